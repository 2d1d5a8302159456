// Correctness check of the CUDA chunk_gla forward and the GPU fp32 references (ctest, label gpu).
//   lina_cuda_gla_check --selftest       host only: finite-difference check of the fp64 host recurrences
//   lina_cuda_gla_check                  the self-test, then GPU: references vs host fp64, CUDA chunk_gla vs
//                                        both at small shapes, then at FLA's benchmark shapes vs the GPU reference
//   lina_cuda_gla_check --small          the self-test and the small shapes only (for compute-sanitizer)
//   lina_cuda_gla_check --large [NAMES]  the benchmark-shape checks only (those named, comma-separated)
// Inputs follow FLA's benchmark (randn bf16; GLA g = logsigmoid(x) clamped at -5), drawn on the device
// from a counter hash. Outputs are poisoned with NaN before every call. Metric: FLA's err_ratio.
// Exit code: 0 all checks passed, 1 a check failed, 2 a bad argument or an exception, 3 a CUDA error,
// 77 no CUDA device (the self-test alone needs none).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "harness/verify/accuracy.h"
#include "lina/chunk_delta.h"
#include "lina/chunk_gla.h"
#include "lina/error.h"
#include "lina/gpu_reference.h"
#include "tests/support/testing/gla_wgmma_selftest.h"
#include "tests/cuda/device_check_support.cuh"
#include "tests/cuda/host_recurrence.h"

using namespace lina;
using lina_test::HostCfg;
using lina_test::HostData;
using lina_test::HostOp;
using lina_test::ck;
using lina_test::DTensor;
using lina_test::fill;
using lina_test::to_host;
using lina_test::HostOut;
using lina_test::g_failures;
using lina_test::report;

namespace {

// ---------------- one problem on the device ----------------
struct Problem {
  HostCfg cfg;
  DTensor q, k, v, g, beta, h0, A, dtb, cu, dO, dht;
  std::vector<std::int64_t> cu_host;
  int gate_kind = 1;
  DType g_dtype = DType::bf16;
  DType beta_dtype = DType::f32;

  Shape qk_shape() const { return Shape{cfg.B, cfg.T, cfg.H, cfg.K}; }
  Shape v_shape() const { return Shape{cfg.B, cfg.T, cfg.HV, cfg.V}; }
  Shape state_shape() const { return Shape{cfg.N(), cfg.HV, cfg.K, cfg.V}; }

  void make(std::uint64_t seed, bool grads) {
    q = DTensor(DType::bf16, qk_shape());
    k = DTensor(DType::bf16, qk_shape());
    v = DTensor(DType::bf16, v_shape());
    fill(q, seed + 1);
    fill(k, seed + 2);
    fill(v, seed + 3);
    if (cfg.op == HostOp::gla) g = DTensor(g_dtype, qk_shape());
    else if (cfg.op == HostOp::kda) g = DTensor(g_dtype, Shape{cfg.B, cfg.T, cfg.HV, cfg.K});
    else g = DTensor(g_dtype, Shape{cfg.B, cfg.T, cfg.HV});
    fill(g, seed + 4, gate_kind);
    if (cfg.op != HostOp::gla) {
      beta = DTensor(beta_dtype, Shape{cfg.B, cfg.T, cfg.HV});
      fill(beta, seed + 5, cfg.bsig ? 0 : 3);
      A = DTensor(DType::f32, Shape{cfg.HV});
      fill(A, seed + 6, 5);
      dtb = DTensor(DType::f32, cfg.op == HostOp::kda ? Shape{cfg.HV * cfg.K} : Shape{cfg.HV});
      fill(dtb, seed + 7);
    }
    if (cfg.h0) {
      h0 = DTensor(DType::f32, state_shape());
      fill(h0, seed + 8);
    }
    if (!cfg.cu.empty()) {
      cu = DTensor(DType::i64, Shape{static_cast<std::int64_t>(cfg.cu.size())});
      ck(cudaMemcpy(cu.p, cfg.cu.data(), cfg.cu.size() * 8, cudaMemcpyHostToDevice), "cu");
    }
    if (grads) {
      dO = DTensor(DType::bf16, v_shape());
      fill(dO, seed + 9);
      dht = DTensor(DType::f32, state_shape());
      fill(dht, seed + 10);
    }
    ck(cudaDeviceSynchronize(), "make");
  }

