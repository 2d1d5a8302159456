// The chunk_kda / chunk_gdn backward's kernel parameters (Params: inputs, outputs, problem, the choices of
// choose_fusions and the fp32 scratch between stages), its constants and the small device helpers every
// stage uses (dtype stores, sigmoid / softplus, the l2norm's inverse norm, a chunk's rows).
// Part of the backward's one translation unit, chunk_delta_bwd.cu (whose anonymous namespace keeps these
// kernels and helpers internal to it); includes what it uses.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/common/cuda/cuda_common.cuh"

namespace lina::detail::cuda {
namespace {

using cuda_util::load_as_float;
using cuda_util::warp_sum;
using i64 = std::int64_t;
using bf16 = __nv_bfloat16;

constexpr int kC = 64;     // chunk length
constexpr int kVT = 64;    // value columns per tile
constexpr int kNT = 256;   // threads per block of the chunk kernels
constexpr int kP64 = 65;   // fp32 pitch of 64-wide tiles (odd: transposed reads hit distinct banks)

enum GateMode : int { kGateGiven = 0, kGateSoftplus = 1, kGateLowerBound = 2 };


struct Params {
  // inputs
  const void* q;
  const void* k;
  const void* v;
  const void* g;
  const void* beta;
  const float* A_log;    // may be null
  const float* dt_bias;  // may be null
  const float* h0;       // may be null
  const void* d_o;
  const void* dht;  // may be null
  int qk_t, v_t, g_t, beta_t, do_t, dht_t;  // dtype codes (lina::DType order: f64 f32 bf16 f16)
  // outputs
  void* dq;
  void* dk;
  void* dv;
  void* dg;
  void* dbeta;
  float* dh0;     // may be null
  float* dA_log;  // may be null
  float* ddt;     // may be null
  int dq_t, dv_t, dg_t, dbeta_t;
  // problem
  cuda_util::SeqTable seqs;  // dense: derived from T (nothing uploaded); varlen: the device table
  int N, H, HV, G, K, V, Kg, nvt;
  i64 R;  // total token rows
  float scale;
  int kda, gate_mode, has_A_log, beta_sigmoid, l2norm;
  float lower_bound, beta_mult;
  int fuse_gate;  // the given gate (no in-kernel activation): grad_k_v2 writes dg and dbeta; post_gate does not run
  int fuse_qk;  // G == 1: grad_k_v2 applies post_qk (the l2norm backward) itself; post_qk does not run
  int qk_inline;  // bf16 q / k with fuse_qk (K <= 128) or qk_v2 (K = 256): chunk_prep_v2 normalises its q / k
                  // rows itself (InlineQkRows) and writes rq / rk, grad_k_v2 too (K <= 128) or scales its half of the
                  // raw rows by them (ScaledQkHalf); prep_qk does not run and qn / kn are not allocated
  int qk_v2;      // the vectorised prep_qk_v2 / post_qk_v2 run (dq, dk 16-byte aligned; not in the scalar_qk variant)
  int safe;  // KDA safe_gate with lower_bound >= -5: chunk_prep_v2's diagonal blocks through their middle row
  // KDA without safe_gate: per (chunk, value head), 1 where chunk_prep_v2 found the gates out of range
  // (gate_range.cuh) and took exact exps; grad_k_v2's tensor-core tail skips those chunks, its SIMT tail the others
  int* tail_exact;
  int tail_items;  // chunks x HV: tail_exact's length
  // scratch (fp32, except the bf16 planes below)
  float *qn, *kn, *rq, *rk;   // [R,H,K], [R,H]
  float *b, *bt;              // chunk-local gate cumsum [R,HV,Kg]; beta after the sigmoid [R,HV]
  float* Tinv;                // [R,HV,64]
  float* vn;                  // u [R,HV,V] (chunk_prep -> state_fwd)
  void* img;                  // ChunkImage<K> [chunks,HV]: the state passes' operand tiles
  // The state passes' outputs that only grad_v reads, as bf16 planes (docs/kernels/chunk_delta_bwd.md):
  // a hi plane, then (plane_kv / plane_tok elements further) a lo plane with x - hi, so hi + lo
  // carries ~16 bits. H_n has its lo plane only where h_lo (inputs not all bf16): with bf16 inputs one plane costs
  // the gradients little (FLA stores h in the input dtype), while dh, v_new and dvn in one plane would not
  // (KDA's dA_log past FLA's 0.003 in the gate).
  bf16 *Hs, *dHs;             // [planes][chunks,HV,K,V]
  bf16 *vnb, *dvn;            // v_new, dvn [2][R,HV,V]
  i64 plane_kv, plane_tok;    // elements per plane: chunks * HV * K * V, R * HV * V
  int h_lo;                   // H_n's lo plane is written and read
  float *dqe, *dke, *dw;      // [R,HV,K]; reused by D2 for the per-value-head dq, dk
  float *dAqk, *dTv;          // [R,HV,64]
  float* hd;                  // [chunks,HV,K]: rowsum(H_n * dh[n])
  float* dbp;                 // [R,HV]: dbeta partial, then dbeta w.r.t. beta
  float* dgv;                 // [R,HV,K]: dg w.r.t. the activated gate, then w.r.t. the raw gate
  float* dAc;                 // [R,HV]: per-row dA_log contributions
  double* param_part;         // [HV][param_parts][Kg + 1]: param_partial's sums of dgv (Kg) and dAc (1) per row part
  int param_parts;            // row parts of param_partial (kParamRowsPerPart rows each, at most kParamMaxParts)
};

__device__ __forceinline__ void store_as(void* p, int dtype, i64 i, float x) {
  switch (dtype) {
    case 0: static_cast<double*>(p)[i] = x; return;
    case 1: static_cast<float*>(p)[i] = x; return;
    case 2: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(x); return;
    default: static_cast<__half*>(p)[i] = __float2half(x); return;
  }
}

__device__ __forceinline__ float sigmoidf_(float x) {
  if (x >= 0.f) return 1.f / (1.f + __expf(-x));
  const float e = __expf(x);
  return e / (1.f + e);
}
__device__ __forceinline__ float softplusf_(float x) { return x > 20.f ? x : log1pf(__expf(x)); }
// The in-kernel l2norm's inverse norm of a row from its sum of squares (1 without the l2norm): prep_qk,
// prep_qk_v2 and InlineQkRows all take it from here, so every q_n / k_n uses the same epsilon.
__device__ __forceinline__ float inv_l2norm(const Params& p, float sumsq) { return p.l2norm ? rsqrtf(sumsq + 1e-6f) : 1.f; }

struct ChunkInfo {
  i64 t0;    // first token row
  int Cn;    // valid rows
  int gidx;  // global chunk index
};

__device__ __forceinline__ ChunkInfo chunk_info(const Params& p, int ci) {
  const int2 cr = p.seqs.chunk(ci, p.N);  // (sequence, chunk within it)
  const cuda_util::SeqDesc sd = p.seqs.at(cr.x);
  ChunkInfo c;
  c.t0 = sd.row_begin + static_cast<i64>(cr.y) * kC;
  c.Cn = min(kC, sd.length - cr.y * kC);
  c.gidx = ci;
  return c;
}

}  // namespace
}  // namespace lina::detail::cuda
