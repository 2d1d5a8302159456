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
