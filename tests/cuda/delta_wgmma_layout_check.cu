// Host-only cross-check of the delta forward's wgmma state kernel layouts (delta_thin_state_kernel in
// ops/delta/cuda/fwd/state.cuh, same conventions as the removed delta_state_wg_kernel;
// helpers in ops/common/cuda/wgmma_sm90.cuh) against CuTe's layout
// algebra: the prep's `blocked` tile offsets (wgmma::sw128_blocked) of w / q e^b (B of batch 1, K-major,
// N = 64 tokens, K = K channels) and k e^(bL-b) (B of the state batch, MN-major, N = KH channels of a
// warpgroup, K = 64 tokens) for K = 64 / 128 / 256 (K = 128 with one or two warpgroups), the k16 slice starts and the descriptor fields
// (desc_k / desc_mn), Aqk rows NO kh .. as the K-major B of the o batch (N = 64 or 32), and the
// accumulator / RS A register fragments for N = 32 / 64 / 128. No GPU needed: target
// lina_delta_wgmma_layout_check, ctest delta_wgmma_layout_check (built with the CUDA backend).
#include <cstdint>
#include <cstdio>
#include <type_traits>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/tensor.hpp>

#include "ops/common/cuda/wgmma_sm90.cuh"
using namespace cute;
namespace G = cute::SM90::GMMA;
namespace W = lina::detail::cuda_util::wgmma;
alignas(8192) static cute::bfloat16_t buf[64 * 256 * 2];
int bad = 0;
void expect(const char* what, long got, long want) {
  if (got != want) {
    ++bad;
    if (bad < 20) printf("MISMATCH %s: cute %ld mine %ld\n", what, got, want);
  }
}
void same_desc(const char* what, cute::GmmaDescriptor c, std::uint64_t mine, bool lbo = true) {
  cute::GmmaDescriptor m(mine);
  if (lbo) expect(what, c.bitfield.leading_byte_offset_, m.bitfield.leading_byte_offset_);
  expect(what, c.bitfield.stride_byte_offset_, m.bitfield.stride_byte_offset_);
  expect(what, c.bitfield.base_offset_, m.bitfield.base_offset_);
  expect(what, c.bitfield.layout_type_, m.bitfield.layout_type_);
}
const uintptr_t base = reinterpret_cast<uintptr_t>(buf);
template <class T>
long off(T* p) { return long(reinterpret_cast<uintptr_t>(p) - base); }

template <int K, int NWG>
void check_k() {
  constexpr int KH = K / NWG;
  // w / q e^b: B of batch 1, (N = 64 tokens, K = K channels), K-major; warpgroup kh reads channels KH kh ..
  {
    auto L = tile_to_shape(G::Layout_K_SW128_Atom<bfloat16_t>{}, Shape<_64, Int<K>>{});
    Tensor t = make_tensor(make_smem_ptr(buf), L);
    for (int n = 0; n < 64; ++n)
      for (int k = 0; k < K; ++k) expect("w offset", off(&t(n, k)), 2L * W::sw128_blocked<64>(n, k));
    for (int kh = 0; kh < NWG; ++kh)
      for (int ks = 0; ks < KH / 16; ++ks) {
        Tensor s = local_tile(t, Shape<_64, _16>{}, make_coord(0, KH / 16 * kh + ks));
        const std::uint32_t a = kh * (KH / 64) * 8192 + (ks >> 2) * 8192 + (ks & 3) * 32;  // the kernel's a_w + ...
        expect("w start", off(raw_pointer_cast(s.data())), a);
        same_desc("w desc", G::make_gmma_desc<G::Major::K>(s), W::desc_k(a), false);
      }
  }
  // k e^(bL-b): B of the state batch, (N = KH channels, K = 64 tokens), MN-major, from channel KH kh
  for (int kh = 0; kh < NWG; ++kh) {
    auto L = tile_to_shape(G::Layout_MN_SW128_Atom<bfloat16_t>{}, Shape<Int<KH>, _64>{}, Step<_2, _1>{});
    const int o0 = kh * (KH / 64) * 8192 / 2;  // elements
    Tensor t = make_tensor(make_smem_ptr(buf + o0), L);
    for (int n = 0; n < KH; ++n)
      for (int k = 0; k < 64; ++k) expect("kg offset", off(&t(n, k)), 2L * W::sw128_blocked<64>(k, KH * kh + n));
    for (int ks = 0; ks < 4; ++ks) {
      Tensor s = local_tile(t, Shape<Int<KH>, _16>{}, make_coord(0, ks));
      const std::uint32_t a = 2 * o0 + ks * 2048;
      expect("kg start", off(raw_pointer_cast(s.data())), a);
      same_desc("kg desc", G::make_gmma_desc<G::Major::MN>(s), W::desc_mn(a, 8192), KH > 64);  // LBO unused at N = 64
    }
  }
}

