#include "harness/verify/baseline.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "harness/util/git.h"
#include "harness/util/json_file.h"
#include "harness/util/sha256.h"
#include "harness/util/subprocess.h"
#include "harness/util/text_file.h"
#include "lina/error.h"

namespace lina::harness {
namespace fs = std::filesystem;
namespace {

// The file's text, or "" when it cannot be read (a tree without the file).
std::string read_file_or_empty(const fs::path& p) {
  try {
    return read_text_file(p);
  } catch (const Error&) {
    return "";
  }
}

// flock on <dir>.lock: two verifies building the same baseline wait for each other. O_CLOEXEC: the
// build's children must not inherit the lock, or a killed verify's orphans would hold it.
class DirLock {
 public:
  explicit DirLock(const fs::path& p) {
    fd_ = ::open(p.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~DirLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace

std::string resolve_ref(const fs::path& repo, const std::string& ref) {
  const ResolvedRef r = resolve_commit(repo, ref);
  switch (r.problem) {
    case ResolvedRef::Problem::none: return r.sha;
    case ResolvedRef::Problem::empty: throw BaselineError("--base: empty git ref");
    case ResolvedRef::Problem::option_like: throw BaselineError("--base: '" + ref + "' is not a git ref (it starts with '-')");
    case ResolvedRef::Problem::git_not_started: throw BaselineError("cannot run git to resolve --base " + ref + ": " + r.detail);
    case ResolvedRef::Problem::not_a_commit: break;
  }
  throw BaselineError("--base: unknown git ref '" + ref + "' in " + repo.string() + " (git rev-parse found no commit)");
}

bool working_tree_dirty(const fs::path& repo) {
  const ProcessResult r = run_process({"git", "-C", repo.string(), "status", "--porcelain", "--untracked-files=no"});
  return r.spawned && r.exit_code == 0 && !trim_trailing_space(r.out).empty();
}

std::string dirty_head_warning(const fs::path& repo, const std::string& ref, const std::string& sha) {
  // The candidate build includes uncommitted edits; a baseline is always the committed tree.
  const ProcessResult head = run_process({"git", "-C", repo.string(), "rev-parse", "HEAD"});
  if (!head.spawned || head.exit_code != 0 || trim_trailing_space(head.out) != sha || !working_tree_dirty(repo)) return "";
  return "--base " + ref + " is HEAD and the working tree has uncommitted changes: the baseline is the committed HEAD " +
         sha.substr(0, 12) + ", without them";
}

fs::path baseline_cache_root() {
  if (const char* d = std::getenv("LINA_CACHE_DIR"); d && *d) return fs::path(d) / "baselines";
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : "/tmp") / ".cache" / "lina" / "baselines";
}

std::string toolchain_key(const std::vector<std::string>& cmake_args) {
  std::string id;
  const char* cxx = std::getenv("CXX");
  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{cxx && *cxx ? cxx : "c++", "--version"}, {"cmake", "--version"}, {"nvcc", "--version"},
        {"/usr/local/cuda/bin/nvcc", "--version"}}) {
    const ProcessResult r = run_process(cmd);
    id += cmd[0] + ": " + (r.spawned && r.exit_code == 0 ? r.out : std::string("absent")) + "\n";
  }
  for (const auto& a : cmake_args) id += "arg: " + a + "\n";
  return sha256_hex(id).substr(0, 16);
}

Baseline prepare_baseline(const BaselineOptions& opts) {
  Baseline b;
  b.ref = opts.ref;
  b.sha = resolve_ref(opts.repo, opts.ref);
  if (std::string w = dirty_head_warning(opts.repo, opts.ref, b.sha); !w.empty()) b.warnings.push_back(w);

  b.key = b.sha + "-" + toolchain_key(opts.cmake_args);
  const fs::path root = opts.cache_root.empty() ? baseline_cache_root() : opts.cache_root;
  b.dir = root / b.key;
  b.lina_exe = b.dir / "build" / "cli" / "lina";
  b.log = b.dir / "build.log";
  const fs::path stamp = b.dir / "stamp.json";
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) throw BaselineError("cannot create the baseline cache " + root.string() + ": " + ec.message());
  DirLock lock(root / (b.key + ".lock"));

