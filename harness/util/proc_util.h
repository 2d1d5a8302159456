// Small process helpers for the toolkit commands (compare, profile, cmd, loop): run a child with an
// argv (never through a shell), capture its output, find programs on PATH, resolve git refs.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace lina::harness {

struct ProcResult {
  int exit_code = -1;  // 127 when the program could not be started; 128+N when killed by signal N
  std::string out;
  std::string err;
};

// Runs argv[0] (looked up on PATH when it has no '/') with argv, in `cwd` when given.
ProcResult run_process(const std::vector<std::string>& argv,
                       const std::optional<std::filesystem::path>& cwd = std::nullopt);

// Absolute path of `name` on PATH, or nullopt.
std::optional<std::filesystem::path> find_on_path(const std::string& name);

// Path of the running executable (/proc/self/exe).
std::filesystem::path self_executable();

// `git rev-parse --verify REF^{commit}` in `repo`: the full SHA, or lina::Error naming `flag`.
std::string git_resolve_commit(const std::filesystem::path& repo, const std::string& ref,
                               const std::string& flag);

// Top of the git work tree containing `start`, or lina::Error.
std::filesystem::path git_toplevel(const std::filesystem::path& start);

// Whole file as a string, or lina::Error naming the path.
std::string read_text_file(const std::filesystem::path& path);
void write_text_file(const std::filesystem::path& path, const std::string& text);

}  // namespace lina::harness
