// What ran where: the GPU and host, the toolchain, the source tree's git state, and the machine's
// measured ceilings (device copy bandwidth, bf16 GEMM throughput) used for roofline fractions.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "lina/ops.h"

namespace lina::harness {

struct Ceilings {
  double hbm_gbps = 0;     // device-to-device copy: (read + write bytes) / time
  double bf16_tflops = 0;  // cuBLAS bf16 GEMM, fp32 accumulate
  std::string source;      // "measured" | "cache:<file>" | "nominal-cpu (not measured)"
};

struct MachineInfo {
  std::string gpu;  // empty without a GPU
  std::optional<int> sm_count;
  std::string compute_capability;  // "9.0"
  std::string driver;              // NVML driver string, else the CUDA driver API version
  std::string cuda_runtime;        // "13.0"
  std::string compiler;            // host compiler (+ nvcc version when CUDA is built)
  std::string host, cpu;
  Ceilings ceilings;
};

struct ToolInfo {
  std::string name = "lina";
  std::string version;
  std::string git_sha;  // 40 hex or "unknown"
  bool git_dirty = false;
  std::string git_source;  // "runtime" (git -C <source dir>) or "configure" (baked in by CMake)
};

// Machine facts; ceilings for `backend` (GPU ones measured once per GPU + driver and cached in
// $XDG_CACHE_HOME/lina or ~/.cache/lina/ceilings.json; CPU ones nominal and marked as such).
MachineInfo machine_info(Backend backend, bool measure_ceilings = true);
ToolInfo tool_info();
Ceilings nominal_cpu_ceilings();

nlohmann::json to_json(const MachineInfo& m);
nlohmann::json to_json(const ToolInfo& t);

}  // namespace lina::harness
