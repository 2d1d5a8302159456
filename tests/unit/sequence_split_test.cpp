// The sequence split of the delta-rule forward (ops/delta/sequence_split.h): its plan, when it declines, and its
// three steps run with the CPU backend's forward and host ops against the unsplit CPU forward on the same inputs
// (dense and varlen with a zero-length and a one-token sequence, GVA, h0 / ht, the in-kernel gate, the two-call maps
// where K + V is wider than one call takes). The CUDA form: tests/cuda/delta_fwd_check.cu and delta_variants_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "harness/verify/accuracy.h"
#include "lina/chunk_delta.h"
#include "ops/common/backends.h"
#include "ops/delta/sequence_split.h"
#include "tests/support/random.h"

namespace lina {
namespace {

using detail::Problem;
using detail::delta::plan_split;
using detail::delta::split_declines;
using detail::delta::split_segment_length;
using i64 = std::int64_t;

Problem dense_problem(i64 B, i64 T, i64 HV, i64 K, i64 V) {
  Problem p;
  p.op = detail::OpKind::gdn;
  p.B = B, p.T = T, p.H = HV, p.HV = HV, p.K = K, p.V = V, p.N = B;
  for (i64 n = 0; n < B; ++n) p.sequences.push_back({n * T, T});
  return p;
}

TEST(SequenceSplit, ThePlanCoversEverySequenceInChunkAlignedSegments) {
  Problem p = dense_problem(1, 1000, 1, 64, 64);
  p.N = 4;
  p.varlen = true;
  p.sequences = {{0, 300}, {300, 0}, {300, 1}, {301, 699}};
  const auto plan = plan_split(p, 128);
  ASSERT_EQ(plan.first.size(), 5u);
  EXPECT_EQ(plan.first, (std::vector<i64>{0, 3, 3, 4, 10}));
  for (i64 n = 0; n < p.N; ++n) {
    i64 row = p.sequences[n].row_begin;
    for (i64 s = plan.first[n]; s < plan.first[n + 1]; ++s) {
      const auto& seg = plan.segments[s];
      EXPECT_EQ(seg.row_begin, row) << n << " " << s;
      EXPECT_LE(seg.length, 128);
      if (s + 1 < plan.first[n + 1]) {
        EXPECT_EQ(seg.length, 128);  // only a sequence's last segment is shorter
      }
      row += seg.length;
    }
    EXPECT_EQ(row, p.sequences[n].row_begin + p.sequences[n].length) << n;
  }
}

TEST(SequenceSplit, ItDeclinesWhereItDoesNotPay) {
  // 4 pairs of 32K tokens on 132 SMs: taken
  EXPECT_FALSE(split_declines(dense_problem(1, 32768, 4, 128, 128), 132));
  // 96 value heads fill the GPU already
  const auto many = split_declines(dense_problem(1, 32768, 96, 128, 128), 132);
  ASSERT_TRUE(many);
  EXPECT_NE(many->find("1 x 96 (sequence, value head) pairs"), std::string::npos) << *many;
  // nothing long enough to split
  const auto short_seq = split_declines(dense_problem(4, 2000, 1, 128, 128), 132);
  ASSERT_TRUE(short_seq);
  EXPECT_NE(short_seq->find("the longest sequence has 2000 tokens"), std::string::npos) << *short_seq;
  const auto none = split_declines(dense_problem(1, 32768, 4, 128, 128), 0);
  ASSERT_TRUE(none);
  EXPECT_NE(none->find("no CUDA device"), std::string::npos);
}

TEST(SequenceSplit, TheSegmentLengthIsChunkAlignedAndAboutOneWaveOfOutputTiles) {
  for (i64 T : {4096, 32768, 100000}) {
    const Problem p = dense_problem(1, T, 4, 128, 128);
    const i64 len = split_segment_length(p, 132);
    EXPECT_EQ(len % 64, 0) << T;
    EXPECT_GE(len, detail::delta::kSplitMinSegment) << T;
    const i64 segments = (T + len - 1) / len;
    if (len > detail::delta::kSplitMinSegment) {
      EXPECT_LE(segments * 4 * 2, 132 + 4 * 2) << T;  // 2 V tiles per head
    }
  }
}

// ---- the split against the unsplit CPU forward

struct Inputs {
  HostTensor q, k, v, g, beta, h0, A_log, dt_bias, cu;
};

struct SplitCase {
  const char* name;
  bool kda;
  i64 B, T, H, HV, K, V;
  std::vector<int> cu;  // empty: dense
  bool gate_in_kernel, h0;
  i64 segment_len;
};

Inputs make_inputs(const SplitCase& c, std::uint64_t seed) {
  testing::Rng r(seed);
  const DType f = DType::f32;
  const i64 N = c.cu.empty() ? c.B : static_cast<i64>(c.cu.size()) - 1;
  Inputs in;
  in.q = testing::normal(r, f, {c.B, c.T, c.H, c.K});
  in.k = testing::normal(r, f, {c.B, c.T, c.H, c.K});
  in.v = testing::normal(r, f, {c.B, c.T, c.HV, c.V});
  const Shape gs = c.kda ? Shape{c.B, c.T, c.HV, c.K} : Shape{c.B, c.T, c.HV};
  in.g = testing::make(f, gs, [&] { return c.gate_in_kernel ? r.normal() : testing::logsigmoid(r.normal()) / (c.kda ? 8.0 : 2.0); });
  in.beta = testing::make(f, {c.B, c.T, c.HV}, [&] { return c.gate_in_kernel ? r.normal() : testing::sigmoid(r.normal()); });
  if (c.h0) in.h0 = testing::normal(r, f, {N, c.HV, c.K, c.V});
  if (c.gate_in_kernel) {
    in.A_log = testing::make(f, {c.HV}, [&] { return std::log(1.0 + 4.0 * r.uniform()); });
    in.dt_bias = testing::make(f, c.kda ? Shape{c.HV * c.K} : Shape{c.HV}, [&] { return 0.5 * r.normal(); });
  }
  if (!c.cu.empty()) {
    in.cu = HostTensor(DType::i32, {static_cast<i64>(c.cu.size())});
    for (std::size_t i = 0; i < c.cu.size(); ++i) in.cu.set(static_cast<i64>(i), c.cu[i]);
  }
  return in;
}

template <class Args>
Args args_of(Inputs& in, const SplitCase& c) {
  Args a;
  a.q = in.q.view(), a.k = in.k.view(), a.v = in.v.view(), a.g = in.g.view(), a.beta = in.beta.view();
  if (c.h0) a.initial_state = in.h0.view();
  if (!c.cu.empty()) a.cu_seqlens = in.cu.view();
  a.use_qk_l2norm_in_kernel = true;
  if (c.gate_in_kernel) {
    a.use_gate_in_kernel = true;
    a.use_beta_sigmoid_in_kernel = true;
    a.A_log = in.A_log.view();
    a.dt_bias = in.dt_bias.view();
  }
  return a;
}

void run_case(const SplitCase& c) {
  Inputs in = make_inputs(c, 17);
  const i64 N = c.cu.empty() ? c.B : static_cast<i64>(c.cu.size()) - 1;
  std::vector<HostTensor> o, ht;
  for (bool split : {false, true}) {
    o.push_back(testing::poisoned(DType::f32, {c.B, c.T, c.HV, c.V}));
    ht.push_back(testing::poisoned(DType::f32, {N, c.HV, c.K, c.V}));
    const AttentionOutputs out{o.back().view(), ht.back().view()};
    const ExecOptions opts;
    const auto run = [&](const auto& a, const Problem& p, auto cpu_forward) {
      if (!split) return cpu_forward(p, a, out, ForwardMode::inference, opts);
      const auto plan = plan_split(p, c.segment_len);
      EXPECT_GT(plan.segments.size(), static_cast<std::size_t>(N)) << c.name << ": nothing was split";
      return detail::delta::run_split(p, a, out, plan, detail::delta::cpu_split_ops(), nullptr,
                                      [&](const Problem& pp, const auto& aa, const AttentionOutputs& oo) {
                                        return cpu_forward(pp, aa, oo, ForwardMode::inference, opts);
                                      });
    };
    if (c.kda) {
      const ChunkKdaArgs a = args_of<ChunkKdaArgs>(in, c);
      run(a, detail::validate_kda(a), detail::cpu::chunk_kda_forward);
    } else {
      const ChunkGdnArgs a = args_of<ChunkGdnArgs>(in, c);
      run(a, detail::validate_gdn(a), detail::cpu::chunk_gdn_forward);
    }
  }
  // both in fp32 on the CPU: only the order of the sums differs (the entering states come from the maps)
  const auto co = harness::assert_close(o[0], o[1], 1e-5);
  const auto ch = harness::assert_close(ht[0], ht[1], 1e-5);
  EXPECT_TRUE(co.pass) << c.name << " o: " << co.str();
  EXPECT_TRUE(ch.pass) << c.name << " ht: " << ch.str();
}

TEST(SequenceSplit, MatchesTheUnsplitForward) {
  const std::vector<SplitCase> cases = {
      {"kda dense B2 HV2 K64 V64 h0", true, 2, 300, 2, 2, 64, 64, {}, false, true, 64},
      {"gdn varlen GVA H1 HV2 K64 V128 h0", false, 1, 400, 1, 2, 64, 128, {0, 0, 70, 71, 400}, false, true, 128},
      {"kda varlen in-kernel gate K64 V64", true, 1, 330, 2, 2, 64, 64, {0, 200, 200, 330}, true, false, 64},
      {"gdn dense in-kernel gate K64 V64 h0", false, 1, 256, 2, 2, 64, 64, {}, true, true, 128},
      // K + V = 320 > 256: the transitions and the contributions come from two calls
      {"kda dense K64 V256 (two-call maps) h0", true, 1, 200, 1, 1, 64, 256, {}, false, true, 64},
  };
  for (const SplitCase& c : cases) run_case(c);
}

}  // namespace
}  // namespace lina
