// NumPy .npy files (format v1, v2 and v3 headers), for `lina check` inputs and outputs.
// Read: little-endian '<f8' '<f4' '<f2' '<i4' '<i8' ('|'/'=' byte orders too on this little-endian
// host), bfloat16 as '<V2' (what ml_dtypes' bfloat16 saves as) and as '<u2' raw bits when the caller
// says the file holds bfloat16 (torch-free tools; `lina check` takes the hint from kwargs.json).
// Write: f64/f32/f16/i32/i64 natively; bfloat16 as '<u2' raw bits (readable by plain numpy:
// `x.view(ml_dtypes.bfloat16)` or `torch.from_numpy(x).view(torch.bfloat16)`).
#pragma once
#include <cstddef>
#include <filesystem>
#include <string>

#include "lina/tensor.h"

namespace lina::harness {

struct NpyReadOptions {
  bool u2_is_bf16 = false;  // interpret '<u2' as raw bfloat16 bits
};

// The largest .npy file read (inputs of the largest shapes are a few GiB).
inline constexpr std::size_t kMaxNpyBytes = std::size_t{64} << 30;

// Missing, malformed, unsupported or truncated file, a FIFO or a folder -> lina::Error
// (invalid_argument) naming the file.
HostTensor read_npy(const std::filesystem::path& file, const NpyReadOptions& opts = {});
// The same on the bytes of a file already read; `file` names it in errors.
HostTensor parse_npy(const std::string& bytes, const std::filesystem::path& file, const NpyReadOptions& opts = {});
void write_npy(const std::filesystem::path& file, const HostTensor& t);

// The dtype string written for `t` ('<f4', ..., '<u2' for bfloat16).
std::string npy_descr(DType t);

}  // namespace lina::harness
