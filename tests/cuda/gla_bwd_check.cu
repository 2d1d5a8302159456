// Correctness check of the CUDA chunk_gla backward (ops/gla/cuda/chunk_gla_bwd.cu), ctest label gpu.
//   lina_cuda_gla_bwd_check            small shapes vs fp64 host recurrence and GPU fp32 reference,
//                                      then FLA's benchmark shapes vs the GPU reference
//   lina_cuda_gla_bwd_check --small    small shapes only (for compute-sanitizer)
// Inputs: randn bf16 q, k, v, dO; g = logsigmoid(randn) clamped at -5 (FLA's benchmark) unless a
// case says otherwise; h0, dht randn fp32. Outputs NaN-poisoned before each call. Metric: FLA's
// err_ratio RMS(ref - out) / RMS(ref), tolerance 0.005 for every gradient (harness/verify/tolerances.cpp).
// Exit code: 0 all checks passed, 1 a check failed, 2 a bad argument or an exception, 3 a CUDA error,
// 77 no CUDA device.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "harness/verify/accuracy.h"
#include "lina/chunk_gla.h"
#include "lina/error.h"
#include "lina/gpu_reference.h"
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

constexpr double kTol = 0.005;

// Device-side err_ratio for big tensors: sums of (ref - out)^2 and ref^2 in fp64, NaN count.
__global__ void err_kernel(const float* ref, const void* out, int out_bf16, std::int64_t n, double* acc) {
  double se = 0, sr = 0, bad = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const double r = ref[i];
    const double o = out_bf16 ? static_cast<double>(__bfloat162float(static_cast<const __nv_bfloat16*>(out)[i])) : static_cast<const float*>(out)[i];
    if (!isfinite(r) || !isfinite(o)) bad += 1;
    else {
      se += (r - o) * (r - o);
      sr += r * r;
    }
  }
  atomicAdd(acc, se);
  atomicAdd(acc + 1, sr);
  atomicAdd(acc + 2, bad);
}

double device_err(const char* what, const DTensor& ref, const DTensor& out, double tol) {
  double* acc;
  ck(cudaMalloc(&acc, 3 * sizeof(double)), "malloc");
  ck(cudaMemset(acc, 0, 3 * sizeof(double)), "memset");
  err_kernel<<<1024, 256>>>(static_cast<const float*>(ref.p), out.p, out.view.dtype == DType::bf16, ref.view.numel(), acc);
  double h[3];
  ck(cudaMemcpy(h, acc, sizeof h, cudaMemcpyDeviceToHost), "d2h");
  cudaFree(acc);
  const double n = static_cast<double>(ref.view.numel());
  const double err = std::sqrt(h[0] / n) / (std::sqrt(h[1] / n) + 1e-8);
  const bool pass = h[2] == 0 && err < tol;
  std::printf("  %-30s err_ratio %.3e (tol %.3g)%s %s\n", what, err, tol, h[2] > 0 ? " NaN/inf!" : "", pass ? "ok" : "FAIL");
  if (!pass) ++g_failures;
  return err;
}

struct Case {
  HostCfg cfg;
  DTensor q, k, v, g, h0, cu, dO, dht;

  Shape qk() const { return Shape{cfg.B, cfg.T, cfg.H, cfg.K}; }
  Shape vs() const { return Shape{cfg.B, cfg.T, cfg.H, cfg.V}; }
  Shape st() const { return Shape{cfg.N(), cfg.H, cfg.K, cfg.V}; }

