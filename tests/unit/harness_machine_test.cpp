#include <gtest/gtest.h>

#include "harness/engine/device_buffer.h"
#include "harness/engine/machine.h"
#include "harness/engine/timing.h"
#include "lina/lina.h"

namespace lina::harness {
namespace {

TEST(HarnessMachine, CpuBackendUsesNominalCeilingsMarkedAsSuch) {
  const MachineInfo m = machine_info(Backend::cpu);
  EXPECT_GT(m.ceilings.hbm_gbps, 0);
  EXPECT_GT(m.ceilings.bf16_tflops, 0);
  EXPECT_NE(m.ceilings.source.find("nominal"), std::string::npos);
  EXPECT_FALSE(m.host.empty());
  EXPECT_FALSE(m.cpu.empty());
  EXPECT_FALSE(m.compiler.empty());
  const auto j = to_json(m);
  for (const char* k : {"gpu", "sm_count", "compute_capability", "driver", "cuda_runtime", "compiler", "host", "cpu", "ceilings"})
    EXPECT_TRUE(j.contains(k)) << k;
  if (cuda_device_count() == 0) {
    EXPECT_TRUE(j["gpu"].is_null());
    EXPECT_TRUE(j["sm_count"].is_null());
  }
}

TEST(HarnessMachine, ToolInfoCarriesAGitSha) {
  const ToolInfo t = tool_info();
  EXPECT_EQ(t.version, kVersion);
  // Built from a git checkout here: a 40-hex SHA, from run time or configure time.
  if (t.git_sha != "unknown") {
    EXPECT_EQ(t.git_sha.size(), 40u);
    EXPECT_EQ(t.git_sha.find_first_not_of("0123456789abcdef"), std::string::npos) << t.git_sha;
  }
  EXPECT_TRUE(t.git_source == "runtime" || t.git_source == "configure");
}

TEST(HarnessMachine, DeviceBuffersRefuseWithoutCuda) {
  if (cuda_backend_compiled()) GTEST_SKIP() << "CUDA build";
  EXPECT_THROW(DeviceBuffer(16), Error);
  EXPECT_EQ(device_used_bytes(), 0u);
  EXPECT_THROW(make_cuda_timer({}), Error);
  EXPECT_FALSE(read_clock().sm_mhz.has_value());
}

}  // namespace
}  // namespace lina::harness
