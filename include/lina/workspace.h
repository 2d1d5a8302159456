// Device scratch of the CUDA kernels (chunk states, per-chunk workspaces) comes from one lina-owned
// stream-ordered memory pool per device that keeps its memory between calls, as PyTorch's caching
// allocator does: re-mapping ~1-3 GB per call cost ~1 ms at B1_T8192_H96_D128. These functions report
// what that pool holds and give it back. Without a CUDA build they report zeros and do nothing.
#pragma once
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

}  // namespace lina
