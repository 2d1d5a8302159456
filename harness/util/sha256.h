// SHA-256 of a byte string or a file's contents, lower-case hex: frozen-gate hashes, loop-log
// evidence, baseline cache keys.
#pragma once
#include <cstddef>
#include <filesystem>
#include <string>

namespace lina::harness {

std::string sha256_hex(const std::string& bytes);
// The largest file hashed (Nsight Compute reports of a full set run to a few GiB).
inline constexpr std::size_t kMaxEvidenceBytes = std::size_t{16} << 30;
// lina::Error(invalid_argument) naming the file when it cannot be read or is not a regular file.
std::string sha256_file(const std::filesystem::path& file);

}  // namespace lina::harness
