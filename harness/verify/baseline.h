// A git ref as a baseline: resolved to a SHA, exported (never checked out in the user's tree),
// built out of tree into a cache keyed by SHA + toolchain, and reused while the key holds.
#pragma once
#include "harness/util/baseline_error.h"
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace lina::harness {


// `git rev-parse --verify REF^{commit}` in `repo`; unknown ref -> BaselineError.
std::string resolve_ref(const std::filesystem::path& repo, const std::string& ref);
// Tracked files modified (untracked files ignored, like the build's own dirty flag).
bool working_tree_dirty(const std::filesystem::path& repo);

// The warning given when `sha` is the checkout's HEAD and tracked files are modified (the baseline
// is the committed tree, without the edits); empty when there is nothing to warn about.
std::string dirty_head_warning(const std::filesystem::path& repo, const std::string& ref, const std::string& sha);

// ${LINA_CACHE_DIR:-$HOME/.cache/lina}/baselines
std::filesystem::path baseline_cache_root();

// Hash of what makes two builds of one SHA differ: compiler versions (c++/$CXX, nvcc when
// present, cmake) and the CMake arguments.
std::string toolchain_key(const std::vector<std::string>& cmake_args);

struct BaselineOptions {
  std::filesystem::path repo;             // the user's checkout (read only: rev-parse, archive)
  std::string ref;                        // as typed: HEAD~1, a branch, a SHA
  std::vector<std::string> cmake_args;    // e.g. -DLINA_WITH_CUDA=OFF (mirrors the candidate's build)
  std::filesystem::path cache_root;       // empty: baseline_cache_root()
  int jobs = 0;                           // 0: the build tool's default
};

struct Baseline {
  std::string ref, sha, key;
  std::filesystem::path dir;       // <cache_root>/<key>
  std::filesystem::path lina_exe;  // <dir>/build/cli/lina
  std::filesystem::path log;       // <dir>/build.log
  bool reused = false;             // true: the stamp was present, nothing was built
  std::vector<std::string> warnings;
};

// Resolve, export, refuse pre-lina trees, build only the `lina` target, stamp. BaselineError on
// any failure (build failures name the log).
Baseline prepare_baseline(const BaselineOptions& opts);

}  // namespace lina::harness
