#include "harness/engine/timing.h"

#include <chrono>
#include <cmath>

#include "harness/engine/stats.h"
#include "lina/error.h"

#ifdef LINA_WITH_CUDA
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#if __has_include(<nvtx3/nvToolsExt.h>)
#include <nvtx3/nvToolsExt.h>
#define LINA_HAVE_NVTX 1
#endif

#include "harness/engine/cuda_check.h"
#endif

namespace lina::harness {

// ---------------------------------------------------------------------------------------------
// NVTX

NvtxRange::NvtxRange(const std::string& name) {
#ifdef LINA_HAVE_NVTX
  if (!name.empty()) {
    nvtxRangePushA(name.c_str());
    active_ = true;
  }
#else
  (void)name;
#endif
}

NvtxRange::~NvtxRange() {
#ifdef LINA_HAVE_NVTX
  if (active_) nvtxRangePop();
#endif
}

// ---------------------------------------------------------------------------------------------
// Sampling loop

Measurement measure(Timer& timer, const std::function<void()>& fn, const TimingPolicy& p, const std::string& label,
                    const std::function<void()>& reset) {
  if (p.min_samples < 1) throw_invalid("--min-samples", std::to_string(p.min_samples), ">= 1");
  if (p.max_samples < p.min_samples)
    throw_invalid("--max-samples", std::to_string(p.max_samples), ">= --min-samples (" + std::to_string(p.min_samples) + ")");
  for (int i = 0; i < std::max(1, p.warmup); ++i) {
    if (reset) reset();
    timer.warm(fn);
  }
  Measurement m;
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    if (reset) reset();
    m.times_ms.push_back(timer.sample(fn, label));
    const auto n = static_cast<int>(m.times_ms.size());
    m.noise = n >= 2 ? sample_std(m.times_ms) / mean(m.times_ms) : 0;
    if (n >= p.min_samples && m.noise < p.max_noise) {
      m.stop_reason = "noise";
      break;
    }
    if (n >= p.max_samples) {
      m.stop_reason = "max_samples";
      break;
    }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (n >= p.min_samples && elapsed >= p.time_budget_s) {
      m.stop_reason = "time_budget";
      break;
    }
  }
  return m;
}

// ---------------------------------------------------------------------------------------------
// CPU timer

namespace {
class CpuTimer final : public Timer {
 public:
  std::string name() const override { return "cpu-steady-clock"; }
  void warm(const std::function<void()>& fn) override { fn(); }
  double sample(const std::function<void()>& fn, const std::string& label) override {
    NvtxRange range(label);
    const auto a = std::chrono::steady_clock::now();
    fn();
    const auto b = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::milli>(b - a).count();
  }
};
}  // namespace

std::unique_ptr<Timer> make_cpu_timer() { return std::make_unique<CpuTimer>(); }

// ---------------------------------------------------------------------------------------------
// CUDA timer

