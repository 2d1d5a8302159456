// Warp-level building blocks shared by the sm_90a kernels: fast exp2, bf16 packing, ldmatrix,
// cp.async and mma.sync (m16n8k16 bf16, m16n8k8 tf32). One definition each, so every kernel's
// numerics (ex2.approx.ftz, round-to-nearest packing, tf32 rna) are the same.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

namespace lina::detail::cuda_util {

// 2^x with the MUFU unit (gates are kept in log2 units so no multiply precedes it).
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<std::uint32_t*>(&v);
}

// Two-term bf16 split: hi = bf16(x), lo = bf16(x - hi) carries ~16 significant bits through two
// bf16 products (A_hi B + A_lo B) where one bf16 rounding of A is too coarse.
__device__ __forceinline__ void pack_bf16_split(float a, float b, std::uint32_t& hi, std::uint32_t& lo) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  const float2 hf = __bfloat1622float2(h);
  hi = *reinterpret_cast<const std::uint32_t*>(&h);
  lo = pack_bf16(a - hf.x, b - hf.y);
}

__device__ __forceinline__ float2 unpack_bf16(std::uint32_t u) {
  __nv_bfloat162 v = *reinterpret_cast<__nv_bfloat162*>(&u);
  return __bfloat1622float2(v);
}

// Eight bf16 (one 16-byte piece) as fp32, in order.
__device__ __forceinline__ void unpack_bf16x8(uint4 u, float (&x)[8]) {
  const std::uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float2 a = unpack_bf16(w[e]);
    x[2 * e] = a.x, x[2 * e + 1] = a.y;
  }
}

// The same values as unpack_bf16 from bit operations (one instruction per element; the generic
// conversion spends a PRMT and a shift on the high half). bf16 -> fp32 is exact either way.
__device__ __forceinline__ float2 unpack_bf16_bits(std::uint32_t u) {
  return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
}

// pack_bf16_split's values, with the hi term widened by unpack_bf16_bits.
__device__ __forceinline__ void pack_bf16_split_bits(float a, float b, std::uint32_t& hi, std::uint32_t& lo) {
  hi = pack_bf16(a, b);
  const float2 hf = unpack_bf16_bits(hi);
  lo = pack_bf16(a - hf.x, b - hf.y);
}

__device__ __forceinline__ float2 load_bf16x2(const __nv_bfloat16* p) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}

__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldsm_x4(std::uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x2(std::uint32_t (&r)[2], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x4_trans(std::uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}
// The same two at a shared-window byte address (for layouts whose addresses are computed as integers,
// e.g. XOR-swizzled tiles).
__device__ __forceinline__ void ldsm_x4_at(std::uint32_t (&r)[4], std::uint32_t saddr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(saddr));
}
__device__ __forceinline__ void ldsm_x2_at(std::uint32_t (&r)[2], std::uint32_t saddr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(saddr));
}
// 8-byte shared load at a shared-window byte address (volatile: never merged across barriers).
__device__ __forceinline__ float2 lds_f32x2_at(std::uint32_t saddr) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0,%1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(saddr));
  return v;
}
__device__ __forceinline__ void ldsm_x4_trans_at(std::uint32_t (&r)[4], std::uint32_t saddr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(saddr));
}

// 16-byte async copy; valid = false zero-fills (src-size 0) for rows past a sequence's end.
__device__ __forceinline__ void cp_async16(void* smem_dst, const void* gmem_src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem_dst)), "l"(gmem_src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// d += a (16x16 row) * b (16x8 col), bf16 inputs, fp32 accumulators.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// d += (a_hi + a_lo)(b_hi + b_lo) without the lo x lo term: two-term bf16 operands (pack_bf16_split),
// ~16 significant bits each, where a single bf16 rounding of either side costs too much accuracy.
__device__ __forceinline__ void mma_bf16_16816_split(float (&d)[4], const std::uint32_t (&ah)[4], const std::uint32_t (&al)[4],
                                                     std::uint32_t bh0, std::uint32_t bh1, std::uint32_t bl0,
                                                     std::uint32_t bl1) {
  mma_bf16_16816(d, al, bh0, bh1);
  mma_bf16_16816(d, ah, bl0, bl1);
  mma_bf16_16816(d, ah, bh0, bh1);
}

// ldmatrix.x4 addressing for mma.sync m16n8k16 fragments (lane = threadIdx.x % 32, tiles bf16, ld in
// elements). a: A fragment (rows m0.., k0..) of a row-major [m][k] tile. a_trans: A fragment of X^T from a
// row-major [k][m] tile X. b_nk: B fragments of the n8 tiles n0 and n0+8 from a [n][k] tile (r0,r1 tile n0;
// r2,r3 tile n0+8). b_kn: the same from a row-major [k][n] tile.
__device__ __forceinline__ void ldsm_frag_a(std::uint32_t (&r)[4], const __nv_bfloat16* base, int ld, int m0, int k0, int lane) {
  const int mi = lane >> 3, i = lane & 7;
  ldsm_x4(r, base + (m0 + i + (mi & 1) * 8) * ld + k0 + (mi >> 1) * 8);
}
__device__ __forceinline__ void ldsm_frag_a_trans(std::uint32_t (&r)[4], const __nv_bfloat16* base, int ld, int m0, int k0, int lane) {
  const int mi = lane >> 3, i = lane & 7;
  ldsm_x4_trans(r, base + (k0 + i + (mi >> 1) * 8) * ld + m0 + (mi & 1) * 8);
}
__device__ __forceinline__ void ldsm_frag_b_nk(std::uint32_t (&r)[4], const __nv_bfloat16* base, int ld, int n0, int k0, int lane) {
  const int mi = lane >> 3, i = lane & 7;
  ldsm_x4(r, base + (n0 + i + (mi >> 1) * 8) * ld + k0 + (mi & 1) * 8);
}
__device__ __forceinline__ void ldsm_frag_b_kn(std::uint32_t (&r)[4], const __nv_bfloat16* base, int ld, int k0, int n0, int lane) {
  const int mi = lane >> 3, i = lane & 7;
  ldsm_x4_trans(r, base + (k0 + i + (mi & 1) * 8) * ld + n0 + (mi >> 1) * 8);
}

__device__ __forceinline__ std::uint32_t to_tf32(float x) {
  std::uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

// d += a (16x8 row) * b (8x8 col), tf32 inputs, fp32 accumulators.
__device__ __forceinline__ void mma_tf32_1688(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace lina::detail::cuda_util
