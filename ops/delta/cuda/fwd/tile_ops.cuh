// The forward preps' shared building blocks: 16 x 16 tf32 block products, input loads, the workspace tiles'
// swizzled layouts, the (I + L)^-1 of a chunk in 16 x 16 blocks and the T' tile store.
// Part of the forward's one translation unit, chunk_delta_fwd.cu (whose anonymous namespace keeps these
// kernels and helpers internal to it); includes what it uses.
#pragma once
#include <cstdint>

#include "ops/delta/cuda/fwd/params.cuh"
#include "ops/common/cuda/cuda_common.cuh"
#include "ops/common/cuda/mma_primitives.cuh"
#include "ops/common/cuda/wgmma_sm90.cuh"

namespace lina::detail::cuda {
namespace {

// acc(16x16, two n8 tiles) += A(16x16) @ B(16x16); fp32 row-major in shared memory, pitch 68.
__device__ __forceinline__ void blk_mma_tf32(float acc[2][4], const float* A, const float* B, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int ks = 0; ks < 2; ++ks) {
    const uint32_t a[4] = {to_tf32(A[g * 68 + ks * 8 + t]), to_tf32(A[(g + 8) * 68 + ks * 8 + t]),
                           to_tf32(A[g * 68 + ks * 8 + t + 4]), to_tf32(A[(g + 8) * 68 + ks * 8 + t + 4])};
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const uint32_t b0 = to_tf32(B[(ks * 8 + t) * 68 + nt * 8 + g]), b1 = to_tf32(B[(ks * 8 + t + 4) * 68 + nt * 8 + g]);
      mma_tf32_1688(acc[nt], a, b0, b1);
    }
  }
}

__device__ __forceinline__ void blk_store(float* D, const float acc[2][4], float sign, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    D[g * 68 + nt * 8 + 2 * t] = sign * acc[nt][0];
    D[g * 68 + nt * 8 + 2 * t + 1] = sign * acc[nt][1];
    D[(g + 8) * 68 + nt * 8 + 2 * t] = sign * acc[nt][2];
    D[(g + 8) * 68 + nt * 8 + 2 * t + 1] = sign * acc[nt][3];
  }
}

__device__ __forceinline__ float load_any(const void* p, long i, int is_f32) {
  return is_f32 ? static_cast<const float*>(p)[i] : __bfloat162float(static_cast<const bf16*>(p)[i]);
}
// load_any in two halves, for loads issued well ahead of their use: the bits now, the float at the use.
__device__ __forceinline__ std::uint32_t load_bits(const void* p, long i, int is_f32) {
  return is_f32 ? __float_as_uint(static_cast<const float*>(p)[i])
                : static_cast<std::uint32_t>(__bfloat16_as_ushort(static_cast<const bf16*>(p)[i]));
}
__device__ __forceinline__ float bits_to_float(std::uint32_t b, int is_f32) { return __uint_as_float(is_f32 ? b : b << 16); }

// Sum of squares of K / 2 consecutive bf16 (16-byte aligned): half a q / k row, for the l2 norms of
// the preps (two threads per row, one shuffle).
template <int K>
__device__ __forceinline__ float half_row_sumsq(const bf16* src) {
  float ss[2] = {0.f, 0.f};
#pragma unroll
  for (int c = 0; c < K / 2; c += 8) {
    const uint4 u = *reinterpret_cast<const uint4*>(src + c);
    const float2 x0 = unpack_bf16_bits(u.x), x1 = unpack_bf16_bits(u.y), x2 = unpack_bf16_bits(u.z), x3 = unpack_bf16_bits(u.w);
    ss[0] += x0.x * x0.x + x0.y * x0.y + x1.x * x1.x + x1.y * x1.y;
    ss[1] += x2.x * x2.x + x2.y * x2.y + x3.x * x3.x + x3.y * x3.y;
  }
  return ss[0] + ss[1];
}

__device__ __forceinline__ float softplus(float x) { return x > 20.f ? x : log1pf(__expf(x)); }

__device__ __forceinline__ void st_u32(void* p, uint32_t v) { *reinterpret_cast<uint32_t*>(p) = v; }

// The [C][C] workspace tiles (Aqk / Q', T') are stored with unpadded rows of R elements (R * 2 bytes, a
// multiple of 128) and the 16-byte pieces of row r XOR-permuted by r mod 8 (the pattern of TMA's
// 128-byte swizzle: the state kernel's SW128 K-major B operands): element (r, c) lives at r R + swz(r, c).
template <int R>
__device__ __forceinline__ int swz(int r, int c) {
  static_assert(R % 64 == 0, "swz: rows of whole 128-byte lines");
  return r * R + ((((c >> 3) ^ (r & 7))) << 3) + (c & 7);
}
// Element offset of (r, c) in a q e^b / k e^b / k e^(bL-b) workspace tile: K / 64 consecutive SW128
// tiles [C][64] (wgmma's canonical order: 64-column block, then row), one contiguous block per tile.
template <int K>
__device__ __forceinline__ int tile_off(int r, int c) {
  return wgmma::sw128_blocked<kC>(r, c);
}

