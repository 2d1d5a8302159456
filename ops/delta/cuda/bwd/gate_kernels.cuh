// Stages E2 and F of the chunk_kda / chunk_gdn backward: post_gate_kernel (dbeta through the sigmoid, dg
// through the in-kernel gate) and param_partial_kernel / param_finish_kernel (dA_log, ddt_bias).
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

// F: the parameter gradients dA_log (sum of dAc over the rows) and ddt_bias (sum of dgv over the rows, per channel),
// double sums in a fixed order (deterministic), in two kernels: param_partial per (row part, value head) over its
// rows, param_finish per value head over the parts in order. (One block per value head, a thread per channel walking
// all rows, took 1.9 ms a call at B2 T8192 H16 K128: 16 blocks of dependent loads.)
constexpr int kParamRowsPerPart = 256;
constexpr int kParamMaxParts = 128;

// Grid (param_parts, HV), 256 threads: thread (group, channel) sums rows row0 + group, + groups, ... of its channel
// (Kg >= 256: a thread per channel, channel blocks of 256), then the groups are added in order.
__global__ void __launch_bounds__(256) param_partial_kernel(const Params p) {
  const int part = blockIdx.x, hv = blockIdx.y, tid = threadIdx.x;
  const i64 rows = (p.R + p.param_parts - 1) / p.param_parts, row0 = part * rows, row1 = min(p.R, row0 + rows);
  double* const out = p.param_part + (static_cast<i64>(hv) * p.param_parts + part) * (p.Kg + 1);
  __shared__ double red[256];
  if (p.ddt) {
    const int width = min(p.Kg, 256), groups = 256 / width, c_in = tid % width, group = tid / width;
    for (int c0 = 0; c0 < p.Kg; c0 += width) {
      double s = 0.0;
      if (group < groups)
        for (i64 r = row0 + group; r < row1; r += groups) s += p.dgv[(r * p.HV + hv) * p.Kg + c0 + c_in];
      red[tid] = s;
      __syncthreads();
      if (tid < width) {
        double t = 0.0;
        for (int g = 0; g < groups; ++g) t += red[g * width + tid];
        out[c0 + tid] = t;
      }
      __syncthreads();
    }
  }
  if (p.dA_log) {
    double s = 0.0;
    for (i64 r = row0 + tid; r < row1; r += 256) s += p.dAc[r * p.HV + hv];
    red[tid] = s;
    __syncthreads();
    for (int o = 128; o > 0; o >>= 1) {
      if (tid < o) red[tid] += red[tid + o];
      __syncthreads();
    }
    if (tid == 0) out[p.Kg] = red[0];
  }
}

// Grid HV: the parts' sums in part order.
__global__ void __launch_bounds__(256) param_finish_kernel(const Params p) {
  const int hv = blockIdx.x;
  const double* const in = p.param_part + static_cast<i64>(hv) * p.param_parts * (p.Kg + 1);
  for (int c = threadIdx.x; c <= p.Kg; c += blockDim.x) {
    if (c == p.Kg ? !p.dA_log : !p.ddt) continue;
    double s = 0.0;
#pragma unroll 4
    for (int part = 0; part < p.param_parts; ++part) s += in[static_cast<i64>(part) * (p.Kg + 1) + c];
    if (c == p.Kg) p.dA_log[hv] = static_cast<float>(s);
    else p.ddt[hv * p.Kg + c] = static_cast<float>(s);
  }
}

}  // namespace
}  // namespace lina::detail::cuda
