#include "harness/engine/device_buffer.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>

#include "lina/error.h"
#include "lina/workspace.h"

#ifdef LINA_WITH_CUDA
#include <cuda_runtime_api.h>

#include "harness/engine/cuda_check.h"
#endif

namespace lina::harness {

namespace {
std::atomic<std::size_t> g_live{0};
}  // namespace

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
#ifdef LINA_WITH_CUDA
  if (bytes > 0) check_cuda(cudaMalloc(&ptr_, bytes), "cudaMalloc");
  g_live += bytes;
#else
  throw_unsupported("--backend", "cuda (a device buffer)", "cpu (this build has no CUDA backend)");
#endif
}

DeviceBuffer::~DeviceBuffer() {
#ifdef LINA_WITH_CUDA
  if (ptr_) cudaFree(ptr_);
  g_live -= bytes_;
#endif
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    DeviceBuffer old(std::move(*this));
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, std::size_t bytes) {
#ifdef LINA_WITH_CUDA
  if (bytes) check_cuda(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
#else
  (void)host, (void)bytes;
#endif
}

void DeviceBuffer::download(void* host, std::size_t bytes) const {
#ifdef LINA_WITH_CUDA
  if (bytes) check_cuda(cudaMemcpy(host, ptr_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
#else
  (void)host, (void)bytes;
#endif
}

void DeviceBuffer::copy_from(const DeviceBuffer& src, void* stream) {
  if (src.bytes_ != bytes_)
    throw_invalid("device copy", std::to_string(src.bytes_) + " bytes into " + std::to_string(bytes_), "buffers of one size");
#ifdef LINA_WITH_CUDA
  if (bytes_ == 0) return;
  check_cuda(cudaMemcpyAsync(ptr_, src.ptr_, bytes_, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)), "cudaMemcpyAsync D2D");
  // The legacy stream does not order work on non-blocking streams: finish before returning.
  if (!stream) check_cuda(cudaStreamSynchronize(nullptr), "cudaMemcpyAsync D2D");
#else
  (void)stream;
#endif
}

void DeviceBuffer::fill_bytes(int value) {
#ifdef LINA_WITH_CUDA
  if (bytes_) check_cuda(cudaMemset(ptr_, value, bytes_), "cudaMemset");
#else
  (void)value;
#endif
}

std::size_t DeviceBuffer::live_bytes() { return g_live.load(); }

DeviceTensor DeviceTensor::empty(DType dtype, const Shape& shape) {
  DeviceTensor t;
  t.dtype = dtype;
  t.shape = shape;
  t.buffer = DeviceBuffer(static_cast<std::size_t>(shape.numel()) * dtype_size(dtype));
  return t;
}

DeviceTensor DeviceTensor::like(const HostTensor& h) { return empty(h.dtype(), h.shape()); }

DeviceTensor DeviceTensor::from_host(const HostTensor& h) {
  DeviceTensor t = like(h);
  t.buffer.upload(h.data(), h.nbytes());
  return t;
}

HostTensor DeviceTensor::to_host() const {
  HostTensor h(dtype, shape);
  buffer.download(h.data(), h.nbytes());
  return h;
}

TensorView DeviceTensor::view(int device_index) const {
  return TensorView::contiguous(buffer.data(), dtype, shape, Device::cuda, device_index);
}

std::size_t device_used_bytes() {
#ifdef LINA_WITH_CUDA
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return total - free;
#else
  return 0;
#endif
}

}  // namespace lina::harness

namespace lina::harness {
std::size_t probe_peak_memory(const std::function<void()>& fn, void* stream) {
#ifdef LINA_WITH_CUDA
  auto st = static_cast<cudaStream_t>(stream);
  int dev = 0;
  check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
  cudaMemPool_t pool = nullptr;
  const bool have_pool = cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess;
  (void)cudaGetLastError();
  std::uint64_t zero = 0, pool_before = 0, pool_high = 0;
  if (have_pool) {
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &pool_before);
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero);
  }
  check_cuda(cudaStreamSynchronize(st), "cudaStreamSynchronize");
  // The kernels' scratch comes from lina's own pool, which keeps its memory mapped between calls:
  // its high-water mark is the call's scratch (device_used_bytes does not grow once it is mapped).
  const std::uint64_t lina_before = workspace_stats().used_bytes;
  reset_workspace_high_water();
  const std::size_t used0 = device_used_bytes();
  fn();
  check_cuda(cudaStreamSynchronize(st), "memory probe call");
  const std::size_t used1 = device_used_bytes();
  if (have_pool) cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &pool_high);
  (void)cudaGetLastError();
  const std::uint64_t lina_high = workspace_stats().used_high_bytes;
  const std::size_t pool_peak = (pool_high > pool_before ? static_cast<std::size_t>(pool_high - pool_before) : 0) +
                                (lina_high > lina_before ? static_cast<std::size_t>(lina_high - lina_before) : 0);
  return std::max(pool_peak, used1 > used0 ? used1 - used0 : std::size_t{0});
#else
  (void)fn, (void)stream;
  return 0;
#endif
}
}  // namespace lina::harness
