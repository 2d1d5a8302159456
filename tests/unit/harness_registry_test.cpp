#include <gtest/gtest.h>

#include "harness/engine/registry.h"
#include "harness/verify/frozen.h"
#include "lina/error.h"

namespace lina::harness {
namespace {

ShapeKeys dense(std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t D, std::int64_t HV = 0) {
  return ShapeKeys{B, T, H, HV ? HV : H, D, D, std::nullopt, B};
}

TEST(HarnessRegistry, HasTheChunkAndDecodeOps) {
  ASSERT_EQ(registry().size(), 6u);
  EXPECT_EQ(find_op("chunk_gla").gate_suite, "lina_chunk_gla_gate");
  EXPECT_EQ(find_op("chunk_kda").gate_suite, "lina_chunk_kda_gate");
  EXPECT_EQ(find_op("chunk_gdn").gate_suite, "lina_chunk_gdn_gate");
  EXPECT_EQ(find_op("fused_recurrent_gdn").gate_suite, "lina_fused_recurrent_gdn_gate");
  EXPECT_EQ(resolve_ops({"all"}).size(), 6u);
  EXPECT_EQ(resolve_ops({"chunk_kda", "chunk_kda"}).size(), 1u);
  for (const auto& op : registry()) {
    EXPECT_NE(op.forward, nullptr) << op.name;
    EXPECT_NE(op.reference_forward, nullptr) << op.name;
    // Forward-only ops have no backward entry points and are checked on the host (no GPU reference).
    EXPECT_EQ(op.backward != nullptr, op.runs(Mode::bwd)) << op.name;
    EXPECT_EQ(op.gpu_reference_backward != nullptr, op.runs(Mode::bwd)) << op.name;
    EXPECT_EQ(op.gpu_reference_forward == nullptr, op.state_pool) << op.name;
  }
}

TEST(HarnessRegistry, UnknownOpListsTheValidOnes) {
  try {
    find_op("chunk_foo");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    const std::string m = e.what();
    EXPECT_NE(m.find("--op"), std::string::npos);
    EXPECT_NE(m.find("chunk_foo"), std::string::npos);
    EXPECT_NE(m.find("chunk_gla, chunk_kda, chunk_gdn"), std::string::npos);
  }
}

TEST(HarnessRegistry, FlaBenchmarkConventions) {
  const auto& gla = find_op("chunk_gla");
  const auto& kda = find_op("chunk_kda");
  const auto& gdn = find_op("chunk_gdn");
  EXPECT_EQ(gla.inputs.at(3).transform, Transform::logsigmoid_clamp5);
  EXPECT_EQ(kda.inputs.at(3).transform, Transform::logsigmoid);
  EXPECT_EQ(kda.inputs.at(4).transform, Transform::sigmoid);
  EXPECT_EQ(gdn.inputs.at(3).rule, (std::vector<std::string>{"B", "T", "HV"}));
  EXPECT_EQ(kda.fixed_kwargs.at("safe_gate"), true);
  EXPECT_EQ(kda.fixed_kwargs.at("lower_bound"), -5.0);
  EXPECT_EQ(kda.fixed_kwargs.at("use_qk_l2norm_in_kernel"), true);
  EXPECT_EQ(gdn.fixed_kwargs.at("use_qk_l2norm_in_kernel"), true);
  for (const auto& op : registry())
    for (const auto& in : op.inputs) EXPECT_EQ(in.dtype, DType::bf16) << op.name << " " << in.name;
}

TEST(HarnessRegistry, FlopsAndBytesMatchTheAnchors) {
  // anchors/README.md "Floors" at D = 128, C = 64, bf16, per token-head.
  const ShapeKeys k = dense(1, 8192, 96, 128);
  const double th = 8192.0 * 96;
  EXPECT_DOUBLE_EQ(find_op("chunk_gla").flops(k, Mode::fwd) / th, 4 * 64 * 128 + 4 * 128 * 128);
  EXPECT_DOUBLE_EQ(find_op("chunk_kda").flops(k, Mode::fwd) / th, 10 * 64 * 128 + 6 * 128 * 128 + 64 * 64);
  EXPECT_DOUBLE_EQ(find_op("chunk_gla").bytes(k, Mode::fwd) / th, 10 * 128);
  EXPECT_DOUBLE_EQ(find_op("chunk_kda").bytes(k, Mode::fwd) / th, 10 * 128 + 2);
  EXPECT_DOUBLE_EQ(find_op("chunk_gdn").bytes(k, Mode::fwd) / th, 8 * 128 + 4);
  // Modes compose: fwdbwd = fwd + bwd; infer moves what fwd moves.
  for (const auto& op : registry()) {
    if (!op.runs(Mode::bwd)) continue;
    EXPECT_DOUBLE_EQ(op.flops(k, Mode::fwdbwd), op.flops(k, Mode::fwd) + op.flops(k, Mode::bwd));
    EXPECT_DOUBLE_EQ(op.bytes(k, Mode::infer), op.bytes(k, Mode::fwd));
    EXPECT_GT(op.bytes(k, Mode::bwd), op.bytes(k, Mode::fwd));
  }
  // GLA backward per docs/math.md section 7: 10KV + 4CK + 4CV.
  EXPECT_DOUBLE_EQ(find_op("chunk_gla").flops(k, Mode::bwd) / th, 10 * 128 * 128 + 8 * 64 * 128);
}

TEST(HarnessRegistry, GvaCountsValueHeads) {
  const ShapeKeys k = dense(1, 64, 2, 64, 8);
  const auto& gdn = find_op("chunk_gdn");
  EXPECT_DOUBLE_EQ(gdn.token_heads(k), 64.0 * 8);
  // q, k on 2 heads; v, o, g, beta on 8.
  EXPECT_DOUBLE_EQ(gdn.bytes(k, Mode::fwd), 64.0 * (2 * 2 * 64 * 2 + 8 * (2 * 64 * 2 + 2 + 2)));
}

TEST(HarnessRegistry, GlaChunkFollowsT) {
  EXPECT_EQ(model_chunk(find_op("chunk_gla"), dense(1, 20, 1, 64)), 32);
  EXPECT_EQ(model_chunk(find_op("chunk_gla"), dense(1, 5, 1, 64)), 16);
  EXPECT_EQ(model_chunk(find_op("chunk_gla"), dense(1, 4096, 1, 64)), 64);
  EXPECT_EQ(model_chunk(find_op("chunk_kda"), dense(1, 20, 1, 64)), 64);
}

TEST(HarnessRegistry, RefusalsNameTheReason) {
  const auto& gla = find_op("chunk_gla");
  const auto& kda = find_op("chunk_kda");
  EXPECT_FALSE(gla.refuses(dense(1, 64, 2, 128), Backend::cuda));
  EXPECT_FALSE(kda.refuses(dense(1, 64, 2, 256, 4), Backend::cpu));
  ASSERT_TRUE(gla.refuses(dense(1, 64, 2, 64, 4), Backend::cpu));
  EXPECT_NE(gla.refuses(dense(1, 64, 2, 64, 4), Backend::cpu)->find("GVA"), std::string::npos);
  ASSERT_TRUE(kda.refuses(dense(1, 64, 2, 96), Backend::cuda));
  EXPECT_NE(kda.refuses(dense(1, 64, 2, 96), Backend::cuda)->find("64, 128, 256"), std::string::npos);
  EXPECT_FALSE(kda.refuses(dense(1, 64, 2, 96), Backend::cpu));
  EXPECT_TRUE(kda.refuses(dense(1, 64, 2, 512), Backend::cpu));
  EXPECT_TRUE(kda.refuses(dense(1, 64, 4, 64, 6), Backend::cpu));  // HV % H != 0
}

TEST(HarnessRegistry, ModesParse) {
  EXPECT_EQ(parse_mode("infer"), Mode::infer);
  EXPECT_THROW(parse_mode("forward"), Error);
  EXPECT_TRUE(mode_has_backward(Mode::fwdbwd));
  EXPECT_FALSE(mode_has_forward(Mode::bwd));
}

TEST(HarnessRegistry, JsonListsEverything) {
  const auto j = to_json(find_op("chunk_kda"));
  for (const char* key : {"name", "category", "inputs", "fixed_kwargs", "shape_sets", "backends", "gate_suite",
                          "bytes_model", "flops_model", "modes"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["inputs"].size(), 5u);
  EXPECT_EQ(j["shape_sets"]["default"].size(), 6u);
}

TEST(HarnessRegistry, DecodeOpsRunInferOnlyAndRefuseTheOtherModesByName) {
  for (const char* name : {"fused_recurrent_gla", "fused_recurrent_kda", "fused_recurrent_gdn"}) {
    const OpSpec& op = find_op(name);
    EXPECT_EQ(op.modes, std::vector<Mode>{Mode::infer}) << name;
    EXPECT_EQ(resolve_modes(op, {}), std::vector<Mode>{Mode::infer}) << name;
    EXPECT_EQ(op.source_dir, "ops/recurrent");
    for (const char* refused : {"fwd", "bwd", "fwdbwd"}) {
      try {
        resolve_modes(op, {"infer", refused});
        ADD_FAILURE() << name << " took --modes " << refused;
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
        EXPECT_EQ(e.argument(), "--modes");
        const std::string m = e.what();
        EXPECT_NE(m.find(std::string("'") + refused + "' for " + name), std::string::npos) << m;
        EXPECT_NE(m.find("forward only"), std::string::npos) << m;
      }
    }
  }
  // The chunk ops keep all four modes and their defaults.
  EXPECT_EQ(resolve_modes(find_op("chunk_gla"), {}), (std::vector<Mode>{Mode::fwd, Mode::fwdbwd}));
  EXPECT_EQ(resolve_modes(find_op("chunk_gla"), {"bwd"}), std::vector<Mode>{Mode::bwd});
}

TEST(HarnessRegistry, DecodeShapeSetsAreModelStateSizes) {
  const OpSpec& gdn = find_op("fused_recurrent_gdn");
  const OpSpec& kda = find_op("fused_recurrent_kda");
  const OpSpec& gla = find_op("fused_recurrent_gla");
  const auto batch = gdn.shape_set("batch");
  ASSERT_TRUE(batch);
  EXPECT_EQ(*batch, (std::vector<std::string>{"B1_T1_H16_D128_HV32", "B8_T1_H16_D128_HV32", "B64_T1_H16_D128_HV32",
                                              "B256_T1_H16_D128_HV32", "B1024_T1_H16_D128_HV32"}));
  EXPECT_EQ(kda.shape_set("batch")->back(), "B1024_T1_H32_D128");
  EXPECT_EQ(gla.shape_set("batch")->back(), "B1024_T1_H16_D128");
  EXPECT_FALSE(gdn.shape_set("varlen"));  // the chunk ops' sets are not the decode ops'
  EXPECT_TRUE(find_op("chunk_gdn").shape_set("varlen"));
  for (const OpSpec* op : {&gdn, &kda, &gla}) {
    // Every member parses, and each backend takes the sets it defaults to.
    for (const auto& [set, members] : op->shape_sets)
      for (const auto& n : members) {
        const Workload w = parse_shape_name(n, 42);
        EXPECT_EQ(w.name, n);
        if (set != "cpu") EXPECT_FALSE(op->refuses(w.keys, Backend::cuda)) << op->name << " " << n;
        if (set == "cpu") EXPECT_FALSE(op->refuses(w.keys, Backend::cpu)) << op->name << " " << n;
      }
    const auto spec = op->shape_set("spec");
    ASSERT_TRUE(spec);
    for (const auto& n : *spec) EXPECT_GT(parse_shape_name(n, 42).keys.T, 1) << n;
  }
  EXPECT_TRUE(gla.refuses(dense(4, 1, 2, 64, 4), Backend::cpu));   // no GVA
  EXPECT_TRUE(gdn.refuses(dense(4, 1, 2, 512, 4), Backend::cpu));  // one K x V state per program: D <= 256
}

TEST(HarnessRegistry, DecodeBytesAreTheStateReadAndWrittenPlusTheTokens) {
  const OpSpec& gdn = find_op("fused_recurrent_gdn");
  const ShapeKeys k = dense(1024, 1, 16, 128, 32);
  const double state = 4.0 * 32 * 128 * 128;  // one sequence's fp32 state
  // q, k: 16 heads of 128; v, o: 32 heads of 128; g, beta: 32 scalars; bf16. Indices: int32 [N].
  const double tokens = 2.0 * (2 * 16 * 128 + 2 * 32 * 128 + 2 * 32);
  EXPECT_DOUBLE_EQ(gdn.bytes(k, Mode::infer), 1024 * (2 * state + tokens + 4));
  EXPECT_DOUBLE_EQ(gdn.bytes(k, Mode::infer, true), gdn.bytes(k, Mode::infer));  // the pool is always written
  EXPECT_DOUBLE_EQ(gdn.flops(k, Mode::infer), 1024.0 * 32 * 6 * 128 * 128);
  EXPECT_DOUBLE_EQ(find_op("fused_recurrent_gla").flops(dense(8, 1, 16, 128), Mode::infer), 8.0 * 16 * 4 * 128 * 128);
  // Speculative steps: one state read, T states written, [N,T] indices and num_accepted_tokens.
  const ShapeKeys spec = dense(64, 3, 16, 128, 32);
  EXPECT_DOUBLE_EQ(gdn.bytes(spec, Mode::infer), 64 * (4 * state + 3 * tokens + 4 * 3 + 4));
  EXPECT_EQ(gdn.bytes_model, "state-pool-io/1");
  EXPECT_EQ(gdn.flops_model, "recurrent-step/1");
}

TEST(HarnessRegistry, DecodeJsonNamesModesSetsAndThePool) {
  const auto j = to_json(find_op("fused_recurrent_kda"));
  EXPECT_EQ(j["modes"], nlohmann::json::array({"infer"}));
  EXPECT_EQ(j["state_pool"], true);
  EXPECT_EQ(j["fixed_kwargs"]["inplace_final_state"], true);
  EXPECT_FALSE(j["fixed_kwargs"].contains("safe_gate"));
  EXPECT_EQ(j["shape_sets"]["default"].size(), 11u);
  EXPECT_EQ(j["shape_sets"]["cpu"].size(), 3u);
}

TEST(HarnessRegistry, FrozenHashesCoverTheDecodeReferenceAndGate) {
  for (const char* op : {"fused_recurrent_gla", "fused_recurrent_kda", "fused_recurrent_gdn"}) {
    const auto h = frozen_hashes(LINA_TEST_SOURCE_DIR, op);
    for (const std::string f : {std::string("tests/gate/") + op + "_gate.cpp", std::string("tests/gate/common/decode_case.cpp"),
                                std::string("ops/recurrent/host_recurrence.cpp"), std::string("harness/verify/tolerances.cpp")}) {
      ASSERT_TRUE(h.count(f)) << op << " " << f;
      EXPECT_NE(h.at(f), "missing") << op << " " << f;
    }
  }
}

}  // namespace
}  // namespace lina::harness