  Case(const HostCfg& c, std::uint64_t seed, int gate_kind, bool with_dht)
      : cfg(c), q(DType::bf16, qk()), k(DType::bf16, qk()), v(DType::bf16, vs()), g(DType::bf16, qk()), dO(DType::bf16, vs()) {
    fill(q, seed + 1);
    fill(k, seed + 2);
    fill(v, seed + 3);
    fill(g, seed + 4, gate_kind);
    fill(dO, seed + 9);
    if (cfg.h0) {
      h0 = DTensor(DType::f32, st());
      fill(h0, seed + 8);
    }
    if (with_dht) {
      dht = DTensor(DType::f32, st());
      fill(dht, seed + 10);
    }
    if (!cfg.cu.empty()) {
      cu = DTensor(DType::i64, Shape{static_cast<std::int64_t>(cfg.cu.size())});
      ck(cudaMemcpy(cu.p, cfg.cu.data(), cfg.cu.size() * 8, cudaMemcpyHostToDevice), "cu");
    }
    ck(cudaDeviceSynchronize(), "make");
  }
  ChunkGlaArgs args() const {
    ChunkGlaArgs a;
    a.q = q.view; a.k = k.view; a.v = v.view; a.g = g.view;
    a.scale = cfg.scale;
    if (cfg.h0) a.initial_state = h0.view;
    if (!cfg.cu.empty()) a.cu_seqlens = cu.view;
    return a;
  }
  AttentionGradInputs gin() const {
    AttentionGradInputs gi{dO.view, std::nullopt};
    if (dht.p) gi.d_final_state = dht.view;
    return gi;
  }
};

struct Grads {
  DTensor dq, dk, dv, dg, dh0;
  Grads(const Case& c, DType dt, bool h0)
      : dq(dt, c.qk()), dk(dt, c.qk()), dv(dt, c.vs()), dg(dt, c.qk()) {
    if (h0) dh0 = DTensor(DType::f32, c.st());
    for (DTensor* t : {&dq, &dk, &dv, &dg, &dh0})
      if (t->p) t->poison();
  }
  ChunkGlaGrads view() const {
    ChunkGlaGrads g{dq.view, dk.view, dv.view, dg.view, std::nullopt};
    if (dh0.p) g.d_initial_state = dh0.view;
    return g;
  }
};

HostCfg gla_cfg(int B, int T, int H, int K, int V, bool h0, std::vector<std::int64_t> cu = {}) {
  HostCfg c;
  c.op = HostOp::gla; c.B = B; c.T = T; c.H = H; c.HV = H; c.K = K; c.V = V; c.h0 = h0; c.cu = std::move(cu);
  c.scale = 1.0 / std::sqrt(static_cast<double>(K));
  return c;
}

void check_small(const std::string& name, const HostCfg& cfg, int gate_kind, bool with_host = true) {
  std::printf("[gla bwd] %s\n", name.c_str());
  Case C(cfg, 11 + cfg.T * 7 + cfg.K + cfg.V * 3, gate_kind, true);
  const ChunkGlaArgs a = C.args();
  Grads out(C, DType::bf16, true), ref(C, DType::f32, true);
  const RunInfo info = chunk_gla_backward(a, C.gin(), out.view(), ExecOptions{Backend::cuda});
  gpu_reference::chunk_gla_backward(a, C.gin(), ref.view());
  ck(cudaDeviceSynchronize(), "bwd");
  std::printf("  ran: %s (%zu kernels)\n", info.backend.c_str(), info.kernels.size());
  const char* names[] = {"dq", "dk", "dv", "dg", "dh0"};
  const DTensor* o[] = {&out.dq, &out.dk, &out.dv, &out.dg, &out.dh0};
  const DTensor* r[] = {&ref.dq, &ref.dk, &ref.dv, &ref.dg, &ref.dh0};
  std::vector<std::vector<double>> ho(5);
  for (int i = 0; i < 5; ++i) {
    ho[i] = to_host(o[i]->view);
    report(std::string(names[i]) + " vs GPU ref", to_host(r[i]->view), ho[i], kTol);
  }
  if (with_host) {
    HostData d;
    d.q = to_host(C.q.view); d.k = to_host(C.k.view); d.v = to_host(C.v.view); d.g = to_host(C.g.view);
    if (cfg.h0) d.h0 = to_host(C.h0.view);
    d.dO = to_host(C.dO.view);
    d.dht = to_host(C.dht.view);
    HostOut hr;
    lina_test::host_run(cfg, d, hr, true);
    const std::vector<double>* hh[] = {&hr.dq, &hr.dk, &hr.dv, &hr.dg, &hr.dh0};
    for (int i = 0; i < 5; ++i) report(std::string(names[i]) + " vs host fp64", *hh[i], ho[i], kTol);
  }
}

