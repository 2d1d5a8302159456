// The chunk_kda / chunk_gdn forward's kernel parameters (Params), its constants, the workspace layouts the
// preps write and the state kernel reads, and where a prep work item lies in the input.
// Part of the forward's one translation unit, chunk_delta_fwd.cu (whose anonymous namespace keeps these
// kernels and helpers internal to it); includes what it uses.
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/common/cuda/cuda_common.cuh"
#include "ops/common/fast_div.h"

namespace lina::detail::cuda {
namespace {

using bf16 = __nv_bfloat16;
using namespace cuda_util;

constexpr int kC = 64;         // chunk length
constexpr int kVT = 64;        // value columns per state CTA
constexpr int kThreads = 256;  // 8 warps in both kernels
constexpr float kLog2e = 1.4426950408889634f;

enum GateMode : int { kGateGiven = 0, kGateSoftplus = 1, kGateLowerBound = 2 };

// bf16 planes of the two C x C operand tiles the preps write for the state kernel. T' = (I + A)^-1 diag(beta)
// as hi + lo: one bf16 rounding of the inverse carries into every later chunk's state and costs the g = 0
// gate cases more than the tolerance allows (H200 with kTPlanes = 1: chunk_gdn
// B1_T1024_H2_D128_gzero o err_ratio 5.78e-3 against 5e-3, forward and backward; 5 % faster GDN forward).
// Q' (scale Aqk) as one plane, and v_new as one plane in the o product, as in FLA's precision map (docs/math.md
// section 5: Aqk, v_new in the input dtype): they enter o only, no error is carried across chunks
// (12 -> 4 wgmma per chunk and V tile for o, 8 KB less per chunk and head of workspace).
constexpr int kTPlanes = 2;
constexpr int kQPlanes = 1;
static_assert((kQPlanes == 1 || kQPlanes == 2) && (kTPlanes == 1 || kTPlanes == 2), "one plane or hi + lo");

// Per-(chunk, value head) workspace of the KDA prep; ch = global chunk * HV + hv. The bf16 tiles are
// stored in the state kernel's shared-memory layout (K / 64 SW128 tiles [C][64], `tile_off`), so each
// (chunk, head) tile is one contiguous block that the state kernel moves with one bulk copy.
struct Workspace {
  bf16* ke;   // [ch][C][K]  k e^b (normalized k)
  bf16* qg;   // [ch][C][K]  q e^b (normalized q)
  bf16* kg;   // [ch][C][K]  k e^(bL - b)
  bf16* a;    // [ch][kQPlanes][C][C] swizzled  scale * Aqk (lower incl., zero above the diagonal)
  float* el;  // [ch][K]     e^bL
};

// The per-(chunk, value head) outputs both preps share the layout of (state.cuh); GDN
// writes all three, KDA only t.
struct ThinWorkspace {
  bf16* t;    // [ch][kTPlanes][C][C] swizzled  T' = (I+A)^-1 diag(beta) as hi, lo
  bf16* a;    // [ch][kQPlanes][C][C] swizzled  Q' (lower incl., zero above the diagonal)
  float* sc;  // [ch][4][C]    per-token factors c1, c2, c3 and 2^bL (repeated)
};

struct Params {
  const bf16* q;
  const bf16* k;
  const bf16* v;
  const void* g;
  const void* beta;
  const float* A_log;    // may be null
  const float* dt_bias;  // may be null
  const float* h0;       // may be null
  float* ht;             // may be null
  bf16* o;
  SeqTable seqs;  // varlen: the sequence table; dense: computed (a dense call uploads nothing)
  int N;
  int g_f32, beta_f32;
  int H, HV, G, V, nvt;
  float scale;
  int gate_mode;
  float lower_bound;
  int beta_sigmoid;
  float beta_mult;
  int l2norm;
  int safe;  // KDA: diagonal sub-blocks through the middle reference row (needs g >= -5)
  int nitems;  // prep work items: total chunks * HV (the prep grid is persistent and strides over them)
  FastDiv fd_hv;   // item -> (global chunk, value head)
  FastDiv fd_nch;  // dense: global chunk -> (sequence, chunk in it); chunks per sequence
  FastDiv fd_g;    // value head -> q/k head (GVA group G)
  Workspace ws;
  ThinWorkspace tw;
  // GDN prep: q and k as [rows][H][K] tensor maps, boxes of 64 channels x 1 head x 64 rows (one SW128 tile each)
  CUtensorMap tm_q, tm_k;
};

// Where a prep work item (global chunk cg, value head hv; item = cg * HV + hv) lies in the input.
struct PrepItem {
  long t0;  // first token row
  int Cn;   // valid rows (<= C)
  int h, hv;
};

__device__ __forceinline__ PrepItem prep_item(const Params& p, int item) {
  const std::uint32_t gc = p.fd_hv.div(static_cast<std::uint32_t>(item));
  const int hv = item - static_cast<int>(gc * p.fd_hv.d);
  int2 sc;  // (sequence, chunk in it) of global chunk gc; dense: one multiply-high, no table
  if (p.seqs.table) {
    sc = p.seqs.chunk(static_cast<int>(gc), p.N);
  } else {
    const std::uint32_t n = p.fd_nch.div(gc);
    sc = make_int2(static_cast<int>(n), static_cast<int>(gc - n * p.fd_nch.d));
  }
  const SeqDesc sd = p.seqs.at(sc.x);
  return PrepItem{sd.row_begin + static_cast<long>(sc.y) * kC, min(kC, sd.length - sc.y * kC),
                  static_cast<int>(p.fd_g.div(static_cast<std::uint32_t>(hv))), hv};
}

// A persistent prep's thread index, read through volatile asm once per item: with a plain threadIdx.x
// the compiler hoists every per-thread shared-memory address of the stages out of the item loop and
// spills them (ptxas still sees a %tid.x read it can rematerialize).
__device__ __forceinline__ int item_tid() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
  return t;
}

// Bytes of one (chunk, head) workspace tile = its shared-memory tile (bulk copy sizes: multiples of 16).
template <int K>
constexpr std::uint32_t kTileBytes = kC * K * sizeof(bf16);
// T' and Q' tiles of one (chunk, head): elements (the workspace stride per ch) and bytes
constexpr int kTTileElems = kTPlanes * kC * kC, kQTileElems = kQPlanes * kC * kC;
constexpr std::uint32_t kTTileBytes = kTTileElems * sizeof(bf16);
constexpr std::uint32_t kQTileBytes = kQTileElems * sizeof(bf16);
static_assert(kTileBytes<64> % 16 == 0 && kTileBytes<128> % 16 == 0 && kTileBytes<256> % 16 == 0 && kTTileBytes % 16 == 0 &&
                  kQTileBytes % 16 == 0,
              "bulk copies: 16-byte sizes");
static_assert(2 * kTileBytes<256> < (1u << 20) && kTileBytes<256> + kTTileBytes + kQTileBytes < (1u << 20),
              "mbarrier tx-count range");

}  // namespace
}  // namespace lina::detail::cuda
