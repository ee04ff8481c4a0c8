#include "ops/cpu/thread_pool.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace fulcrum::ops {
namespace {

TEST(ThreadPoolTest, EveryIndexRunsExactlyOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int round = 0; round < 200; ++round) {
      const int n = 1 + round % 9;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.ParallelFor(n, [&](int i) { hits[static_cast<size_t>(i)].fetch_add(1); });
      for (int i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << round;
    }
  }
}

TEST(ThreadPoolTest, UsesMoreThanOneThreadForSlowParts) {
  ThreadPool pool(2);
  std::atomic<int> running{0}, max_running{0};
  pool.ParallelFor(2, [&](int) {
    const int now = running.fetch_add(1) + 1;
    int seen = max_running.load();
    while (now > seen && !max_running.compare_exchange_weak(seen, now)) {
    }
    // Stay inside until the other thread arrives (microseconds when idle; the bound only
    // matters on a heavily loaded machine).
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < until && max_running.load() < 2) {
      std::this_thread::yield();
    }
    running.fetch_sub(1);
  });
  EXPECT_EQ(max_running.load(), 2);
}

TEST(ThreadPoolTest, ZeroWorkAndDestructionWhileIdle) {
  ThreadPool pool(3);
  int calls = 0;
  pool.ParallelFor(0, [&](int) { ++calls; });
  EXPECT_EQ(calls, 0);
  pool.ParallelFor(1, [&](int) { ++calls; });
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace fulcrum::ops
