// Correctness check of the CUDA chunk_kda / chunk_gdn backward through the public API (ctest, label gpu).
// FLA's metric RMS(ref - out) / RMS(ref) at FLA's tolerances (harness/verify/tolerances.cpp):
//   small shapes: the fp64 host reference (lina::reference, naive recurrence) on the same inputs;
//   large shapes: the GPU fp32 naive reference (lina::gpu_reference).
// Outputs are poisoned with NaN.
//   lina_cuda_delta_bwd_check [--small] [--match TEXT]
//     --small: small shapes only (compute-sanitizer); --match: only the cases whose name contains TEXT
// Exit code: 0 all checks passed, 1 a check failed, 2 a bad argument, 3 a CUDA error, 77 no CUDA device.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/verify/accuracy.h"
#include "harness/verify/tolerances.h"
#include "lina/chunk_delta.h"
#include "lina/error.h"
#include "lina/gpu_reference.h"
#include "tests/cuda/device_check_support.cuh"
#include "tests/support/random.h"

using namespace lina;

#define CK(x) lina_test::ck((x), #x)

namespace {

using lina_test::DevBuf;

enum Gate { kGiven = 0, kSoftplus = 1, kLowerBound = 2 };

struct Case {
  const char* name;
  bool kda;
  int B, T, H, HV, D;
  std::vector<int> cu;  // empty: dense
  Gate gate = kGiven;
  bool safe = false, sigmoid = false, neg_eig = false, l2 = true, h0 = true, dht = true;
  double neg1000 = 0;  // probability of a -1000 gate element
  bool odd_chunks = false;  // -1000 gates only in the tokens t with t / 64 odd: chunks in and out of range alternate
  int Dv = 0;            // value head dim when it differs from D (K)
  bool gpu_ref = false;  // large: compare against the GPU fp32 reference
  bool f32io = false;    // q, k, v, dO (and so dq, dk, dv) in f32 instead of bf16
  bool odd_do = false;   // dO 2 bytes past a 16-byte boundary: grad_v (hi + lo planes, any dtype) instead of grad_v4
  bool refuse = false;   // the call must be refused (Error, before any launch)
};

struct Inputs {
  HostTensor q, k, v, g, beta, h0, cu, d_o, dht;
  std::optional<HostTensor> A_log, dt_bias;
};

Inputs make_inputs(const Case& c, std::uint64_t seed) {
  testing::Rng r(seed);
  const bool varlen = !c.cu.empty();
  const int B = varlen ? 1 : c.B, T = varlen ? c.cu.back() : c.T, N = varlen ? static_cast<int>(c.cu.size()) - 1 : B;
  const int H = c.H, HV = c.HV, K = c.D, V = c.Dv ? c.Dv : c.D;
  Inputs in;
  const DType io = c.f32io ? DType::f32 : DType::bf16;
  auto qk = [&]() {
    if (c.l2) return testing::normal(r, io, {B, T, H, K});
    HostTensor t(io, {B, T, H, K});  // normalised outside
    std::vector<double> row(K);
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(B) * T * H; ++i) {
      double n = 0;
      for (auto& x : row) { x = r.normal(); n += x * x; }
      for (int j = 0; j < K; ++j) t.set(i * K + j, row[j] / std::sqrt(n));
    }
    return t;
  };
  in.q = qk();
  in.k = qk();
  in.v = testing::normal(r, io, {B, T, HV, V});
  const Shape gs = c.kda ? Shape{B, T, HV, K} : Shape{B, T, HV};
  const std::int64_t per_token = static_cast<std::int64_t>(HV) * (c.kda ? K : 1);
  std::int64_t elem = 0;
  in.g = testing::make(c.gate == kGiven ? DType::f32 : (c.kda ? DType::bf16 : DType::f32), gs, [&] {
    const double x = r.normal();
    double g = c.gate != kGiven ? x : testing::logsigmoid(x);
    if (c.safe && c.gate == kGiven) g = std::max(g, -5.0);
    const bool odd = (elem++ / per_token % T / 64) % 2 == 1;
    if (c.neg1000 > 0 && r.uniform() < c.neg1000 && (!c.odd_chunks || odd)) g = -1000.0;
    return g;
  });
  in.beta = testing::make(DType::f32, {B, T, HV}, [&] { const double x = r.normal(); return c.sigmoid ? x : testing::sigmoid(x); });
  if (c.gate != kGiven) {
    in.A_log = testing::make(DType::f32, {HV}, [&] { return c.gate == kSoftplus ? std::log(1.0 + 15.0 * r.uniform()) : 0.3 * r.normal(); });
    in.dt_bias = testing::make(DType::f32, c.kda ? Shape{HV * K} : Shape{HV}, [&] { return r.normal(); });
  }
  in.h0 = c.h0 ? testing::normal(r, DType::f32, {N, HV, K, V}) : HostTensor::filled(DType::f32, {N, HV, K, V}, 0.0);
  if (varlen) {
    in.cu = HostTensor(DType::i32, {static_cast<std::int64_t>(c.cu.size())});
    for (size_t i = 0; i < c.cu.size(); ++i) in.cu.set(static_cast<std::int64_t>(i), c.cu[i]);
  }
  in.d_o = testing::normal(r, io, {B, T, HV, V});
  in.dht = testing::normal(r, DType::f32, {N, HV, K, V});
  return in;
}