void run(bool small_only) {

  check_small("T=1 B1 H2 D64 h0", gla_cfg(1, 1, 2, 64, 64, true), 1);
  check_small("T=63 B2 H3 D128", gla_cfg(2, 63, 3, 128, 128, false), 1);
  check_small("T=100 B1 H2 D256 h0", gla_cfg(1, 100, 2, 256, 256, true), 1);
  check_small("varlen [0,0,16] H4 D64 h0 (empty sequence)", gla_cfg(1, 16, 4, 64, 64, true, {0, 0, 16}), 1);
  check_small("varlen [0,15,100,300] H2 D128 h0", gla_cfg(1, 300, 2, 128, 128, true, {0, 15, 100, 300}), 1);
  check_small("varlen [0,64,64,200,201] H2 D64 h0", gla_cfg(1, 201, 2, 64, 64, true, {0, 64, 64, 200, 201}), 1);
  check_small("steep gate (logsigmoid/0.1) T200 D128 h0", gla_cfg(1, 200, 2, 128, 128, true), 2);
  check_small("steep gate T150 D256 B2", gla_cfg(2, 150, 1, 256, 256, true), 2);
  check_small("steep gate T129 D64 B2 H3", gla_cfg(2, 129, 3, 64, 64, true), 2);
  check_small("medium gate (1.6 logsigmoid) T300 D128", gla_cfg(1, 300, 2, 128, 128, true), 6);
  check_small("K64 V128 T130", gla_cfg(1, 130, 2, 64, 128, true), 1);
  check_small("K256 V64 T77 B3", gla_cfg(3, 77, 1, 256, 64, true), 1);
  check_small("B2 T1000 H4 D128 (GPU ref only)", gla_cfg(2, 1000, 4, 128, 128, true), 1, false);
  {  // f16 is refused by name
    Case C(gla_cfg(1, 8, 1, 64, 64, false), 5, 1, false);
    DTensor d16(DType::f16, C.vs());
    Grads out(C, DType::bf16, false);
    AttentionGradInputs gi{d16.view, std::nullopt};
    try {
      chunk_gla_backward(C.args(), gi, out.view(), ExecOptions{Backend::cuda});
      std::printf("[gla bwd] f16 do: NOT refused (FAIL)\n");
      ++g_failures;
    } catch (const Error& e) {
      std::printf("[gla bwd] f16 do refused: %s\n", e.what());
    }
  }
  if (small_only) return;

  // FLA's benchmark shapes against the GPU fp32 reference.
  struct BenchShape {
    const char* name;
    int B, T, H, D;
  };
  const BenchShape shapes[] = {
      {"B1_T8192_H96_D128", 1, 8192, 96, 128}, {"B2_T16384_H16_D128", 2, 16384, 16, 128},
      {"B4_T2048_H16_D128", 4, 2048, 16, 128}, {"B4_T4096_H64_D128", 4, 4096, 64, 128},
      {"B8_T2048_H32_D256", 8, 2048, 32, 256}, {"B8_T1024_H8_D64", 8, 1024, 8, 64},
  };
  for (const auto& s : shapes) {
    std::printf("[bench check] %s\n", s.name);
    Case C(gla_cfg(s.B, s.T, s.H, s.D, s.D, false), 42, 1, false);
    const ChunkGlaArgs a = C.args();
    {
      Grads out(C, DType::bf16, false), ref(C, DType::f32, false);
      chunk_gla_backward(a, C.gin(), out.view(), ExecOptions{Backend::cuda});
      gpu_reference::chunk_gla_backward(a, C.gin(), ref.view());
      ck(cudaDeviceSynchronize(), "bench check");
      device_err("dq vs GPU ref", ref.dq, out.dq, kTol);
      device_err("dk vs GPU ref", ref.dk, out.dk, kTol);
      device_err("dv vs GPU ref", ref.dv, out.dv, kTol);
      device_err("dg vs GPU ref", ref.dg, out.dg, kTol);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool small_only = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--small")) {
      small_only = true;
    } else {
      std::printf("lina_cuda_gla_bwd_check: unknown argument `%s`, expected --small\n", argv[i]);
      return 2;
    }
  }
  lina_test::require_device_or_skip();
  try {
    run(small_only);
  } catch (const std::exception& e) {
    std::printf("exception: %s\n", e.what());
    return 2;
  }
  std::printf("\n%s: %d failure(s)\n", g_failures ? "FAILED" : "ALL PASSED", g_failures);
  return g_failures ? 1 : 0;
}
