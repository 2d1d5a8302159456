// Shared bits of the toolkit tests: fixture paths, the built `lina` binary, scratch folders.
#pragma once
#include <atomic>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "harness/util/subprocess.h"
#include "lina/build_info.h"

namespace lina::testing {

inline std::filesystem::path data_dir() { return std::filesystem::path(LINA_BUILD_SOURCE_DIR) / "tests" / "data"; }
inline std::filesystem::path data(const std::string& name) { return data_dir() / name; }

// The `lina` binary of this build tree (tests live in <build>/tests, the CLI in <build>/cli).
inline std::filesystem::path lina_binary() {
  return harness::current_executable().parent_path().parent_path() / "cli" / "lina";
}

// A fresh scratch folder per call, removed by the caller's TempDir destructor.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static std::atomic<int> n{0};
    path = std::filesystem::temp_directory_path() /
           ("lina_tools_" + std::to_string(getpid()) + "_" + std::to_string(n++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace lina::testing
