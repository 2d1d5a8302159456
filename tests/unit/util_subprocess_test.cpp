// The harness's one process runner: argv without a shell, captured output, and a timeout that kills
// the child's whole process group.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "harness/util/subprocess.h"

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

}  // namespace
}  // namespace lina::harness
