#include "harness/util/proc_util.h"

#include "harness/util/subprocess.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "lina/error.h"

namespace lina::harness {
namespace fs = std::filesystem;

ProcResult run_process(const std::vector<std::string>& argv, const std::optional<fs::path>& cwd) {
  if (argv.empty()) throw Error(ErrorCode::invalid_argument, "argv", "run_process: empty argv");
  ProcessOptions opts;
  opts.cwd = cwd;
  ProcessResult p = spawn_process(argv, opts);
  if (!p.spawned) return {127, std::move(p.out), p.err + p.spawn_error + "\n"};
  return {p.exit_code, std::move(p.out), std::move(p.err)};
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

fs::path self_executable() { return current_executable(); }

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
