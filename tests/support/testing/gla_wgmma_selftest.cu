// See gla_wgmma_selftest.h. One warpgroup runs state_a_frags + issue_o_state (RS, B = K-major tile),
// issue_o_intra (SS, A = MN-major v block, B = K-major A hi / lo), issue_a (SS, both K-major) and
// issue_state (SS, A = MN-major, B = MN-major two-block tile) exactly as chunk_gla_fwd_wg128 calls them, on tiles written through the
// same swizzle function. Inputs are multiples of 1/8 (A lo: 1/1024) in [-1, 1], scales powers of two, so
// every product and sum is exact in fp32 and the comparison is exact.
#include "tests/support/testing/gla_wgmma_selftest.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "ops/common/cuda/mma_primitives.cuh"
#include "ops/gla/cuda/gla_wgmma_glue.cuh"

namespace lina::detail::cuda {
namespace {

constexpr int kT = 64, kCh = 128, kV = 128;

// X [64 tok][128 ch] (qe, then ke), Vt [64 tok][128 V] (block 1 = this warpgroup's 64 columns), Ahi, Alo
// [64][64], Hf [64 v][128 ch] fp32 (the state accumulator, v = rows of block 1), re [128] scales.
// out: O1 [64 v][64 tok] (o from the state), O2 [64 v][64 tok] (intra), O3 [64 v][128 ch] (state update),
// O4 [64 tok][64 tok'] = X @ Vt^T (the producers' A of the variant wg128: both operands K-major).
__global__ void __launch_bounds__(128) wgmma_selftest_kernel(const float* X, const float* Vt, const float* Ahi, const float* Alo,
                                                              const float* Hf, const float* re, float* O1, float* O2, float* O3,
                                                              float* O4) {
  using namespace gla_wg;
  extern __shared__ __align__(16) unsigned char raw[];
  const std::uint32_t raw_s = cuda_util::smem_u32(raw);
  unsigned char* sm = raw + (((raw_s + 1023u) & ~1023u) - raw_s);
  unsigned char *sx = sm, *sv = sm + 16384, *sah = sm + 32768, *sal = sm + 40960;
  float* sre = reinterpret_cast<float*>(sm + 49152);
  const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
  for (int i = tid; i < kT * kCh; i += 128) {
    const int r = i / kCh, c = i % kCh;
    *reinterpret_cast<__nv_bfloat16*>(sx + swz(r, c)) = __float2bfloat16_rn(X[i]);
    *reinterpret_cast<__nv_bfloat16*>(sv + swz(r, c)) = __float2bfloat16_rn(Vt[i]);
  }
  for (int i = tid; i < kT * kT; i += 128) {
    const int r = i / kT, c = i % kT;
    *reinterpret_cast<__nv_bfloat16*>(sah + swz64(r, c)) = __float2bfloat16_rn(Ahi[i]);
    *reinterpret_cast<__nv_bfloat16*>(sal + swz64(r, c)) = __float2bfloat16_rn(Alo[i]);
  }
  for (int i = tid; i < kCh; i += 128) sre[i] = re[i];
  fence_proxy_async_smem();
  __syncthreads();
  const std::uint32_t bx = cuda_util::smem_u32(sx), bv = cuda_util::smem_u32(sv) + 8192;
  auto row_of = [&](int i) { return 16 * w + g8 + 8 * ((i >> 1) & 1); };
  auto col_of = [&](int i) { return 8 * (i >> 2) + 2 * t4 + (i & 1); };
  float ht[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) ht[i] = Hf[row_of(i) * kCh + col_of(i)];
  {
    float o[32];
    std::uint32_t af[8][4];
    state_a_frags(af, ht, sre, t4);
    fence_regs(o);
    cute::warpgroup_arrive();
    issue_o_state(o, af, bx, false);
    cute::warpgroup_commit_batch();
    cute::warpgroup_wait<0>();
    fence_regs(o);
#pragma unroll
    for (int i = 0; i < 32; ++i) O1[row_of(i) * kT + col_of(i)] = o[i];
  }
  {
    float o[32];
    fence_regs(o);
    cute::warpgroup_arrive();
    issue_o_intra(o, bv, cuda_util::smem_u32(sah), cuda_util::smem_u32(sal), false);
    cute::warpgroup_commit_batch();
    cute::warpgroup_wait<0>();
    fence_regs(o);
#pragma unroll
    for (int i = 0; i < 32; ++i) O2[row_of(i) * kT + col_of(i)] = o[i];
  }
  {
    float o[32];
    fence_regs(o);
    cute::warpgroup_arrive();
    issue_a(o, bx, cuda_util::smem_u32(sv));
    cute::warpgroup_commit_batch();
    cute::warpgroup_wait<0>();
    fence_regs(o);
#pragma unroll
    for (int i = 0; i < 32; ++i) O4[row_of(i) * kT + col_of(i)] = o[i];
  }
  fence_regs(ht);
  cute::warpgroup_arrive();
  issue_state(ht, bv, bx);
  cute::warpgroup_commit_batch();
  cute::warpgroup_wait<0>();
  fence_regs(ht);
#pragma unroll
  for (int i = 0; i < 64; ++i) O3[row_of(i) * kCh + col_of(i)] = ht[i];
}

}  // namespace

std::string gla_wgmma_selftest() {
  auto val = [](int i, int salt, double unit) { return static_cast<double>(((i * 37 + salt * 101 + 11) % 17) - 8) * unit; };
  std::vector<float> X(kT * kCh), Vt(kT * kV), Ahi(kT * kT), Alo(kT * kT), Hf(64 * kCh), re(kCh);
  for (int i = 0; i < kT * kCh; ++i) X[i] = static_cast<float>(val(i, 1, 0.125));
  for (int i = 0; i < kT * kV; ++i) Vt[i] = static_cast<float>(val(i, 2, 0.125));
  for (int i = 0; i < kT * kT; ++i) {
    Ahi[i] = static_cast<float>(val(i, 3, 0.125));
    Alo[i] = static_cast<float>(val(i, 4, 1.0 / 1024));
  }
  for (int i = 0; i < 64 * kCh; ++i) Hf[i] = static_cast<float>(val(i, 5, 0.125));
  for (int i = 0; i < kCh; ++i) re[i] = (i % 3 == 0) ? 0.5f : (i % 3 == 1) ? 1.f : 2.f;
  // host results (exact in double and in fp32)
  std::vector<double> R1(64 * kT), R2(64 * kT), R3(64 * kCh), R4(kT * kT);
  for (int r = 0; r < kT; ++r)
    for (int c = 0; c < kT; ++c) {
      double a = 0;
      for (int ch = 0; ch < kCh; ++ch) a += static_cast<double>(X[r * kCh + ch]) * Vt[c * kV + ch];
      R4[r * kT + c] = a;
    }
  for (int v = 0; v < 64; ++v) {
    for (int t = 0; t < kT; ++t) {
      double a = 0, b = 0;
      for (int c = 0; c < kCh; ++c) a += static_cast<double>(Hf[v * kCh + c]) * re[c] * X[t * kCh + c];
      for (int u = 0; u < kT; ++u) b += static_cast<double>(Vt[u * kV + 64 + v]) * (static_cast<double>(Ahi[t * kT + u]) + Alo[t * kT + u]);
      R1[v * kT + t] = a;
      R2[v * kT + t] = b;
    }
    for (int c = 0; c < kCh; ++c) {
      double a = Hf[v * kCh + c];
      for (int u = 0; u < kT; ++u) a += static_cast<double>(Vt[u * kV + 64 + v]) * X[u * kCh + c];
      R3[v * kCh + c] = a;
    }
  }
  std::vector<float*> d(10, nullptr);
  const std::size_t n[10] = {X.size(), Vt.size(), Ahi.size(), Alo.size(), Hf.size(), re.size(), R1.size(), R2.size(), R3.size(), R4.size()};
  const float* h[6] = {X.data(), Vt.data(), Ahi.data(), Alo.data(), Hf.data(), re.data()};
  std::string err;
  auto ck = [&](cudaError_t e, const char* what) {
    if (e != cudaSuccess && err.empty()) err = std::string(what) + ": " + cudaGetErrorString(e);
    return e == cudaSuccess;
  };
  for (int i = 0; i < 10; ++i) ck(cudaMalloc(&d[i], n[i] * sizeof(float)), "cudaMalloc");
  for (int i = 0; i < 6 && err.empty(); ++i) ck(cudaMemcpy(d[i], h[i], n[i] * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  const int smem = 49152 + kCh * 4 + 1024;
  std::vector<float> O1(R1.size()), O2(R2.size()), O3(R3.size()), O4(R4.size());
  if (err.empty() && ck(cudaFuncSetAttribute(wgmma_selftest_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "smem attribute")) {
    wgmma_selftest_kernel<<<1, 128, smem>>>(d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[9]);
    ck(cudaGetLastError(), "launch");
    ck(cudaDeviceSynchronize(), "kernel");
    ck(cudaMemcpy(O1.data(), d[6], O1.size() * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
    ck(cudaMemcpy(O2.data(), d[7], O2.size() * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
    ck(cudaMemcpy(O3.data(), d[8], O3.size() * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
    ck(cudaMemcpy(O4.data(), d[9], O4.size() * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
  }
  for (float* p : d) cudaFree(p);
  if (!err.empty()) return err;
  // Per piece: mismatch count and the first few (row, column, got, want); a transposed or permuted
  // result usually shows got == want at another (row, column), which is reported too.
  auto cmp = [&](const char* piece, const std::vector<float>& got, const std::vector<double>& want, int cols) {
    int bad = 0;
    std::string first;
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (std::fabs(got[i] - want[i]) <= 1e-6 * (1 + std::fabs(want[i]))) continue;
      if (bad++ < 3) {
        char b[200];
        std::snprintf(b, sizeof b, " (r %zu, c %zu: got %.6g want %.6g", i / cols, i % cols, got[i], want[i]);
        first += b;
        for (std::size_t j = 0; j < want.size(); ++j)
          if (got[i] != 0 && std::fabs(got[i] - want[j]) <= 1e-6 * (1 + std::fabs(want[j]))) {
            std::snprintf(b, sizeof b, ", = want at r %zu, c %zu", j / cols, j % cols);
            first += b;
            break;
          }
        first += ")";
      }
    }
    if (bad == 0) return std::string();
    return std::string(piece) + ": " + std::to_string(bad) + " of " + std::to_string(got.size()) + " wrong" + first + ". ";
  };
  return cmp("o from the state (state_a_frags register fragments + RS wgmma, B = qe K-major SW128)", O1, R1, kT) +
         cmp("o intra (SS wgmma, A = v^T MN-major SW128 block 1, B = A hi / lo K-major SW128)", O2, R2, kT) +
         cmp("state update (SS wgmma m64n128, A = v^T MN-major, B = ke MN-major SW128, two atoms LBO 8192)", O3, R3, kCh) +
         cmp("producers' A (SS wgmma, A = qe K-major, B = kr K-major SW128)", O4, R4, kT);
}

}  // namespace lina::detail::cuda
