// Stages E2 and F of the chunk_kda / chunk_gdn backward: post_gate_kernel (dbeta through the sigmoid, dg
// through the in-kernel gate) and param_reduce_kernel (dA_log, ddt_bias).
// Part of the backward's one translation unit, chunk_delta_bwd.cu (whose anonymous namespace keeps these
// kernels and helpers internal to it); includes what it uses.
#pragma once
#include <cstdint>

#include "ops/delta/cuda/bwd/params.cuh"
#include "ops/common/cuda/cuda_common.cuh"

namespace lina::detail::cuda {
namespace {

// E2: dbeta through the sigmoid, dg through the in-kernel gate; per-row dA_log contributions.
__global__ void post_gate_kernel(const Params p) {
  const i64 item = (static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (item >= p.R * p.HV) return;
  const int hv = static_cast<int>(item % p.HV);
  if (lane == 0) {
    float db = p.dbp[item];
    if (p.beta_sigmoid) {
      const float s = sigmoidf_(load_as_float(p.beta, p.beta_t, item));
      db *= p.beta_mult * s * (1.f - s);
    }
    store_as(p.dbeta, p.dbeta_t, item, db);
  }
  const float a = p.has_A_log ? __expf(p.A_log[hv]) : 1.f;
  float dA = 0.f;
  for (int c = lane; c < p.Kg; c += 32) {
    const i64 gi = item * p.Kg + c;
    const float dy = p.dgv[gi];
    float dx = dy;
    if (p.gate_mode != kGateGiven) {
      const float x = load_as_float(p.g, p.g_t, gi) + (p.dt_bias ? p.dt_bias[hv * p.Kg + c] : 0.f);
      if (p.gate_mode == kGateSoftplus) {
        dx = -a * sigmoidf_(x) * dy;
        dA += dy * (-a * softplusf_(x));
      } else {
        const float s = sigmoidf_(a * x);
        dx = dy * p.lower_bound * s * (1.f - s) * a;
        dA += dx * x;
      }
      p.dgv[gi] = dx;
    }
    store_as(p.dg, p.dg_t, gi, dx);
  }
  if (p.dA_log) {
    dA = warp_sum(dA);
    if (lane == 0) p.dAc[item] = dA;
  }
}

// F: parameter gradients, one block per value head, double sums in a fixed order.
__global__ void param_reduce_kernel(const Params p) {
  const int hv = blockIdx.x, tid = threadIdx.x;
  __shared__ double red[256];
  if (p.dA_log) {
    double s = 0.0;
    for (i64 r = tid; r < p.R; r += blockDim.x) s += p.dAc[r * p.HV + hv];
    red[tid] = s;
    __syncthreads();
    for (int o = blockDim.x / 2; o > 0; o >>= 1) {
      if (tid < o) red[tid] += red[tid + o];
      __syncthreads();
    }
    if (tid == 0) p.dA_log[hv] = static_cast<float>(red[0]);
  }
  if (p.ddt) {
    for (int c = tid; c < p.Kg; c += blockDim.x) {
      double s = 0.0;
      for (i64 r = 0; r < p.R; ++r) s += p.dgv[(r * p.HV + hv) * p.Kg + c];
      p.ddt[hv * p.Kg + c] = static_cast<float>(s);
    }
  }
}

}  // namespace
}  // namespace lina::detail::cuda
