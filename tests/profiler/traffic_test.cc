// TrafficCounters: per-peer, per-method totals stay exact under concurrent updates.
#include "profiler/traffic.h"

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace fulcrum::profiler {
namespace {

TEST(TrafficCountersTest, SumsPerPeerAndMethod) {
  TrafficCounters t;
  t.Add("ps-0", "PushPull", 100, 200);
  t.Add("ps-0", "PushPull", 1, 2);
  t.Add("ps-0", "Pull", 5, 7);
  t.Add("chief-0", "Heartbeat", 10, 3);
  const std::vector<RpcTrafficPoint> s = t.Snapshot();
  ASSERT_EQ(s.size(), 3u);
  // Sorted by peer, then method.
  EXPECT_EQ(s[0].peer, "chief-0");
  EXPECT_EQ(s[1].peer, "ps-0");
  EXPECT_EQ(s[1].method, "Pull");
  EXPECT_EQ(s[2].method, "PushPull");
  EXPECT_EQ(s[2].rpcs, 2u);
  EXPECT_EQ(s[2].bytes_sent, 101u);
  EXPECT_EQ(s[2].bytes_received, 202u);
  EXPECT_EQ(s[0].rpcs, 1u);
  EXPECT_EQ(s[0].bytes_sent, 10u);
}

TEST(TrafficCountersTest, ConcurrentAddsLoseNothing) {
  TrafficCounters t;
  constexpr int kThreads = 8;
  constexpr int kCalls = 20000;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&t, i] {
      const std::string peer = i % 2 == 0 ? "ps-0" : "ps-1";
      for (int k = 0; k < kCalls; ++k) t.Add(peer, "PushPull", 3, static_cast<uint64_t>(i));
    });
  }
  for (auto& th : threads) th.join();
  const std::vector<RpcTrafficPoint> s = t.Snapshot();
  ASSERT_EQ(s.size(), 2u);
  for (const RpcTrafficPoint& p : s) {
    EXPECT_EQ(p.rpcs, static_cast<uint64_t>(kThreads / 2 * kCalls));
    EXPECT_EQ(p.bytes_sent, static_cast<uint64_t>(kThreads / 2 * kCalls * 3));
  }
  // Received: even threads 0+2+4+6, odd 1+3+5+7, each kCalls times.
  EXPECT_EQ(s[0].bytes_received, static_cast<uint64_t>(12 * kCalls));
  EXPECT_EQ(s[1].bytes_received, static_cast<uint64_t>(16 * kCalls));
}

}  // namespace
}  // namespace fulcrum::profiler
