// Baselines from a real temporary git repo: this source tree committed twice; HEAD~1 is built once
// (CPU only, `lina` target only) into a private cache and then reused.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "harness/verify/baseline.h"
#include "harness/util/subprocess.h"

namespace lina::harness {
namespace {

namespace fs = std::filesystem;

ProcessResult git(const fs::path& repo, std::vector<std::string> args) {
  std::vector<std::string> argv = {"git", "-C", repo.string(), "-c", "user.name=lina-test", "-c", "user.email=t@example.invalid",
                                   "-c", "commit.gpgsign=false"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv);
}

std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// One shared repo for the suite: building lina is the expensive part, done once.
class BaselineRepo : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir("lina-baseline-test");
    const fs::path src = LINA_TEST_SOURCE_DIR;
    repo_ = tmp_->path() / "repo";
    fs::create_directories(repo_);
    const fs::path tar = tmp_->path() / "tree.tar";
    const ProcessResult a = run_process({"git", "-C", src.string(), "archive", "--format=tar", "-o", tar.string(), "HEAD"});
    if (a.exit_code != 0) {
      skip_ = "the source dir is not a git checkout: " + a.err;
      return;
    }
    run_process({"tar", "-xf", tar.string(), "-C", repo_.string()});
    git(repo_, {"init", "-q"});
    git(repo_, {"add", "-A"});
    git(repo_, {"commit", "-qm", "first"});
    std::ofstream(repo_ / "NOTES.txt") << "second commit\n";
    git(repo_, {"add", "NOTES.txt"});
    git(repo_, {"commit", "-qm", "second"});
    first_ = git(repo_, {"rev-parse", "HEAD~1"}).out.substr(0, 40);
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
  }
  static BaselineOptions opts() {
    BaselineOptions o;
    o.repo = repo_;
    o.ref = "HEAD~1";
    // -O0: the test checks the build-and-reuse flow, not the code's speed (an optimised build of the
    // CLI costs minutes of the CI's two cores).
    o.cmake_args = {"-DLINA_WITH_CUDA=OFF", "-DCMAKE_BUILD_TYPE=Debug", "-DCMAKE_CXX_FLAGS_DEBUG=-O0"};
    o.cache_root = tmp_->path() / "cache";
    o.jobs = 2;
    return o;
  }
  static inline TempDir* tmp_ = nullptr;
  static inline fs::path repo_;
  static inline std::string first_, skip_;
};

TEST_F(BaselineRepo, ResolvesRefsAndRefusesUnknownOnes) {
  EXPECT_EQ(resolve_ref(repo_, "HEAD~1"), first_);
  EXPECT_EQ(resolve_ref(repo_, first_.substr(0, 10)), first_);
  try {
    resolve_ref(repo_, "no-such-branch");
    FAIL();
  } catch (const BaselineError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown git ref 'no-such-branch'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(resolve_ref(repo_, "--all"), BaselineError);
  EXPECT_THROW(resolve_ref(repo_, "HEAD~5"), BaselineError);
}

TEST_F(BaselineRepo, BuildsAnEarlierCommitOnceThenReusesIt) {
  const std::string head_before = git(repo_, {"rev-parse", "HEAD"}).out;
  const Baseline b = prepare_baseline(opts());
  ASSERT_TRUE(fs::is_regular_file(b.lina_exe)) << read(b.log);
  EXPECT_FALSE(b.reused);
  EXPECT_EQ(b.sha, first_);
  EXPECT_EQ(b.dir.parent_path(), tmp_->path() / "cache");
  EXPECT_EQ(b.key.substr(0, 40), first_);
  // The build names the SHA it was made from, not the repo's HEAD.
  const std::string info = read(b.dir / "build" / "generated" / "lina" / "build_info.h");
  EXPECT_NE(info.find("\"" + first_ + "\""), std::string::npos) << info;
  EXPECT_NE(info.find("LINA_BUILD_GIT_DIRTY false"), std::string::npos) << info;
  // Only the lina target: no test binaries.
  EXPECT_FALSE(fs::exists(b.dir / "build" / "tests"));
  EXPECT_EQ(run_process({b.lina_exe.string(), "--version"}).exit_code, 0);
  // The user's checkout is untouched.
  EXPECT_EQ(git(repo_, {"rev-parse", "HEAD"}).out, head_before);
  EXPECT_TRUE(git(repo_, {"status", "--porcelain"}).out.empty());

  // reused: the stamp matched, no build ran (the same executable, untouched)
  const auto built_at = fs::last_write_time(b.lina_exe);
  const Baseline again = prepare_baseline(opts());
  EXPECT_TRUE(again.reused);
  EXPECT_EQ(again.lina_exe, b.lina_exe);
  EXPECT_EQ(fs::last_write_time(again.lina_exe), built_at);

  // A different toolchain / option set is a different key (not built here: that is the same code).
  BaselineOptions other = opts();
  other.cmake_args.push_back("-DCMAKE_CXX_FLAGS=-O1");
  EXPECT_NE(toolchain_key(other.cmake_args), toolchain_key(opts().cmake_args));
  EXPECT_EQ(toolchain_key(opts().cmake_args), toolchain_key(opts().cmake_args));

  // A broken stamp forces a rebuild check (here: incremental, so fast), not a silent reuse.
  std::ofstream(b.dir / "stamp.json") << "{garbage";
  const Baseline third = prepare_baseline(opts());
  EXPECT_FALSE(third.reused);
  EXPECT_TRUE(fs::is_regular_file(third.lina_exe)) << read(third.log);
}

TEST_F(BaselineRepo, DirtyHeadIsWarnedAbout) {
  const std::string head = git(repo_, {"rev-parse", "HEAD"}).out.substr(0, 40);
  EXPECT_TRUE(dirty_head_warning(repo_, "HEAD", head).empty());
  std::ofstream(repo_ / "NOTES.txt", std::ios::app) << "edit\n";
  const std::string w = dirty_head_warning(repo_, "HEAD", head);
  git(repo_, {"checkout", "--", "NOTES.txt"});
  EXPECT_NE(w.find("uncommitted changes"), std::string::npos) << w;
  EXPECT_TRUE(dirty_head_warning(repo_, "HEAD~1", first_).empty());
}

TEST(BaselinePreLina, TreesWithoutLinaAreRefused) {
  TempDir t("lina-prelina");
  const fs::path r = t.path() / "old";
  fs::create_directories(r);
  std::ofstream(r / "CMakeLists.txt") << "project(other)\n";
  git(r, {"init", "-q"});
  git(r, {"add", "-A"});
  git(r, {"commit", "-qm", "old"});
  BaselineOptions o;
  o.repo = r;
  o.ref = "HEAD";
  o.cache_root = t.path() / "cache";
  try {
    prepare_baseline(o);
    FAIL();
  } catch (const BaselineError& e) {
    EXPECT_NE(std::string(e.what()).find("predates lina"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lina::harness
