#include "harness/proc_util.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "lina/error.h"

namespace lina::harness {
namespace fs = std::filesystem;

ProcResult run_process(const std::vector<std::string>& argv, const std::optional<fs::path>& cwd) {
  ProcResult r;
  if (argv.empty()) throw Error(ErrorCode::invalid_argument, "argv", "run_process: empty argv");
  int out_pipe[2], err_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) {
    throw Error(ErrorCode::runtime, "", std::string("pipe failed: ") + std::strerror(errno));
  }
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw Error(ErrorCode::runtime, "", std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    close(out_pipe[0]); close(out_pipe[1]); close(err_pipe[0]); close(err_pipe[1]);
    if (cwd && chdir(cwd->c_str()) != 0) _exit(127);
    execvp(cargv[0], cargv.data());
    const char* msg = "exec failed\n";
    (void)!write(2, msg, std::strlen(msg));
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  // Drain both pipes together so that a chatty child can never block on a full pipe.
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) r.exit_code = 128 + WTERMSIG(status);
  return r;
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

fs::path self_executable() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error(ErrorCode::runtime, "", "cannot read /proc/self/exe: " + ec.message());
  return p;
}

static std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string git_resolve_commit(const fs::path& repo, const std::string& ref, const std::string& flag) {
  // A ref starting with '-' would be read by git as an option.
  if (ref.empty() || ref[0] == '-') {
    throw Error(ErrorCode::invalid_argument, flag, flag + " `" + ref + "`: not a git ref");
  }
  auto r = run_process({"git", "-C", repo.string(), "rev-parse", "--verify", "--quiet", ref + "^{commit}"});
  const std::string sha = trim(r.out);
  if (r.exit_code != 0 || sha.size() != 40) {
    throw Error(ErrorCode::invalid_argument, flag,
                flag + " `" + ref + "`: does not name a commit in " + repo.string());
  }
  return sha;
}

fs::path git_toplevel(const fs::path& start) {
  auto r = run_process({"git", "-C", start.string(), "rev-parse", "--show-toplevel"});
  if (r.exit_code != 0) {
    throw Error(ErrorCode::invalid_argument, "repo", start.string() + " is not inside a git work tree");
  }
  return fs::path(trim(r.out));
}

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
