// Per-device launch facts and settings that every call used to query or set again (the host path runs
// inside the timed interval of a small problem: each avoided runtime call is microseconds of it).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace lina::detail::cuda_util {

// cudaGetDevice; a failure throws lina::Error.
int current_device();

// SM count of the current device, queried once per device.
int sm_count();

// cudaFuncSetAttribute(kernel, attr, value) on the current device, once per (device, kernel, attr,
// value); a failure throws lina::Error naming `what`.
void set_func_attribute(const void* kernel, cudaFuncAttribute attr, int value, const char* what);

template <class Kernel>
void set_func_attribute(Kernel* kernel, cudaFuncAttribute attr, int value, const char* what) {
  set_func_attribute(reinterpret_cast<const void*>(kernel), attr, value, what);
}

// cudaFuncAttributeMaxDynamicSharedMemorySize = bytes for `kernel` (set_func_attribute).
template <class Kernel>
void set_max_dynamic_smem(Kernel* kernel, int bytes, const char* what) {
  set_func_attribute(reinterpret_cast<const void*>(kernel), cudaFuncAttributeMaxDynamicSharedMemorySize, bytes, what);
}

// cudaOccupancyMaxActiveBlocksPerMultiprocessor of `kernel` at (threads, dynamic smem bytes) on the
// current device, queried once per (device, kernel, threads, bytes).
int max_active_blocks(const void* kernel, int threads, std::size_t smem_bytes, const char* what);

template <class Kernel>
int max_active_blocks(Kernel* kernel, int threads, std::size_t smem_bytes, const char* what) {
  return max_active_blocks(reinterpret_cast<const void*>(kernel), threads, smem_bytes, what);
}

// Fork / join of independent kernels inside one call. fork_side_stream(main) returns a lina-owned
// non-blocking stream of the current device (created once per device) that waits for main's work so
// far; join_side_stream(main, side) makes main wait for what was enqueued on side since. Both are
// event waits (record / wait, which stream capture accepts), so the call stays ordered on `main` as a whole.
// One call at a time per side stream: calls on different host threads take the mutex of fork / join
// only, so two concurrent calls may share the side stream (correct, only serialised there).
cudaStream_t fork_side_stream(cudaStream_t main);
void join_side_stream(cudaStream_t main, cudaStream_t side);

}  // namespace lina::detail::cuda_util