// One set of views (host or device) of the inputs.
struct Views {
  TensorView q, k, v, g, beta, h0, cu, d_o, dht;
  std::optional<TensorView> A_log, dt_bias;
};

template <class Args>
void fill_args(Args& a, const Views& v, const Case& c) {
  a.q = v.q;
  a.k = v.k;
  a.v = v.v;
  a.g = v.g;
  a.beta = v.beta;
  a.initial_state = v.h0;
  if (!c.cu.empty()) a.cu_seqlens = v.cu;
  a.use_qk_l2norm_in_kernel = c.l2;
  a.use_beta_sigmoid_in_kernel = c.sigmoid;
  a.allow_neg_eigval = c.neg_eig;
  a.use_gate_in_kernel = c.gate != kGiven;
  a.A_log = v.A_log;
  a.dt_bias = v.dt_bias;
}

ChunkKdaArgs kda_args(const Views& v, const Case& c) {
  ChunkKdaArgs a;
  fill_args(a, v, c);
  if (c.safe) a.safe_gate = true;
  if (c.safe || c.gate == kLowerBound) a.lower_bound = -5.0;
  return a;
}

using Results = std::map<std::string, HostTensor>;

// Gradient tensors in the given dtypes (exact: the input dtypes; otherwise all `forced`).
Results alloc_grads(const Inputs& in, bool exact, DType forced) {
  auto dt = [&](DType d) { return exact ? d : forced; };
  Results r;
  r["dq"] = testing::poisoned(dt(in.q.dtype()), in.q.shape());
  r["dk"] = testing::poisoned(dt(in.k.dtype()), in.k.shape());
  r["dv"] = testing::poisoned(dt(in.v.dtype()), in.v.shape());
  r["dg"] = testing::poisoned(dt(in.g.dtype()), in.g.shape());
  r["dbeta"] = testing::poisoned(dt(in.beta.dtype()), in.beta.shape());
  r["dh0"] = testing::poisoned(dt(DType::f32), in.h0.shape());
  if (in.A_log) r["dA_log"] = testing::poisoned(dt(DType::f32), in.A_log->shape());
  if (in.dt_bias) r["ddt_bias"] = testing::poisoned(dt(DType::f32), in.dt_bias->shape());
  return r;
}

DeltaRuleGrads grads_of(std::map<std::string, TensorView>& t) {
  DeltaRuleGrads g{t["dq"], t["dk"], t["dv"], t["dg"], t["dbeta"], t["dh0"], std::nullopt, std::nullopt};
  if (t.count("dA_log")) g.d_A_log = t["dA_log"];
  if (t.count("ddt_bias")) g.d_dt_bias = t["ddt_bias"];
  return g;
}

void call_bwd(const Case& c, const Views& v, const DeltaRuleGrads& g, int mode /*0 cuda, 1 host ref, 2 gpu ref*/) {
  const AttentionGradInputs gi{v.d_o, c.dht ? std::optional<TensorView>(v.dht) : std::nullopt};
  ExecOptions opts;
  opts.backend = Backend::cuda;
  if (c.kda) {
    const ChunkKdaArgs a = kda_args(v, c);
    if (mode == 0) chunk_kda_backward(a, gi, g, opts);
    else if (mode == 1) reference::chunk_kda_backward(a, gi, g);
    else gpu_reference::chunk_kda_backward(a, gi, g);
  } else {
    ChunkGdnArgs a;
    fill_args(a, v, c);
    if (mode == 0) chunk_gdn_backward(a, gi, g, opts);
    else if (mode == 1) reference::chunk_gdn_backward(a, gi, g);
    else gpu_reference::chunk_gdn_backward(a, gi, g);
  }
}

