// A minimal fork-join parallel loop for the CPU backend and references (no pool: calls are coarse).
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace lina::detail {

inline int resolve_threads(int requested) {
  if (requested > 0) return requested;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

// Runs fn(i) for i in [0, n) on up to `threads` threads, dynamic scheduling; rethrows the first error.
template <class Fn>
void parallel_for(std::int64_t n, int threads, Fn&& fn) {
  const int workers = static_cast<int>(std::min<std::int64_t>(resolve_threads(threads), n));
  if (workers <= 1) {
    for (std::int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<std::int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (;;) {
      const std::int64_t i = next.fetch_add(1);
      if (i >= n) return;
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next.store(n);
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(workers - 1));
  // A thread the system refuses (resource limits, a huge count) is not an error: the threads already
  // started and this one share the remaining work, dynamic scheduling needs no fixed worker count.
  try {
    for (int w = 1; w < workers; ++w) pool.emplace_back(work);
  } catch (const std::system_error&) {
  }
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace lina::detail
