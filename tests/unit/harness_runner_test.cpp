// The run engine end to end on the CPU with a stand-in op (the real ops land separately): cells,
// call counts, timing rows, reference checks (pass, fail, reference unavailable) and the JSON.
#include <gtest/gtest.h>

#include <atomic>

#include "harness/util/shell_quote.h"
#include "harness/util/subprocess.h"
#include "harness/engine/decode_state.h"
#include "harness/engine/runner.h"
#include "lina/error.h"

namespace lina::harness {
namespace {

double load(const TensorView& t, std::int64_t i) {
  switch (t.dtype) {
    case DType::bf16: return bf16_bits_to_float(t.ptr<std::uint16_t>()[i]);
    case DType::f32: return t.ptr<float>()[i];
    case DType::f64: return t.ptr<double>()[i];
    default: throw std::runtime_error("unexpected dtype");
  }
}
void store(const TensorView& t, std::int64_t i, double v) {
  switch (t.dtype) {
    case DType::bf16: t.ptr<std::uint16_t>()[i] = float_to_bf16_bits(static_cast<float>(v)); break;
    case DType::f32: t.ptr<float>()[i] = static_cast<float>(v); break;
    case DType::f64: t.ptr<double>()[i] = v; break;
    default: throw std::runtime_error("unexpected dtype");
  }
}
void copy(const TensorView& from, const TensorView& to, double factor = 1) {
  for (std::int64_t i = 0; i < to.numel(); ++i) store(to, i, factor * load(from, i));
}

std::atomic<int> g_forward{0}, g_backward{0};

// o = v and each gradient = its input: exact in bf16, so an honest reference matches.
void fake_forward(const Bound& b) {
  copy(b.in.at("v"), b.out.o);
  if (b.out.final_state) {  // ht = the first elements of k, cycled
    const TensorView& k = b.in.at("k");
    for (std::int64_t i = 0; i < b.out.final_state->numel(); ++i) store(*b.out.final_state, i, load(k, i % k.numel()));
  }
}
void fake_backward(const Bound& b) {
  for (const auto& [name, t] : b.in) copy(t, b.grads.at("d" + name));
}

OpSpec fake_op(bool wrong_reference, bool reference_missing) {
  OpSpec s = find_op("chunk_gla");  // its tolerance table applies
  s.forward = [](const Bound& b, ForwardMode, const ExecOptions&) {
    ++g_forward;
    fake_forward(b);
    return RunInfo{"cpu", {"fake_fwd"}};
  };
  s.backward = [](const Bound& b, const ExecOptions&) {
    ++g_backward;
    fake_backward(b);
    return RunInfo{"cpu", {"fake_bwd"}};
  };
  if (reference_missing) {
    s.reference_forward = [](const Bound&) { throw_unsupported("reference", "fake", "a built reference"); };
  } else if (wrong_reference) {
    s.reference_forward = [](const Bound& b) { copy(b.in.at("v"), b.out.o, 2.0); };
  } else {
    s.reference_forward = fake_forward;
  }
  s.reference_backward = fake_backward;
  return s;
}

RunConfig quick_config() {
  RunConfig c;
  c.ops = {"chunk_gla"};
  c.backend = "cpu";
  c.policy.warmup = 1;
  c.policy.min_samples = 3;
  c.policy.max_samples = 3;
  c.policy.time_budget_s = 10;
  c.policy.max_noise = 1e-12;  // stop on the sample count, not on noise
  c.command = "lina run --op chunk_gla";
  return c;
}

TEST(HarnessRunner, TimesChecksAndWritesEveryCell) {
  const OpSpec op = fake_op(false, false);
  Plan plan;
  plan.backend = Backend::cpu;
  const Workload dense = parse_shape_name("B2_T32_H2_D16", 1);
  const Workload varlen = parse_varlen("longtail:T=300,H=2,D=16", 1).at(0);
  for (Mode m : all_modes()) plan.cells.push_back({&op, m, dense});
  plan.cells.push_back({&op, Mode::fwdbwd, varlen});
  g_forward = 0;
  g_backward = 0;
  std::size_t progress_calls = 0;
  const RunOutput out = run_plan(quick_config(), plan, [&](std::size_t, std::size_t n, const Cell&, const std::string&) {
    ++progress_calls;
    EXPECT_EQ(n, plan.cells.size());
  });
  ASSERT_TRUE(out.failures.empty()) << out.failures.at(0).error;
  ASSERT_EQ(out.rows.size(), 5u);
  EXPECT_EQ(out.exit_code, 0);
  EXPECT_GT(progress_calls, 5u);
  // Calls per cell: warm-up 1 + samples 3 (+ 1 untimed forward for bwd); nothing per sample extra.
  // fwd 4 + infer 4 + bwd 1 + fwdbwd 4 + varlen fwdbwd 4 forwards; bwd 4 + fwdbwd 4 + varlen 4 backwards.
  EXPECT_EQ(g_forward.load(), 17);
  EXPECT_EQ(g_backward.load(), 12);
  for (const auto& r : out.rows) {
    SCOPED_TRACE(r.mode + " " + r.shape);
    EXPECT_EQ(r.times_ms.size(), 3u);
    EXPECT_EQ(r.stop_reason, "max_samples");
    EXPECT_LE(r.stats.min, r.stats.median);
    EXPECT_EQ(r.backend, "cpu");
    EXPECT_EQ(r.check.reference, "fp64-host");
    ASSERT_TRUE(r.check.pass.has_value());
    EXPECT_TRUE(*r.check.pass);
    EXPECT_FALSE(r.peak_mem_bytes.has_value());
    EXPECT_DOUBLE_EQ(r.bytes, op.bytes(r.keys, parse_mode(r.mode)));
    EXPECT_DOUBLE_EQ(r.flops, op.flops(r.keys, parse_mode(r.mode)));
  }
  EXPECT_EQ(out.rows[0].check.tensors.size(), 1u);  // fwd: o
  EXPECT_EQ(out.rows[2].check.tensors.size(), 4u);  // bwd: dq dk dv dg
  EXPECT_EQ(out.rows[3].check.tensors.size(), 5u);  // fwdbwd: o + grads
  EXPECT_EQ(out.rows[3].kernels, (std::vector<std::string>{"fake_fwd", "fake_bwd"}));
  EXPECT_EQ(*out.rows[4].keys.varlen, "longtail");
  EXPECT_NO_THROW(validate_document(out.document, "run"));
  EXPECT_EQ(out.document["config"]["seed"], 42);
  EXPECT_EQ(out.document["config"]["command"], "lina run --op chunk_gla");
  EXPECT_EQ(out.document["results"].size(), 5u);
}

TEST(HarnessRunner, WrongResultFailsTheCheckAndTheExitCode) {
  const OpSpec op = fake_op(true, false);
  Plan plan;
  plan.cells.push_back({&op, Mode::fwd, parse_shape_name("B1_T32_H2_D16", 1)});
  const RunOutput out = run_plan(quick_config(), plan);
  ASSERT_EQ(out.rows.size(), 1u);
  ASSERT_TRUE(out.rows[0].check.pass.has_value());
  EXPECT_FALSE(*out.rows[0].check.pass);
  EXPECT_GT(*out.rows[0].check.err_ratio, 0.1);
  EXPECT_EQ(out.exit_code, 1);
}

TEST(HarnessRunner, MissingReferenceIsRecordedNotFaked) {
  const OpSpec op = fake_op(false, true);
  Plan plan;
  plan.cells.push_back({&op, Mode::fwd, parse_shape_name("B1_T32_H2_D16", 1)});
  const RunOutput out = run_plan(quick_config(), plan);
  ASSERT_EQ(out.rows.size(), 1u);
  EXPECT_FALSE(out.rows[0].check.pass.has_value());
  EXPECT_NE(out.rows[0].check.reason.find("could not run"), std::string::npos);
  EXPECT_TRUE(out.document["results"][0]["check"]["pass"].is_null());
  EXPECT_EQ(out.exit_code, 0);
}

TEST(HarnessRunner, FinalStateIsWrittenCheckedAndCounted) {
  const OpSpec op = fake_op(false, false);
  Plan plan;
  const Workload w = parse_shape_name("B2_T32_H2_D16", 1);
  plan.cells.push_back({&op, Mode::fwd, w});
  plan.cells.push_back({&op, Mode::bwd, w});
  RunConfig c = quick_config();
  c.final_state = true;
  const RunOutput out = run_plan(c, plan);
  ASSERT_EQ(out.rows.size(), 2u);
  const auto& fwd = out.rows[0];
  ASSERT_EQ(fwd.check.tensors.size(), 2u);
  EXPECT_EQ(fwd.check.tensors[1].name, "ht");
  EXPECT_TRUE(fwd.check.tensors[1].pass);
  EXPECT_DOUBLE_EQ(fwd.bytes - op.bytes(w.keys, Mode::fwd), 4.0 * 2 * 2 * 16 * 16);  // N * HV * K * V f32
  // bwd mode has no timed forward: no ht, no extra bytes.
  EXPECT_EQ(out.rows[1].check.tensors.size(), 4u);
  EXPECT_DOUBLE_EQ(out.rows[1].bytes, op.bytes(w.keys, Mode::bwd));
  EXPECT_EQ(out.document["config"]["final_state"], true);
}

TEST(HarnessRunner, SafeGateOffReachesTheOpAndItsReferenceAndIsRecorded) {
  static std::atomic<int> op_safe{-1}, ref_safe{-1};
  OpSpec op = fake_op(false, false);
  op.forward = [](const Bound& b, ForwardMode, const ExecOptions&) {
    op_safe = b.kda_safe_gate ? 1 : 0;
    fake_forward(b);
    return RunInfo{"cpu", {"fake_fwd"}};
  };
  op.reference_forward = [](const Bound& b) {
    ref_safe = b.kda_safe_gate ? 1 : 0;
    fake_forward(b);
  };
  Plan plan;
  plan.cells.push_back({&op, Mode::fwd, parse_shape_name("B1_T32_H2_D16", 1)});
  for (bool safe : {true, false}) {
    SCOPED_TRACE(safe ? "safe_gate on" : "safe_gate off");
    RunConfig c = quick_config();
    c.safe_gate = safe;
    op_safe = ref_safe = -1;
    const RunOutput out = run_plan(c, plan);
    ASSERT_EQ(out.rows.size(), 1u);
    EXPECT_TRUE(out.rows[0].check.pass.value_or(false));
    EXPECT_EQ(op_safe.load(), safe ? 1 : 0);
    EXPECT_EQ(ref_safe.load(), safe ? 1 : 0);
    EXPECT_EQ(out.document["config"]["safe_gate"], safe);
  }
}

TEST(HarnessRunner, NoCheckIsRecorded) {
  const OpSpec op = fake_op(true, false);
  Plan plan;
  plan.cells.push_back({&op, Mode::fwd, parse_shape_name("B1_T32_H2_D16", 1)});
  RunConfig c = quick_config();
  c.check = false;
  const RunOutput out = run_plan(c, plan);
  EXPECT_EQ(out.rows.at(0).check.reference, "none");
  EXPECT_FALSE(out.rows[0].check.pass.has_value());
  EXPECT_EQ(out.document["config"]["check"], false);
  EXPECT_EQ(out.exit_code, 0);
}

TEST(HarnessRunner, OpErrorsBecomeFailuresAndOtherCellsStillRun) {
  OpSpec bad = fake_op(false, false);
  bad.forward = [](const Bound&, ForwardMode, const ExecOptions&) -> RunInfo { throw_unsupported("q", "x", "y"); };
  const OpSpec good = fake_op(false, false);
  Plan plan;
  plan.cells.push_back({&bad, Mode::fwd, parse_shape_name("B1_T32_H2_D16", 1)});
  plan.cells.push_back({&good, Mode::fwd, parse_shape_name("B1_T32_H2_D16", 1)});
  const RunOutput out = run_plan(quick_config(), plan);
  ASSERT_EQ(out.failures.size(), 1u);
  EXPECT_EQ(out.rows.size(), 1u);
  EXPECT_EQ(out.exit_code, 2);
  EXPECT_EQ(out.document["failures"].size(), 1u);
}

std::string plan_error(const RunConfig& c);

// A stand-in state-pool op: o = v, and every pool element + 1, in place. A call that finds the
// pool other than as seeded counts in g_unseeded_calls.
std::atomic<int> g_unseeded_calls{0};
double g_seeded_first = 0;
void fake_pool_step(const Bound& b) {
  copy(b.in.at("v"), b.out.o);
  const TensorView& pool = *b.state_pool;
  for (std::int64_t i = 0; i < pool.numel(); ++i) store(pool, i, load(pool, i) + 1);
}
OpSpec fake_pool_op() {
  OpSpec s = find_op("fused_recurrent_gdn");
  s.forward = [](const Bound& b, ForwardMode, const ExecOptions&) {
    ++g_forward;
    if (load(*b.state_pool, 0) != g_seeded_first) ++g_unseeded_calls;
    fake_pool_step(b);
    return RunInfo{"cpu", {"fake_decode"}};
  };
  s.reference_forward = fake_pool_step;
  return s;
}

TEST(HarnessRunner, StatePoolIsReseededBeforeEveryCallAndCheckedAfterOne) {
  const OpSpec op = fake_pool_op();
  Plan plan;
  plan.backend = Backend::cpu;
  const Workload w = parse_shape_name("B3_T2_H2_D16_HV4", 1);
  plan.cells.push_back({&op, Mode::infer, w});
  RunConfig cfg = quick_config();
  g_seeded_first = make_state_pool(w.keys, cfg.seed).pool.get(0);
  g_forward = 0;
  g_unseeded_calls = 0;
  const RunOutput out = run_plan(cfg, plan);
  ASSERT_TRUE(out.failures.empty()) << out.failures.at(0).error;
  ASSERT_EQ(out.rows.size(), 1u);
  // Warm-up 1 + samples 3 + the checked call, each on the seeded pool.
  EXPECT_EQ(g_forward.load(), 5);
  EXPECT_EQ(g_unseeded_calls.load(), 0);
  const ResultRow& r = out.rows[0];
  EXPECT_EQ(r.check.reference, "fp64-host");
  ASSERT_EQ(r.check.tensors.size(), 2u);
  EXPECT_EQ(r.check.tensors[0].name, "o");
  EXPECT_EQ(r.check.tensors[1].name, "ht");  // the pool after one call
  EXPECT_EQ(r.check.pass, true);
  EXPECT_DOUBLE_EQ(r.bytes, op.bytes(w.keys, Mode::infer));
}

TEST(HarnessRunner, StatePoolCheckFailsWhenTheCallSkipsThePool) {
  OpSpec op = fake_pool_op();
  op.forward = [](const Bound& b, ForwardMode, const ExecOptions&) {
    copy(b.in.at("v"), b.out.o);  // o right, pool never written
    return RunInfo{"cpu", {"fake_decode"}};
  };
  Plan plan;
  plan.backend = Backend::cpu;
  plan.cells.push_back({&op, Mode::infer, parse_shape_name("B2_T1_H2_D16", 1)});
  const RunOutput out = run_plan(quick_config(), plan);
  ASSERT_EQ(out.rows.size(), 1u);
  EXPECT_EQ(out.rows[0].check.pass, false);
  EXPECT_EQ(out.exit_code, 1);
}

TEST(HarnessRunner, PlanRunsEachOpsModesAndSets) {
  RunConfig c = quick_config();
  c.ops = {"chunk_gla", "fused_recurrent_gdn"};
  const Plan p = make_plan(c);
  const auto decode_cpu = find_op("fused_recurrent_gdn").shape_set("cpu");
  ASSERT_EQ(p.cells.size(), shape_set("cpu")->size() * 2 + decode_cpu->size());
  for (const Cell& cell : p.cells)
    if (cell.op->name == "fused_recurrent_gdn") EXPECT_EQ(cell.mode, Mode::infer);
  c.shapes = {"cpu"};  // a set name resolves against each op's own sets
  EXPECT_EQ(make_plan(c).cells.size(), p.cells.size());
  c.ops = {"fused_recurrent_gdn"};
  c.modes = {"fwd"};
  const std::string e = plan_error(c);
  EXPECT_NE(e.find("--modes"), std::string::npos) << e;
  EXPECT_NE(e.find("fused_recurrent_gdn"), std::string::npos) << e;
  c.modes = {"infer"};
  c.shapes = {"B2_T1_H2_D512_HV4"};
  EXPECT_NE(plan_error(c).find("B2_T1_H2_D512_HV4"), std::string::npos);
}

std::string plan_error(const RunConfig& c) {
  try {
    make_plan(c);
  } catch (const Error& e) {
    EXPECT_NE(e.code(), ErrorCode::runtime);
    return e.what();
  }
  return "(no error)";
}

TEST(HarnessRunner, PlanValidatesFlags) {
  RunConfig c = quick_config();
  const Plan p = make_plan(c);
  EXPECT_EQ(p.cells.size(), shape_set("cpu")->size() * 2);  // default modes fwd, fwdbwd
  EXPECT_EQ(p.backend, Backend::cpu);
  auto bad = c;
  bad.ops = {"chunk_foo"};
  EXPECT_NE(plan_error(bad).find("--op"), std::string::npos);
  bad = c;
  bad.modes = {"fwd", "sideways"};
  EXPECT_NE(plan_error(bad).find("--modes"), std::string::npos);
  bad = c;
  bad.backend = "tpu";
  EXPECT_NE(plan_error(bad).find("--backend"), std::string::npos);
  bad = c;
  bad.graphs = true;
  EXPECT_NE(plan_error(bad).find("--graphs"), std::string::npos);
  bad = c;
  bad.ops = {"chunk_kda"};
  bad.shapes = {"B1_T64_H2_D512"};
  EXPECT_NE(plan_error(bad).find("B1_T64_H2_D512"), std::string::npos);
  bad = c;
  bad.shapes = {"B1_T64_H2_D64_HV4"};
  EXPECT_NE(plan_error(bad).find("GVA"), std::string::npos);
  bad = c;
  bad.custom_shapes = "[{";
  EXPECT_NE(plan_error(bad).find("--custom-shapes"), std::string::npos);
  bad = c;
  bad.policy.max_noise = 0;
  EXPECT_NE(plan_error(bad).find("--max-noise"), std::string::npos);
  // --varlen alone replaces the default set; with --shapes both are planned.
  auto v = c;
  v.varlen = {"single:T=64,H=2,D=16"};
  EXPECT_EQ(make_plan(v).cells.size(), 2u);
  v.shapes = {"B1_T32_H2_D16"};
  EXPECT_EQ(make_plan(v).cells.size(), 4u);
}

TEST(HarnessRunner, ShellQuotingOfRecordedCommands) {
  EXPECT_EQ(shell_quote("--op"), "--op");
  EXPECT_EQ(shell_quote("[{\"B\":1}]"), "'[{\"B\":1}]'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_join({"lina", "run", "--custom-shapes", "[1, 2]"}), "lina run --custom-shapes '[1, 2]'");
  EXPECT_EQ(quote_argv({"lina", "run", "--custom-shapes", "[1, 2]"}), "lina run --custom-shapes '[1, 2]'");
}

}  // namespace
}  // namespace lina::harness
