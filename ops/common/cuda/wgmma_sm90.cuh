// Hopper warpgroup MMA (wgmma) glue on top of CuTe's GMMA atoms (cute/arch/mma_sm90_gmma.hpp) and
// descriptors (cute/arch/mma_sm90_desc.hpp): the 128-byte-swizzled [rows][64 bf16] tile that every
// operand here lives in, its shared-memory descriptor, and call wrappers that expand a float
// accumulator array into the atoms' argument lists.
//
// Tile format ("SW128 tile"): rows of 64 bf16 = 128 bytes, row r at byte 128 r, its eight 16-byte
// pieces permuted by piece ^ (r % 8) (CuTe's Swizzle<3,4,3> on byte addresses: bits [4,7) ^= bits
// [7,10)); 8 rows = one 1024-byte swizzle atom, which must start 1024-byte aligned. Wider matrices are
// stored as consecutive such tiles of 64 columns each. One format serves both majors:
//   K-major operand (K along the row, the "row" is M or N): descriptor SBO = 1024 (next 8 rows), LBO
//     unused (1); a k16 step inside the 64-column tile advances the start address by 32 bytes.
//   MN-major operand (M or N along the row, the "row" is K): SBO = 1024 (next 8 K rows), LBO = byte
//     stride of the next 64-column tile along M / N; a k16 step advances by 16 rows = 2048 bytes.
// (CuTe, mma_traits_sm90_gmma.hpp make_gmma_desc: B128 K-major ((8,n),2):((8,SBO),1), MN-major
// ((8,n),(8,k)):((1,LBO),(8,SBO)) in 16-byte units.)
//
// Register fragments (CuTe CLayout_64xN / ALayout_64x16): in warp w of the warpgroup, lane l
// (g8 = l / 4, t4 = l % 4), accumulator d[4 j + e] of an m64nN wgmma is element
// (row 16 w + g8 + 8 (e >= 2), column 8 j + 2 t4 + (e & 1)); the bf16 A fragment of an m64k16 RS
// wgmma is a[i] = pack(x(row 16 w + g8 + 8 (i & 1), k 2 t4 + 8 (i >> 1) + {0, 1})). Hence columns
// 16 s .. 16 s + 15 of an fp32 accumulator, packed pairwise as (d[8s], d[8s+1]), (d[8s+2], d[8s+3]),
// (d[8s+4], d[8s+5]), (d[8s+6], d[8s+7]), are the A fragment of k-step s of a product with that
// accumulator as the left operand.
#pragma once
#include <cstdint>
#include <type_traits>
#include <utility>

#include <cute/arch/mma_sm90_desc.hpp>
#include <cute/arch/mma_sm90_gmma.hpp>

