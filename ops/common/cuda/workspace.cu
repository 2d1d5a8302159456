// lina's per-device scratch pool (include/lina/workspace.h): one cudaMemPool_t per device, created
// on first use, release threshold "keep everything" so repeated calls reuse their mapping.
#include "ops/common/cuda/workspace.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "lina/workspace.h"
#include "ops/common/cuda/cuda_common.cuh"

namespace lina {
namespace {

int resolve(int device) {
  if (device >= 0) return device;
  int d = 0;
  detail::cuda_util::check(cudaGetDevice(&d), "cudaGetDevice");
  return d;
}

cudaMemPool_t pool_of(int device) {
  static std::mutex mu;
  static std::map<int, cudaMemPool_t> pools;
  const std::lock_guard<std::mutex> lock(mu);
  if (auto it = pools.find(device); it != pools.end()) return it->second;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr;
  detail::cuda_util::check(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate(lina workspace)");
  std::uint64_t keep = UINT64_MAX;
  detail::cuda_util::check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
  pools.emplace(device, pool);
  return pool;
}

std::uint64_t attr(cudaMemPool_t pool, cudaMemPoolAttr a) {
  std::uint64_t v = 0;
  detail::cuda_util::check(cudaMemPoolGetAttribute(pool, a, &v), "cudaMemPoolGetAttribute");
  return v;
}

}  // namespace

WorkspaceStats workspace_stats(int device) {
  const cudaMemPool_t pool = pool_of(resolve(device));
  return {attr(pool, cudaMemPoolAttrReservedMemCurrent), attr(pool, cudaMemPoolAttrUsedMemCurrent),
          attr(pool, cudaMemPoolAttrUsedMemHigh)};
}

void reset_workspace_high_water(int device) {
  std::uint64_t zero = 0;  // resets the high-water mark to the current use
  detail::cuda_util::check(cudaMemPoolSetAttribute(pool_of(resolve(device)), cudaMemPoolAttrUsedMemHigh, &zero),
                           "cudaMemPoolSetAttribute(UsedMemHigh)");
}

void release_workspace(int device) {
  detail::cuda_util::check(cudaMemPoolTrimTo(pool_of(resolve(device)), 0), "cudaMemPoolTrimTo");
}

namespace detail::cuda_util {

void* workspace_alloc(std::size_t bytes, cudaStream_t stream, const char* what) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  check(cudaMallocFromPoolAsync(&p, bytes, pool_of(resolve(-1)), stream),
        (std::string("cudaMallocFromPoolAsync(") + what + ", " + std::to_string(bytes) + " bytes)").c_str());
  return p;
}

void workspace_free(void* p, cudaStream_t stream, const char* what) {
  if (p) check(cudaFreeAsync(p, stream), (std::string("cudaFreeAsync(") + what + ")").c_str());
}

}  // namespace detail::cuda_util
}  // namespace lina
