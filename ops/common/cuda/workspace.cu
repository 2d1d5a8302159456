// lina's per-device scratch pool (include/lina/workspace.h): one cudaMemPool_t per device, created
// on first use, release threshold "keep everything" so repeated calls reuse their mapping.
#include "ops/common/cuda/workspace.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "lina/workspace.h"
#include "ops/common/cuda/cuda_common.cuh"
#include "ops/common/cuda/launch_setup.h"

namespace lina {
namespace {

int resolve(int device) { return device >= 0 ? device : detail::cuda_util::current_device(); }

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

// Pinned staging slots for upload_table, per device (their events belong to that device). A slot is
// reused only after the copy that last read it has run (its event), normally long before.
struct StagingRing {
  struct Slot {
    void* host = nullptr;
    std::size_t capacity = 0;
    cudaEvent_t copied = nullptr;
  };
  static constexpr int kSlots = 8;
  Slot slots[kSlots];
  int next = 0;
};

StagingRing& ring_of(int device, std::unique_lock<std::mutex>& lock) {
  static std::mutex mu;
  static std::map<int, StagingRing> rings;
  lock = std::unique_lock<std::mutex>(mu);
  return rings[device];
}

// The caller's allocator (set_workspace_allocator); allocate == nullptr means lina's pool.
WorkspaceAllocator& external_allocator() {
  static WorkspaceAllocator a;
  return a;
}

}  // namespace

void set_workspace_allocator(const WorkspaceAllocator& allocator) {
  if ((allocator.allocate == nullptr) != (allocator.release == nullptr))
    throw_invalid("allocator", "only one of allocate / release set", "both or neither");
  external_allocator() = allocator;
}

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
  if (const WorkspaceAllocator& ext = external_allocator(); ext.allocate != nullptr) {
    void* p = ext.allocate(bytes, stream, ext.context);
    if (p == nullptr)
      throw Error(ErrorCode::runtime, what, std::string("workspace allocator: ") + what + ": " + std::to_string(bytes) +
                                                " bytes could not be allocated");
    return p;
  }
  void* p = nullptr;
  check(cudaMallocFromPoolAsync(&p, bytes, pool_of(resolve(-1)), stream),
        (std::string("cudaMallocFromPoolAsync(") + what + ", " + std::to_string(bytes) + " bytes)").c_str());
  return p;
}

void* upload_table(const void* host, std::size_t bytes, cudaStream_t stream, const char* what) {
  if (bytes == 0) return nullptr;
  void* dev = workspace_alloc(bytes, stream, what);
  std::unique_lock<std::mutex> lock;
  StagingRing& ring = ring_of(resolve(-1), lock);
  StagingRing::Slot& slot = ring.slots[ring.next];
  ring.next = (ring.next + 1) % StagingRing::kSlots;
  if (slot.copied) check(cudaEventSynchronize(slot.copied), "cudaEventSynchronize(staging slot)");
  else check(cudaEventCreateWithFlags(&slot.copied, cudaEventDisableTiming), "cudaEventCreate(staging slot)");
  if (slot.capacity < bytes) {
    if (slot.host) check(cudaFreeHost(slot.host), "cudaFreeHost(staging slot)");
    slot.host = nullptr;
    slot.capacity = 0;
    const std::size_t cap = std::max<std::size_t>(bytes, 64 << 10);
    check(cudaHostAlloc(&slot.host, cap, cudaHostAllocDefault), "cudaHostAlloc(staging slot)");
    slot.capacity = cap;
  }
  std::memcpy(slot.host, host, bytes);
  check(cudaMemcpyAsync(dev, slot.host, bytes, cudaMemcpyHostToDevice, stream), (std::string("cudaMemcpyAsync(") + what + ")").c_str());
  check(cudaEventRecord(slot.copied, stream), "cudaEventRecord(staging slot)");
  return dev;
}

void workspace_free(void* p, cudaStream_t stream, const char* what) {
  if (p == nullptr) return;
  if (const WorkspaceAllocator& ext = external_allocator(); ext.release != nullptr) {
    ext.release(p, stream, ext.context);
    return;
  }
  check(cudaFreeAsync(p, stream), (std::string("cudaFreeAsync(") + what + ")").c_str());
}

}  // namespace detail::cuda_util
}  // namespace lina
