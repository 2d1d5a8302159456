// Device buffers, CUDA error checks and seeded device-side inputs shared by the CUDA check programs in
// tests/cuda/ (ctests labelled `gpu`: correctness only; timing belongs to the harness, `lina run`).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "harness/verify/accuracy.h"
#include "lina/dtype.h"
#include "lina/tensor.h"

namespace lina_test {

// A check program's failure count, and one comparison line in FLA's metric (harness/verify/accuracy.h).
inline int g_failures = 0;
inline lina::harness::Closeness report(const std::string& what, const std::vector<double>& ref,
                                       const std::vector<double>& out, double tol) {
  const lina::harness::Closeness c = lina::harness::assert_close(ref, out, tol);
  std::printf("  %-44s %s\n", what.c_str(), c.str().c_str());
  if (!c.pass) ++g_failures;
  return c;
}

// A CUDA error ends the check program (exit 3): nothing after it can be trusted.
inline void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::printf("CUDA error %s: %s\n", what, cudaGetErrorString(e));
    std::exit(3);
  }
}

// Exit code of a check program that found no CUDA device: ctest's SKIP_RETURN_CODE for the `gpu` label
// (tests/CMakeLists.txt), so a machine without a GPU reports the check skipped, not failed.
inline constexpr int kSkipNoDevice = 77;

// Ends the program with kSkipNoDevice when no CUDA device is usable; otherwise prints the device line.
inline void require_device_or_skip() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "device count 0");
    std::exit(kSkipNoDevice);
  }
  cudaDeviceProp prop{};
  ck(cudaGetDeviceProperties(&prop, 0), "props");
  std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
}

// Raw device bytes (at least 16, so that empty tensors still have a valid pointer).
struct DevBuf {
  void* p = nullptr;
  std::size_t n = 0;
  DevBuf() = default;
  explicit DevBuf(std::size_t bytes) : n(bytes) { ck(cudaMalloc(&p, bytes ? bytes : 16), "cudaMalloc"); }
  ~DevBuf() {
    if (p) cudaFree(p);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

// A device tensor with its lina view; poison() fills it with NaN bits (bf16 and f32) so that a
// partial write fails the check.
struct DTensor {
  void* p = nullptr;
  lina::TensorView view;
  DTensor() = default;
  DTensor(lina::DType dt, lina::Shape s) {
    const std::size_t bytes = std::max<std::size_t>(1, static_cast<std::size_t>(s.numel()) * lina::dtype_size(dt));
    ck(cudaMalloc(&p, bytes), "cudaMalloc");
    view = lina::TensorView::contiguous(p, dt, s, lina::Device::cuda, 0);
  }
  DTensor(const DTensor&) = delete;
  DTensor& operator=(const DTensor&) = delete;
  DTensor(DTensor&& o) noexcept : p(o.p), view(o.view) { o.p = nullptr; }
  DTensor& operator=(DTensor&& o) noexcept {
    std::swap(p, o.p);
    std::swap(view, o.view);
    return *this;
  }
  ~DTensor() {
    if (p) cudaFree(p);
  }
  std::size_t bytes() const { return static_cast<std::size_t>(view.numel()) * lina::dtype_size(view.dtype); }
  void poison() const { ck(cudaMemset(p, 0xFF, bytes()), "poison"); }
};

// ---- seeded inputs drawn on the device (the host would take too long at bench sizes)

__device__ __forceinline__ std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// kind: 0 randn, 1 logsigmoid(randn) clamped at -5 (GLA bench gate), 2 logsigmoid(randn)/0.1 (steep),
//       3 sigmoid(randn), 4 logsigmoid(randn), 5 rand U[0,1) * 0.5 (small positive), 6 1.6 * logsigmoid(randn)
// dtype: lina::DType code of `out` (bf16 or f32); for bf16, x is drawn in bf16 first, as FLA does.
__global__ void fill_kernel(void* out, int dtype, std::int64_t n, std::uint64_t seed, int kind) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::uint64_t h = mix64(seed * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(i));
    const float u1 = (static_cast<float>(h >> 40) + 0.5f) / 16777216.f;
    const float u2 = static_cast<float>((h >> 16) & 0xFFFFFF) / 16777216.f;
    float x = sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
    if (dtype == 2) x = __bfloat162float(__float2bfloat16_rn(x));
    const float ls = fminf(x, 0.f) - log1pf(expf(-fabsf(x)));
    float y = x;
    if (kind == 1) y = fmaxf(ls, -5.f);
    else if (kind == 2) y = ls / 0.1f;
    else if (kind == 3) y = 1.f / (1.f + expf(-x));
    else if (kind == 4) y = ls;
    else if (kind == 5) y = 0.5f * u2;
    else if (kind == 6) y = 1.6f * ls;
    if (dtype == 2) static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(y);
    else static_cast<float*>(out)[i] = y;
  }
}

inline void fill(const DTensor& t, std::uint64_t seed, int kind = 0) {
  if (t.view.numel() == 0) return;
  fill_kernel<<<1024, 256>>>(t.p, static_cast<int>(t.view.dtype), t.view.numel(), seed, kind);
  ck(cudaGetLastError(), "fill");
}

// 64-bit FNV-1a of a host buffer: printed beside a check's errors, so that two builds that claim
// bit-identical outputs (a change that only moves work between threads) can be compared exactly.
inline std::uint64_t fnv1a64(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// A device tensor (bf16 or f32) as doubles on the host.
inline std::vector<double> to_host(const lina::TensorView& v) {
  const std::size_t n = static_cast<std::size_t>(v.numel());
  std::vector<double> out(n);
  if (n == 0) return out;
  if (v.dtype == lina::DType::bf16) {
    std::vector<std::uint16_t> h(n);
    ck(cudaMemcpy(h.data(), v.data, n * 2, cudaMemcpyDeviceToHost), "d2h");
    for (std::size_t i = 0; i < n; ++i) out[i] = lina::bf16_bits_to_float(h[i]);
  } else {
    std::vector<float> h(n);
    ck(cudaMemcpy(h.data(), v.data, n * 4, cudaMemcpyDeviceToHost), "d2h");
    for (std::size_t i = 0; i < n; ++i) out[i] = h[i];
  }
  return out;
}

}  // namespace lina_test
