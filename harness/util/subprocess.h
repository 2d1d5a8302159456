// Running a child process from an argv vector (posix_spawn, no shell, so no quoting or injection
// hazards), with its stdout/stderr captured, optionally extra environment variables and a cwd.
#pragma once
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lina::harness {

struct ProcessResult {
  int exit_code = -1;   // the child's exit status; 128 + signal when it was killed by a signal
  bool spawned = false; // false: the program could not be started (not found, not executable)
  std::string out;      // captured stdout (empty when redirected to a log file)
  std::string err;      // captured stderr (empty when redirected to a log file)
  std::string spawn_error;
};

struct ProcessOptions {
  std::map<std::string, std::string> env;           // set (or override) in the child's environment
  std::vector<std::string> unset_env;                // removed from the child's environment
  std::optional<std::filesystem::path> cwd;          // working directory of the child
  std::optional<std::filesystem::path> log_file;     // stdout+stderr appended here instead of captured
  bool inherit_output = false;                       // child writes to our terminal (nothing captured)
};

// argv[0] is looked up on PATH when it has no '/'.
ProcessResult spawn_process(const std::vector<std::string>& argv, const ProcessOptions& opts = {});

// A shell-quoted rendering of argv, for messages and JSON `config.command` only (never executed).
std::string quote_argv(const std::vector<std::string>& argv);

// Path of the running executable (/proc/self/exe).
std::filesystem::path current_executable();

// A fresh private directory under $TMPDIR (or /tmp), removed by the destructor.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "lina");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace lina::harness
