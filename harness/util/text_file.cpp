#include "harness/util/text_file.h"

#include <fstream>
#include <sstream>

#include "lina/error.h"

namespace lina::harness {

std::string trim_trailing_space(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

namespace fs = std::filesystem;

std::string read_text_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::invalid_argument, path.string(), path.string() + ": cannot be read");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text_file(const fs::path& path, const std::string& text) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(ErrorCode::invalid_argument, path.string(), path.string() + ": cannot be written");
  out << text;
  if (!out) throw Error(ErrorCode::runtime, path.string(), path.string() + ": write failed");
}

}  // namespace lina::harness