  ChunkGlaArgs gla_args() const {
    ChunkGlaArgs a;
    a.q = q.view; a.k = k.view; a.v = v.view; a.g = g.view;
    a.scale = cfg.scale;
    if (cfg.h0) a.initial_state = h0.view;
    if (!cfg.cu.empty()) a.cu_seqlens = cu.view;
    return a;
  }
  void fill_delta(DeltaRuleArgs& a) const {
    a.q = q.view; a.k = k.view; a.v = v.view; a.g = g.view; a.beta = beta.view;
    a.scale = cfg.scale;
    if (cfg.h0) a.initial_state = h0.view;
    if (!cfg.cu.empty()) a.cu_seqlens = cu.view;
    a.use_qk_l2norm_in_kernel = cfg.l2;
    a.use_beta_sigmoid_in_kernel = cfg.bsig;
    a.allow_neg_eigval = cfg.neg;
    a.use_gate_in_kernel = cfg.gate_in;
    if (cfg.gate_in && cfg.has_alog) a.A_log = A.view;
    if (cfg.gate_in && cfg.has_dtb) a.dt_bias = dtb.view;
  }

  HostData host() const {
    HostData d;
    d.q = to_host(q.view); d.k = to_host(k.view); d.v = to_host(v.view); d.g = to_host(g.view);
    if (cfg.op != HostOp::gla) {
      d.beta = to_host(beta.view);
      d.A = to_host(A.view);
      d.dtb = to_host(dtb.view);
    }
    if (cfg.h0) d.h0 = to_host(h0.view);
    if (dO.p) {
      d.dO = to_host(dO.view);
      d.dht = to_host(dht.view);
    }
    return d;
  }
};

// ---------------- GPU reference vs host fp64 ----------------
void check_reference(const std::string& name, HostCfg cfg, int gate_kind, DType g_dtype) {
  std::printf("[ref] %s\n", name.c_str());
  Problem P;
  P.cfg = cfg;
  P.gate_kind = gate_kind;
  P.g_dtype = g_dtype;
  P.make(1000 + cfg.T, true);
  const HostData hd = P.host();
  HostOut hr;
  lina_test::host_run(cfg, hd, hr, true);
  DTensor o(DType::f32, P.v_shape()), ht(DType::f32, P.state_shape());
  DTensor dq(DType::f32, P.qk_shape()), dk(DType::f32, P.qk_shape()), dv(DType::f32, P.v_shape()), dg(DType::f32, P.g.view.shape),
      dh0(DType::f32, P.state_shape());
  DTensor dbeta, dA, ddt;
  for (DTensor* t : {&o, &ht, &dq, &dk, &dv, &dg, &dh0}) t->poison();
  AttentionOutputs out{o.view, ht.view};
  AttentionGradInputs gin{P.dO.view, P.dht.view};
  if (cfg.op == HostOp::gla) {
    const ChunkGlaArgs a = P.gla_args();
    gpu_reference::chunk_gla_forward(a, out);
    ChunkGlaGrads gr{dq.view, dk.view, dv.view, dg.view, std::nullopt};
    if (cfg.h0) gr.d_initial_state = dh0.view;
    gpu_reference::chunk_gla_backward(a, gin, gr);
  } else {
    dbeta = DTensor(DType::f32, P.beta.view.shape);
    dbeta.poison();
    DeltaRuleGrads gr{dq.view, dk.view, dv.view, dg.view, dbeta.view, std::nullopt, std::nullopt, std::nullopt};
    if (cfg.h0) gr.d_initial_state = dh0.view;
    if (cfg.gate_in && cfg.has_alog) {
      dA = DTensor(DType::f32, P.A.view.shape);
      gr.d_A_log = dA.view;
    }
    if (cfg.gate_in && cfg.has_dtb) {
      ddt = DTensor(DType::f32, P.dtb.view.shape);
      gr.d_dt_bias = ddt.view;
    }
    if (cfg.op == HostOp::kda) {
      ChunkKdaArgs a;
      P.fill_delta(a);
      if (cfg.has_lb) a.lower_bound = cfg.lb;
      gpu_reference::chunk_kda_forward(a, out);
      gpu_reference::chunk_kda_backward(a, gin, gr);
    } else {
      ChunkGdnArgs a;
      P.fill_delta(a);
      gpu_reference::chunk_gdn_forward(a, out);
      gpu_reference::chunk_gdn_backward(a, gin, gr);
    }
  }
  ck(cudaDeviceSynchronize(), "reference");
  const double tol = 1e-4;  // fp32 against fp64: anything near bf16 error means a bug
  report("o", hr.o, to_host(o.view), tol);
  report("final_state", hr.ht, to_host(ht.view), tol);
  report("dq", hr.dq, to_host(dq.view), tol);
  report("dk", hr.dk, to_host(dk.view), tol);
  report("dv", hr.dv, to_host(dv.view), tol);
  report("dg", hr.dg, to_host(dg.view), tol);
  if (cfg.h0) report("dh0", hr.dh0, to_host(dh0.view), tol);
  if (cfg.op != HostOp::gla) report("dbeta", hr.dbeta, to_host(dbeta.view), tol);
  if (dA.p) report("dA_log", hr.dA, to_host(dA.view), tol);
  if (ddt.p) report("ddt_bias", hr.ddt, to_host(ddt.view), tol);
}

// ---------------- CUDA chunk_gla forward ----------------
struct FwdResult {
  double err_o = 0, err_ht = 0;
  bool pass = true;
};

FwdResult check_gla_fwd(const std::string& name, HostCfg cfg, int gate_kind, DType g_dtype, bool with_host, ForwardMode mode = ForwardMode::training) {
  std::printf("[gla fwd] %s\n", name.c_str());
  Problem P;
  P.cfg = cfg;
  P.gate_kind = gate_kind;
  P.g_dtype = g_dtype;
  P.make(7 + cfg.T * 3 + cfg.K, false);
  const ChunkGlaArgs a = P.gla_args();
  DTensor o(DType::bf16, P.v_shape()), ht(DType::f32, P.state_shape());
  DTensor ro(DType::f32, P.v_shape()), rht(DType::f32, P.state_shape());
  o.poison();
  ht.poison();
  ro.poison();
  rht.poison();
  const RunInfo info = chunk_gla_forward(a, AttentionOutputs{o.view, ht.view}, mode, ExecOptions{Backend::cuda});
  gpu_reference::chunk_gla_forward(a, AttentionOutputs{ro.view, rht.view});
  ck(cudaDeviceSynchronize(), "gla fwd");
  std::string kernels;
  for (const auto& kn : info.kernels) kernels += (kernels.empty() ? "" : " + ") + kn;
  std::printf("  ran: %s %s\n", info.backend.c_str(), kernels.c_str());
  FwdResult r;
  const auto ho = to_host(o.view), hht = to_host(ht.view);
  const auto c1 = report("o vs GPU ref", to_host(ro.view), ho, 0.004);
  const auto c2 = report("final_state vs GPU ref", to_host(rht.view), hht, 0.005);
  r.err_o = c1.err_ratio;
  r.err_ht = c2.err_ratio;
  r.pass = c1.pass && c2.pass;
  if (with_host) {
    const HostData hd = P.host();
    HostOut hr;
    lina_test::host_run(cfg, hd, hr, false);
    report("o vs host fp64", hr.o, ho, 0.004);
    report("final_state vs host fp64", hr.ht, hht, 0.005);
    report("GPU ref o vs host fp64", hr.o, to_host(ro.view), 1e-4);
  }
  return r;
}

// K = 256 state-kernel layout self-test: one chunk, one 64-column V tile, one CTA per case, each case
// isolating GEMMs of the state kernel so that a wrong wgmma descriptor / fragment layout shows where:
//   "state only" (v = 0, h0): o = q 2^b H0 only (o GEMM: qe tile + bf16(2^rho H) register fragments),
//     final state 2^bL H0 (accumulator layout round trip);
//   "A @ v only" (h0 none): o = A v (v tile as the MN-major A operand, A hi / lo tiles), final state
//     ke^T v (ke as the MN-major B operand over two 64-channel tiles).
// On a failure the relative-RMS map prints per 16-token x 16-column block of o and per 64-channel
// tile x 16-column block of the final state (rows of the map: token / channel blocks).
void error_map(const char* what, const std::vector<double>& ref, const std::vector<double>& out, int rows, int cols, int rb, int cb) {
  std::printf("    %s error map (rows of %d x columns of %d, RMS(ref - out) / RMS(ref) per block):\n", what, rb, cb);
  for (int i = 0; i < rows / rb; ++i) {
    std::printf("     ");
    for (int j = 0; j < cols / cb; ++j) {
      double se = 0, sr = 0;
      for (int r = i * rb; r < (i + 1) * rb; ++r)
        for (int c = j * cb; c < (j + 1) * cb; ++c) {
          const double d = ref[static_cast<std::size_t>(r) * cols + c] - out[static_cast<std::size_t>(r) * cols + c];
          se += d * d;
          sr += ref[static_cast<std::size_t>(r) * cols + c] * ref[static_cast<std::size_t>(r) * cols + c];
        }
      std::printf(" %8.1e", sr > 0 ? std::sqrt(se / sr) : std::sqrt(se));
    }
    std::printf("\n");
  }
}
void check_d256_layout() {
  for (int variant = 0; variant < 2; ++variant) {
    const char* name = variant == 0 ? "state only (v = 0, h0)" : "A @ v only (no h0)";
    std::printf("[gla fwd] D256 state-kernel layout self-test: %s, B1 T64 H1 K256 V64\n", name);
    HostCfg c;
    c.op = HostOp::gla; c.B = 1; c.T = 64; c.H = 1; c.HV = 1; c.K = 256; c.V = 64; c.h0 = variant == 0;
    c.scale = 1.0 / 16.0;
    Problem P;
    P.cfg = c;
    P.make(91 + variant, false);
    if (variant == 0) ck(cudaMemset(P.v.p, 0, P.v.bytes()), "v = 0");
    const ChunkGlaArgs a = P.gla_args();
    DTensor o(DType::bf16, P.v_shape()), ht(DType::f32, P.state_shape()), ro(DType::f32, P.v_shape()), rht(DType::f32, P.state_shape());
    for (DTensor* t : {&o, &ht, &ro, &rht}) t->poison();
    const RunInfo info = chunk_gla_forward(a, AttentionOutputs{o.view, ht.view}, ForwardMode::training, ExecOptions{Backend::cuda});
    gpu_reference::chunk_gla_forward(a, AttentionOutputs{ro.view, rht.view});
    ck(cudaDeviceSynchronize(), "d256 layout self-test");
    std::string kernels;
    for (const auto& kn : info.kernels) kernels += (kernels.empty() ? "" : " + ") + kn;
    std::printf("  ran: %s %s\n", info.backend.c_str(), kernels.c_str());
    const auto ho = to_host(o.view), rho = to_host(ro.view), hht = to_host(ht.view), rhht = to_host(rht.view);
    const auto c1 = report(variant == 0 ? "o (o GEMM: qe, 2^rho H fragments)" : "o (A @ v: v tile, A hi / lo tiles)", rho, ho, 0.004);
    const auto c2 = report(variant == 0 ? "final_state (2^bL H0)" : "final_state (ke^T v: ke, v tiles)", rhht, hht, 0.005);
    if (!c1.pass) error_map("o [token][V]", rho, ho, 64, 64, 16, 16);
    if (!c2.pass) error_map("final_state [channel][V]", rhht, hht, 256, 64, 64, 16);
  }
}

struct BenchShape {
  const char* name;
  int B, T, H, D;
};

void run_gpu(bool small_only, bool large_only, const char* only_shapes) {
  // 1. GPU references vs host fp64 (forward and backward).
  if (!large_only) {
    HostCfg c;
    c.op = HostOp::gla; c.B = 2; c.T = 100; c.H = 2; c.HV = 2; c.K = 64; c.V = 64; c.h0 = true; c.scale = 0.125;
    check_reference("GLA B2 T100 H2 K64 V64 h0", c, 1, DType::bf16);
    c.B = 1; c.T = 300; c.H = 2; c.HV = 2; c.K = 100; c.V = 40; c.cu = {0, 15, 100, 300}; c.scale = 0.1;
    check_reference("GLA varlen [0,15,100,300] H2 K100 V40 h0", c, 2, DType::f32);
    c.cu = {0, 0, 16}; c.T = 16; c.K = 64; c.V = 64;
    check_reference("GLA varlen [0,0,16] H2 K64 V64 h0", c, 1, DType::bf16);
  }
  {
    HostCfg c;
    c.op = HostOp::kda; c.B = 2; c.T = 130; c.H = 2; c.HV = 4; c.K = 64; c.V = 64; c.h0 = true; c.scale = 0.125;
    c.l2 = true; c.bsig = true; c.gate_in = true; c.has_alog = true; c.has_dtb = true;
    check_reference("KDA B2 T130 H2 HV4 l2 sigmoid softplus-gate", c, 0, DType::f32);
    c.B = 1; c.T = 200; c.cu = {0, 0, 70, 200}; c.H = 1; c.HV = 2; c.has_lb = true; c.lb = -5; c.neg = true; c.V = 48;
    check_reference("KDA varlen [0,0,70,200] lower-bound gate, neg eig", c, 0, DType::f32);
    HostCfg d;
    d.op = HostOp::kda; d.B = 1; d.T = 80; d.H = 2; d.HV = 2; d.K = 64; d.V = 64; d.h0 = false; d.l2 = true; d.scale = 0.125;
    check_reference("KDA B1 T80 plain gate (logsigmoid), beta in (0,1)", d, 4, DType::f32);
  }
  {
    HostCfg c;
    c.op = HostOp::gdn; c.B = 2; c.T = 100; c.H = 2; c.HV = 4; c.K = 64; c.V = 32; c.h0 = true; c.scale = 0.125;
    c.l2 = true; c.bsig = true; c.gate_in = true; c.has_alog = true; c.has_dtb = true;
    check_reference("GDN B2 T100 H2 HV4 l2 sigmoid softplus-gate", c, 0, DType::f32);
    HostCfg d;
    d.op = HostOp::gdn; d.B = 1; d.T = 150; d.H = 2; d.HV = 2; d.K = 128; d.V = 128; d.l2 = true; d.scale = 1.0 / std::sqrt(128.0);
    d.cu = {0, 50, 50, 150};
    check_reference("GDN varlen [0,50,50,150] K128 plain gate", d, 4, DType::bf16);
  }

  // 2. CUDA chunk_gla forward at small shapes.
  auto gla_cfg = [](int B, int T, int H, int K, int V, bool h0, std::vector<std::int64_t> cu = {}) {
    HostCfg c;
    c.op = HostOp::gla; c.B = B; c.T = T; c.H = H; c.HV = H; c.K = K; c.V = V; c.h0 = h0; c.cu = std::move(cu);
    c.scale = 1.0 / std::sqrt(static_cast<double>(K));
    return c;
  };
  if (!large_only) {
  check_d256_layout();
  {  // the K = 128 kernel's wgmma pieces alone: names a wrong descriptor / swizzle / fragment layout
    const std::string r = lina::detail::cuda::gla_wgmma_selftest();
    if (!r.empty()) ++g_failures;
    std::printf("[gla fwd] wgmma glue self-test: %s\n", r.empty() ? "ok (exact)" : ("FAIL: " + r).c_str());
  }
  check_gla_fwd("T=1 B1 H2 D64 h0", gla_cfg(1, 1, 2, 64, 64, true), 1, DType::bf16, true);
  check_gla_fwd("T=1 B3 H4 D128 h0", gla_cfg(3, 1, 4, 128, 128, true), 1, DType::bf16, true);
  check_gla_fwd("T=1 B2 H2 D256 h0", gla_cfg(2, 1, 2, 256, 256, true), 1, DType::bf16, true);
  check_gla_fwd("K128 V64 T200 B2 h0", gla_cfg(2, 200, 2, 128, 64, true), 1, DType::bf16, true);
  check_gla_fwd("K128 V256 T100 steep", gla_cfg(1, 100, 2, 128, 256, true), 2, DType::bf16, true);
  check_gla_fwd("T=63 B2 H3 D128", gla_cfg(2, 63, 3, 128, 128, false), 1, DType::bf16, true);
  check_gla_fwd("T=100 B1 H2 D256 h0", gla_cfg(1, 100, 2, 256, 256, true), 1, DType::bf16, true);
  check_gla_fwd("varlen [0,0,16] H4 D64 h0", gla_cfg(1, 16, 4, 64, 64, true, {0, 0, 16}), 1, DType::bf16, true);
  check_gla_fwd("varlen [0,15,100,300] H2 D128 h0", gla_cfg(1, 300, 2, 128, 128, true, {0, 15, 100, 300}), 1, DType::bf16, true);
  check_gla_fwd("steep gate (logsigmoid/0.1) T200 D128", gla_cfg(1, 200, 2, 128, 128, true), 2, DType::bf16, true);
  check_gla_fwd("medium gate (1.6*logsigmoid: reference-row path) T300 D128", gla_cfg(1, 300, 2, 128, 128, true), 6, DType::bf16, true);
  check_gla_fwd("medium gate T200 D256", gla_cfg(1, 200, 1, 256, 256, true), 6, DType::bf16, true);
  check_gla_fwd("medium gate T200 D64 B2", gla_cfg(2, 200, 2, 64, 64, true), 6, DType::bf16, true);
  check_gla_fwd("medium gate B2 T4096 H8 D128 (mixed paths)", gla_cfg(2, 4096, 8, 128, 128, true), 6, DType::bf16, false);
  check_gla_fwd("steep gate T150 D256 B2", gla_cfg(2, 150, 1, 256, 256, true), 2, DType::bf16, true);
  check_gla_fwd("steep gate T129 D64 B2 H3", gla_cfg(2, 129, 3, 64, 64, true), 2, DType::bf16, true);
  check_gla_fwd("K64 V256 T130 inference", gla_cfg(1, 130, 1, 64, 256, false), 1, DType::bf16, true, ForwardMode::inference);
  // 100 CTAs of <64,64>: two segments of 6 chunks, so the two-stage pipeline wraps three times (both
  // parities of the stage-release barrier), on steep and non-steep chunks.
  check_gla_fwd("medium gate B1 T768 H100 D64 (6 chunks per CTA)", gla_cfg(1, 768, 100, 64, 64, true), 6, DType::bf16, false);
  check_gla_fwd("K256 V64 T77 B3 h0", gla_cfg(3, 77, 1, 256, 64, true), 1, DType::bf16, true);
  // K = 256 prep + state: varlen chunk numbering with an empty sequence and a split sequence, steep
  // chunks in both split passes (segment decays from the per-token products), mixed paths over 8 segments.
  check_gla_fwd("varlen [0,0,70,300] H2 D256 h0 (split)", gla_cfg(1, 300, 2, 256, 256, true, {0, 0, 70, 300}), 1, DType::bf16, true);
  check_gla_fwd("steep gate T600 K256 V64 h0 (split 5)", gla_cfg(1, 600, 1, 256, 64, true), 2, DType::bf16, true);
  check_gla_fwd("medium gate B2 T1000 H2 K256 V128 (split 8)", gla_cfg(2, 1000, 2, 256, 128, true), 6, DType::bf16, false);
  check_gla_fwd("B2 T1000 H4 D128 (B*H below SM count)", gla_cfg(2, 1000, 4, 128, 128, true), 1, DType::bf16, false);
  {  // f16 is refused, naming the dtype
    Problem P;
    P.cfg = gla_cfg(1, 8, 1, 64, 64, false);
    P.make(5, false);
    DTensor q16(DType::f16, P.qk_shape()), k16(DType::f16, P.qk_shape()), v16(DType::f16, P.v_shape()), o16(DType::f16, P.v_shape()),
        g16(DType::f16, P.qk_shape());
    ChunkGlaArgs a = P.gla_args();
    a.q = q16.view; a.k = k16.view; a.v = v16.view; a.g = g16.view;
    try {
      chunk_gla_forward(a, AttentionOutputs{o16.view, std::nullopt}, ForwardMode::training, ExecOptions{Backend::cuda});
      std::printf("[gla fwd] f16: NOT refused (FAIL)\n");
      ++g_failures;
    } catch (const Error& e) {
      std::printf("[gla fwd] f16 refused: %s\n", e.what());
    }
  }
  }

  if (small_only) return;
  // 3. Full-size correctness at FLA's benchmark shapes.
  const BenchShape shapes[] = {
      {"B1_T8192_H96_D128", 1, 8192, 96, 128}, {"B2_T16384_H16_D128", 2, 16384, 16, 128},
      {"B4_T2048_H16_D128", 4, 2048, 16, 128}, {"B4_T4096_H64_D128", 4, 4096, 64, 128},
      {"B8_T2048_H32_D256", 8, 2048, 32, 256}, {"B8_T1024_H8_D64", 8, 1024, 8, 64},
  };
  for (const auto& s : shapes) {
    if (only_shapes && !std::strstr(only_shapes, s.name)) continue;  // one name or a comma-separated list
    Problem P;
    P.cfg = gla_cfg(s.B, s.T, s.H, s.D, s.D, false);
    P.make(42, false);
    const ChunkGlaArgs a = P.gla_args();
    DTensor o(DType::bf16, P.v_shape()), ht(DType::f32, P.state_shape());
    DTensor ro(DType::f32, P.v_shape()), rht(DType::f32, P.state_shape());
    for (DTensor* t : {&o, &ht, &ro, &rht}) t->poison();
    chunk_gla_forward(a, AttentionOutputs{o.view, ht.view}, ForwardMode::training, ExecOptions{Backend::cuda});
    gpu_reference::chunk_gla_forward(a, AttentionOutputs{ro.view, rht.view});
    ck(cudaDeviceSynchronize(), "bench shape");
    std::printf("[bench check] %s\n", s.name);
    report("o vs GPU ref", to_host(ro.view), to_host(o.view), 0.004);
    report("final_state vs GPU ref", to_host(rht.view), to_host(ht.view), 0.005);
  }
}

// ---------------- host self-test: finite differences on the fp64 recurrences ----------------
void selftest_one(const char* name, HostCfg c, std::uint64_t seed) {
  std::uint64_t st = seed;
  auto rnd = [&]() {
    st = st * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(st >> 11) / 9007199254740992.0;
  };
  auto randn = [&]() { return std::sqrt(-2 * std::log(rnd() + 1e-12)) * std::cos(6.283185307179586 * rnd()); };
  HostData d;
  auto gen = [&](std::vector<double>& v, std::size_t n, int kind) {
    v.resize(n);
    for (auto& x : v) {
      const double r = randn();
      x = kind == 0 ? r : kind == 1 ? std::min(0.0, r) - std::log1p(std::exp(-std::abs(r))) : 0.5 * rnd();
    }
  };
  const std::int64_t rows = c.rows();
  gen(d.q, static_cast<std::size_t>(rows * c.H * c.K), 0);
  gen(d.k, d.q.size(), 0);
  gen(d.v, static_cast<std::size_t>(rows * c.HV * c.V), 0);
  gen(d.g, static_cast<std::size_t>(c.g_size()), c.gate_in ? 0 : 1);
  gen(d.beta, static_cast<std::size_t>(rows * c.HV), c.bsig ? 0 : 2);
  gen(d.h0, static_cast<std::size_t>(c.N()) * c.HV * c.K * c.V, 0);
  gen(d.A, static_cast<std::size_t>(c.HV), 2);
  gen(d.dtb, static_cast<std::size_t>(c.dtb_size()), 0);
  gen(d.dO, d.v.size(), 0);
  gen(d.dht, d.h0.size(), 0);
  HostOut r;
  lina_test::host_run(c, d, r, true);
  auto loss = [&](const HostData& dd) {
    HostOut o;
    lina_test::host_run(c, dd, o, false);
    double L = 0;
    for (std::size_t i = 0; i < o.o.size(); ++i) L += o.o[i] * dd.dO[i];
    for (std::size_t i = 0; i < o.ht.size(); ++i) L += o.ht[i] * dd.dht[i];
    return L;
  };
  double worst = 0;
  auto probe = [&](const char* what, std::vector<double> HostData::*field, const std::vector<double>& grad) {
    HostData dd = d;
    auto& x = dd.*field;
    for (std::size_t s = 0; s < 3 && !x.empty(); ++s) {
      const std::size_t i = (s * 7919 + 13) % x.size();
      const double x0 = x[i], eps = 1e-6;
      x[i] = x0 + eps;
      const double lp = loss(dd);
      x[i] = x0 - eps;
      const double lm = loss(dd);
      x[i] = x0;
      const double fd = (lp - lm) / (2 * eps);
      const double err = std::abs(fd - grad[i]) / (std::abs(fd) + 1e-3);
      worst = std::max(worst, err);
      if (err > 1e-5) std::printf("  %s[%zu]: fd %.8e analytic %.8e\n", what, i, fd, grad[i]);
    }
  };
  probe("q", &HostData::q, r.dq);
  probe("k", &HostData::k, r.dk);
  probe("v", &HostData::v, r.dv);
  probe("g", &HostData::g, r.dg);
  if (c.h0) probe("h0", &HostData::h0, r.dh0);
  if (c.op != HostOp::gla) probe("beta", &HostData::beta, r.dbeta);
  if (c.gate_in && c.has_alog) probe("A_log", &HostData::A, r.dA);
  if (c.gate_in && c.has_dtb) probe("dt_bias", &HostData::dtb, r.ddt);
  const bool ok = worst < 1e-5;
  if (!ok) ++g_failures;
  std::printf("[selftest] %-48s worst rel err %.2e %s\n", name, worst, ok ? "ok" : "FAIL");
}

void selftest() {
  HostCfg c;
  c.op = HostOp::gla; c.B = 2; c.T = 7; c.H = 2; c.HV = 2; c.K = 5; c.V = 3; c.h0 = true; c.scale = 0.4;
  selftest_one("GLA dense h0", c, 1);
  c.cu = {0, 0, 5, 14}; c.B = 1; c.T = 14;
  selftest_one("GLA varlen with empty sequence", c, 2);
  HostCfg k;
  k.op = HostOp::kda; k.B = 1; k.T = 9; k.H = 1; k.HV = 2; k.K = 4; k.V = 3; k.h0 = true; k.scale = 0.5;
  k.l2 = true; k.bsig = true; k.gate_in = true; k.has_alog = true; k.has_dtb = true;
  selftest_one("KDA GVA l2 sigmoid softplus gate", k, 3);
  k.has_lb = true; k.lb = -5; k.neg = true;
  selftest_one("KDA lower-bound gate, neg eig", k, 4);
  k.has_alog = false;
  selftest_one("KDA lower-bound gate without A_log", k, 5);
  HostCfg g;
  g.op = HostOp::gdn; g.B = 2; g.T = 6; g.H = 1; g.HV = 2; g.K = 4; g.V = 5; g.h0 = true; g.scale = 0.5;
  g.l2 = true; g.bsig = true; g.gate_in = true; g.has_alog = true; g.has_dtb = true;
  selftest_one("GDN GVA l2 sigmoid softplus gate", g, 6);
  g.gate_in = false; g.bsig = false; g.l2 = false;
  selftest_one("GDN plain", g, 7);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    const bool large_only = mode == "--large";
    const int max_args = large_only ? 3 : 2;  // --large takes an optional list of shape names
    const bool known = mode.empty() || mode == "--selftest" || mode == "--small" || large_only;
    if (!known || argc > max_args) {
      std::printf("lina_cuda_gla_check: unexpected argument `%s`, expected none, --selftest, --small or --large [NAMES]\n",
                  known ? argv[max_args] : argv[1]);
      return 2;
    }
    if (!large_only) selftest();
    if (mode != "--selftest") {
      lina_test::require_device_or_skip();
      run_gpu(mode == "--small", large_only, large_only && argc > 2 ? argv[2] : nullptr);
    }
  } catch (const std::exception& e) {
    std::printf("exception: %s\n", e.what());
    return 2;
  }
  std::printf("\n%s: %d failure(s)\n", g_failures ? "FAILED" : "ALL PASSED", g_failures);
  return g_failures ? 1 : 0;
}
