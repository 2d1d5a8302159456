// The CUDA side of the run engine on a real GPU, with a stand-in op made of stream-ordered copies
// (no kernels needed): device buffers, event timing with L2 flush, CUDA-graph replay, the memory
// probe, the device-side check and the measured ceilings. Skipped without a GPU.
#include <gtest/gtest.h>

#include "harness/engine/device_buffer.h"
#include "harness/engine/machine.h"
#include "harness/engine/runner.h"
#include "lina/lina.h"

#ifdef LINA_WITH_CUDA
#include <cuda_runtime_api.h>

#include "ops/common/cuda/workspace.h"
#endif

namespace lina::harness {
namespace {

#ifdef LINA_WITH_CUDA
void copy_async(const TensorView& from, const TensorView& to, void* stream) {
  ASSERT_EQ(from.numel(), to.numel());
  if (from.dtype == to.dtype) {
    cudaMemcpyAsync(to.data, from.data, static_cast<std::size_t>(from.numel()) * dtype_size(from.dtype), cudaMemcpyDeviceToDevice,
                    static_cast<cudaStream_t>(stream));
    return;
  }
  // bf16 -> f32 (reference outputs): widen on the host; the reference is untimed.
  std::vector<std::uint16_t> h(static_cast<std::size_t>(from.numel()));
  cudaMemcpy(h.data(), from.data, h.size() * 2, cudaMemcpyDeviceToHost);
  std::vector<float> f(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) f[i] = bf16_bits_to_float(h[i]);
  cudaMemcpy(to.data, f.data(), f.size() * 4, cudaMemcpyHostToDevice);
}

OpSpec copy_op() {
  OpSpec s = find_op("chunk_gla");
  s.forward = [](const Bound& b, ForwardMode, const ExecOptions& o) {
    copy_async(b.in.at("v"), b.out.o, o.stream);
    return RunInfo{"cuda", {"memcpy_fwd"}};
  };
  s.backward = [](const Bound& b, const ExecOptions& o) {
    for (const auto& [name, t] : b.in) copy_async(t, b.grads.at("d" + name), o.stream);
    return RunInfo{"cuda", {"memcpy_bwd"}};
  };
  s.gpu_reference_forward = [](const Bound& b, void* st) { copy_async(b.in.at("v"), b.out.o, st); };
  s.gpu_reference_backward = [](const Bound& b, void* st) {
    for (const auto& [name, t] : b.in) copy_async(t, b.grads.at("d" + name), st);
  };
  return s;
}
#endif

TEST(HarnessCuda, RunsCopyOpWithEventsGraphsAndChecks) {
#ifndef LINA_WITH_CUDA
  GTEST_SKIP() << "CUDA backend not built";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  const OpSpec op = copy_op();
  for (bool graphs : {false, true}) {
    SCOPED_TRACE(graphs ? "graphs" : "events");
    RunConfig c;
    c.ops = {"chunk_gla"};
    c.backend = "cuda";
    c.graphs = graphs;
    c.policy.min_samples = 5;
    c.policy.max_samples = 50;
    c.policy.time_budget_s = 0.5;
    Plan plan;
    plan.backend = Backend::cuda;
    plan.cells.push_back({&op, Mode::fwd, parse_shape_name("B2_T1024_H4_D128", 1)});
    plan.cells.push_back({&op, Mode::fwdbwd, parse_varlen("longtail:T=4096,H=4,D=64", 1).at(0)});
    const RunOutput out = run_plan(c, plan);
    ASSERT_TRUE(out.failures.empty()) << out.failures.at(0).error;
    ASSERT_EQ(out.rows.size(), 2u);
    for (const auto& r : out.rows) {
      EXPECT_GE(r.times_ms.size(), 5u);
      EXPECT_GT(r.stats.median, 0);
      EXPECT_EQ(r.timer, graphs ? "cuda-graph" : "cuda-events");
      EXPECT_EQ(r.check.reference, "fp32-gpu");
      ASSERT_TRUE(r.check.pass.has_value()) << r.check.reason;
      EXPECT_TRUE(*r.check.pass);
      ASSERT_TRUE(r.peak_mem_bytes.has_value());
      EXPECT_GT(r.gbps, 0);
    }
    EXPECT_NO_THROW(validate_document(out.document, "cuda run"));
    std::printf("%s\n", out.document["machine"].dump().c_str());
  }
#endif
}

TEST(HarnessCuda, CeilingsAreMeasuredAndCached) {
#ifndef LINA_WITH_CUDA
  GTEST_SKIP() << "CUDA backend not built";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  const MachineInfo a = machine_info(Backend::cuda);
  const MachineInfo b = machine_info(Backend::cuda);
  EXPECT_FALSE(a.gpu.empty());
  EXPECT_GT(a.ceilings.hbm_gbps, 100);
  EXPECT_GT(a.ceilings.bf16_tflops, 10);
  EXPECT_EQ(b.ceilings.source.rfind("cache:", 0), 0u);
  EXPECT_DOUBLE_EQ(a.ceilings.hbm_gbps, b.ceilings.hbm_gbps);
  const ClockReading clk = read_clock();
  std::printf("gpu %s sm %d driver %s copy %.0f GB/s gemm %.0f TFLOP/s clock %s\n", a.gpu.c_str(), a.sm_count.value_or(-1),
              a.driver.c_str(), a.ceilings.hbm_gbps, a.ceilings.bf16_tflops,
              clk.sm_mhz ? std::to_string(*clk.sm_mhz).c_str() : "null");
#endif
}

// lina's scratch pool keeps its memory mapped, so a second call grows no device memory: the probe
// must still report the call's scratch (from the pool's high-water mark), and release gives it back.
TEST(HarnessCuda, WorkspacePoolIsCountedInPeakMemoryAndReleased) {
#ifndef LINA_WITH_CUDA
  const WorkspaceStats s = workspace_stats();
  EXPECT_EQ(s.reserved_bytes + s.used_bytes + s.used_high_bytes, 0u);  // no CUDA: nothing held
  release_workspace();
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreate(&st), cudaSuccess);
  constexpr std::size_t kBytes = 64u << 20;
  auto call = [&] {
    void* p = detail::cuda_util::workspace_alloc(kBytes, st, "test scratch");
    cudaMemsetAsync(p, 0, kBytes, st);
    detail::cuda_util::workspace_free(p, st, "test scratch");
  };
  EXPECT_GE(probe_peak_memory(call, st), kBytes);
  EXPECT_GE(workspace_stats().reserved_bytes, kBytes);  // kept mapped
  EXPECT_GE(probe_peak_memory(call, st), kBytes);       // still counted on the second call
  EXPECT_EQ(workspace_stats().used_bytes, 0u);
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  release_workspace();
  EXPECT_EQ(workspace_stats().reserved_bytes, 0u);
  cudaStreamDestroy(st);
#endif
}

}  // namespace
}  // namespace lina::harness
