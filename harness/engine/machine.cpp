#include "harness/engine/machine.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "harness/engine/stats.h"
#include "harness/engine/timing.h"
#include "harness/engine/workload.h"
#include "harness/util/json_file.h"
#include "harness/util/text_file.h"
#include "lina/error.h"
#include "lina/build_info.h"
#include "lina/version.h"

#ifdef LINA_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "harness/engine/cuda_check.h"
#endif

namespace lina::harness {

namespace {

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const auto c = line.find(':');
      if (c != std::string::npos) return trim_trailing_space(line.substr(c + 2));
    }
  return "unknown";
}

std::string compiler() {
  std::string c;
#if defined(__clang__)
  c = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  c = std::string("gcc ") + __VERSION__;
#else
  c = "unknown";
#endif
#ifdef LINA_CUDA_COMPILER_VERSION
  c += std::string("; nvcc ") + LINA_CUDA_COMPILER_VERSION;
#endif
  return c;
}

#ifdef LINA_WITH_CUDA
std::filesystem::path cache_file() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  std::filesystem::path dir = xdg && *xdg ? std::filesystem::path(xdg) / "lina"
                              : home      ? std::filesystem::path(home) / ".cache" / "lina"
                                          : std::filesystem::path(".lina-cache");
  return dir / "ceilings.json";
}

// Median over timed repetitions of fn on the default stream.
double time_ms(const std::function<void()>& fn, int reps) {
  cudaEvent_t a, b;
  check_cuda(cudaEventCreate(&a), "cudaEventCreate");
  check_cuda(cudaEventCreate(&b), "cudaEventCreate");
  fn();
  check_cuda(cudaDeviceSynchronize(), "ceiling warm-up");
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(a);
    fn();
    cudaEventRecord(b);
    check_cuda(cudaEventSynchronize(b), "ceiling sample");
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return median(t);
}

