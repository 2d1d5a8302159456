// Correctness check of the CUDA chunk_kda / chunk_gdn forward through the public API (ctest, label gpu).
// Reference: fp64 host recurrence (docs/math.md section 2) on the same bf16-rounded inputs, FLA's metric
// RMS(ref - out) / RMS(ref) with tolerance 0.005 on o and the final state; outputs poisoned with NaN.
//   lina_cuda_delta_check [--match TEXT]   only the cases whose name contains TEXT (sanitizer runs)
// Exit code: 0 all checks passed, 1 a check failed, 2 a bad argument, 3 a CUDA error, 77 no CUDA device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <cuda_bf16.h>
#include <string>
#include <vector>

#include "harness/verify/accuracy.h"
#include "lina/chunk_delta.h"
#include "lina/error.h"
#include "tests/cuda/device_check_support.cuh"
#include "tests/support/random.h"

using namespace lina;

#define CK(x) lina_test::ck((x), #x)

namespace {

using lina_test::DevBuf;

TensorView dev_view(DevBuf& b, DType dt, Shape s) { return TensorView::contiguous(b.p, dt, s, Device::cuda, 0); }

DevBuf* upload(const HostTensor& h) {
  auto* b = new DevBuf(h.nbytes());
  CK(cudaMemcpy(b->p, h.data(), h.nbytes(), cudaMemcpyHostToDevice));
  return b;
}

enum Gate { kGiven = 0, kSoftplus = 1, kLowerBound = 2 };

struct Case {
  const char* name;
  bool kda;
  int B, T, H, HV, D;
  std::vector<int> cu;  // empty: dense
  Gate gate;
  bool safe;
  bool beta_sigmoid;
  bool h0;
  int Vdim = 0;  // value head dim; 0: V = D (K = D always)
  double neg1000 = 0;       // probability of a -1000 given gate element
  bool odd_chunks = false;  // -1000 gates only in the tokens t with t / 64 odd: chunks in and out of range alternate
};

double softplus(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }

int run_case(const Case& c, std::uint64_t seed) {
  testing::Rng rng(seed);
  const int K = c.D, V = c.Vdim ? c.Vdim : c.D, B = c.B, T = c.T, H = c.H, HV = c.HV, G = HV / H;
  const bool varlen = !c.cu.empty();
  const int N = varlen ? static_cast<int>(c.cu.size()) - 1 : B;
  HostTensor q = testing::normal(rng, DType::bf16, {B, T, H, K});
  HostTensor k = testing::normal(rng, DType::bf16, {B, T, H, K});
  HostTensor v = testing::normal(rng, DType::bf16, {B, T, HV, V});
  Shape gshape = c.kda ? Shape{B, T, HV, K} : Shape{B, T, HV};
  const std::int64_t per_token = static_cast<std::int64_t>(HV) * (c.kda ? K : 1);
  std::int64_t elem = 0;
  HostTensor g = testing::make(DType::bf16, gshape, [&] {
    const double x = rng.normal();
    const bool odd = (elem++ / per_token % T / 64) % 2 == 1;
    if (c.gate != kGiven) return x;
    const double ls = testing::logsigmoid(x);
    if (c.neg1000 > 0 && rng.uniform() < c.neg1000 && (!c.odd_chunks || odd)) return -1000.0;
    return c.safe ? std::max(ls, -5.0) : ls;
  });
  HostTensor beta = testing::make(DType::bf16, {B, T, HV}, [&] {
    const double x = rng.normal();
    return c.beta_sigmoid ? x : testing::sigmoid(x);
  });
  HostTensor A_log, dt_bias;
  const bool has_alog = c.gate == kSoftplus || (c.gate == kLowerBound && (seed & 1));
  if (has_alog) A_log = testing::make(DType::f32, {HV}, [&] { return c.gate == kSoftplus ? std::log(1.0 + 15.0 * rng.uniform()) : 0.3 * rng.normal(); });
  if (c.gate != kGiven) dt_bias = testing::make(DType::f32, c.kda ? Shape{HV * K} : Shape{HV}, [&] { return rng.normal(); });
  HostTensor h0;
  if (c.h0) h0 = testing::normal(rng, DType::f32, {N, HV, K, V});
  HostTensor cu;
  if (varlen) {
    cu = HostTensor(DType::i32, {static_cast<std::int64_t>(c.cu.size())});
    for (size_t i = 0; i < c.cu.size(); ++i) cu.set(static_cast<std::int64_t>(i), c.cu[i]);
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(K));
  const double lower_bound = -5.0;

  // ---- fp64 reference: S' = decay S; u = beta (v - S'^T k); S = S' + k u^T; o = S^T (scale q)
  std::vector<double> o_ref(static_cast<size_t>(B) * T * HV * V), ht_ref(static_cast<size_t>(N) * HV * K * V);
  const auto qd = q.to_f64(), kd = k.to_f64(), vd = v.to_f64(), gd = g.to_f64(), bd = beta.to_f64();
  std::vector<double> S(static_cast<size_t>(K) * V), qn(K), kn(K), gk(K), u(V);
  for (int n = 0; n < N; ++n) {
    const long bos = varlen ? c.cu[n] : static_cast<long>(n) * T;
    const long len = varlen ? c.cu[n + 1] - c.cu[n] : T;
    for (int hv = 0; hv < HV; ++hv) {
      const int h = hv / G;
      for (int i = 0; i < K * V; ++i) S[i] = c.h0 ? h0.get((static_cast<long>(n) * HV + hv) * K * V + i) : 0.0;
      for (long tt = bos; tt < bos + len; ++tt) {
        double sq = 0, sk = 0;
        for (int x = 0; x < K; ++x) {
          qn[x] = qd[(tt * H + h) * K + x];
          kn[x] = kd[(tt * H + h) * K + x];
          sq += qn[x] * qn[x];
          sk += kn[x] * kn[x];
        }
        for (int x = 0; x < K; ++x) {  // use_qk_l2norm_in_kernel
          qn[x] /= std::sqrt(sq + 1e-6);
          kn[x] /= std::sqrt(sk + 1e-6);
        }
        for (int x = 0; x < K; ++x) {
          const double raw = c.kda ? gd[(tt * HV + hv) * K + x] : gd[tt * HV + hv];
          double gv = raw;
          if (c.gate == kSoftplus) {
            const double bias = c.kda ? dt_bias.get(hv * K + x) : dt_bias.get(hv);
            gv = -std::exp(A_log.get(hv)) * softplus(raw + bias);
          } else if (c.gate == kLowerBound) {
            const double e = has_alog ? std::exp(A_log.get(hv)) : 1.0;
            gv = lower_bound * testing::sigmoid(e * (raw + dt_bias.get(hv * K + x)));
          }
          gk[x] = gv;
        }
        double bt = bd[tt * HV + hv];
        if (c.beta_sigmoid) bt = testing::sigmoid(bt);
        for (int x = 0; x < K; ++x) {
          const double a = std::exp(gk[x]);
          for (int y = 0; y < V; ++y) S[x * V + y] *= a;
        }
        for (int y = 0; y < V; ++y) {
          double p = 0;
          for (int x = 0; x < K; ++x) p += S[x * V + y] * kn[x];
          u[y] = bt * (vd[(tt * HV + hv) * V + y] - p);
        }
        for (int x = 0; x < K; ++x)
          for (int y = 0; y < V; ++y) S[x * V + y] += kn[x] * u[y];
        for (int y = 0; y < V; ++y) {
          double o = 0;
          for (int x = 0; x < K; ++x) o += S[x * V + y] * qn[x] * scale;
          o_ref[(tt * HV + hv) * V + y] = o;
        }
      }
      for (int i = 0; i < K * V; ++i) ht_ref[(static_cast<size_t>(n) * HV + hv) * K * V + i] = S[i];
    }
  }

  // ---- CUDA path through the public API
  std::unique_ptr<DevBuf> dq(upload(q)), dk(upload(k)), dv(upload(v)), dg(upload(g)), dbeta(upload(beta));
  std::unique_ptr<DevBuf> dalog, ddt, dh0, dcu;
  if (has_alog) dalog.reset(upload(A_log));
  if (c.gate != kGiven) ddt.reset(upload(dt_bias));
  if (c.h0) dh0.reset(upload(h0));
  if (varlen) dcu.reset(upload(cu));
  DevBuf dout(static_cast<size_t>(B) * T * HV * V * 2), dht(static_cast<size_t>(N) * HV * K * V * 4);
  CK(cudaMemset(dout.p, 0xff, dout.n));  // NaN poison
  CK(cudaMemset(dht.p, 0xff, dht.n));
  AttentionOutputs out{dev_view(dout, DType::bf16, {B, T, HV, V}), dev_view(dht, DType::f32, {N, HV, K, V})};
  auto fill = [&](DeltaRuleArgs& a) {
    a.q = dev_view(*dq, DType::bf16, {B, T, H, K});
    a.k = dev_view(*dk, DType::bf16, {B, T, H, K});
    a.v = dev_view(*dv, DType::bf16, {B, T, HV, V});
    a.g = dev_view(*dg, DType::bf16, gshape);
    a.beta = dev_view(*dbeta, DType::bf16, {B, T, HV});
    if (c.h0) a.initial_state = dev_view(*dh0, DType::f32, {N, HV, K, V});
    if (varlen) a.cu_seqlens = dev_view(*dcu, DType::i32, {static_cast<std::int64_t>(c.cu.size())});
    a.use_qk_l2norm_in_kernel = true;
    a.use_beta_sigmoid_in_kernel = c.beta_sigmoid;
    a.use_gate_in_kernel = c.gate != kGiven;
    if (dalog) a.A_log = dev_view(*dalog, DType::f32, {HV});
    if (ddt) a.dt_bias = dev_view(*ddt, DType::f32, c.kda ? Shape{HV * K} : Shape{HV});
  };
  ExecOptions opts;
  opts.backend = Backend::cuda;
  RunInfo info;
  try {
    if (c.kda) {
      ChunkKdaArgs a;
      fill(a);
      a.safe_gate = c.safe;
      if (c.safe || c.gate == kLowerBound) a.lower_bound = lower_bound;
      info = chunk_kda_forward(a, out, ForwardMode::inference, opts);
    } else {
      ChunkGdnArgs a;
      fill(a);
      info = chunk_gdn_forward(a, out, ForwardMode::inference, opts);
    }
    CK(cudaDeviceSynchronize());
  } catch (const Error& e) {
    std::printf("%-44s ERROR %s\n", c.name, e.what());
    return 1;
  }
  HostTensor o_h(DType::bf16, {B, T, HV, V}), ht_h(DType::f32, {N, HV, K, V});
  CK(cudaMemcpy(o_h.data(), dout.p, o_h.nbytes(), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(ht_h.data(), dht.p, ht_h.nbytes(), cudaMemcpyDeviceToHost));
  const auto co = harness::assert_close(o_ref, o_h.to_f64(), 0.005);
  const auto ch = harness::assert_close(ht_ref, ht_h.to_f64(), 0.005);
  const bool pass = co.pass && ch.pass;
  // bits: FNV-1a of the outputs' bytes, for comparing two builds that should agree bit for bit
  std::printf("%-44s %-14s o: err %.2e max %.2e nan %d | ht: err %.2e max %.2e nan %d  %s  bits o %016llx ht %016llx\n", c.name,
              info.variant.c_str(), co.err_ratio, co.max_abs, co.has_nan, ch.err_ratio, ch.max_abs, ch.has_nan, pass ? "PASS" : "FAIL",
              static_cast<unsigned long long>(lina_test::fnv1a64(o_h.data(), o_h.nbytes())),
              static_cast<unsigned long long>(lina_test::fnv1a64(ht_h.data(), ht_h.nbytes())));
  return pass ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const char* match = nullptr;  // --match TEXT: only the checks whose name contains TEXT (sanitizer runs)
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--match") && i + 1 < argc) {
      match = argv[++i];
    } else {
      std::printf("lina_cuda_delta_check: unknown argument `%s`, expected --match TEXT\n", argv[i]);
      return 2;
    }
  }
  lina_test::require_device_or_skip();
  int fails = 0;
  {
    const std::vector<int> vl = {0, 0, 16, 100, 300};
    const std::vector<int> vlm = {0, 1000, 1000, 1001, 3000, 4500};  // with a zero-length and a T = 1 sequence
    const std::vector<int> vls = {0, 300, 300, 4100, 5000};            // split: short, zero-length, long, mid
    const std::vector<Case> cases = {
        {"gdn T1 H2 HV2 D64", false, 1, 1, 2, 2, 64, {}, kGiven, false, false, true},
        {"gdn T63 B2 H2 HV4 D128 h0", false, 2, 63, 2, 4, 128, {}, kGiven, false, false, true},
        {"gdn T100 H1 HV4 D64 gate-in-kernel", false, 1, 100, 1, 4, 64, {}, kSoftplus, false, true, false},
        {"gdn T300 varlen H2 HV4 D128 h0", false, 1, 300, 2, 4, 128, vl, kGiven, false, true, true},
        {"gdn T200 B2 H4 HV4 D128 V-tiles", false, 2, 200, 4, 4, 128, {}, kGiven, false, false, true},
        {"kda T1 H2 HV2 D64 safe", true, 1, 1, 2, 2, 64, {}, kGiven, true, false, true},
        {"kda T63 B2 H2 HV4 D128 safe h0", true, 2, 63, 2, 4, 128, {}, kGiven, true, false, true},
        {"kda T100 H1 HV4 D64 lower-bound gate", true, 1, 100, 1, 4, 64, {}, kLowerBound, true, true, false},
        {"kda T300 varlen H2 HV4 D128 lb gate h0", true, 1, 300, 2, 4, 128, vl, kLowerBound, true, true, true},
        {"kda T300 varlen H2 HV4 D128 softplus", true, 1, 300, 2, 4, 128, vl, kSoftplus, false, true, true},
        {"kda T200 B2 H2 HV2 D64 given unsafe", true, 2, 200, 2, 2, 64, {}, kGiven, false, false, true},
        {"kda T130 B1 H2 HV4 D128 given safe", true, 1, 130, 2, 4, 128, {}, kGiven, true, false, true},
        {"gdn T200 B1 H2 HV2 D256 h0", false, 1, 200, 2, 2, 256, {}, kGiven, false, false, true},
        {"gdn T300 varlen H1 HV2 D256 gate-in-kernel", false, 1, 300, 1, 2, 256, vl, kSoftplus, false, true, true},
        {"kda T150 B1 H2 HV2 D256 given safe h0", true, 1, 150, 2, 2, 256, {}, kGiven, true, false, true},
        {"kda T300 varlen H1 HV2 D256 lb gate", true, 1, 300, 1, 2, 256, vl, kLowerBound, true, true, true},
        {"kda T100 B1 H1 HV1 D256 given unsafe", true, 1, 100, 1, 1, 256, {}, kGiven, false, false, false},
        // KDA without safe_gate: the diagonal blocks through their middle row where a chunk's 16-row gate sums are
        // >= -40 (gate_range.cuh), exact exps elsewhere; chunks of both kinds in one call, and all out of range
        {"kda T300 B2 H2 HV2 D128 given m1000 odd chunks", true, 2, 300, 2, 2, 128, {}, kGiven, false, false, true, 0, 0.3, true},
        {"kda T200 B1 H1 HV2 D256 given m1000 odd chunks", true, 1, 200, 1, 2, 256, {}, kGiven, false, false, true, 0, 0.3, true},
        {"kda T200 B1 H2 HV4 D64 given m1000", true, 1, 200, 2, 4, 64, {}, kGiven, false, false, true, 0, 0.3},
        // V != K: 32-column state tiles over V = 256 and V = 192 (six tiles), and 64-column ones at K = 256
        {"gdn T200 B1 H2 HV4 K128 V256 h0", false, 1, 200, 2, 4, 128, {}, kGiven, false, false, true, 256},
        {"kda T300 varlen H2 HV2 K64 V192 lb gate h0", true, 1, 300, 2, 2, 64, vl, kLowerBound, true, true, true, 192},
        {"gdn T130 B1 H1 HV2 K256 V128 h0", false, 1, 130, 1, 2, 256, {}, kGiven, false, false, true, 128},
        // More 64-column V tiles than SMs with an even count per head: KDA's state kernel takes V-tile
        // pairs (two warpgroups of one CTA share the chunk's operand tiles): dense, varlen with a
        // zero-length sequence, V = 256 (two pairs per head), K = 64 and 128; GDN's large grids for contrast
        {"kda T200 B3 H24 HV48 D128 lb gate h0 V-tile pairs", true, 3, 200, 24, 48, 128, {}, kLowerBound, true, true, true},
        {"kda T300 varlen H8 HV72 K64 V256 softplus h0 V-tile pairs", true, 1, 300, 8, 72, 64, vl, kSoftplus, false, true, true, 256},
        {"kda T130 B2 H36 HV72 K64 V128 given safe V-tile pairs", true, 2, 130, 36, 72, 64, {}, kGiven, true, false, false, 128},
        {"gdn T150 B2 H48 HV96 D128 h0 large grid", false, 2, 150, 48, 96, 128, {}, kGiven, false, false, true},
        // More (chunk, head) items than the persistent prep grid holds (2-3 CTAs per SM at K <= 128,
        // 1-2 at K = 256, 132 SMs): each CTA walks several items with the next item's loads in flight.
        {"kda T2048 B2 H2 HV8 D128 lb gate h0 multi-item prep", true, 2, 2048, 2, 8, 128, {}, kLowerBound, true, true, true},
        {"gdn T4500 varlen H4 HV8 D128 gate-in-kernel h0 multi-item prep", false, 1, 4500, 4, 8, 128, vlm, kSoftplus, false, true, true},
        {"kda T4500 varlen H2 HV4 D64 softplus multi-item prep", true, 1, 4500, 2, 4, 64, vlm, kSoftplus, false, true, false},
        {"kda T4400 B1 H2 HV4 D256 given safe h0 multi-item prep", true, 1, 4400, 2, 4, 256, {}, kGiven, true, false, true},
        {"gdn T4400 B1 H4 HV4 D256 h0 multi-item prep", false, 1, 4400, 4, 4, 256, {}, kGiven, false, false, true},
        // Few (sequence, value head) pairs and long sequences: the default is the sequence split (a varlen view of
        // segments, the maps [X | Y], the combine, the outputs). One-call maps at K = V = 128 and K = V = 64, two-call
        // maps at K = 256 (above: the D256 multi-item cases) and K = 128 V = 256; varlen with a zero-length sequence
        // and sequences shorter than a segment; GVA; the in-kernel gates
        {"gdn T6000 B1 H1 HV2 D128 h0 sequence split", false, 1, 6000, 1, 2, 128, {}, kGiven, false, false, true},
        {"kda T5000 varlen H1 HV2 D128 lb gate h0 sequence split", true, 1, 5000, 1, 2, 128, vls, kLowerBound, true, true, true},
        {"gdn T5000 varlen H2 HV2 D64 gate-in-kernel sequence split", false, 1, 5000, 2, 2, 64, vls, kSoftplus, false, true, true},
        {"kda T4200 B2 H1 HV1 K128 V256 softplus h0 sequence split", true, 2, 4200, 1, 1, 128, {}, kSoftplus, false, true, true, 256},
    };
    std::uint64_t seed = 42;
    for (const auto& c : cases) {
      const std::uint64_t cs = seed++;  // a case's seed does not depend on the filter
      if (!match || std::strstr(c.name, match)) fails += run_case(c, cs);
    }
  }
  std::printf("%s (%d failing checks)\n", fails ? "FAILED" : "ALL CHECKS PASSED", fails);
  return fails ? 1 : 0;
}
