// chunk_gla forward, one fused kernel (docs/kernels/chunk_gla_fwd.md).
// One CTA per (sequence, head, 64-column V tile) walks its chunks of 64 tokens in order. The fp32
// state tile H [K, 64] lives in the MMA accumulators of the warps (each warp owns K/NW rows); a bf16
// copy in shared memory feeds the inter-chunk read. Per chunk, everything stays on chip:
//   b   = chunk-local cumsum of g (log2 units)
//   o   = scale * ((q * 2^b) @ H + A @ v),  A[r,j] = sum_c q_r k_j 2^(b_r - b_j) for j <= r
//   H   = diag(2^bL) H + (k * 2^(bL - b))^T @ v
// A uses one reference row per 16-row sub-chunk (its first row m): (q_r 2^(b_r - b_m)) . (k_j 2^(b_m - b_j)).
// Off the diagonal both factors are <= 1. On the diagonal 16x16 blocks the k factor is >= 1 but at
// most 2^span (span = decay across the 15 rows), so the same MMA is exact while span <= 60;
// otherwise that block is computed element by element with the exact exponent (spec section 5).
// Tensor cores via mma.sync m16n8k16 bf16 -> fp32.
#include <cuda_bf16.h>

#include <cstdint>
#include <utility>

#include "lina/error.h"
#include "ops/common/backends.h"
#include "ops/common/cuda/cuda_common.cuh"
#include "ops/common/cuda/mma_primitives.cuh"

namespace lina::detail::cuda {
namespace {

using namespace cuda_util;
using cuda_util::SeqDesc;

constexpr int kC = 64;              // chunk
constexpr int kVT = 64;             // value columns per CTA
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kMaxDiagSpan = 60.f;  // log2 units: 2^60 stays far inside bf16/fp32 range

template <int K>
struct Cfg {
  static constexpr int NW = K == 64 ? 4 : 8;   // warps
  static constexpr int STAGES = K == 256 ? 1 : 2;  // cp.async stages of the raw q, k, g, v tiles
  static constexpr int kQ = K + 8;             // bf16 row stride of q, k, g, H^T (bank-conflict padding)
  static constexpr int kB = K + 8;             // f32 row stride of b
  static constexpr int kVs = kVT + 8;          // bf16 row stride of v and A
  static constexpr int ROWS = K / NW;          // state rows per warp
  static constexpr int MT = ROWS / 16;         // m16 tiles of state per warp
  static constexpr int CG = NW / 4;            // warps sharing one 16-token row block
  static constexpr int OCOLS = kVT / CG;       // output columns per warp
  static constexpr int ONT = OCOLS / 8;        // n8 tiles of output per warp
  static constexpr std::size_t stage_bytes = 3ull * kC * kQ * 2 + 1ull * kC * kVs * 2;  // q, k, g, v
  static constexpr std::size_t smem = STAGES * stage_bytes + 1ull * kC * kB * 4 + 1ull * kVT * kQ * 2 + 1ull * kC * kVs * 2;
};

struct Params {
  const __nv_bfloat16 *q, *k, *v;
  const __nv_bfloat16* g;
  const float* h0;
  __nv_bfloat16* o;
  float* ht;
  const SeqDesc* seqs;
  int H, K, V;
  float scale;
};

// B fragments of two adjacent n8 tiles from a row-major [k][n] bf16 tile (k0, n0 its corner).
__device__ __forceinline__ void ldsm_x4_trans_at(std::uint32_t (&r)[4], const __nv_bfloat16* base, int ld, int k0, int n0, int lane) {
  const int mi = lane >> 3, i = lane & 7;
  ldsm_x4_trans(r, base + (k0 + i + (mi & 1) * 8) * ld + n0 + (mi >> 1) * 8);
}

// x[r][c..c+1] * 2^(b[r][c..c+1] - ref[c..c+1]) packed to bf16x2 (ref = nullptr: 2^b).
template <int K>
__device__ __forceinline__ std::uint32_t scaled_pair(const __nv_bfloat16* x, const float* b, const float* ref, int r, int c) {
  const float2 xv = unpack_bf16(*reinterpret_cast<const std::uint32_t*>(x + r * Cfg<K>::kQ + c));
  const float2 bv = *reinterpret_cast<const float2*>(b + r * Cfg<K>::kB + c);
  float e0 = bv.x, e1 = bv.y;
  if (ref) {
    const float2 rv = *reinterpret_cast<const float2*>(ref + c);
    e0 -= rv.x;
    e1 -= rv.y;
  }
  return pack_bf16(xv.x * ex2(e0), xv.y * ex2(e1));
}

// k[j][c..c+1] * 2^(ref[c..c+1] - b[j][c..c+1]) packed to bf16x2 (the B side of A).
template <int K>
__device__ __forceinline__ std::uint32_t kref_pair(const __nv_bfloat16* x, const float* b, const float* ref, int j, int c) {
  const float2 xv = unpack_bf16(*reinterpret_cast<const std::uint32_t*>(x + j * Cfg<K>::kQ + c));
  const float2 bv = *reinterpret_cast<const float2*>(b + j * Cfg<K>::kB + c);
  const float2 rv = *reinterpret_cast<const float2*>(ref + c);
  return pack_bf16(xv.x * ex2(rv.x - bv.x), xv.y * ex2(rv.y - bv.y));
}

template <int K>
__global__ void __launch_bounds__(Cfg<K>::NW * 32) chunk_gla_fwd_fused(Params p) {
  using C = Cfg<K>;
  extern __shared__ __align__(16) unsigned char smem[];
  float* sb = reinterpret_cast<float*>(smem);                                  // [64][kB] cumsum (log2)
  __nv_bfloat16* shT = reinterpret_cast<__nv_bfloat16*>(sb + kC * C::kB);      // [64 col][kQ] H_n in bf16
  __nv_bfloat16* sA = shT + kVT * C::kQ;                                       // [64][kVs] A in bf16
  unsigned char* stage0 = reinterpret_cast<unsigned char*>(sA + kC * C::kVs);  // STAGES x {q, k, g, v}

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g8 = lane >> 2, t4 = lane & 3;
  const int j0 = blockIdx.x * kVT, h = blockIdx.y, n = blockIdx.z;
  const SeqDesc s = p.seqs[n];
  const std::int64_t state_base = (static_cast<std::int64_t>(n) * p.H + h) * K * p.V;

  // State accumulators: warp rows [warp*ROWS, +ROWS), all 64 columns.
  float hacc[C::MT][8][4];
#pragma unroll
  for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = warp * C::ROWS + mt * 16 + g8 + (e >= 2 ? 8 : 0);
        const int col = nt * 8 + 2 * t4 + (e & 1);
        hacc[mt][nt][e] = p.h0 ? p.h0[state_base + static_cast<std::int64_t>(r) * p.V + j0 + col] : 0.f;
      }
  auto store_state_bf16 = [&]() {
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = warp * C::ROWS + mt * 16 + g8 + (e >= 2 ? 8 : 0);
          const int col = nt * 8 + 2 * t4 + (e & 1);
          shT[col * C::kQ + r] = __float2bfloat16_rn(hacc[mt][nt][e]);
        }
  };
  store_state_bf16();

