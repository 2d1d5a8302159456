// Device scratch of the CUDA kernels (chunk states, per-chunk workspaces) comes from one lina-owned
// stream-ordered memory pool per device that keeps its memory between calls, as PyTorch's caching
// allocator does: re-mapping ~1-3 GB per call cost ~1 ms at B1_T8192_H96_D128. These functions report
// what that pool holds and give it back. Without a CUDA build they report zeros and do nothing.
#pragma once
#include <cstddef>
#include <cstdint>

namespace lina {

struct WorkspaceStats {
  std::uint64_t reserved_bytes = 0;   // held by the pool (free or in use)
  std::uint64_t used_bytes = 0;       // in use by calls still in flight
  std::uint64_t used_high_bytes = 0;  // high-water mark of used_bytes since the last reset
};

// device < 0: the current device.
WorkspaceStats workspace_stats(int device = -1);
void reset_workspace_high_water(int device = -1);
// Returns the pool's unused memory to the driver (after the frees already enqueued).
void release_workspace(int device = -1);

// Scratch from the caller's allocator instead of lina's pool: a framework (PyTorch's caching allocator)
// then sees lina's scratch in its own statistics and its CUDA-graph pools. `allocate` returns memory
// usable by work enqueued on `stream` (a cudaStream_t) after the call, or nullptr on failure; `release`
// takes it back once the work enqueued on that stream so far has used it (stream order, as
// cudaFreeAsync). Both run on the calling thread with the target device current. An allocator with
// allocate == nullptr restores lina's pool. Set it before the first call, not while calls are in flight.
struct WorkspaceAllocator {
  void* (*allocate)(std::size_t bytes, void* stream, void* context) = nullptr;
  void (*release)(void* ptr, void* stream, void* context) = nullptr;
  void* context = nullptr;
};
void set_workspace_allocator(const WorkspaceAllocator& allocator);

}  // namespace lina
