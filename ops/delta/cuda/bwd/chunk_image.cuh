// The state passes' operand tiles of one (chunk, value head) as chunk_prep_v2 writes them to HBM
// (ChunkImage: SW128 bf16 tiles, hi + lo or one plane) and their element stores.
// Part of the backward's one translation unit, chunk_delta_bwd.cu (whose anonymous namespace keeps these
// kernels and helpers internal to it); includes what it uses.
#pragma once
#include <cstdint>

#include "ops/delta/cuda/bwd/params.cuh"
#include "ops/delta/cuda/bwd/tile_ops.cuh"
#include "ops/common/cuda/mma_primitives.cuh"
#include "ops/common/cuda/wgmma_sm90.cuh"

namespace lina::detail::cuda {
namespace {

// A [64][W] wgmma operand (W = K or 64) as bf16 hi + lo SW128 tiles (wgmma_sm90.cuh format,
// sw128_blocked<64>): W / 64 tiles of [64 rows][64 cols] per plane.
template <int W>
struct SplitTile {
  bf16 hi[kC * W];
  bf16 lo[kC * W];
};
// The same tile as one bf16 plane (operands whose lo term the gradients do not need: docs/kernels/
// chunk_delta_bwd.md, precision budget).
template <int W>
struct PlainTile {
  bf16 x[kC * W];
};
static_assert(sizeof(PlainTile<64>) % 1024 == 0 && sizeof(PlainTile<128>) % 1024 == 0 && sizeof(PlainTile<256>) % 1024 == 0,
              "SW128 tiles 1 KB aligned");

// The state passes' operands of one (chunk, value head) as chunk_prep_v2 writes them to HBM: the exact
// shared-memory images the wgmma state passes read, so that their producers are bulk copies (no fp32
// loads, gate exps or hi / lo splits in the sequential passes). Every row of every tile is written,
// padded rows (past the sequence end) as zeros. B copies {w, kg}, C copies {kg, qg, A} and then w: the
// member order is their shared-memory order.
template <int K>
struct ChunkImage {
  PlainTile<K> w;    // w = Tinv (k e^b beta) [tok][ch], one bf16 plane
  SplitTile<K> kg;   // k e^(bL - b) [tok][ch]
  PlainTile<K> qg;   // scale q e^b [tok][ch], one bf16 plane
  SplitTile<kC> A;   // Aqk [r][j] (scale applied; zero above the diagonal)
  float el[K];       // e^bL
};
static_assert(sizeof(ChunkImage<64>) % 16 == 0 && sizeof(ChunkImage<128>) % 16 == 0 && sizeof(ChunkImage<256>) % 16 == 0,
              "bulk copies need 16-byte sizes");

// Columns c, c + 1 (c even) of row r of a SplitTile as bf16 hi + lo: 4 bytes per plane.
template <int W>
__device__ __forceinline__ void tile_store2(SplitTile<W>& t, int r, int c, float x0, float x1) {
  std::uint32_t hi, lo;
  cuda_util::pack_bf16_split(x0, x1, hi, lo);
  const int o = cuda_util::wgmma::sw128_blocked<kC>(r, c);
  *reinterpret_cast<std::uint32_t*>(t.hi + o) = hi;
  *reinterpret_cast<std::uint32_t*>(t.lo + o) = lo;
}
template <int W>
__device__ __forceinline__ void tile_store2(PlainTile<W>& t, int r, int c, float x0, float x1) {
  *reinterpret_cast<std::uint32_t*>(t.x + cuda_util::wgmma::sw128_blocked<kC>(r, c)) = cuda_util::pack_bf16(x0, x1);
}
// Four consecutive columns at SW128 element offset o.
template <int W>
__device__ __forceinline__ void tile_store4(SplitTile<W>& t, int o, float4 v) {
  st_split4(t.hi, t.lo, o, v);
}
template <int W>
__device__ __forceinline__ void tile_store4(PlainTile<W>& t, int o, float4 v) {
  *reinterpret_cast<uint2*>(t.x + o) = make_uint2(cuda_util::pack_bf16(v.x, v.y), cuda_util::pack_bf16(v.z, v.w));
}

template <int K>
__device__ __forceinline__ ChunkImage<K>& chunk_image(const Params& p, int gidx, int hv) {
  return reinterpret_cast<ChunkImage<K>*>(p.img)[static_cast<i64>(gidx) * p.HV + hv];
}

}  // namespace
}  // namespace lina::detail::cuda