  const int nchunks = (s.length + kC - 1) / kC;
  // Issue the raw tiles of chunk `ch` into stage `st` (16-byte cp.async; rows past the end zero-filled).
  auto issue = [&](int ch, int st) {
    unsigned char* base = stage0 + st * C::stage_bytes;
    __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(base);
    __nv_bfloat16* k_s = q_s + kC * C::kQ;
    __nv_bfloat16* g_s = k_s + kC * C::kQ;
    __nv_bfloat16* v_s = g_s + kC * C::kQ;
    const int t0 = ch * kC, cn = min(kC, s.length - t0);
    const std::int64_t row0 = s.row_begin + t0;
    for (int i = tid; i < kC * K / 8; i += C::NW * 32) {
      const int r = i / (K / 8), c = (i % (K / 8)) * 8;
      const bool ok = r < cn;
      const std::int64_t off = ok ? ((row0 + r) * p.H + h) * K + c : 0;
      cp_async16(q_s + r * C::kQ + c, p.q + off, ok);
      cp_async16(k_s + r * C::kQ + c, p.k + off, ok);
      cp_async16(g_s + r * C::kQ + c, p.g + off, ok);
    }
    for (int i = tid; i < kC * kVT / 8; i += C::NW * 32) {
      const int r = i / (kVT / 8), c = (i % (kVT / 8)) * 8;
      const bool ok = r < cn;
      const std::int64_t off = ok ? ((row0 + r) * p.H + h) * p.V + j0 + c : 0;
      cp_async16(v_s + r * C::kVs + c, p.v + off, ok);
    }
  };
  if (C::STAGES == 2 && nchunks > 0) issue(0, 0);
  cp_async_commit();