struct DeviceSet {
  std::vector<std::unique_ptr<DevBuf>> keep;
  TensorView up(const HostTensor& h, std::size_t shift = 0) {  // shift: bytes past the allocation's start
    keep.push_back(std::make_unique<DevBuf>(h.nbytes() + shift));
    void* p = static_cast<char*>(keep.back()->p) + shift;
    CK(cudaMemcpy(p, h.data(), h.nbytes(), cudaMemcpyHostToDevice));
    return TensorView::contiguous(p, h.dtype(), h.shape(), Device::cuda, 0);
  }
};

Views device_views(DeviceSet& d, const Inputs& in, const Case& c) {
  Views v{d.up(in.q), d.up(in.k), d.up(in.v), d.up(in.g), d.up(in.beta), d.up(in.h0), TensorView{}, d.up(in.d_o, c.odd_do ? 2 : 0),
          d.up(in.dht), {}, {}};
  if (!c.cu.empty()) v.cu = d.up(in.cu);
  if (in.A_log) v.A_log = d.up(*in.A_log);
  if (in.dt_bias) v.dt_bias = d.up(*in.dt_bias);
  return v;
}

// Runs mode 0 (cuda) or 2 (gpu ref) on the device and brings the grads back.
Results run_device(const Case& c, const Inputs& in, int mode) {
  DeviceSet d;
  const Views v = device_views(d, in, c);
  Results r = alloc_grads(in, mode == 0, DType::f32);
  std::map<std::string, TensorView> t;
  std::map<std::string, DevBuf*> bufs;
  for (auto& [k, h] : r) {
    t[k] = d.up(h);
    bufs[k] = d.keep.back().get();
  }
  call_bwd(c, v, grads_of(t), mode);
  CK(cudaDeviceSynchronize());
  for (auto& [k, h] : r) CK(cudaMemcpy(h.data(), bufs[k]->p, h.nbytes(), cudaMemcpyDeviceToHost));
  return r;
}

Results run_host_ref(const Case& c, const Inputs& in) {
  Results r = alloc_grads(in, false, DType::f64);
  Views v{in.q.view(), in.k.view(), in.v.view(), in.g.view(), in.beta.view(), in.h0.view(), TensorView{}, in.d_o.view(), in.dht.view(), {}, {}};
  if (!c.cu.empty()) v.cu = in.cu.view();
  if (in.A_log) v.A_log = in.A_log->view();
  if (in.dt_bias) v.dt_bias = in.dt_bias->view();
  std::map<std::string, TensorView> t;
  for (auto& [k, h] : r) t[k] = h.view();
  call_bwd(c, v, grads_of(t), 1);
  return r;
}

