#include "ops/common/cuda/launch_setup.h"

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "ops/common/cuda/cuda_common.cuh"

namespace lina::detail::cuda_util {
int current_device() {
  int d = 0;
  check(cudaGetDevice(&d), "cudaGetDevice");
  return d;
}

int sm_count() {
  static std::mutex mu;
  static std::vector<int> counts;  // by device; 0 = not queried yet
  const int d = current_device();
  const std::lock_guard<std::mutex> lock(mu);
  if (static_cast<int>(counts.size()) <= d) counts.resize(static_cast<std::size_t>(d) + 1, 0);
  int& n = counts[static_cast<std::size_t>(d)];
  if (n == 0) check(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, d), "cudaDeviceGetAttribute(SM count)");
  return n;
}

void set_func_attribute(const void* kernel, cudaFuncAttribute attr, int value, const char* what) {
  static std::mutex mu;
  static std::set<std::tuple<int, const void*, int, int>> done;
  const auto key = std::make_tuple(current_device(), kernel, static_cast<int>(attr), value);
  const std::lock_guard<std::mutex> lock(mu);
  if (done.count(key)) return;
  check(cudaFuncSetAttribute(kernel, attr, value), (std::string("cudaFuncSetAttribute(") + what + ")").c_str());
  done.insert(key);
}

namespace {
// An event recorded on `from` that `to` waits for (destroyed at once: the wait keeps what it needs).
void stream_wait(cudaStream_t to, cudaStream_t from) {
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate(fork / join)");
  const cudaError_t rec = cudaEventRecord(e, from);
  const cudaError_t wait = rec == cudaSuccess ? cudaStreamWaitEvent(to, e, 0) : rec;
  cudaEventDestroy(e);
  check(wait, "cudaEventRecord / cudaStreamWaitEvent (fork / join)");
}
}  // namespace

cudaStream_t fork_side_stream(cudaStream_t main) {
  static std::mutex mu;
  static std::vector<cudaStream_t> sides;  // by device
  const int d = current_device();
  cudaStream_t side = nullptr;
  {
    const std::lock_guard<std::mutex> lock(mu);
    if (static_cast<int>(sides.size()) <= d) sides.resize(static_cast<std::size_t>(d) + 1, nullptr);
    cudaStream_t& s = sides[static_cast<std::size_t>(d)];
    if (!s) check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate(side stream)");
    side = s;
  }
  stream_wait(side, main);
  return side;
}

void join_side_stream(cudaStream_t main, cudaStream_t side) { stream_wait(main, side); }

int max_active_blocks(const void* kernel, int threads, std::size_t smem_bytes, const char* what) {
  static std::mutex mu;
  static std::map<std::tuple<int, const void*, int, std::size_t>, int> known;
  const auto key = std::make_tuple(current_device(), kernel, threads, smem_bytes);
  const std::lock_guard<std::mutex> lock(mu);
  if (auto it = known.find(key); it != known.end()) return it->second;
  int n = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem_bytes),
        (std::string("cudaOccupancyMaxActiveBlocksPerMultiprocessor(") + what + ")").c_str());
  known.emplace(key, n);
  return n;
}

}  // namespace lina::detail::cuda_util