  const int rb = warp & 3;                      // row block (16 tokens) for o and A
  const int cg = warp >> 2;                     // column group of o; A n-tiles nt with nt % CG == cg
  const int cbase = cg * C::OCOLS;              // output columns of this warp
  for (int ch = 0; ch < nchunks; ++ch) {
    const int t0 = ch * kC;
    const int cn = min(kC, s.length - t0);
    const std::int64_t row0 = s.row_begin + t0;
    __syncthreads();  // every warp is done with the stage about to be refilled, sb and sA
    if (C::STAGES == 2) {
      if (ch + 1 < nchunks) issue(ch + 1, (ch + 1) & 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      issue(ch, 0);
      cp_async_commit();
      cp_async_wait<0>();
    }
    __syncthreads();
    const unsigned char* base = stage0 + (C::STAGES == 2 ? (ch & 1) : 0) * C::stage_bytes;
    const __nv_bfloat16* sq = reinterpret_cast<const __nv_bfloat16*>(base);
    const __nv_bfloat16* sk = sq + kC * C::kQ;
    const __nv_bfloat16* sg = sk + kC * C::kQ;
    const __nv_bfloat16* sv = sg + kC * C::kQ;

    // Chunk-local cumsum of g in log2 units; padded rows hold 0 so they repeat bL (all exps <= 1).
    for (int c = tid; c < K; c += C::NW * 32) {
      float acc = 0.f;
#pragma unroll 16
      for (int r = 0; r < kC; ++r) {
        acc += __bfloat162float(sg[r * C::kQ + c]) * kLog2e;
        sb[r * C::kB + c] = acc;
      }
    }
    __syncthreads();

    // ---- o = (q * 2^b) @ H_n  (rows rb*16.., columns cbase..)
    float oacc[C::ONT][4];
#pragma unroll
    for (int nt = 0; nt < C::ONT; ++nt) oacc[nt][0] = oacc[nt][1] = oacc[nt][2] = oacc[nt][3] = 0.f;
    const int r_lo = rb * 16 + g8, r_hi = r_lo + 8;
#pragma unroll 2
    for (int ks = 0; ks < K / 16; ++ks) {
      const int c = ks * 16 + 2 * t4;
      std::uint32_t a[4];
      a[0] = scaled_pair<K>(sq, sb, nullptr, r_lo, c);
      a[1] = scaled_pair<K>(sq, sb, nullptr, r_hi, c);
      a[2] = scaled_pair<K>(sq, sb, nullptr, r_lo, c + 8);
      a[3] = scaled_pair<K>(sq, sb, nullptr, r_hi, c + 8);
#pragma unroll
      for (int nt = 0; nt < C::ONT; ++nt) {
        const __nv_bfloat16* hb = shT + (cbase + nt * 8 + g8) * C::kQ + c;
        mma_bf16_16816(oacc[nt], a, *reinterpret_cast<const std::uint32_t*>(hb), *reinterpret_cast<const std::uint32_t*>(hb + 8));
      }
    }

    // ---- A row block rb, n8 tiles nt <= 2rb+1 with nt % CG == cg: reference row m = rb*16.
    const int m = rb * 16;
    const float* bref = sb + m * C::kB;
    float span = 0.f;
    for (int c = lane; c < K; c += 32) span = fmaxf(span, bref[c] - sb[(m + 15) * C::kB + c]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) span = fmaxf(span, __shfl_xor_sync(0xffffffffu, span, o));
    const bool diag_mma = span <= kMaxDiagSpan;
    const int nt_end = diag_mma ? 2 * rb + 2 : 2 * rb;  // n8 tiles of j computed by MMA
    float aacc[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) aacc[nt][0] = aacc[nt][1] = aacc[nt][2] = aacc[nt][3] = 0.f;
#pragma unroll 2
    for (int ks = 0; ks < K / 16; ++ks) {
      const int c = ks * 16 + 2 * t4;
      std::uint32_t a[4];
      a[0] = scaled_pair<K>(sq, sb, bref, r_lo, c);
      a[1] = scaled_pair<K>(sq, sb, bref, r_hi, c);
      a[2] = scaled_pair<K>(sq, sb, bref, r_lo, c + 8);
      a[3] = scaled_pair<K>(sq, sb, bref, r_hi, c + 8);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        if (nt < nt_end && nt % C::CG == cg) {
          const int jr = nt * 8 + g8;
          mma_bf16_16816(aacc[nt], a, kref_pair<K>(sk, sb, bref, jr, c), kref_pair<K>(sk, sb, bref, jr, c + 8));
        }
      }
    }
    if (!diag_mma) {
      // Exact per-channel exponent on the diagonal block (steep decay).
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        if ((nt >> 1) != rb || nt % C::CG != cg) continue;  // compile-time register index, run-time selection
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = m + g8 + (e >= 2 ? 8 : 0);
          const int jj = nt * 8 + 2 * t4 + (e & 1);
          float acc = 0.f;
          if (jj <= r) {
            for (int c = 0; c < K; ++c)
              acc += __bfloat162float(sq[r * C::kQ + c]) * __bfloat162float(sk[jj * C::kQ + c]) *
                     ex2(sb[r * C::kB + c] - sb[jj * C::kB + c]);
          }
          aacc[nt][e] = acc;
        }
      }
    }
    // Causal mask (select, never multiply: the masked side may be large), then A -> sA in bf16.
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      if (nt % C::CG != cg) continue;
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int r = m + g8 + hh * 8;
        const int jj = nt * 8 + 2 * t4;
        const float x0 = jj > r ? 0.f : aacc[nt][2 * hh];
        const float x1 = jj + 1 > r ? 0.f : aacc[nt][2 * hh + 1];
        *reinterpret_cast<std::uint32_t*>(sA + r * C::kVs + jj) = pack_bf16(x0, x1);
      }
    }
    __syncthreads();

    // ---- o += A @ v   (only j blocks <= rb are nonzero)
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      if (kk <= rb) {
        const int c = kk * 16 + 2 * t4;
        std::uint32_t a[4];
        a[0] = *reinterpret_cast<const std::uint32_t*>(sA + r_lo * C::kVs + c);
        a[1] = *reinterpret_cast<const std::uint32_t*>(sA + r_hi * C::kVs + c);
        a[2] = *reinterpret_cast<const std::uint32_t*>(sA + r_lo * C::kVs + c + 8);
        a[3] = *reinterpret_cast<const std::uint32_t*>(sA + r_hi * C::kVs + c + 8);
#pragma unroll
        for (int np = 0; np < C::ONT / 2; ++np) {
          std::uint32_t b[4];
          ldsm_x4_trans_at(b, sv, C::kVs, kk * 16, cbase + np * 16, lane);
          mma_bf16_16816(oacc[2 * np], a, b[0], b[1]);
          mma_bf16_16816(oacc[2 * np + 1], a, b[2], b[3]);
        }
      }
    }
    // ---- store o (bf16)
