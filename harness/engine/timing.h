// Timers and the sampling loop. The loop follows nvbench: warm-up, then samples until at least
// `min_samples` and relative noise (std / mean) below `max_noise`, or the time budget or
// `max_samples` runs out.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lina::harness {

struct TimingPolicy {
  int warmup = 3;              // untimed calls before sampling (at least one: first-call costs)
  int min_samples = 10;
  int max_samples = 1000;
  double max_noise = 0.005;    // relative (std / mean)
  double time_budget_s = 2.0;  // wall-clock budget for sampling one cell
};

struct Measurement {
  std::vector<double> times_ms;
  double noise = 0;
  std::string stop_reason;  // noise | time_budget | max_samples
};

// Times one call per sample. `prepare` runs untimed before each sample (the L2 flush).
class Timer {
 public:
  virtual ~Timer() = default;
  virtual std::string name() const = 0;  // "cpu-steady-clock" | "cuda-events" | "cuda-graph"
  // Runs fn once untimed (warm-up); a graph timer captures on its first call.
  virtual void warm(const std::function<void()>& fn) = 0;
  // One timed sample of fn, in ms; `label` names an NVTX range around the timed call only.
  virtual double sample(const std::function<void()>& fn, const std::string& label) = 0;
};

// Drives a Timer by the policy. `label` names the NVTX range around each timed call. `reset`, when
// given, runs untimed before every call (warm-up and sample, ahead of the L2 flush): it restores what
// the call changes in place (a decode op's state pool) so that every sample times the same work.
Measurement measure(Timer& timer, const std::function<void()>& fn, const TimingPolicy& policy,
                    const std::string& label = "", const std::function<void()>& reset = {});

std::unique_ptr<Timer> make_cpu_timer();

struct CudaTimerOptions {
  bool l2_flush = true;
  bool graphs = false;
  void* stream = nullptr;  // cudaStream_t the op runs on (must not be the legacy stream for graphs)
};
// Throws lina::Error(unsupported) when CUDA is not compiled in.
std::unique_ptr<Timer> make_cuda_timer(const CudaTimerOptions& options);

// SM clock through NVML (dlopen'd at run time; nullopt when NVML or the GPU is absent).
struct ClockReading {
  std::optional<double> sm_mhz;
  std::optional<double> max_sm_mhz;
  std::optional<unsigned long long> throttle_reasons;  // NVML clocks-event reasons bitmask
};
ClockReading read_clock(int cuda_device = 0);
// Throttled: clock after below 0.9 x max, or NVML reports a power / thermal / slowdown reason.
bool throttled(const ClockReading& after);
// NVML driver version string, or empty.
std::string nvml_driver_version();

// NVTX range (no-op without the NVTX3 headers). Ranges are named "lina:timed:<op>:<mode>:<shape>".
class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name);
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;

 private:
  bool active_ = false;
};

}  // namespace lina::harness
