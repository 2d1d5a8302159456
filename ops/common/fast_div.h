// Division by a divisor fixed at launch time, as a multiply-high, an add and a shift (the round-up
// method of Granlund and Montgomery): exact for every dividend below 2^31 and every divisor >= 1.
// The host builds it once per launch; kernels call div / mod (the prep kernels' item decode: an item
// index split into (chunk, head) and a chunk into (sequence, chunk in it) for dense inputs).
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define LINA_HD __host__ __device__ __forceinline__
#else
#define LINA_HD inline
#endif

namespace lina::detail {

struct FastDiv {
  std::uint32_t d = 1;  // the divisor
  std::uint32_t m = 1;  // 2^32 (2^s - d) / d + 1 (fits 32 bits since 2^s < 2 d)
  std::uint32_t s = 0;  // ceil(log2 d)

  FastDiv() = default;
  explicit FastDiv(std::uint32_t divisor) : d(divisor < 1 ? 1 : divisor) {
    while ((std::uint64_t{1} << s) < d) ++s;
    m = static_cast<std::uint32_t>(((std::uint64_t{1} << 32) * ((std::uint64_t{1} << s) - d)) / d + 1);
  }
  // n / d for n < 2^31 (the add cannot carry out: the high product is below n)
  LINA_HD std::uint32_t div(std::uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const std::uint32_t hi = __umulhi(n, m);
#else
    const auto hi = static_cast<std::uint32_t>((static_cast<std::uint64_t>(n) * m) >> 32);
#endif
    return (hi + n) >> s;
  }
  LINA_HD std::uint32_t mod(std::uint32_t n) const { return n - div(n) * d; }
};

}  // namespace lina::detail

#undef LINA_HD