int run_case(const Case& c, std::uint64_t seed) {
  const Inputs in = make_inputs(c, seed);
  Results out, ref;
  try {
    out = run_device(c, in, 0);
  } catch (const Error& e) {
    std::printf("%-48s %s %s\n", c.name, c.refuse ? "REFUSED (expected) PASS" : "ERROR", e.what());
    return c.refuse ? 0 : 1;
  }
  if (c.refuse) {
    std::printf("%-48s ran, expected a refusal FAIL\n", c.name);
    return 1;
  }
  ref = c.gpu_ref ? run_device(c, in, 2) : run_host_ref(c, in);
  const auto set = c.cu.empty() ? harness::ToleranceSet::dense : harness::ToleranceSet::varlen;
  bool pass = true;
  std::string line;
  for (const auto& [name, r] : ref) {
    const auto cl = harness::assert_close(r, out.at(name), harness::tolerance(c.kda ? "chunk_kda" : "chunk_gdn", name, set));
    char buf[96];
    std::snprintf(buf, sizeof buf, " %s %.2e%s%s", name.c_str(), cl.err_ratio, cl.has_nan ? "(nan)" : "", cl.pass ? "" : "(FAIL)");
    line += buf;
    pass = pass && cl.pass;
  }
  std::printf("%-48s%s  %s\n", c.name, line.c_str(), pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  bool small_only = false;       // --small: no large (GPU-reference) cases, for compute-sanitizer
  const char* match = nullptr;  // --match TEXT: only the checks whose name contains TEXT (sanitizer runs)
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--small")) {
      small_only = true;
    } else if (!std::strcmp(argv[i], "--match") && i + 1 < argc) {
      match = argv[++i];
    } else {
      std::printf("lina_cuda_delta_bwd_check: unknown argument `%s`, expected --small or --match TEXT\n", argv[i]);
      return 2;
    }
  }
  lina_test::require_device_or_skip();
  int fails = 0;
  {
    const std::vector<int> vl = {0, 0, 16, 100, 300};
    std::vector<Case> cases;
    auto add = [&](Case c) { cases.push_back(std::move(c)); };
    Case c;
    c = {"gdn T1 H2 HV2 D64", false, 1, 1, 2, 2, 64}; add(c);
    c = {"gdn T63 B2 H2 HV4 D128", false, 2, 63, 2, 4, 128}; add(c);
    c = {"gdn T100 H1 HV4 D64 gate sigmoid", false, 1, 100, 1, 4, 64}; c.gate = kSoftplus; c.sigmoid = true; add(c);
    c = {"gdn varlen[0,0,16,100,300] H2 HV4 D128", false, 1, 0, 2, 4, 128, vl}; add(c);
    c = {"gdn T200 B2 H2 HV2 D64 no-l2 no-dht", false, 2, 200, 2, 2, 64}; c.l2 = false; c.dht = false; c.h0 = false; add(c);
    c = {"kda T1 H2 HV2 D64", true, 1, 1, 2, 2, 64}; add(c);
    c = {"kda T63 B2 H2 HV4 D128 safe", true, 2, 63, 2, 4, 128}; c.safe = true; add(c);
    c = {"kda T100 H1 HV4 D64 lower-bound gate", true, 1, 100, 1, 4, 64}; c.gate = kLowerBound; c.safe = true; add(c);
    c = {"kda varlen H2 HV4 D128 softplus m1000", true, 1, 0, 2, 4, 128, vl}; c.gate = kSoftplus; c.neg1000 = 0.1; add(c);
    c = {"kda varlen H2 HV2 D64 given m1000", true, 1, 0, 2, 2, 64, vl}; c.neg1000 = 0.3; add(c);
    c = {"kda T200 B2 H2 HV2 D64 sigmoid neg-eig", true, 2, 200, 2, 2, 64}; c.sigmoid = true; c.neg_eig = true; add(c);
    c = {"kda T130 H2 HV2 D128 no-l2 no-h0", true, 1, 130, 2, 2, 128}; c.l2 = false; c.h0 = false; add(c);
    c = {"kda T100 H2 HV4 K64 V128 (V != K)", true, 1, 100, 2, 4, 64}; c.Dv = 128; add(c);
    c = {"gdn varlen H1 HV2 K128 V256 (4 V tiles)", false, 1, 0, 1, 2, 128, {0, 70, 200}}; c.Dv = 256; add(c);
    c = {"kda varlen H1 HV2 K128 V192 lb gate", true, 1, 0, 1, 2, 128, {0, 130}}; c.Dv = 192; c.gate = kLowerBound; c.safe = true; add(c);
    // f32 q / k / v / dO: the vector and cp.async f32 paths of the delta backward's v2 / v3 kernels
    c = {"kda T130 H2 HV2 D128 f32 io", true, 1, 130, 2, 2, 128}; c.f32io = true; c.safe = true; add(c);
    c = {"gdn T70 H1 HV2 K64 V128 f32 io", false, 1, 70, 1, 2, 64}; c.Dv = 128; c.f32io = true; add(c);
    // dO off its 16-byte alignment: grad_v (not grad_v4) reads the state passes' bf16 H_n, dh, v_new and dvn
    c = {"kda T150 B2 H2 HV4 D128 dO misaligned", true, 2, 150, 2, 4, 128}; c.odd_do = true; c.safe = true; add(c);
    c = {"gdn varlen H2 HV2 K64 V128 dO misaligned", false, 1, 0, 2, 2, 64, vl}; c.Dv = 128; c.odd_do = true; add(c);
    // K = 256: CTA pairs over the channel halves in the state passes and grad_k_v2, four K parts in grad_v4
    c = {"gdn T100 H1 HV2 D256", false, 1, 100, 1, 2, 256}; add(c);
    c = {"gdn varlen H2 HV2 D256 gate sigmoid", false, 1, 0, 2, 2, 256, vl}; c.gate = kSoftplus; c.sigmoid = true; add(c);
    c = {"kda T130 H2 HV2 D256 lb gate", true, 1, 130, 2, 2, 256}; c.gate = kLowerBound; c.safe = true; add(c);
    c = {"kda varlen H1 HV2 D256 given m1000", true, 1, 0, 1, 2, 256, vl}; c.neg1000 = 0.3; add(c);
    c = {"kda T70 B2 H1 HV2 K256 V128 safe no-h0", true, 2, 70, 1, 2, 256}; c.Dv = 128; c.safe = true; c.h0 = false; add(c);
    c = {"gdn T64 H1 HV1 D256 f32 io no-l2", false, 1, 64, 1, 1, 256}; c.f32io = true; c.l2 = false; add(c);
    // bf16 without l2norm: chunk_prep_v2 inlines the rows with rq = rk = 1 (no prep_qk at K = 256 with bf16 q / k)
    c = {"kda T90 H1 HV2 D256 no-l2", true, 1, 90, 1, 2, 256}; c.l2 = false; add(c);
    // KDA without safe_gate takes the diagonal blocks through their middle row where a chunk's 16-row gate sums
    // are >= -40 (gate_range.cuh) and exact exps elsewhere, per chunk: chunks of both kinds in one call (-1000 gates
    // in every second chunk; softplus heads with A up to 16 are out of range, those near 1 in range)
    c = {"kda T300 B2 H2 HV2 D128 given m1000 odd chunks", true, 2, 300, 2, 2, 128}; c.neg1000 = 0.3; c.odd_chunks = true;
    add(c);
    c = {"kda T200 H2 HV4 D64 given m1000 odd chunks", true, 1, 200, 2, 4, 64}; c.neg1000 = 0.3; c.odd_chunks = true; add(c);
    c = {"kda T200 H1 HV2 D256 given m1000 odd chunks", true, 1, 200, 1, 2, 256}; c.neg1000 = 0.3; c.odd_chunks = true; add(c);
    c = {"kda T260 B2 H2 HV8 D128 softplus heads in and out of range", true, 2, 260, 2, 8, 128}; c.gate = kSoftplus;
    c.sigmoid = true; add(c);
    c = {"kda T80 H1 HV1 D256 dO misaligned (refused)", true, 1, 80, 1, 1, 256}; c.odd_do = true; c.refuse = true; add(c);
    if (!small_only) {
      c = {"kda B2 T1024 H4 HV8 D256 lb gate (gpu ref)", true, 2, 1024, 4, 8, 256}; c.gate = kLowerBound; c.safe = true;
      c.gpu_ref = true; add(c);
      c = {"gdn varlen 4 seqs H2 HV4 D256 (gpu ref)", false, 1, 0, 2, 4, 256, {0, 1, 900, 2049, 3000}}; c.gpu_ref = true; add(c);
      c = {"kda B1 T4096 H8 HV16 D128 (gpu ref)", true, 1, 4096, 8, 16, 128}; c.safe = true; c.gpu_ref = true; add(c);
      c = {"gdn B1 T4096 H8 HV16 D128 (gpu ref)", false, 1, 4096, 8, 16, 128}; c.gpu_ref = true; add(c);
      c = {"kda varlen 5 seqs H4 D128 lb gate (gpu ref)", true, 1, 0, 4, 4, 128, {0, 1, 700, 2048, 2049, 5000}};
      c.gate = kLowerBound; c.safe = true; c.gpu_ref = true; add(c);
      c = {"gdn B2 T2048 H4 D64 gate (gpu ref)", false, 2, 2048, 4, 4, 64}; c.gate = kSoftplus; c.gpu_ref = true; add(c);
      // more (chunk, value head) items than the exact tail's persistent grid takes in one pass (32 per CTA, a CTA
      // per SM: 4,224 on the H200): 16 x 270 items, every second chunk out of range
      c = {"kda B1 T1024 H2 HV270 K128 V64 m1000 odd chunks (gpu ref)", true, 1, 1024, 2, 270, 128}; c.Dv = 64;
      c.neg1000 = 0.3; c.odd_chunks = true; c.gpu_ref = true; add(c);
    }
    std::uint64_t seed = 42;
    for (const auto& cc : cases) {
      const std::uint64_t cs = seed++;
      if (!match || std::strstr(cc.name, match)) fails += run_case(cc, cs);
    }
    for (bool kda : {true, false}) {  // head dims outside {64, 128, 256} are refused by name
      Case r{kda ? "kda D96 (refused)" : "gdn D96 (refused)", kda, 1, 64, 1, 1, 96};
      r.refuse = true;
      if (!match) fails += run_case(r, 7);
    }
  }
  std::printf("%s (%d failing checks)\n", fails ? "FAILED" : "ALL CHECKS PASSED", fails);
  return fails ? 1 : 0;
}