Ceilings measure_gpu_ceilings() {
  Ceilings c;
  c.source = "measured";
  {
    const std::size_t bytes = std::size_t{1} << 30;
    void *src = nullptr, *dst = nullptr;
    check_cuda(cudaMalloc(&src, bytes), "cudaMalloc (copy ceiling)");
    check_cuda(cudaMalloc(&dst, bytes), "cudaMalloc (copy ceiling)");
    cudaMemset(src, 1, bytes);
    const double ms = time_ms([&] { cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice); }, 20);
    c.hbm_gbps = 2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
    cudaFree(src);
    cudaFree(dst);
  }
  {
    const int n = 8192;
    const std::size_t bytes = static_cast<std::size_t>(n) * n * 2;
    void *A = nullptr, *B = nullptr, *C = nullptr;
    check_cuda(cudaMalloc(&A, bytes), "cudaMalloc (GEMM ceiling)");
    check_cuda(cudaMalloc(&B, bytes), "cudaMalloc (GEMM ceiling)");
    check_cuda(cudaMalloc(&C, bytes), "cudaMalloc (GEMM ceiling)");
    // Random operands: a GEMM on zeros runs ~13 % faster on an H200 (less switching power) and
    // would overstate the ceiling.
    const HostTensor ha = generate_tensor("ceiling_a", DType::bf16, Shape{n, n}, Transform::randn, 1);
    const HostTensor hb = generate_tensor("ceiling_b", DType::bf16, Shape{n, n}, Transform::randn, 2);
    check_cuda(cudaMemcpy(A, ha.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy (GEMM ceiling)");
    check_cuda(cudaMemcpy(B, hb.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy (GEMM ceiling)");
    cublasHandle_t h = nullptr;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw Error(ErrorCode::runtime, "cublas", "cublasCreate failed");
    const float alpha = 1, beta = 0;
    const double ms = time_ms(
        [&] {
          cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, A, CUDA_R_16BF, n, B, CUDA_R_16BF, n, &beta, C,
                       CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        },
        20);
    c.bf16_tflops = 2.0 * n * static_cast<double>(n) * n / (ms * 1e-3) / 1e12;
    cublasDestroy(h);
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
  }
  return c;
}
#endif

}  // namespace

Ceilings nominal_cpu_ceilings() { return Ceilings{50.0, 1.0, "nominal-cpu (not measured)"}; }

MachineInfo machine_info(Backend backend, bool measure) {
  MachineInfo m;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  m.host = host;
  m.cpu = cpu_model();
  m.compiler = compiler();
  m.ceilings = nominal_cpu_ceilings();
#ifdef LINA_WITH_CUDA
  int rt = 0, drv = 0, n = 0;
  if (cudaRuntimeGetVersion(&rt) == cudaSuccess) m.cuda_runtime = std::to_string(rt / 1000) + "." + std::to_string(rt % 1000 / 10);
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) {
    int dev = 0;
    cudaGetDevice(&dev);
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, dev) == cudaSuccess) {
      m.gpu = p.name;
      m.sm_count = p.multiProcessorCount;
      m.compute_capability = std::to_string(p.major) + "." + std::to_string(p.minor);
    }
    m.driver = nvml_driver_version();
    if (m.driver.empty() && cudaDriverGetVersion(&drv) == cudaSuccess)
      m.driver = "cuda " + std::to_string(drv / 1000) + "." + std::to_string(drv % 1000 / 10);
  }
  (void)cudaGetLastError();
  if (backend == Backend::cuda && !m.gpu.empty() && measure) {
    const auto file = cache_file();
    const std::string key = m.gpu + "|" + m.driver;
    nlohmann::json cache = nlohmann::json::object();
    if (std::filesystem::exists(file)) {
      try {
        cache = read_json_file(file);
      } catch (const std::exception&) {
        cache = nlohmann::json::object();  // a corrupt cache is re-measured, not trusted
      }
    }
    if (cache.is_object() && cache.contains(key) && cache[key].contains("hbm_gbps") && cache[key].contains("bf16_tflops")) {
      m.ceilings = Ceilings{cache[key]["hbm_gbps"].get<double>(), cache[key]["bf16_tflops"].get<double>(),
                            "cache:" + file.string()};
    } else {
      m.ceilings = measure_gpu_ceilings();
      cache[key] = {{"hbm_gbps", m.ceilings.hbm_gbps}, {"bf16_tflops", m.ceilings.bf16_tflops}};
      std::error_code ec;
      std::filesystem::create_directories(file.parent_path(), ec);
      try {
        write_file_atomically(file, cache.dump(2) + "\n");
      } catch (const std::exception&) {
        // Only a cache: the next run measures again.
      }
    }
  }
#else
  (void)backend, (void)measure;
#endif
  return m;
}

ToolInfo tool_info() {
  // The commit this binary was built from (cmake/LinaBuildInfo.cmake), never a run-time `git` query:
  // a baseline binary must report its own SHA even when the checkout has moved on since.
  ToolInfo t;
  t.version = kVersion;
  t.git_sha = LINA_BUILD_GIT_SHA;
  t.git_dirty = LINA_BUILD_GIT_DIRTY;
  t.git_source = "configure";
  return t;
}

nlohmann::json to_json(const MachineInfo& m) {
  const auto str_or_null = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
  return {{"gpu", str_or_null(m.gpu)},
          {"sm_count", m.sm_count ? nlohmann::json(*m.sm_count) : nlohmann::json(nullptr)},
          {"compute_capability", str_or_null(m.compute_capability)},
          {"driver", str_or_null(m.driver)},
          {"cuda_runtime", str_or_null(m.cuda_runtime)},
          {"compiler", m.compiler},
          {"host", m.host},
          {"cpu", m.cpu},
          {"ceilings", {{"hbm_gbps", m.ceilings.hbm_gbps}, {"bf16_tflops", m.ceilings.bf16_tflops}, {"source", m.ceilings.source}}}};
}

nlohmann::json to_json(const ToolInfo& t) {
  return {{"name", t.name}, {"version", t.version}, {"git_sha", t.git_sha}, {"git_dirty", t.git_dirty}, {"git_source", t.git_source}};
}

}  // namespace lina::harness
