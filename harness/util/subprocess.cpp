#include "harness/util/subprocess.h"

#include "harness/util/shell_quote.h"
#include "lina/error.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>
#include <thread>

extern char** environ;

namespace lina::harness {
namespace fs = std::filesystem;
namespace {

// The process groups of the children being waited for, read by the signal handler (lock-free atomics
// only: it may run at any point of run_process). One slot per concurrent run_process call.
constexpr int kMaxLiveChildren = 64;
std::atomic<pid_t> live_groups[kMaxLiveChildren];

// Registers a child's process group for the lifetime of the wait.
class LiveGroup {
 public:
  explicit LiveGroup(pid_t pgid) {
    for (int i = 0; i < kMaxLiveChildren; ++i) {
      pid_t empty = 0;
      if (live_groups[i].compare_exchange_strong(empty, pgid)) {
        slot_ = i;
        return;
      }
    }
  }
  ~LiveGroup() {
    if (slot_ >= 0) live_groups[slot_].store(0);
  }
  LiveGroup(const LiveGroup&) = delete;
  LiveGroup& operator=(const LiveGroup&) = delete;

 private:
  int slot_ = -1;
};

extern "C" void kill_children_and_reraise(int sig) {
  for (auto& g : live_groups)
    if (const pid_t pgid = g.load(); pgid > 0) kill(-pgid, SIGKILL);
  signal(sig, SIG_DFL);
  raise(sig);
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// Blocks until `pid` exits; false (errno set) when waitpid fails for another reason than a signal.
bool wait_blocking(pid_t pid, int& status) {
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return false;
  return true;
}

// Polls until `pid` exits or `timeout` runs out; then kills its process group (the child leads it)
// and reaps it. false (errno set) when waitpid fails.
bool wait_with_timeout(pid_t pid, std::chrono::milliseconds timeout, int& status, bool& timed_out) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto nap = std::chrono::milliseconds(1);
  for (;;) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) return true;
    if (w < 0 && errno != EINTR) return false;
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(-pid, SIGKILL);
      timed_out = true;
      return wait_blocking(pid, status);
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::milliseconds(20));
  }
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& opts) {
  ProcessResult r;
  if (argv.empty()) {
    r.exit_code = 127;
    r.spawn_error = "empty command";
    return r;
  }
  // Environment: ours, minus unset_env, with env overriding.
  std::vector<std::string> env_store;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv(*e);
    const std::string key = kv.substr(0, kv.find('='));
    bool drop = opts.env.count(key) > 0;
    for (const auto& u : opts.unset_env) drop = drop || u == key;
    if (!drop) env_store.push_back(kv);
  }
  for (const auto& [k, v] : opts.env) env_store.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_store) envp.push_back(s.data());
  envp.push_back(nullptr);

  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (auto& s : args) cargv.push_back(s.data());
  cargv.push_back(nullptr);

  // Output goes to files rather than pipes: no deadlock on large output, no poll loop.
  std::optional<TempDir> tmp;
  fs::path out_path, err_path;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (opts.log_file) {
    const std::string log = opts.log_file->string();
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
  } else if (!opts.inherit_output) {
    tmp.emplace("lina-proc");
    out_path = tmp->path() / "stdout";
    err_path = tmp->path() / "stderr";
    posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  }
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::string cwd;
  if (opts.cwd) {
    cwd = opts.cwd->string();
    posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
  }
  // Its own process group, killed as a whole at the timeout or when we are signalled (the terminal's
  // Ctrl-C reaches our group only: forward_signals_to_children passes it on).
  const std::chrono::milliseconds timeout = opts.timeout ? *opts.timeout : child_timeout(kDefaultTimeout);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // A signal arriving between the spawn and the registration below would miss the child: hold them
  // (the child starts with the mask we had before).
  sigset_t forwarded, previous;
  sigemptyset(&forwarded);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&forwarded, s);
  pthread_sigmask(SIG_BLOCK, &forwarded, &previous);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &previous);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, cargv[0], &fa, &attr, cargv.data(), envp.data());
  std::optional<LiveGroup> live;
  if (rc == 0) live.emplace(pid);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    r.exit_code = 127;
    r.spawn_error = std::string("cannot start '") + argv[0] + "': " + std::strerror(rc);
    return r;
  }
  int status = 0;
  const bool reaped = wait_with_timeout(pid, timeout, status, r.timed_out);
  if (!reaped) {
    r.exit_code = 127;
    r.spawn_error = std::string("waitpid failed: ") + std::strerror(errno);
    return r;
  }
  // glibc reports exec failures of posix_spawnp as exit status 127 of the child.
  r.spawned = true;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) r.exit_code = 128 + WTERMSIG(status);
  if (tmp) {
    r.out = slurp(out_path);
    r.err = slurp(err_path);
  }
  return r;
}

std::chrono::milliseconds child_timeout(std::chrono::seconds fallback) {
  const char* v = std::getenv("LINA_CHILD_TIMEOUT_S");
  if (v == nullptr || *v == '\0') return fallback;
  const std::string text(v);
  // At most 9 digits: a billion seconds is beyond any build, and the product stays in range.
  if (text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos || std::stoll(text) == 0)
    throw Error(ErrorCode::invalid_argument, "LINA_CHILD_TIMEOUT_S",
                "environment variable `LINA_CHILD_TIMEOUT_S`: seen '" + text + "', expected a whole number of seconds in [1, 999999999]");
  return std::chrono::seconds(std::stoll(text));
}

std::string timeout_message(const ProcessOptions& opts) {
  const auto t = opts.timeout ? *opts.timeout : child_timeout(kDefaultTimeout);
  return "timed out after " + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(t).count()) +
         " s and was killed (LINA_CHILD_TIMEOUT_S changes the limit)";
}

void forward_signals_to_children() {
  struct sigaction sa{};
  sa.sa_handler = kill_children_and_reraise;
  sigemptyset(&sa.sa_mask);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaction(s, &sa, nullptr);
}

std::string quote_argv(const std::vector<std::string>& argv) { return shell_join(argv); }

fs::path current_executable() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return p;
}

std::optional<fs::path> find_on_path(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    if (access(name.c_str(), X_OK) == 0) return fs::absolute(name);
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  if (!path) return std::nullopt;
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    const fs::path p = fs::path(dir) / name;
    std::error_code ec;
    if (fs::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0) return p;
  }
  return std::nullopt;
}

TempDir::TempDir(const std::string& prefix) {
  const char* t = std::getenv("TMPDIR");
  std::string tmpl = std::string(t && *t ? t : "/tmp") + "/" + prefix + "-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr)
    throw std::system_error(errno, std::generic_category(), "cannot create a temporary directory from " + tmpl);
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

}  // namespace lina::harness
