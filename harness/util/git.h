// The one git ref resolver and work-tree lookup of the harness (gate, baseline, compare, profile,
// cmd and loop all resolve refs here), through run_process.
#pragma once
#include <filesystem>
#include <string>

namespace lina::harness {

// The outcome of `git rev-parse --verify REF^{commit}`: the full SHA, or why there is none.
struct ResolvedRef {
  enum class Problem { none, empty, option_like, git_not_started, not_a_commit };
  Problem problem = Problem::none;
  std::string sha;     // set when problem == none
  std::string detail;  // git_not_started: why git could not be started
};

// Never throws; git_resolve_commit and the baseline builder turn a problem into an error.
ResolvedRef resolve_commit(const std::filesystem::path& repo, const std::string& ref);

// resolve_commit; an empty or option-like ref -> lina::Error(invalid_argument) naming `flag` (exit 2),
// a ref that names no commit or git that cannot start -> BaselineError naming `flag` (exit 3, as for
// every command that takes a ref).
std::string git_resolve_commit(const std::filesystem::path& repo, const std::string& ref, const std::string& flag);

// Top of the git work tree containing `start`, or lina::Error.
std::filesystem::path git_toplevel(const std::filesystem::path& start);

}  // namespace lina::harness
