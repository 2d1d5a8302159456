// Per-stage times of a multi-kernel call on one stream, for the measurement knobs LINA_DELTA_BWD_STAGES and
// LINA_DELTA_FWD_STAGES: an event at each mark, and once the last one has completed one stderr line
// "<label> stages (ms): <name> <ms> ..." (the time from the previous mark to each named one). It synchronises the
// stream, so it is for measurement only; switched off, every call returns at once.
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ops/common/cuda/cuda_common.cuh"

namespace lina::detail::cuda_util {

// An environment switch: set to anything but "" or "0".
inline bool env_flag(const char* name) {
  const char* e = std::getenv(name);
  return e && *e && *e != '0';
}

class StageTimer {
 public:
  StageTimer(bool on, cudaStream_t stream, const char* label) : on_(on), stream_(stream), label_(label) {}
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;
  ~StageTimer() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  // The first mark is the start; each later one ends the stage it names.
  void mark(const char* name) {
    if (!on_) return;
    cudaEvent_t e;
    check(cudaEventCreate(&e), "cudaEventCreate");
    events_.push_back(e);
    names_.push_back(name);
    check(cudaEventRecord(e, stream_), "cudaEventRecord");
  }
  void report() {
    if (!on_ || events_.empty()) return;
    check(cudaEventSynchronize(events_.back()), "cudaEventSynchronize");
    std::fprintf(stderr, "%s stages (ms):", label_);
    for (std::size_t i = 1; i < events_.size(); ++i) {
      float ms = 0.f;
      cudaEventElapsedTime(&ms, events_[i - 1], events_[i]);
      std::fprintf(stderr, " %s %.3f", names_[i], ms);
    }
    std::fprintf(stderr, "\n");
  }

 private:
  bool on_;
  cudaStream_t stream_;
  const char* label_;
  std::vector<cudaEvent_t> events_;
  std::vector<const char*> names_;
};

}  // namespace lina::detail::cuda_util
