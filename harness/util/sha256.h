// SHA-256 of a byte string or a file's contents, lower-case hex: frozen-gate hashes, loop-log
// evidence, baseline cache keys.
#pragma once
#include <filesystem>
#include <string>

namespace lina::harness {

std::string sha256_hex(const std::string& bytes);
// lina::Error(invalid_argument) naming the file when it cannot be read.
std::string sha256_file(const std::filesystem::path& file);

}  // namespace lina::harness
