// The chunked CPU chunk_gla backend against the fp64 reference, at FLA's test_chunk tolerances
// (o 0.004, everything else 0.005), on a subset of test_chunk and test_chunk_varlen that keeps every
// T / D edge case (docs/math.md section 6); plus numerics, threading and refusal checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <limits>
#include <string>

#include "lina/error.h"
#include "ops/common/cpu_math.h"
#include "tests/unit/gla_test_common.h"

namespace lina {
namespace {

using gla_test::Case;
using gla_test::Data;
using gla_test::Results;

struct Tolerances {
  double o = 0.004, rest = 0.005;
};

void expect_close(const Results& ref, const Results& out, const Case& c, Tolerances tol) {
  struct Item { const char* name; const HostTensor* r; const HostTensor* o; double tol; };
  std::vector<Item> items{{"o", &ref.o, &out.o, tol.o},     {"ht", &ref.ht, &out.ht, tol.rest},
                          {"dq", &ref.dq, &out.dq, tol.rest}, {"dk", &ref.dk, &out.dk, tol.rest},
                          {"dv", &ref.dv, &out.dv, tol.rest}, {"dg", &ref.dg, &out.dg, tol.rest}};
  if (c.h0) items.push_back({"dh0", &ref.dh0, &out.dh0, tol.rest});
  for (const Item& it : items) {
    const auto cl = harness::assert_close(*it.r, *it.o, it.tol);
    EXPECT_TRUE(cl.pass) << it.name << ": " << cl.str();
    if (std::getenv("LINA_TEST_VERBOSE")) std::printf("    %-4s %s\n", it.name, cl.str().c_str());
  }
}

// ---------------------------------------------------------------- FLA test_chunk (subset)

struct ChunkParam {
  std::int64_t B, T, H, D;
  double normalizer;
  DType dtype;
};

void PrintTo(const ChunkParam& p, std::ostream* os) {
  *os << "B" << p.B << " T" << p.T << " H" << p.H << " D" << p.D << " norm " << p.normalizer << " " << gla_test::dtype_token(p.dtype);
}

std::string chunk_name(const ::testing::TestParamInfo<ChunkParam>& info) {
  const ChunkParam& p = info.param;
  std::string norm = p.normalizer == 0.1 ? "0p1" : std::to_string(static_cast<int>(p.normalizer));
  return "B" + std::to_string(p.B) + "_T" + std::to_string(p.T) + "_H" + std::to_string(p.H) + "_D" +
         std::to_string(p.D) + "_norm" + norm + "_" + gla_test::dtype_token(p.dtype);
}

class GlaCpuChunk : public ::testing::TestWithParam<ChunkParam> {};

TEST_P(GlaCpuChunk, MatchesReference) {
  const ChunkParam& p = GetParam();
  Case c;
  c.B = p.B; c.T = p.T; c.H = p.H; c.K = p.D; c.V = p.D; c.normalizer = p.normalizer; c.dtype = p.dtype;
  const Data d(c, 42);
  RunInfo fi, bi;
  const Results out = gla_test::run_cpu(d, 0, &fi, &bi);
  EXPECT_EQ(fi.backend, "cpu");
  EXPECT_EQ(bi.backend, "cpu");
  EXPECT_FALSE(fi.kernels.empty());
  expect_close(gla_test::run_reference(d), out, c, {});
}

// FLA's cases with H (and sometimes B, T) cut down for CPU time; the T / D edge cases are kept:
// T = 63 (one partial chunk), T = 1, T not a multiple of 64, D = 60 / 100 / 320 (not powers of two).
INSTANTIATE_TEST_SUITE_P(
    Fla, GlaCpuChunk,
    ::testing::Values(ChunkParam{1, 63, 1, 64, 1, DType::f16}, ChunkParam{2, 1024, 1, 60, 1, DType::f16},
                      ChunkParam{1, 300, 2, 128, 0.1, DType::f16}, ChunkParam{1, 300, 2, 128, 1, DType::f16},
                      ChunkParam{1, 300, 2, 128, 10, DType::f16}, ChunkParam{2, 2048, 1, 64, 1, DType::f16},
                      ChunkParam{1, 128, 1, 256, 1, DType::f16}, ChunkParam{1, 64, 1, 320, 1, DType::f16},
                      ChunkParam{1, 130, 2, 100, 1, DType::bf16}, ChunkParam{1, 1, 2, 64, 1, DType::f16},
                      ChunkParam{3, 65, 2, 32, 1, DType::bf16}),
    chunk_name);

// ---------------------------------------------------------------- FLA test_chunk_varlen (all cases)

struct VarlenParam {
  std::int64_t H, D;
  std::vector<std::int64_t> cu;
};

void PrintTo(const VarlenParam& p, std::ostream* os) {
  *os << "H" << p.H << " D" << p.D << " cu [";
  for (auto x : p.cu) *os << " " << x;
  *os << " ]";
}

std::string varlen_name(const ::testing::TestParamInfo<VarlenParam>& info) {
  std::string s = "H";
  s += std::to_string(info.param.H);
  s += "_D";
  s += std::to_string(info.param.D);
  s += "_cu";
  for (auto x : info.param.cu) {
    s += '_';
    s += std::to_string(x);
  }
  return s;
}

class GlaCpuVarlen : public ::testing::TestWithParam<VarlenParam> {};

TEST_P(GlaCpuVarlen, MatchesReference) {
  const VarlenParam& p = GetParam();
  Case c;
  c.B = 1; c.T = p.cu.back(); c.H = p.H; c.K = p.D; c.V = p.D; c.cu = p.cu; c.dtype = DType::f16;
  c.dht_uniform = true;
  const Data d(c, 42);
  const Results ref = gla_test::run_reference(d);
  const Results out = gla_test::run_cpu(d);
  expect_close(ref, out, c, {});
  // Zero-length sequences pass their initial state and dht straight through.
  for (std::size_t n = 0; n + 1 < p.cu.size(); ++n) {
    if (p.cu[n + 1] != p.cu[n]) continue;
    const std::int64_t base = static_cast<std::int64_t>(n) * c.H * c.K * c.V;
    for (std::int64_t i = base; i < base + c.H * c.K * c.V; ++i) {
      ASSERT_EQ(out.ht.get(i), d.h0.get(i));
      ASSERT_EQ(out.dh0.get(i), d.dht.get(i));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fla, GlaCpuVarlen,
                         ::testing::Values(VarlenParam{4, 64, {0, 15}}, VarlenParam{4, 64, {0, 0, 16}},
                                           VarlenParam{4, 64, {0, 256, 500, 1000}},
                                           VarlenParam{4, 100, {0, 15, 100, 300, 1200, 2000}}),
                         varlen_name);

// ---------------------------------------------------------------- tighter checks

// With f32 inputs the only differences are fp32 accumulation and fp32 exps, so the chunked algorithm
// must agree far better than FLA's bf16 tolerances: this catches formula slips those would hide.
TEST(GlaCpu, F32AgreesTightlyVarlenNoInitialState) {
  Case c;
  c.T = 333; c.H = 2; c.K = 24; c.V = 40; c.cu = {0, 1, 64, 65, 200, 333}; c.dtype = DType::f32;
  const Data d(c, 11);
  expect_close(gla_test::run_reference(d), gla_test::run_cpu(d), c, {1e-4, 1e-4});
  Case c2 = c;
  c2.h0 = false; c2.dht = false; c2.normalizer = 0.1;
  const Data d2(c2, 12);
  expect_close(gla_test::run_reference(d2), gla_test::run_cpu(d2), c2, {1e-4, 1e-4});
}

TEST(GlaCpu, F32AgreesTightlyDense) {
  Case c;
  c.B = 2; c.T = 191; c.H = 1; c.K = 17; c.V = 9; c.dtype = DType::f32; c.normalizer = 10;
  const Data d(c, 13);
  expect_close(gla_test::run_reference(d), gla_test::run_cpu(d), c, {1e-4, 1e-4});
}

// g = -1000 (a full reset, FLA's KDA varlen tests use it) and a whole chunk of such resets: every
// exp must underflow to 0 cleanly, never meet an inf, and the result must still match.
TEST(GlaCpu, ResetGatesGiveNoNaN) {
  Case c;
  c.T = 200; c.H = 2; c.K = 32; c.V = 16; c.dtype = DType::bf16;
  Data d(c, 14);
  testing::Rng rng(99);
  for (std::int64_t i = 0; i < d.g.numel(); ++i)
    if (rng.uniform() < 0.3) d.g.set(i, -1000.0);
  for (std::int64_t row = 64; row < 128; ++row)
    for (std::int64_t i = 0; i < c.H * c.K; ++i) d.g.set(row * c.H * c.K + i, -1000.0);
  const Results out = gla_test::run_cpu(d);
  for (const HostTensor* t : {&out.o, &out.ht, &out.dq, &out.dk, &out.dv, &out.dg, &out.dh0})
    for (std::int64_t i = 0; i < t->numel(); ++i) ASSERT_TRUE(std::isfinite(t->get(i))) << i;
  expect_close(gla_test::run_reference(d), out, c, {});
}

// g = -inf is a reset too; b_r - b_j must not become (-inf) - (-inf).
TEST(GlaCpu, MinusInfinityGatesGiveNoNaN) {
  Case c;
  c.T = 100; c.H = 1; c.K = 16; c.V = 8; c.dtype = DType::f32;
  Data d(c, 19);
  for (std::int64_t i = 0; i < d.g.numel(); i += 7) d.g.set(i, -std::numeric_limits<double>::infinity());
  const Results out = gla_test::run_cpu(d);
  for (const HostTensor* t : {&out.o, &out.ht, &out.dq, &out.dk, &out.dv, &out.dg, &out.dh0})
    for (std::int64_t i = 0; i < t->numel(); ++i) ASSERT_TRUE(std::isfinite(t->get(i))) << i;
  expect_close(gla_test::run_reference(d), out, c, {1e-4, 1e-4});
}

// A batch of nothing but empty sequences (T = 0): states pass straight through, on both paths.
TEST(GlaCpu, AllEmptySequences) {
  Case c;
  c.T = 0; c.H = 2; c.K = 8; c.V = 4; c.cu = {0, 0, 0}; c.dtype = DType::bf16;
  const Data d(c, 20);
  for (const Results& r : {gla_test::run_cpu(d), gla_test::run_reference(d)}) {
    ASSERT_EQ(r.ht.numel(), 2 * 2 * 8 * 4);
    for (std::int64_t i = 0; i < r.ht.numel(); ++i) {
      EXPECT_EQ(r.ht.get(i), d.h0.get(i));
      EXPECT_EQ(r.dh0.get(i), d.dht.get(i));
    }
  }
}

TEST(GlaCpu, InferenceModeMatchesTraining) {
  Case c;
  c.T = 77; c.H = 2; c.K = 16; c.V = 16; c.dtype = DType::f16;
  const Data d(c, 21);
  Results a(d, true), b(d, true);
  ExecOptions opts;
  opts.backend = Backend::cpu;
  chunk_gla_forward(d.args(), a.outputs(), ForwardMode::training, opts);
  chunk_gla_forward(d.args(), b.outputs(), ForwardMode::inference, opts);
  EXPECT_EQ(a.o.to_f64(), b.o.to_f64());
  EXPECT_EQ(a.ht.to_f64(), b.ht.to_f64());
  EXPECT_TRUE(std::isfinite(a.o.get(0)));
}

TEST(GlaCpu, ThreadCountDoesNotChangeResults) {
  Case c;
  c.B = 3; c.T = 100; c.H = 3; c.K = 16; c.V = 16; c.dtype = DType::bf16;
  const Data d(c, 15);
  const Results one = gla_test::run_cpu(d, 1), many = gla_test::run_cpu(d, 4);
  for (auto [a, b] : {std::pair{&one.o, &many.o}, {&one.dq, &many.dq}, {&one.dg, &many.dg}, {&one.dh0, &many.dh0}}) {
    const auto va = a->to_f64(), vb = b->to_f64();
    for (std::size_t i = 0; i < va.size(); ++i) ASSERT_EQ(va[i], vb[i]) << i;
  }
}

TEST(GlaCpu, OutputsAreRoundedToTheirDtypes) {
  Case c;
  c.T = 70; c.H = 1; c.K = 8; c.V = 8; c.dtype = DType::bf16;
  const Data d(c, 16);
  // The front door only accepts o, dq... in the input dtype and states in f32.
  const Results out = gla_test::run_cpu(d);
  EXPECT_EQ(out.o.dtype(), DType::bf16);
  EXPECT_EQ(out.dg.dtype(), DType::bf16);
  EXPECT_EQ(out.ht.dtype(), DType::f32);
  // g may be f32 while q/k/v are bf16: dg then comes back in f32.
  Data d32(c, 16);
  d32.g = d.g.cast(DType::f32);
  HostTensor dg32 = testing::poisoned(DType::f32, d.g.shape());
  Results r(d32, true);
  ChunkGlaGrads grads = r.grads(true);
  grads.dg = dg32.view();
  ExecOptions opts;
  opts.backend = Backend::cpu;
  chunk_gla_backward(d32.args(), d32.grad_inputs(), grads, opts);
  const auto cl = harness::assert_close(out.dg, dg32, 0.005);
  EXPECT_TRUE(cl.pass) << cl.str();
}

// ---------------------------------------------------------------- refusals

bool untouched(const HostTensor& t, double sentinel) {
  for (std::int64_t i = 0; i < t.numel(); ++i)
    if (t.get(i) != sentinel) return false;
  return true;
}

TEST(GlaCpu, RefusesBadInputAndWritesNothing) {
  Case c;
  c.B = 1; c.T = 10; c.H = 2; c.K = 8; c.V = 8; c.dtype = DType::bf16;
  const Data d(c, 17);
  ExecOptions opts;
  opts.backend = Backend::cpu;
  const double s = 7.0;
  HostTensor o = HostTensor::filled(DType::bf16, d.v.shape(), s), ht = HostTensor::filled(DType::f32, Shape{1, 2, 8, 8}, s);

  // Forward: g of the wrong shape.
  ChunkGlaArgs bad = d.args();
  HostTensor g_short = HostTensor::filled(DType::bf16, Shape{1, 10, 2, 7}, -0.1);
  bad.g = g_short.view();
  try {
    chunk_gla_forward(bad, AttentionOutputs{o.view(), ht.view()}, ForwardMode::training, opts);
    FAIL() << "g of the wrong shape was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "g");
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
  }
  // Forward: o in f32 while v is bf16 (kernels write o in v's dtype).
  HostTensor o32 = HostTensor::filled(DType::f32, d.v.shape(), s);
  EXPECT_THROW(chunk_gla_forward(d.args(), AttentionOutputs{o32.view(), ht.view()}, ForwardMode::training, opts), Error);
  EXPECT_TRUE(untouched(o, s));
  EXPECT_TRUE(untouched(o32, s));
  EXPECT_TRUE(untouched(ht, s));

  // Backward: dq of the wrong dtype; nothing else may be written either.
  HostTensor dq = HostTensor::filled(DType::f32, d.q.shape(), s), dk = HostTensor::filled(DType::bf16, d.k.shape(), s),
             dv = HostTensor::filled(DType::bf16, d.v.shape(), s), dg = HostTensor::filled(DType::bf16, d.g.shape(), s),
             dh0 = HostTensor::filled(DType::f32, Shape{1, 2, 8, 8}, s);
  try {
    chunk_gla_backward(d.args(), d.grad_inputs(), ChunkGlaGrads{dq.view(), dk.view(), dv.view(), dg.view(), dh0.view()}, opts);
    FAIL() << "dq of the wrong dtype was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "dq");
  }
  for (const HostTensor* t : {&dq, &dk, &dv, &dg, &dh0}) EXPECT_TRUE(untouched(*t, s));

  // Varlen with B != 1 is refused too.
  Case cv = c;
  cv.B = 2; cv.T = 5; cv.cu = {0, 5, 10};
  EXPECT_THROW(
      {
        const Data dv2(cv, 18);
        Results r(dv2, true);
        chunk_gla_forward(dv2.args(), r.outputs(), ForwardMode::training, opts);
      },
      Error);
}

// ---------------------------------------------------------------- fp32 building blocks

TEST(GlaCpuMath, DotHandlesTails) {
  std::vector<float> a(13), b(13);
  double ref = 0;
  for (int i = 0; i < 13; ++i) {
    a[static_cast<std::size_t>(i)] = static_cast<float>(i) - 3.5f;
    b[static_cast<std::size_t>(i)] = 0.25f * static_cast<float>(i);
    ref += static_cast<double>(a[static_cast<std::size_t>(i)]) * b[static_cast<std::size_t>(i)];
  }
  for (int n : {0, 1, 7, 8, 9, 13}) {
    double r = 0;
    for (int i = 0; i < n; ++i) r += static_cast<double>(a[static_cast<std::size_t>(i)]) * b[static_cast<std::size_t>(i)];
    EXPECT_FLOAT_EQ(detail::cpu::dot(a.data(), b.data(), n), static_cast<float>(r)) << n;
  }
  EXPECT_FLOAT_EQ(detail::cpu::dot(a.data(), b.data(), 13), static_cast<float>(ref));
}

// The CPU backend has one implementation per direction: a variant named for chunk_gla is refused by
// argument "variant" before any work (the outputs keep their poison), in both directions.
TEST(GlaCpu, ANamedVariantIsRefused) {
  Case c;
  c.T = 20; c.H = 1; c.K = 8; c.V = 8; c.dtype = DType::bf16;
  const Data d(c, 23);
  Results r(d, true);
  ExecOptions opts;
  opts.backend = Backend::cpu;
  opts.variant = "wg128";
  const auto expect_refused = [](const char* what, const auto& call) {
    try {
      call();
      ADD_FAILURE() << what << ": a named variant was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
      EXPECT_EQ(e.argument(), "variant") << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string("'wg128' for ") + what + " on the cpu backend"), std::string::npos) << e.what();
    }
  };
  const double o0 = r.o.get(0);
  expect_refused("chunk_gla.fwd", [&] { chunk_gla_forward(d.args(), r.outputs(), ForwardMode::training, opts); });
  EXPECT_TRUE(std::isnan(o0) ? std::isnan(r.o.get(0)) : r.o.get(0) == o0);  // nothing written
  expect_refused("chunk_gla.bwd", [&] { chunk_gla_backward(d.args(), d.grad_inputs(), r.grads(d.c.h0), opts); });
  opts.variant.clear();
  EXPECT_NO_THROW(chunk_gla_forward(d.args(), r.outputs(), ForwardMode::training, opts));
}

}  // namespace
}  // namespace lina
