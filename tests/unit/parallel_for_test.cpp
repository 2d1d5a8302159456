// parallel_for (ops/common/parallel.h): a thread the system refuses is not fatal.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "ops/common/parallel.h"

namespace {

#if defined(__SANITIZE_ADDRESS__)
#define LINA_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LINA_UNDER_ASAN 1
#endif
#endif

TEST(ParallelFor, EveryIndexRunsOnceWhateverTheThreadCount) {
  for (int threads : {0, 1, 3, 64}) {
    std::atomic<std::int64_t> sum{0};
    lina::detail::parallel_for(1000, threads, [&](std::int64_t i) { sum += i; });
    EXPECT_EQ(sum.load(), 999 * 1000 / 2) << threads;
  }
}

TEST(ParallelFor, ThreadsTheSystemRefusesLeaveTheWorkToTheOthers) {
#ifdef LINA_UNDER_ASAN
  GTEST_SKIP() << "the address-space limit that makes thread creation fail also starves the sanitizer's shadow memory";
#else
  // In a child: an address space too small for 1000 thread stacks. Creating them used to throw out of
  // parallel_for with joinable threads alive, which aborts the process.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    rlimit as{};
    getrlimit(RLIMIT_AS, &as);
    as.rlim_cur = std::size_t{1} << 30;  // 1 GiB: room for the process, not for 1000 stacks of 8 MiB
    setrlimit(RLIMIT_AS, &as);
    std::atomic<std::int64_t> sum{0};
    lina::detail::parallel_for(100000, 1000, [&](std::int64_t i) { sum += i; });
    _exit(sum.load() == std::int64_t{99999} * 100000 / 2 ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "an index was lost or run twice";
#endif
}

}  // namespace