#pragma unroll
    for (int nt = 0; nt < C::ONT; ++nt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int r = (hh ? r_hi : r_lo);
        if (r < cn) {
          const int col = j0 + cbase + nt * 8 + 2 * t4;
          *reinterpret_cast<std::uint32_t*>(p.o + ((row0 + r) * p.H + h) * p.V + col) =
              pack_bf16(p.scale * oacc[nt][2 * hh], p.scale * oacc[nt][2 * hh + 1]);
        }
      }
    // (H_n in shT was last read before the barrier above; the update below only writes it at the end.)

    // ---- H = diag(2^bL) H + (k * 2^(bL - b))^T @ v
    const float* bl = sb + (kC - 1) * C::kB;
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt) {
      const int c_lo = warp * C::ROWS + mt * 16 + g8, c_hi = c_lo + 8;
      const float bl_lo = bl[c_lo], bl_hi = bl[c_hi];
      const float d_lo = ex2(bl_lo), d_hi = ex2(bl_hi);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        hacc[mt][nt][0] *= d_lo;
        hacc[mt][nt][1] *= d_lo;
        hacc[mt][nt][2] *= d_hi;
        hacc[mt][nt][3] *= d_hi;
      }
#pragma unroll
      for (int ks = 0; ks < kC / 16; ++ks) {
        const int tk = ks * 16 + 2 * t4;
        auto ke = [&](int tok, int c, float blc) {
          return __bfloat162float(sk[tok * C::kQ + c]) * ex2(blc - sb[tok * C::kB + c]);
        };
        std::uint32_t a[4];
        a[0] = pack_bf16(ke(tk, c_lo, bl_lo), ke(tk + 1, c_lo, bl_lo));
        a[1] = pack_bf16(ke(tk, c_hi, bl_hi), ke(tk + 1, c_hi, bl_hi));
        a[2] = pack_bf16(ke(tk + 8, c_lo, bl_lo), ke(tk + 9, c_lo, bl_lo));
        a[3] = pack_bf16(ke(tk + 8, c_hi, bl_hi), ke(tk + 9, c_hi, bl_hi));
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          std::uint32_t b[4];
          ldsm_x4_trans_at(b, sv, C::kVs, ks * 16, np * 16, lane);
          mma_bf16_16816(hacc[mt][2 * np], a, b[0], b[1]);
          mma_bf16_16816(hacc[mt][2 * np + 1], a, b[2], b[3]);
        }
      }
    }
    store_state_bf16();  // read after the next chunk's barriers
  }
  if (p.ht) {
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = warp * C::ROWS + mt * 16 + g8 + (e >= 2 ? 8 : 0);
          const int col = nt * 8 + 2 * t4 + (e & 1);
          p.ht[state_base + static_cast<std::int64_t>(r) * p.V + j0 + col] = hacc[mt][nt][e];
        }
  }
}