// The inverse of the chunk's unit lower-triangular I + L (fp32 [C][68] tiles) in 16 x 16 blocks, in
// stages the preps interleave with their own work (both preps run them the same way).
// Warp w < 4, lanes 0-15: diagonal block w of (I + L)^-1 by forward substitution in fp32 (lane c solves
// column c), written to D; D may be L itself (every lane reads the block before any writes).
__device__ __forceinline__ void invert_diagonal_block(const float (*L)[68], float (*D)[68], int warp, int lane) {
  float xs[16];
  const int c = lane & 15, o16 = 16 * warp;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    float acc = (i == c) ? 1.f : 0.f;
#pragma unroll
    for (int j = 0; j < i; ++j) acc -= L[o16 + i][o16 + j] * xs[j];
    xs[i] = acc;
  }
  __syncwarp();  // every lane has read the block
  if (lane < 16) {
#pragma unroll
    for (int i = 0; i < 16; ++i) D[o16 + i][o16 + c] = xs[i];
  }
}
// Every thread of the CTA (warps 0-3 work; three CTA barriers inside): X's strictly lower blocks from its inverted
// diagonal blocks (tf32 mma.sync) in two levels of the 2 x 2 block inverse: (a) X_10 = -X_11 L_10 X_00 and
// X_32 = -X_33 L_32 X_22 (warps 0, 1); (b) Z = L_[23][01] X_[01][01], block (i, j) on warp 2 (i - 2) + j; (c)
// X_[23][01] = -X_[23][23] Z; X's upper blocks hold the scratch. Six dependent 16 x 16 x 16 products on the longest
// path and all four warps busy in (b) and (c). (The previous form: one block diagonal d per round on warps
// d..3, nine on the longest path; the GDN prep on one warpgroup 0.318 -> 0.274 ms at B1_T8192_H96_D128 with this and
// its scalar prefetch, the KDA prep unchanged within noise. Splitting the blocks' n8 halves over eight warps measured
// 1-1.5 % slower: the rounds are bound by dependent shared-memory loads.)
__device__ __forceinline__ void merge_inverse_blocks(const float (*L)[68], float (*X)[68], int warp, int lane) {
  if (warp < 2) {
    const int i = 2 * warp + 1, j = 2 * warp;
    float acc[2][4] = {};
    blk_mma_tf32(acc, &L[16 * i][16 * j], &X[16 * j][16 * j], lane);
    blk_store(&X[16 * j][16 * i], acc, 1.f, lane);  // scratch: the upper block (j, i)
    __syncwarp();
    float acc2[2][4] = {};
    blk_mma_tf32(acc2, &X[16 * i][16 * i], &X[16 * j][16 * i], lane);
    blk_store(&X[16 * i][16 * j], acc2, -1.f, lane);
  }
  __syncthreads();
  const int i = 2 + (warp >> 1), j = warp & 1;
  if (warp < 4) {  // Z_ij = sum_{m = j}^{1} L_im X_mj into the upper block (j, i)
    float acc[2][4] = {};
    for (int m = j; m < 2; ++m) blk_mma_tf32(acc, &L[16 * i][16 * m], &X[16 * m][16 * j], lane);
    blk_store(&X[16 * j][16 * i], acc, 1.f, lane);
  }
  __syncthreads();
  if (warp < 4) {  // X_ij = -sum_{n = 2}^{i} X_in Z_nj
    float acc[2][4] = {};
    for (int n = 2; n <= i; ++n) blk_mma_tf32(acc, &X[16 * i][16 * n], &X[16 * j][16 * n], lane);
    blk_store(&X[16 * i][16 * j], acc, -1.f, lane);
  }
  __syncthreads();
}
// Two consecutive values at element offset off of a [NP][C][C] tile: bf16 (NP = 1) or bf16 hi and lo planes
// (NP = 2, x = hi + lo), 4 bytes per plane.
template <int NP>
__device__ __forceinline__ void st_bf16x2_planes(bf16* tile, int off, float x0, float x1) {
  if constexpr (NP == 2) {
    uint32_t hi, lo;
    pack_bf16_split(x0, x1, hi, lo);
    st_u32(tile + off, hi);
    st_u32(tile + kC * kC + off, lo);
  } else {
    st_u32(tile + off, pack_bf16(x0, x1));
  }
}
// Every thread of the CTA: T' = X diag(beta) (lower incl., zero above) as bf16 hi + lo into the
// swizzled [kTPlanes][C][C] workspace tile Tg. One bf16 rounding of the inverse costs the g = 0 cases more
// than the tolerance allows.
template <int NT = kThreads>
__device__ __forceinline__ void store_t_prime(const float (*X)[68], const float* beta, bf16* Tg, int tid) {
  constexpr int PR = NT / (kC / 2);  // rows per pass (8 with 256 threads)
  const unsigned u = static_cast<unsigned>(tid);
  const int j = static_cast<int>(u % (kC / 2)) * 2, r1 = static_cast<int>(u / (kC / 2));
  const float bj0 = beta[j], bj1 = beta[j + 1];
#pragma unroll
  for (int it = 0; it < kC / PR; ++it) {
    const int r = r1 + it * PR;
    const float2 x = *reinterpret_cast<const float2*>(&X[r][j]);  // j even, rows of 272 bytes: 8-byte aligned
    float tu[2];
    tu[0] = (j <= r) ? x.x * bj0 : 0.f;
    tu[1] = (j + 1 <= r) ? x.y * bj1 : 0.f;
    st_bf16x2_planes<kTPlanes>(Tg, swz<kC>(r, j), tu[0], tu[1]);
  }
}

}  // namespace
}  // namespace lina::detail::cuda
