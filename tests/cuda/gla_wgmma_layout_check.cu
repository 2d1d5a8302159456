// Host-only cross-check of the K = 128 chunk_gla forward's wgmma layouts (ops/gla/cuda/gla_wgmma_glue.cuh)
// against CuTe's own layout algebra: the swizzled element offsets of the qe / ke, v and A tiles (swz,
// swz64), the start offsets of the k16 slices, the LBO / SBO / layout type that make_gmma_desc derives for
// them (the values desc_k_sw128 / desc_mn_sw128 hard-code), and the accumulator / RS A register fragments
// that state_a_frags and the o store assume. No GPU needed: target lina_gla_wgmma_layout_check, ctest
// gla_wgmma_layout_check (built with the CUDA backend).
// (CuTe prints "cast_smem_ptr_to_uint not supported" on the host for the descriptor start address; the
// start offsets are compared through the slice pointers instead.) Passes (0 mismatches) on this branch; a changed SBO is caught (tried).
#include <cstdio>
#include <cstdint>
#include <cute/tensor.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>

#include "ops/gla/cuda/gla_wgmma_glue.cuh"
using namespace cute;
namespace G = cute::SM90::GMMA;
using lina::detail::gla_wg::swz;
using lina::detail::gla_wg::swz64;
alignas(8192) static cute::bfloat16_t buf[64 * 128 * 4];
int bad = 0;
void expect(const char* what, long got, long want) {
  if (got != want) { ++bad; if (bad < 20) printf("MISMATCH %s: cute %ld mine %ld\n", what, got, want); }
}
// The glue's descriptor (start address aside) must equal CuTe's field for field.
void same_desc(const char* what, cute::GmmaDescriptor cute_d, std::uint64_t mine) {
  cute::GmmaDescriptor m(mine);
  expect(what, cute_d.bitfield.leading_byte_offset_, m.bitfield.leading_byte_offset_);
  expect(what, cute_d.bitfield.stride_byte_offset_, m.bitfield.stride_byte_offset_);
  expect(what, cute_d.bitfield.base_offset_, m.bitfield.base_offset_);
  expect(what, cute_d.bitfield.layout_type_, m.bitfield.layout_type_);
}
template <class Desc> void show(const char* w, Desc d) {
  printf("%-34s start %5u lbo %4u sbo %4u base %u type %u\n", w, unsigned(d.bitfield.start_address_), unsigned(d.bitfield.leading_byte_offset_),
         unsigned(d.bitfield.stride_byte_offset_), unsigned(d.bitfield.base_offset_), unsigned(d.bitfield.layout_type_));
}
int main() {
  const uintptr_t base = reinterpret_cast<uintptr_t>(buf);
  // 1. qe (B of o, K-major): (N = 64 tok, K = 128 ch)
  {
    auto L = tile_to_shape(G::Layout_K_SW128_Atom<bfloat16_t>{}, Shape<_64, _128>{});
    Tensor t = make_tensor(make_smem_ptr(buf), L);
    for (int n = 0; n < 64; ++n)
      for (int k = 0; k < 128; ++k)
        expect("qe offset", long(reinterpret_cast<uintptr_t>(&t(n, k)) - base), long(swz(n, k)));
    for (int ks = 0; ks < 8; ++ks) {
      Tensor s = local_tile(t, Shape<_64, _16>{}, make_coord(0, ks));
      auto d = G::make_gmma_desc<G::Major::K>(s);
      if (ks < 2 || ks == 4) show("qe K-major ks", d);
      uint32_t addr = uint32_t(base) + (ks >> 2) * 8192 + (ks & 3) * 32;
      expect("qe start", long(reinterpret_cast<uintptr_t>(raw_pointer_cast(s.data())) - base), long(addr - uint32_t(base)));
      same_desc("qe desc (desc_k_sw128)", d, lina::detail::gla_wg::desc_k_sw128(addr));
      expect("qe lbo", d.bitfield.leading_byte_offset_, 1);
      expect("qe sbo", d.bitfield.stride_byte_offset_, 64);
      expect("qe type", d.bitfield.layout_type_, 1);
    }
  }
  // 2. A hi (B of the intra term, K-major): (N = 64 tok, K = 64 tok')
  {
    auto L = tile_to_shape(G::Layout_K_SW128_Atom<bfloat16_t>{}, Shape<_64, _64>{});
    Tensor t = make_tensor(make_smem_ptr(buf), L);
    for (int n = 0; n < 64; ++n)
      for (int k = 0; k < 64; ++k) expect("A offset", long(reinterpret_cast<uintptr_t>(&t(n, k)) - base), long(swz64(n, k)));
    for (int kk = 0; kk < 4; ++kk) {
      Tensor s = local_tile(t, Shape<_64, _16>{}, make_coord(0, kk));
      auto d = G::make_gmma_desc<G::Major::K>(s);
      expect("A start", long(reinterpret_cast<uintptr_t>(raw_pointer_cast(s.data())) - base), kk * 32);
      expect("A sbo", d.bitfield.stride_byte_offset_, 64);
      same_desc("A desc (desc_k_sw128)", d, lina::detail::gla_wg::desc_k_sw128(kk * 32));
    }
  }
  // 3. v^T (A operand, MN-major): (M = 64 V, K = 64 tok) = the v block
  {
    auto L = tile_to_shape(G::Layout_MN_SW128_Atom<bfloat16_t>{}, Shape<_64, _64>{});
    Tensor t = make_tensor(make_smem_ptr(buf), L);
    for (int m = 0; m < 64; ++m)
      for (int k = 0; k < 64; ++k) expect("v offset", long(reinterpret_cast<uintptr_t>(&t(m, k)) - base), long(swz64(k, m)));
    for (int kk = 0; kk < 4; ++kk) {
      Tensor s = local_tile(t, Shape<_64, _16>{}, make_coord(0, kk));
      auto d = G::make_gmma_desc<G::Major::MN>(s);
      if (kk < 2) show("v^T MN-major kk", d);
      expect("v start", long(reinterpret_cast<uintptr_t>(raw_pointer_cast(s.data())) - base), kk * 2048);
      expect("v sbo", d.bitfield.stride_byte_offset_, 64);
      cute::GmmaDescriptor mine(lina::detail::gla_wg::desc_mn_sw128(kk * 2048, 8192));
      expect("v desc sbo (desc_mn_sw128)", d.bitfield.stride_byte_offset_, mine.bitfield.stride_byte_offset_);
      expect("v desc type (desc_mn_sw128)", d.bitfield.layout_type_, mine.bitfield.layout_type_);  // LBO unused at M = 64
    }
  }
  // 4. ke (B of the state update, MN-major): (N = 128 ch, K = 64 tok), two 64-channel blocks 8192 B apart
  {
    auto L = tile_to_shape(G::Layout_MN_SW128_Atom<bfloat16_t>{}, Shape<_128, _64>{}, Step<_2, _1>{});
    Tensor t = make_tensor(make_smem_ptr(buf), L);
    for (int n = 0; n < 128; ++n)
      for (int k = 0; k < 64; ++k) expect("ke offset", long(reinterpret_cast<uintptr_t>(&t(n, k)) - base), long(swz(k, n)));
    for (int ks = 0; ks < 4; ++ks) {
      Tensor s = local_tile(t, Shape<_128, _16>{}, make_coord(0, ks));
      auto d = G::make_gmma_desc<G::Major::MN>(s);
      if (ks < 2) show("ke MN-major ks", d);
      expect("ke start", long(reinterpret_cast<uintptr_t>(raw_pointer_cast(s.data())) - base), ks * 2048);
      same_desc("ke desc (desc_mn_sw128)", d, lina::detail::gla_wg::desc_mn_sw128(ks * 2048, 8192));
      expect("ke lbo", d.bitfield.leading_byte_offset_, 8192 >> 4);
      expect("ke sbo", d.bitfield.stride_byte_offset_, 64);
    }
  }
  // 5. register fragments: accumulator m64n128 and RS A m64k16 (thread t, value i) -> (row, col)
  {
    using CL = G::CLayout_64xN<128>;
    for (int t = 0; t < 128; ++t)
      for (int i = 0; i < 64; ++i) {
        const int idx = CL{}(t, i), row = idx % 64, col = idx / 64;
        const int w = t / 32, g8 = (t % 32) / 4, t4 = t % 4;
        expect("C row", row, 16 * w + g8 + 8 * ((i >> 1) & 1));
        expect("C col", col, 8 * (i >> 2) + 2 * t4 + (i & 1));
      }
    using AL = G::ALayout_64x16;
    for (int t = 0; t < 128; ++t)
      for (int i = 0; i < 8; ++i) {  // value i = bf16 number i of the thread's 4 registers (register i / 2)
        const int idx = AL{}(t, i), row = idx % 64, col = idx / 64;
        const int w = t / 32, g8 = (t % 32) / 4, t4 = t % 4, j = i / 2;
        expect("A row", row, 16 * w + g8 + 8 * (j & 1));
        expect("A col", col, 8 * (j >> 1) + 2 * t4 + (i & 1));
      }
  }
  printf("%s: %d mismatches\n", bad ? "FAIL" : "OK", bad);
  return bad != 0;
}