#ifdef LINA_WITH_CUDA
namespace {

class CudaTimer final : public Timer {
 public:
  explicit CudaTimer(const CudaTimerOptions& o) : opt_(o), stream_(static_cast<cudaStream_t>(o.stream)) {
    if (opt_.graphs && stream_ == nullptr)
      throw_invalid("--graphs", "the legacy default stream", "a created stream (graph capture needs one)");
    check_cuda(cudaEventCreate(&start_), "cudaEventCreate");
    check_cuda(cudaEventCreate(&stop_), "cudaEventCreate");
    if (opt_.l2_flush) {
      int dev = 0;
      check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
      cudaDeviceProp prop{};
      check_cuda(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
      // A write over twice the L2 evicts whatever the previous sample left there.
      flush_bytes_ = std::max<std::size_t>(2 * static_cast<std::size_t>(prop.l2CacheSize), 1 << 20);
      check_cuda(cudaMalloc(&flush_, flush_bytes_), "cudaMalloc (L2 flush buffer)");
    }
  }
  ~CudaTimer() override {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
    if (flush_) cudaFree(flush_);
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  std::string name() const override { return opt_.graphs ? "cuda-graph" : "cuda-events"; }

  void warm(const std::function<void()>& fn) override {
    fn();
    check_cuda(cudaStreamSynchronize(stream_), "warm-up call");
    if (opt_.graphs && !exec_) capture(fn);
    if (exec_) {
      check_cuda(cudaGraphLaunch(exec_, stream_), "cudaGraphLaunch");
      check_cuda(cudaStreamSynchronize(stream_), "graph warm-up replay");
    }
  }

  double sample(const std::function<void()>& fn, const std::string& label) override {
    if (flush_) check_cuda(cudaMemsetAsync(flush_, ++flush_value_ & 0xff, flush_bytes_, stream_), "L2 flush");
    {
      NvtxRange range(label);  // the flush stays outside the range so ncu's NVTX filter skips it
      check_cuda(cudaEventRecord(start_, stream_), "cudaEventRecord");
      if (exec_) {
        check_cuda(cudaGraphLaunch(exec_, stream_), "cudaGraphLaunch");
      } else {
        fn();
      }
      check_cuda(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    }
    check_cuda(cudaEventSynchronize(stop_), "timed call");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms;
  }

 private:
  void capture(const std::function<void()>& fn) {
    check_cuda(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    try {
      fn();
    } catch (...) {
      cudaGraph_t g = nullptr;
      cudaStreamEndCapture(stream_, &g);
      if (g) cudaGraphDestroy(g);
      throw;
    }
    check_cuda(cudaStreamEndCapture(stream_, &graph_), "graph capture of the op call (--graphs)");
    check_cuda(cudaGraphInstantiate(&exec_, graph_, 0), "cudaGraphInstantiate");
  }

  CudaTimerOptions opt_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  void* flush_ = nullptr;
  std::size_t flush_bytes_ = 0;
  int flush_value_ = 0;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};
}  // namespace

std::unique_ptr<Timer> make_cuda_timer(const CudaTimerOptions& o) { return std::make_unique<CudaTimer>(o); }
#else
std::unique_ptr<Timer> make_cuda_timer(const CudaTimerOptions&) {
  throw_unsupported("--backend", "cuda", "cpu (this build has no CUDA backend)");
}
#endif

// ---------------------------------------------------------------------------------------------
// NVML (declared here: nvml.h is not installed; the library comes with the driver)

namespace {
#ifdef LINA_WITH_CUDA
using nvmlDevice = void*;
struct Nvml {
  int (*init)() = nullptr;
  int (*by_pci)(const char*, nvmlDevice*) = nullptr;
  int (*clock)(nvmlDevice, int, unsigned*) = nullptr;
  int (*max_clock)(nvmlDevice, int, unsigned*) = nullptr;
  int (*reasons)(nvmlDevice, unsigned long long*) = nullptr;
  int (*driver)(char*, unsigned) = nullptr;
  bool ok = false;
};

const Nvml& nvml() {
  static const Nvml lib = [] {
    Nvml n;
    void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return n;
    const auto sym = [h](const char* s) { return dlsym(h, s); };
    n.init = reinterpret_cast<int (*)()>(sym("nvmlInit_v2"));
    n.by_pci = reinterpret_cast<int (*)(const char*, nvmlDevice*)>(sym("nvmlDeviceGetHandleByPciBusId_v2"));
    n.clock = reinterpret_cast<int (*)(nvmlDevice, int, unsigned*)>(sym("nvmlDeviceGetClockInfo"));
    n.max_clock = reinterpret_cast<int (*)(nvmlDevice, int, unsigned*)>(sym("nvmlDeviceGetMaxClockInfo"));
    void* r = sym("nvmlDeviceGetCurrentClocksEventReasons");
    if (!r) r = sym("nvmlDeviceGetCurrentClocksThrottleReasons");
    n.reasons = reinterpret_cast<int (*)(nvmlDevice, unsigned long long*)>(r);
    n.driver = reinterpret_cast<int (*)(char*, unsigned)>(sym("nvmlSystemGetDriverVersion"));
    n.ok = n.init && n.by_pci && n.clock && n.init() == 0;
    return n;
  }();
  return lib;
}
constexpr int kNvmlClockSm = 1;
#endif
}  // namespace

ClockReading read_clock(int cuda_device) {
  ClockReading r;
#ifdef LINA_WITH_CUDA
  const Nvml& n = nvml();
  if (!n.ok) return r;
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, cuda_device) != cudaSuccess) {
    (void)cudaGetLastError();
    return r;
  }
  nvmlDevice dev = nullptr;
  if (n.by_pci(bus, &dev) != 0) return r;
  unsigned mhz = 0;
  if (n.clock(dev, kNvmlClockSm, &mhz) == 0) r.sm_mhz = mhz;
  if (n.max_clock && n.max_clock(dev, kNvmlClockSm, &mhz) == 0) r.max_sm_mhz = mhz;
  unsigned long long reasons = 0;
  if (n.reasons && n.reasons(dev, &reasons) == 0) r.throttle_reasons = reasons;
#else
  (void)cuda_device;
#endif
  return r;
}

bool throttled(const ClockReading& after) {
  // NVML reasons: 0x4 SW power cap, 0x8 HW slowdown, 0x20 SW thermal, 0x40 HW thermal, 0x80 power brake.
  constexpr unsigned long long kSlow = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;
  if (after.throttle_reasons && (*after.throttle_reasons & kSlow)) return true;
  if (after.sm_mhz && after.max_sm_mhz && *after.sm_mhz < 0.9 * *after.max_sm_mhz) return true;
  return false;
}

std::string nvml_driver_version() {
#ifdef LINA_WITH_CUDA
  const Nvml& n = nvml();
  char buf[96] = {};
  if (n.ok && n.driver && n.driver(buf, sizeof buf) == 0) return buf;
#endif
  return "";
}

}  // namespace lina::harness
