// Whole-file text I/O with errors that name the path.
#pragma once
#include <filesystem>
#include <string>

namespace lina::harness {

// Whole file as a string, or lina::Error(invalid_argument) naming the path.
std::string read_text_file(const std::filesystem::path& path);
// Creates the parent folders; lina::Error naming the path when the file cannot be written.
void write_text_file(const std::filesystem::path& path, const std::string& text);
// Without trailing newlines, carriage returns and spaces (a command's captured output, a /proc field).
std::string trim_trailing_space(std::string s);

}  // namespace lina::harness
