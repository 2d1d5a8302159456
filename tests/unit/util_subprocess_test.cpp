// The harness's one process runner: argv without a shell, captured output, and a timeout that kills
// the child's whole process group.
#include <gtest/gtest.h>

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "harness/util/subprocess.h"
#include "lina/error.h"

namespace lina::harness {
namespace {

using std::chrono::milliseconds;

// True when `pid` has exited: gone, or a zombie its new parent has not reaped yet.
bool exited(long pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

TEST(UtilSubprocess, CapturesOutputAndExitCodeWithoutAShell) {
  const ProcessResult r = run_process({"sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_TRUE(r.spawned);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  // An argument is passed as one word, never re-split or expanded.
  EXPECT_EQ(run_process({"echo", "a b;$HOME"}).out, "a b;$HOME\n");
}

TEST(UtilSubprocess, AProgramThatCannotStartIsReportedNotRun) {
  const ProcessResult r = run_process({"/nonexistent/lina-no-such-program"});
  EXPECT_FALSE(r.spawned);
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.spawn_error.find("/nonexistent/lina-no-such-program"), std::string::npos) << r.spawn_error;
  EXPECT_NE(r.err_or_spawn_error().find(r.spawn_error), std::string::npos);
}

TEST(UtilSubprocess, AChildPastItsTimeoutIsKilledWithItsProcessGroup) {
  ProcessOptions o;
  // Long enough for a loaded machine to start the shell; far shorter than the sleep.
  o.timeout = milliseconds(2000);
  // The shell prints its background sleep's pid, then waits: both must die at the timeout.
  const ProcessResult r = run_process({"sh", "-c", "sleep 30 & echo $!; wait"}, o);
  EXPECT_TRUE(r.spawned);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  ASSERT_FALSE(r.out.empty()) << "the shell printed no pid before the timeout";
  const long grandchild = std::stol(r.out);
  bool gone = exited(grandchild);
  for (int i = 0; i < 100 && !gone; ++i) {
    std::this_thread::sleep_for(milliseconds(20));
    gone = exited(grandchild);
  }
  EXPECT_TRUE(gone) << "the child's own child (pid " << grandchild << ") outlived the timeout";
}

TEST(UtilSubprocess, AChildWithinItsTimeoutIsNotFlagged) {
  ProcessOptions o;
  o.timeout = milliseconds(60000);
  const ProcessResult r = run_process({"sh", "-c", "echo done"}, o);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "done\n");
}

// Sets an environment variable for one scope.
struct ScopedEnv {
  std::string name;
  ScopedEnv(const std::string& n, const std::string& v) : name(n) { setenv(n.c_str(), v.c_str(), 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

TEST(UtilSubprocess, EveryChildLeadsItsOwnProcessGroup) {
  // No timeout asked for: the default one applies, and with it the child's own process group.
  const ProcessResult r = run_process({"sh", "-c", "echo $$ $(cut -d' ' -f5 /proc/$$/stat)"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  long pid = 0, pgid = 0;
  in >> pid >> pgid;
  EXPECT_GT(pid, 0) << r.out;
  EXPECT_EQ(pid, pgid) << r.out;
  EXPECT_NE(pgid, static_cast<long>(getpgrp()));
}

TEST(UtilSubprocess, TheTimeoutEnvironmentVariableReplacesTheDefault) {
  {
    ScopedEnv env("LINA_CHILD_TIMEOUT_S", "1");
    EXPECT_EQ(child_timeout(kBuildTimeout), std::chrono::seconds(1));
    const ProcessResult r = run_process({"sleep", "30"});
    EXPECT_TRUE(r.timed_out);
    EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  }
  EXPECT_EQ(child_timeout(kBuildTimeout), kBuildTimeout);
  for (const char* bad : {"0", "-5", "1.5", "soon", "99999999999999999999"}) {
    ScopedEnv env("LINA_CHILD_TIMEOUT_S", bad);
    try {
      child_timeout(kQuickTimeout);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), "LINA_CHILD_TIMEOUT_S");
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(UtilSubprocess, ASignalledParentTakesItsChildrensProcessGroupsWithIt) {
  // A process that forwards signals runs a shell whose background sleep would outlive it; SIGTERM to
  // that process alone must end the sleep too (a killed verify leaves no build running).
  char dir_template[] = "/tmp/lina-signal-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string pid_file = std::string(dir_template) + "/pid";
  const pid_t parent = fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    forward_signals_to_children();
    run_process({"sh", "-c", "sleep 60 & echo $! > " + pid_file + "; wait"});
    _exit(0);
  }
  long grandchild = 0;
  for (int i = 0; i < 500 && grandchild == 0; ++i) {
    std::ifstream f(pid_file);
    if (!(f >> grandchild)) grandchild = 0;
    if (grandchild == 0) std::this_thread::sleep_for(milliseconds(20));
  }
  kill(parent, SIGTERM);
  int status = 0;
  waitpid(parent, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "status " << status;
  ASSERT_GT(grandchild, 0) << "the shell wrote no pid";
  bool gone = exited(grandchild);
  for (int i = 0; i < 250 && !gone; ++i) {
    std::this_thread::sleep_for(milliseconds(20));
    gone = exited(grandchild);
  }
  EXPECT_TRUE(gone) << "the sleep (pid " << grandchild << ") outlived the signalled parent";
  if (!gone) kill(static_cast<pid_t>(grandchild), SIGKILL);
  std::remove(pid_file.c_str());
  rmdir(dir_template);
}

TEST(UtilSubprocess, TemporaryFoldersArePrivateAndUnpredictable) {
  // compare's rounds used to go to /tmp/lina-compare-<pid>, a name another user could plant.
  const TempDir a("lina-compare"), b("lina-compare");
  EXPECT_NE(a.path(), b.path());
  struct stat st{};
  ASSERT_EQ(lstat(a.path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));  // a real folder, not a symlink followed
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

}  // namespace
}  // namespace lina::harness