namespace lina::detail::cuda_util::wgmma {

using Major = cute::SM90::GMMA::Major;
using ScaleOut = cute::SM90::GMMA::ScaleOut;

// Element offset of (row, col < 64) inside an SW128 tile.
__host__ __device__ __forceinline__ int sw128(int row, int col) { return row * 64 + ((((col >> 3) ^ row) & 7) << 3) + (col & 7); }
// Byte offset of the 16-byte piece c8 (columns 8 c8 ..) of row `row` inside an SW128 tile.
__device__ __forceinline__ std::uint32_t sw128_piece(int row, int c8) {
  return static_cast<std::uint32_t>(row * 128 + (((c8 ^ row) & 7) << 4));
}

// Descriptor of an SW128 operand starting at shared-window byte address `saddr` (the atom base plus a
// k-step offset; the atom base 1024-byte aligned, so base_offset = 0). lbo / sbo in bytes.
__host__ __device__ __forceinline__ std::uint64_t desc_sw128(std::uint32_t saddr, std::uint32_t lbo, std::uint32_t sbo) {
  cute::GmmaDescriptor d;
  d.bitfield.start_address_ = static_cast<std::uint16_t>(saddr >> 4);
  d.bitfield.leading_byte_offset_ = static_cast<std::uint16_t>(lbo >> 4);
  d.bitfield.stride_byte_offset_ = static_cast<std::uint16_t>(sbo >> 4);
  d.bitfield.base_offset_ = 0;
  d.bitfield.layout_type_ = static_cast<std::uint8_t>(cute::SM90::GMMA::LayoutType::B128);
  return d.desc_;
}
// K-major and MN-major descriptors of the tile format above.
__host__ __device__ __forceinline__ std::uint64_t desc_k(std::uint32_t saddr) { return desc_sw128(saddr, 16, 1024); }
__host__ __device__ __forceinline__ std::uint64_t desc_mn(std::uint32_t saddr, std::uint32_t tile_stride) {
  return desc_sw128(saddr, tile_stride, 1024);
}

// Keeps the compiler from moving accesses of wgmma accumulators / A registers across the async region.
template <int N>
__device__ __forceinline__ void fence_regs(float* d) {
#pragma unroll
  for (int i = 0; i < N; ++i) cute::warpgroup_fence_operand(d[i]);
}
template <int N>
__device__ __forceinline__ void fence_regs(std::uint32_t* d) {
#pragma unroll
  for (int i = 0; i < N; ++i) cute::warpgroup_fence_operand(d[i]);
}

// Orders this thread's generic-proxy shared-memory writes (st.shared, cp.async) before later
// async-proxy reads (wgmma operands); a barrier must follow before other threads' wgmma.
__device__ __forceinline__ void fence_proxy_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// D (+)= A(smem) B(smem): Op is a CuTe SS atom with C registers float[N]. The accumulator is taken as an
// array reference (a pointer parameter gave one kernel, chunk_gla_fwd_wg128, an 8-byte stack frame).
template <class Op, int N, std::size_t... I>
__device__ __forceinline__ void ss_impl(std::uint64_t da, std::uint64_t db, float (&d)[N], ScaleOut s, std::index_sequence<I...>) {
  Op::fma(da, db, d[I]..., s);
}
template <class Op, int N>
__device__ __forceinline__ void mma_ss(std::uint64_t da, std::uint64_t db, float (&d)[N], ScaleOut s = ScaleOut::One) {
  ss_impl<Op, N>(da, db, d, s, std::make_index_sequence<N>{});
}
// D (+)= A(registers, 4 x bf16x2) B(smem): Op is a CuTe RS atom.
template <class Op, int N, std::size_t... I>
__device__ __forceinline__ void rs_impl(const std::uint32_t (&a)[4], std::uint64_t db, float (&d)[N], ScaleOut s,
                                        std::index_sequence<I...>) {
  Op::fma(a[0], a[1], a[2], a[3], db, d[I]..., s);
}
template <class Op, int N>
__device__ __forceinline__ void mma_rs(const std::uint32_t (&a)[4], std::uint64_t db, float (&d)[N], ScaleOut s = ScaleOut::One) {
  rs_impl<Op, N>(a, db, d, s, std::make_index_sequence<N>{});
}
// ScaleOut from "accumulate into d" (false: d = A B).
__device__ __forceinline__ ScaleOut scale_out(bool acc) { return acc ? ScaleOut::One : ScaleOut::Zero; }

// The shapes used (bf16 x bf16 -> f32).
template <Major A, Major B>
using M64N64_SS = cute::SM90::GMMA::MMA_64x64x16_F32BF16BF16_SS<A, B>;
template <Major A, Major B>
using M64N16_SS = cute::SM90::GMMA::MMA_64x16x16_F32BF16BF16_SS<A, B>;
template <Major A, Major B>
using M64N128_SS = cute::SM90::GMMA::MMA_64x128x16_F32BF16BF16_SS<A, B>;
// m64nN SS atom by N (64 or 128).
template <int N, Major A, Major B>
using M64_SS = std::conditional_t<N == 64, M64N64_SS<A, B>, M64N128_SS<A, B>>;
template <Major B>
using M64N64_RS = cute::SM90::GMMA::MMA_64x64x16_F32BF16BF16_RS<Major::K, B>;
template <Major B>
using M64N128_RS = cute::SM90::GMMA::MMA_64x128x16_F32BF16BF16_RS<Major::K, B>;
template <Major B>
using M64N32_RS = cute::SM90::GMMA::MMA_64x32x16_F32BF16BF16_RS<Major::K, B>;
// m64nN RS atom by N (32, 64 or 128), for kernels templated on a head dimension.
template <int N, Major B>
using M64_RS = std::conditional_t<N == 32, M64N32_RS<B>, std::conditional_t<N == 64, M64N64_RS<B>, M64N128_RS<B>>>;

// Element offset of (row, col) in a [rows][W] bf16 matrix stored as W / 64 consecutive SW128 tiles of
// [rows][64] (the canonical wgmma order: column block, then row), `rows` rows per tile.
template <int Rows>
__host__ __device__ __forceinline__ int sw128_blocked(int row, int col) {
  return (col >> 6) * (Rows * 64) + row * 64 + ((((col >> 3) ^ row) & 7) << 3) + (col & 7);
}

}  // namespace lina::detail::cuda_util::wgmma