template <int NO>
void check_a() {  // Aqk rows NO kh .. (N = NO tokens r, K = 64 tokens j), K-major, inside the [64][64] tile
  auto L = tile_to_shape(G::Layout_K_SW128_Atom<bfloat16_t>{}, Shape<_64, _64>{});
  Tensor t = make_tensor(make_smem_ptr(buf), L);
  for (int kh = 0; kh < 64 / NO; ++kh)
    for (int ks = 0; ks < 4; ++ks) {
      Tensor s = local_tile(t, Shape<Int<NO>, _16>{}, make_coord(kh, ks));
      const std::uint32_t a = kh * NO * 128 + ks * 32;
      expect("Aqk start", off(raw_pointer_cast(s.data())), a);
      same_desc("Aqk desc", G::make_gmma_desc<G::Major::K>(s), W::desc_k(a), false);
    }
}

// Backward state pass C (delta_bwd_state_wg.cuh): dO [tok][v] as the MN-major A of the SS products
// dO^T Aqk and dO^T qg (M = 64 values, K = 64 tokens), and Aqk [r][j] as the MN-major B of dO^T Aqk
// (N = 64 tokens j, K = 64 tokens r): both one SW128 [64][64] tile written by the producer at
// sw128_blocked<64>(row = token, col), k-step = 16 rows = 2048 bytes, desc_mn (LBO unused at 64).
// The other operands of both backward passes have the forward's shapes (check_k<K, 1>): w (pass B) and
// kg (pass C, B of D^T kg^T) K-major with N = 64 tokens; kg (pass B), qg and -w (pass C) MN-major with
// N = K channels.
void check_mn64() {
  auto L = tile_to_shape(G::Layout_MN_SW128_Atom<bfloat16_t>{}, Shape<_64, _64>{});
  Tensor t = make_tensor(make_smem_ptr(buf), L);
  for (int m = 0; m < 64; ++m)
    for (int k = 0; k < 64; ++k) expect("dO / Aqk offset", off(&t(m, k)), 2L * W::sw128_blocked<64>(k, m));
  for (int ks = 0; ks < 4; ++ks) {
    Tensor s = local_tile(t, Shape<_64, _16>{}, make_coord(0, ks));
    const std::uint32_t a = ks * 2048;
    expect("dO / Aqk start", off(raw_pointer_cast(s.data())), a);
    same_desc("dO / Aqk desc", G::make_gmma_desc<G::Major::MN>(s), W::desc_mn(a, 8192), false);
  }
  // the atoms: A MN-major is allowed for bf16 SS (tnspA), and M64_SS picks the N of the state
  static_assert(std::is_same_v<W::M64_SS<64, G::Major::MN, G::Major::MN>, G::MMA_64x64x16_F32BF16BF16_SS<G::Major::MN, G::Major::MN>>);
  static_assert(std::is_same_v<W::M64_SS<128, G::Major::MN, G::Major::MN>, G::MMA_64x128x16_F32BF16BF16_SS<G::Major::MN, G::Major::MN>>);
}

template <int N>
void check_frag() {  // accumulator m64nN: value i of thread t -> (row 16 w + g8 + 8 (i >= 2 in its 4), col 8 (i / 4) + 2 t4 + (i & 1))
  using CL = G::CLayout_64xN<N>;
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < N / 2; ++i) {
      const int idx = CL{}(t, i), row = idx % 64, col = idx / 64;
      const int w = t / 32, g8 = (t % 32) / 4, t4 = t % 4;
      expect("C row", row, 16 * w + g8 + ((i & 2) << 2));
      expect("C col", col, 8 * (i >> 2) + 2 * t4 + (i & 1));
    }
}

int main() {
  check_k<64, 1>();
  check_k<128, 1>();
  check_k<128, 2>();  // K = 128 on two warpgroups (the removed wg2 variant; the K = 256 structure)
  check_k<256, 2>();
  check_mn64();
  check_a<64>();
  check_a<32>();
  check_frag<32>();
  check_frag<64>();
  check_frag<128>();
  using AL = G::ALayout_64x16;  // RS A: bf16 number i (register i / 2) of thread t
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < 8; ++i) {
      const int idx = AL{}(t, i), row = idx % 64, col = idx / 64, j = i / 2;
      expect("A row", row, 16 * (t / 32) + (t % 32) / 4 + 8 * (j & 1));
      expect("A col", col, 8 * (j >> 1) + 2 * (t % 4) + (i & 1));
    }
  printf("%s: %d mismatches\n", bad ? "FAIL" : "OK", bad);
  return bad != 0;
}