  if (fs::is_regular_file(stamp) && fs::is_regular_file(b.lina_exe)) {
    try {
      const auto j = read_json_file(stamp);
      if (j.value("sha", "") == b.sha && j.value("key", "") == b.key) {
        b.reused = true;
        return b;
      }
    } catch (const std::exception&) {
      // A corrupt stamp means an unknown state: rebuild.
    }
  }
  fs::remove(stamp, ec);

  // Export with `git archive`: the user's checkout, index and HEAD are never touched.
  const fs::path src = b.dir / "src";
  fs::remove_all(src, ec);
  fs::create_directories(src);
  const fs::path tar = b.dir / "src.tar";
  ProcessResult r = run_process({"git", "-C", opts.repo.string(), "archive", "--format=tar", "-o", tar.string(), b.sha});
  if (!r.spawned || r.exit_code != 0) throw BaselineError("git archive of " + b.sha + " failed: " + trim_trailing_space(r.err) + r.spawn_error);
  r = run_process({"tar", "-xf", tar.string(), "-C", src.string()});
  fs::remove(tar, ec);
  if (!r.spawned || r.exit_code != 0) throw BaselineError("unpacking the export of " + b.sha + " failed: " + trim_trailing_space(r.err) + r.spawn_error);

  const std::string cml = read_file_or_empty(src / "CMakeLists.txt");
  if (cml.find("project(lina") == std::string::npos || !fs::is_directory(src / "cli"))
    throw BaselineError("--base " + opts.ref + " (" + b.sha.substr(0, 12) + ") predates lina: its tree has no " +
                        (cml.empty() ? "CMakeLists.txt" : cml.find("project(lina") == std::string::npos ? "project(lina) in CMakeLists.txt" : "cli/") +
                        "; pick a ref that has the `lina` command");

  const bool ninja = run_process({"ninja", "--version"}).exit_code == 0;
  std::vector<std::string> configure = {"cmake", "-S", src.string(), "-B", (b.dir / "build").string()};
  if (ninja) {
    configure.push_back("-G");
    configure.push_back("Ninja");
  }
  for (const std::string& a : {std::string("-DCMAKE_BUILD_TYPE=Release"), "-DLINA_GIT_SHA=" + b.sha, std::string("-DLINA_BUILD_TESTS=OFF")})
    configure.push_back(a);
  for (const auto& a : opts.cmake_args) configure.push_back(a);
  ProcessOptions po;
  po.log_file = b.log;
  po.timeout = child_timeout(kBuildTimeout);
  try {
    write_file_atomically(b.log, "# baseline " + opts.ref + " = " + b.sha + "\n# " + quote_argv(configure) + "\n");
  } catch (const Error& e) {
    throw BaselineError(std::string("cannot write the baseline's build log: ") + e.what());
  }
  const auto why = [&](const ProcessResult& p) { return p.timed_out ? " (" + timeout_message(po) + ")" : std::string(); };
  r = run_process(configure, po);
  if (!r.spawned || r.exit_code != 0)
    throw BaselineError("configuring the baseline " + opts.ref + " (" + b.sha.substr(0, 12) + ") failed" + why(r) + "; log: " + b.log.string());
  std::vector<std::string> build = {"cmake", "--build", (b.dir / "build").string(), "--target", "lina"};
  if (opts.jobs > 0) {
    build.push_back("-j");
    build.push_back(std::to_string(opts.jobs));
  }
  r = run_process(build, po);
  if (!r.spawned || r.exit_code != 0 || !fs::is_regular_file(b.lina_exe))
    throw BaselineError("building the baseline " + opts.ref + " (" + b.sha.substr(0, 12) + ") failed" + why(r) + "; log: " + b.log.string());

  nlohmann::json j = {{"sha", b.sha}, {"key", b.key}, {"ref", opts.ref}, {"cmake_args", opts.cmake_args}, {"lina", b.lina_exe.string()}};
  try {
    write_file_atomically(stamp, j.dump(2) + "\n");
  } catch (const Error& e) {
    throw BaselineError(std::string("cannot stamp the built baseline: ") + e.what());
  }
  return b;
}

}  // namespace lina::harness
