// TMA tensor maps (host side): cuTensorMapEncodeTiled through the runtime's driver entry point, so nothing links
// libcuda directly. A kernel takes the map in a __grid_constant__ parameter and loads boxes with tma_load_3d
// (ops/common/cuda/mbarrier.cuh).
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <cstdint>
#include <string>

#include "lina/error.h"

namespace lina::detail::cuda_util {

// A [rows][heads][cols] bf16 tensor (cols contiguous, then heads, then rows) read in boxes of box_cols x 1 head x
// box_rows, each landing in shared memory with the 128-byte swizzle (box_cols * 2 must be 128: one SW128 tile of
// box_rows rows). Coordinates of a box: {col, head, row}. Rows past `rows` read as zeros.
inline CUtensorMap tensor_map_bf16_rows_heads_cols(const void* base, std::uint64_t rows, std::uint64_t heads, std::uint64_t cols,
                                                   std::uint32_t box_cols, std::uint32_t box_rows, const char* name) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult status{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &status) != cudaSuccess ||
        status != cudaDriverEntryPointSuccess || fn == nullptr)
      throw Error(ErrorCode::runtime, "", "cuTensorMapEncodeTiled is not available from the CUDA driver");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  CUtensorMap map{};
  const cuuint64_t dims[3] = {cols, heads, rows};
  const cuuint64_t strides[2] = {cols * 2, heads * cols * 2};  // bytes of dims 1, 2
  const cuuint32_t box[3] = {box_cols, 1, box_rows};
  const cuuint32_t elem[3] = {1, 1, 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(base), dims, strides, box, elem,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error(ErrorCode::runtime, name, std::string("cuTensorMapEncodeTiled failed with CUresult ") + std::to_string(r));
  return map;
}

}  // namespace lina::detail::cuda_util