template <int K>
void launch(const Params& prm, const Problem& p, cudaStream_t st) {
  using C = Cfg<K>;
  check(cudaFuncSetAttribute(chunk_gla_fwd_fused<K>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(C::smem)),
        "cudaFuncSetAttribute(chunk_gla_fwd_fused)");
  const dim3 grid(static_cast<unsigned>(p.V / kVT), static_cast<unsigned>(p.H), static_cast<unsigned>(p.N));
  chunk_gla_fwd_fused<K><<<grid, C::NW * 32, C::smem, st>>>(prm);
  check(cudaGetLastError(), "chunk_gla_fwd_fused launch");
}

}  // namespace

RunInfo chunk_gla_forward(const Problem& p, const ChunkGlaArgs& a, const AttentionOutputs& out, ForwardMode mode,
                          const ExecOptions& opts) {
  (void)mode;  // training and inference run the same kernel: the backward recomputes what it needs
  if (a.q.dtype != DType::bf16)
    throw_unsupported("q", "dtype " + std::string(dtype_name(a.q.dtype)), "bfloat16 (the CUDA chunk_gla kernel)");
  if (a.g.dtype != DType::bf16)
    throw_unsupported("g", "dtype " + std::string(dtype_name(a.g.dtype)), "bfloat16 (the CUDA chunk_gla kernel)");
  if (!cuda_head_dim_supported(p.K)) throw_unsupported("K", std::to_string(p.K), "64, 128 or 256 (the CUDA chunk_gla kernel)");
  if (!cuda_head_dim_supported(p.V)) throw_unsupported("V", std::to_string(p.V), "64, 128 or 256 (the CUDA chunk_gla kernel)");
  // cp.async moves 16-byte vectors of q, k, g, v; o is written as bf16 pairs.
  for (const auto& [name, t] : {std::pair<const char*, const TensorView*>{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"g", &a.g}, {"o", &out.o}})
    if (reinterpret_cast<std::uintptr_t>(t->data) % 16 != 0)
      throw_unsupported(name, "a data pointer not aligned to 16 bytes", "16-byte aligned tensors (the CUDA chunk_gla kernel)");
  const cudaStream_t st = static_cast<cudaStream_t>(opts.stream);
  Params prm{};
  prm.q = a.q.ptr<const __nv_bfloat16>();
  prm.k = a.k.ptr<const __nv_bfloat16>();
  prm.v = a.v.ptr<const __nv_bfloat16>();
  prm.g = a.g.ptr<const __nv_bfloat16>();
  prm.h0 = a.initial_state ? a.initial_state->ptr<const float>() : nullptr;
  prm.o = out.o.ptr<__nv_bfloat16>();
  prm.ht = out.final_state ? out.final_state->ptr<float>() : nullptr;
  prm.H = static_cast<int>(p.H);
  prm.K = static_cast<int>(p.K);
  prm.V = static_cast<int>(p.V);
  prm.scale = static_cast<float>(p.scale);
  const cuda_util::DeviceSeqs seqs = cuda_util::upload_sequences(p, st);
  prm.seqs = seqs.ptr;
  std::string name = "chunk_gla_fwd_fused<" + std::to_string(p.K) + ">";
  if (p.N > 0) {
    switch (p.K) {
      case 64: launch<64>(prm, p, st); break;
      case 128: launch<128>(prm, p, st); break;
      default: launch<256>(prm, p, st); break;
    }
  }
  if (seqs.ptr) check(cudaFreeAsync(seqs.ptr, st), "cudaFreeAsync(seqs)");
  return RunInfo{"cuda", {name}};
}

}  // namespace lina::detail::cuda
