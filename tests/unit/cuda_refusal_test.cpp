// Bad input that only the CUDA path can reject: a data pointer off the 16-byte alignment its kernels
// move data in (a view at an odd element offset). Each op must refuse it by name, as `unsupported`,
// before launching anything, and leave the device usable. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lina/lina.h"

#ifdef LINA_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace lina {
namespace {

#ifdef LINA_WITH_CUDA
// Device memory for the test's tensors; views may start `offset_bytes` into their allocation.
struct DeviceArena {
  std::vector<void*> blocks;
  ~DeviceArena() {
    for (void* p : blocks) cudaFree(p);
  }
  TensorView tensor(DType dt, Shape s, std::size_t offset_bytes = 0) {
    void* p = nullptr;
    const std::size_t bytes = static_cast<std::size_t>(s.numel()) * dtype_size(dt) + 64;
    EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
    blocks.push_back(p);
    return TensorView::contiguous(static_cast<char*>(p) + offset_bytes, dt, s, Device::cuda, 0);
  }
};

constexpr std::int64_t B = 1, T = 64, H = 2, D = 64;

// Runs `call`, expects lina::Error (unsupported) naming `arg` and the alignment, and no CUDA error.
void expect_refused(const std::string& what, const std::string& arg, const std::function<void()>& call) {
  try {
    call();
    ADD_FAILURE() << what << ": a misaligned `" << arg << "` was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported) << what << ": " << e.what();
    EXPECT_EQ(e.argument(), arg) << what << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find("aligned to 16 bytes"), std::string::npos) << what << ": " << e.what();
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << what;
}
#endif

TEST(CudaRefusal, MisalignedPointersAreRefusedByNameOnEveryOp) {
#ifndef LINA_WITH_CUDA
  GTEST_SKIP() << "CUDA backend not built";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  ExecOptions cuda;
  cuda.backend = Backend::cuda;
  const Shape qkv{B, T, H, D}, rows{B, T, H};
  for (const char* bad : {"q", "v"}) {
    DeviceArena m;
    const auto at = [&](const char* name) { return std::string(name) == bad ? 2 : 0; };  // one bf16 element off
    const TensorView q = m.tensor(DType::bf16, qkv, at("q")), k = m.tensor(DType::bf16, qkv), v = m.tensor(DType::bf16, qkv, at("v"));
    const TensorView g = m.tensor(DType::bf16, qkv), o = m.tensor(DType::bf16, qkv), d_o = m.tensor(DType::bf16, qkv);
    const TensorView beta = m.tensor(DType::bf16, rows), g_gdn = m.tensor(DType::bf16, rows);
    const TensorView dq = m.tensor(DType::bf16, qkv), dk = m.tensor(DType::bf16, qkv), dv = m.tensor(DType::bf16, qkv);
    const TensorView dg = m.tensor(DType::bf16, qkv), dg_gdn = m.tensor(DType::bf16, rows), dbeta = m.tensor(DType::bf16, rows);

    const ChunkGlaArgs gla{q, k, v, g};
    expect_refused(std::string("chunk_gla forward, ") + bad, bad, [&] { chunk_gla_forward(gla, {o}, ForwardMode::training, cuda); });
    expect_refused(std::string("chunk_gla backward, ") + bad, bad,
                   [&] { chunk_gla_backward(gla, {d_o}, ChunkGlaGrads{dq, dk, dv, dg}, cuda); });

    ChunkKdaArgs kda;
    kda.q = q, kda.k = k, kda.v = v, kda.g = g, kda.beta = beta;
    expect_refused(std::string("chunk_kda forward, ") + bad, bad, [&] { chunk_kda_forward(kda, {o}, ForwardMode::training, cuda); });
    expect_refused(std::string("chunk_kda backward, ") + bad, bad,
                   [&] { chunk_kda_backward(kda, {d_o}, DeltaRuleGrads{dq, dk, dv, dg, dbeta}, cuda); });

    ChunkGdnArgs gdn;
    gdn.q = q, gdn.k = k, gdn.v = v, gdn.g = g_gdn, gdn.beta = beta;
    expect_refused(std::string("chunk_gdn forward, ") + bad, bad, [&] { chunk_gdn_forward(gdn, {o}, ForwardMode::training, cuda); });
    expect_refused(std::string("chunk_gdn backward, ") + bad, bad,
                   [&] { chunk_gdn_backward(gdn, {d_o}, DeltaRuleGrads{dq, dk, dv, dg_gdn, dbeta}, cuda); });
  }
  // The same tensors, aligned, run: the refusal is about the pointer, not the shapes.
  DeviceArena m;
  const TensorView q = m.tensor(DType::bf16, qkv), k = m.tensor(DType::bf16, qkv), v = m.tensor(DType::bf16, qkv);
  const TensorView g = m.tensor(DType::bf16, qkv), o = m.tensor(DType::bf16, qkv);
  for (const TensorView& t : {q, k, v, g}) ASSERT_EQ(cudaMemset(t.data, 0, static_cast<std::size_t>(t.numel()) * 2), cudaSuccess);
  EXPECT_EQ(chunk_gla_forward(ChunkGlaArgs{q, k, v, g}, {o}, ForwardMode::training, cuda).backend, "cuda");
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
#endif
}

}  // namespace
}  // namespace lina
