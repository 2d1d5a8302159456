#include <gtest/gtest.h>

#include "harness/engine/registry.h"
#include "lina/error.h"

namespace lina::harness {
namespace {

ShapeKeys dense(std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t D, std::int64_t HV = 0) {
  return ShapeKeys{B, T, H, HV ? HV : H, D, D, std::nullopt, B};
}

TEST(HarnessRegistry, HasTheThreeOps) {
  ASSERT_EQ(registry().size(), 3u);
  EXPECT_EQ(find_op("chunk_gla").gate_suite, "lina_chunk_gla_gate");
  EXPECT_EQ(find_op("chunk_kda").gate_suite, "lina_chunk_kda_gate");
  EXPECT_EQ(find_op("chunk_gdn").gate_suite, "lina_chunk_gdn_gate");
  EXPECT_EQ(resolve_ops({"all"}).size(), 3u);
  EXPECT_EQ(resolve_ops({"chunk_kda", "chunk_kda"}).size(), 1u);
  for (const auto& op : registry()) {
    EXPECT_NE(op.forward, nullptr);
    EXPECT_NE(op.backward, nullptr);
    EXPECT_NE(op.reference_forward, nullptr);
    EXPECT_NE(op.gpu_reference_backward, nullptr);
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

}  // namespace
}  // namespace lina::harness
