// The one way the harness runs a child process: an argv vector (posix_spawn, no shell, so no quoting
// or injection hazards), stdout/stderr captured, optional extra environment variables, a cwd and a
// timeout after which the child's whole process group is killed. Every child leads its own process
// group; forward_signals_to_children() makes SIGINT / SIGTERM / SIGHUP of the caller kill those
// groups too, so that a killed `lina verify` leaves no cmake, ninja or gate behind.
#pragma once
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lina::harness {

struct ProcessResult {
  int exit_code = -1;      // the child's exit status; 128 + signal when killed by a signal; 127 when not started
  bool spawned = false;    // false: the program could not be started (not found, not executable)
  bool timed_out = false;  // true: killed (SIGKILL to its process group) when ProcessOptions::timeout ran out
  std::string out;         // captured stdout (empty when redirected to a log file)
  std::string err;         // captured stderr (empty when redirected to a log file)
  std::string spawn_error; // why the program could not be started
  // stderr, or the reason the program did not start (for messages).
  std::string err_or_spawn_error() const { return spawned ? err : err + spawn_error + "\n"; }
};

struct ProcessOptions {
  std::map<std::string, std::string> env;           // set (or override) in the child's environment
  std::vector<std::string> unset_env;                // removed from the child's environment
  std::optional<std::filesystem::path> cwd;          // working directory of the child
  std::optional<std::filesystem::path> log_file;     // stdout+stderr appended here instead of captured
  bool inherit_output = false;                       // child writes to our terminal (nothing captured)
  // The child's process group is killed (SIGKILL) when the time runs out, so that its own children
  // cannot outlive it. Absent: child_timeout(kDefaultTimeout).
  std::optional<std::chrono::milliseconds> timeout;
};

// Time limits of the children the harness starts (docs/environment.md). LINA_CHILD_TIMEOUT_S, a
// whole number of seconds > 0, replaces every one of them.
inline constexpr std::chrono::seconds kQuickTimeout{600};         // git, `--version`, listing a gate
inline constexpr std::chrono::seconds kDefaultTimeout{4 * 3600};  // a gate suite, a `lina run`, ncu
inline constexpr std::chrono::seconds kBuildTimeout{8 * 3600};    // configuring or building a baseline
// `fallback`, or LINA_CHILD_TIMEOUT_S when it is set; lina::Error naming it when it is not a count of seconds.
std::chrono::milliseconds child_timeout(std::chrono::seconds fallback);
// "timed out after N s (LINA_CHILD_TIMEOUT_S changes the limit)", for messages.
std::string timeout_message(const ProcessOptions& opts);

// Installs handlers of SIGINT, SIGTERM and SIGHUP that kill the process group of every child
// run_process is waiting for, then end this process by the same signal. Called once by `lina`'s main.
void forward_signals_to_children();

// argv[0] is looked up on PATH when it has no '/'.
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& opts = {});

// A shell-quoted rendering of argv, for messages and JSON `config.command` only (never executed).
std::string quote_argv(const std::vector<std::string>& argv);

// Path of the running executable (/proc/self/exe).
std::filesystem::path current_executable();

// Absolute path of `name` on PATH (or `name` itself when it holds a '/' and is executable), or nullopt.
std::optional<std::filesystem::path> find_on_path(const std::string& name);

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
