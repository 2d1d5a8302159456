#include "harness/util/git.h"

#include "harness/util/subprocess.h"
#include "harness/util/baseline_error.h"
#include "harness/util/text_file.h"
#include "lina/error.h"

namespace lina::harness {
namespace fs = std::filesystem;
ResolvedRef resolve_commit(const fs::path& repo, const std::string& ref) {
  ResolvedRef r;
  if (ref.empty()) {
    r.problem = ResolvedRef::Problem::empty;
    return r;
  }
  // A ref starting with '-' would be read by git as an option.
  if (ref[0] == '-') {
    r.problem = ResolvedRef::Problem::option_like;
    return r;
  }
  const ProcessResult p = run_process({"git", "-C", repo.string(), "rev-parse", "--verify", "--quiet", ref + "^{commit}"});
  if (!p.spawned) {
    r.problem = ResolvedRef::Problem::git_not_started;
    r.detail = p.spawn_error;
    return r;
  }
  const std::string sha = trim_trailing_space(p.out);
  if (p.exit_code != 0 || sha.size() < 40) {
    r.problem = ResolvedRef::Problem::not_a_commit;
    return r;
  }
  r.sha = sha;
  return r;
}

std::string git_resolve_commit(const fs::path& repo, const std::string& ref, const std::string& flag) {
  const ResolvedRef r = resolve_commit(repo, ref);
  using P = ResolvedRef::Problem;
  if (r.problem == P::empty || r.problem == P::option_like)
    throw Error(ErrorCode::invalid_argument, flag, flag + " `" + ref + "`: not a git ref");
  if (r.problem == P::git_not_started) throw BaselineError(flag + " `" + ref + "`: cannot run git to resolve it: " + r.detail);
  if (r.problem != P::none)
    throw BaselineError(flag + ": unknown git ref '" + ref + "' in " + repo.string() + " (git rev-parse found no commit)");
  return r.sha;
}

fs::path git_toplevel(const fs::path& start) {
  auto r = run_process({"git", "-C", start.string(), "rev-parse", "--show-toplevel"});
  if (r.exit_code != 0) {
    throw Error(ErrorCode::invalid_argument, "repo", start.string() + " is not inside a git work tree");
  }
  return fs::path(trim_trailing_space(r.out));
}

}  // namespace lina::harness
