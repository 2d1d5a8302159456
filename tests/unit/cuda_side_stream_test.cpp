// cuda_util::fork_side_stream / join_side_stream (ops/common/cuda/launch_setup.h), which the delta
// backward uses to run its two state passes side by side: work on the side stream starts after the
// main stream's earlier work, and the main stream's later work starts after the side stream's. Checked
// with stream-ordered memsets large enough (256 MB, tens of microseconds) that a missing wait shows as
// the wrong final bytes or as a stream still busy. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "lina/lina.h"

#ifdef LINA_WITH_CUDA
#include <cuda_runtime_api.h>

#include "ops/common/cuda/launch_setup.h"
#endif

namespace lina {
namespace {

#ifdef LINA_WITH_CUDA
constexpr std::size_t kBytes = std::size_t{256} << 20;

struct Fixture {
  cudaStream_t main = nullptr;
  unsigned char* buf = nullptr;
  Fixture() {
    EXPECT_EQ(cudaStreamCreateWithFlags(&main, cudaStreamNonBlocking), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&buf, kBytes), cudaSuccess);
  }
  ~Fixture() {
    cudaStreamSynchronize(main);
    cudaFree(buf);
    cudaStreamDestroy(main);
  }
  // The first, middle and last byte (a memset that ran out of order leaves the other value everywhere).
  std::vector<unsigned char> probe() const {
    std::vector<unsigned char> h(3);
    cudaMemcpy(&h[0], buf, 1, cudaMemcpyDeviceToHost);
    cudaMemcpy(&h[1], buf + kBytes / 2, 1, cudaMemcpyDeviceToHost);
    cudaMemcpy(&h[2], buf + kBytes - 1, 1, cudaMemcpyDeviceToHost);
    return h;
  }
};
#endif

TEST(CudaSideStream, ForkOrdersTheSideStreamAfterMainsEarlierWork) {
#ifndef LINA_WITH_CUDA
  GTEST_SKIP() << "CUDA backend not built";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  Fixture f;
  for (int round = 0; round < 4; ++round) {
    ASSERT_EQ(cudaMemsetAsync(f.buf, 0x11, kBytes, f.main), cudaSuccess);
    const cudaStream_t side = detail::cuda_util::fork_side_stream(f.main);
    ASSERT_NE(side, f.main);
    ASSERT_EQ(cudaMemsetAsync(f.buf, 0x22, 1, side), cudaSuccess);  // must land after main's 0x11
    ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
    // side's memset waited for main's: main is idle now, and the first byte is side's
    EXPECT_EQ(cudaStreamQuery(f.main), cudaSuccess) << "round " << round;
    const std::vector<unsigned char> h = f.probe();
    EXPECT_EQ(h[0], 0x22) << "round " << round;
    EXPECT_EQ(h[1], 0x11) << "round " << round;
  }
#endif
}

TEST(CudaSideStream, JoinOrdersMainsLaterWorkAfterTheSideStream) {
#ifndef LINA_WITH_CUDA
  GTEST_SKIP() << "CUDA backend not built";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  Fixture f;
  for (int round = 0; round < 4; ++round) {
    const cudaStream_t side = detail::cuda_util::fork_side_stream(f.main);
    ASSERT_EQ(cudaMemsetAsync(f.buf, 0x33, kBytes, side), cudaSuccess);
    detail::cuda_util::join_side_stream(f.main, side);
    ASSERT_EQ(cudaMemsetAsync(f.buf + kBytes - 1, 0x44, 1, f.main), cudaSuccess);  // must land after side's 0x33
    ASSERT_EQ(cudaStreamSynchronize(f.main), cudaSuccess);
    EXPECT_EQ(cudaStreamQuery(side), cudaSuccess) << "round " << round;
    const std::vector<unsigned char> h = f.probe();
    EXPECT_EQ(h[0], 0x33) << "round " << round;
    EXPECT_EQ(h[2], 0x44) << "round " << round;
  }
#endif
}

TEST(CudaSideStream, OneSideStreamPerDevice) {
#ifndef LINA_WITH_CUDA
  GTEST_SKIP() << "CUDA backend not built";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  Fixture f;
  const cudaStream_t a = detail::cuda_util::fork_side_stream(f.main);
  const cudaStream_t b = detail::cuda_util::fork_side_stream(f.main);
  EXPECT_EQ(a, b);
  unsigned int flags = 0;
  ASSERT_EQ(cudaStreamGetFlags(a, &flags), cudaSuccess);
  EXPECT_EQ(flags & cudaStreamNonBlocking, cudaStreamNonBlocking);
#endif
}

}  // namespace
}  // namespace lina
