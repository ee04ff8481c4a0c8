// tests: ps/staleness.h, the bounded-staleness gate of --mode=ssp, on its own. No assertion
// on wall-clock time: a wait that must end is given a generous deadline, a wait that must
// time out a short one, and "held until" is checked by order (a flag set before the event
// that may release the waiter must be seen by the waiter when it returns).
#include "ps/staleness.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fulcrum::ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr absl::Duration kLong = absl::Seconds(30);

absl::Time Soon() { return absl::Now() + absl::Milliseconds(50); }

TEST(StalenessGateTest, OnlyTheSpecsWorkersHaveAnIndex) {
  StalenessGate gate("ps:0", 2, 1, 1);
  EXPECT_EQ(*gate.WorkerIndex("worker:0", "Push"), 0);
  EXPECT_EQ(*gate.WorkerIndex("worker:1", "Push"), 1);
  for (const char* bad : {"worker:2", "chief:0", "worker:", "worker:01", "worker:-1", "worker:+1",
                          "worker:1x", "ps:0", ""}) {
    const absl::StatusOr<int> w = gate.WorkerIndex(bad, "Push");
    EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(w.status().message(), HasSubstr("ps:0: Push from '")) << bad;
    EXPECT_THAT(w.status().message(), HasSubstr("worker:0 ... worker:1")) << bad;
  }
}

TEST(StalenessGateTest, AWorkerWithinTheBoundGoesOnAtOnce) {
  StalenessGate gate("ps:0", 3, 2, 2);
  for (int step = 0; step < 2; ++step) gate.Advance(0, 0);
  int64_t waited_ns = 0;
  // Two steps ahead of workers 1 and 2 on chunk 0: exactly the bound.
  EXPECT_TRUE(gate.Wait(0, 0, Soon(), &waited_ns).ok());
  EXPECT_EQ(waited_ns, 0);
  // Chunk 1 took nothing from anyone: nobody is ahead there.
  EXPECT_TRUE(gate.Wait(0, 1, Soon(), &waited_ns).ok());
  EXPECT_THAT(gate.Clocks(), ElementsAre(0, 0, 0));  // the least over the chunks
  gate.Advance(0, 1);
  gate.Advance(0, 1);
  EXPECT_THAT(gate.Clocks(), ElementsAre(2, 0, 0));
  EXPECT_EQ(gate.timeouts(), 0);
}

TEST(StalenessGateTest, AWaitPastTheDeadlineNamesTheWorkersBehind) {
  StalenessGate gate("ps:3", 3, 4, 1);
  for (int step = 0; step < 4; ++step) gate.Advance(0, 2);
  gate.Advance(1, 2);
  gate.Advance(1, 2);
  gate.Advance(1, 2);  // worker 1 is within the bound, worker 2 is not
  int64_t waited_ns = 0;
  const absl::Status s = gate.Wait(0, 2, Soon(), &waited_ns);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), HasSubstr("ps:3: worker:0 waited"));
  EXPECT_THAT(s.message(), HasSubstr("on chunk 2"));
  EXPECT_THAT(s.message(), HasSubstr("--staleness=1"));
  EXPECT_THAT(s.message(), HasSubstr("it pushed step 4 and goes on once every worker has "
                                     "pushed step 3; behind: worker:2 at step 0 (4 steps behind)"));
  EXPECT_THAT(s.message(), ::testing::Not(HasSubstr("worker:1 at")));
  EXPECT_GT(waited_ns, 0);
  EXPECT_EQ(gate.timeouts(), 1);
}

// The fast worker is held until the slow one has pushed enough, and not before.
TEST(StalenessGateTest, TheFastWorkerIsHeldUntilTheSlowOneCatchesUp) {
  StalenessGate gate("ps:0", 2, 1, 1);
  gate.Advance(0, 0);
  gate.Advance(0, 0);  // worker 0 at 2, worker 1 at 0: one step too far ahead
  std::atomic<bool> caught_up{false};
  absl::Status status;
  bool released_after_catch_up = false;
  int64_t waited_ns = 0;
  std::thread fast([&] {
    status = gate.Wait(0, 0, absl::Now() + kLong, &waited_ns);
    released_after_catch_up = caught_up.load();
  });
  caught_up = true;
  gate.Advance(1, 0);  // worker 1 at 1 = 2 - 1
  fast.join();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(released_after_catch_up);
}

// Staleness 0: every worker waits for every other one after each step (lock-step).
// Invariant checked by every worker after each wait: nobody is behind it.
TEST(StalenessGateTest, StalenessZeroIsLockStep) {
  constexpr int kWorkers = 4;
  constexpr int kSteps = 50;
  StalenessGate gate("ps:0", kWorkers, 1, 0);
  std::atomic<int> pushed[kWorkers] = {};
  std::atomic<int> violations{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      for (int step = 1; step <= kSteps; ++step) {
        pushed[w].store(step);
        gate.Advance(w, 0);
        int64_t waited_ns = 0;
        ASSERT_TRUE(gate.Wait(w, 0, absl::Now() + kLong, &waited_ns).ok());
        for (int other = 0; other < kWorkers; ++other) {
          if (pushed[other].load() < step) violations.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : workers) t.join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_THAT(gate.Clocks(), ElementsAre(kSteps, kSteps, kSteps, kSteps));
}

// With staleness S no worker gets past its wait more than S steps ahead of any other, however
// the threads are scheduled; one worker is slowed by yields.
TEST(StalenessGateTest, NoWorkerRunsMoreThanStalenessAhead) {
  constexpr int kWorkers = 3;
  constexpr int kSteps = 200;
  constexpr int64_t kStaleness = 2;
  StalenessGate gate("ps:0", kWorkers, 2, kStaleness);
  std::atomic<int> pushed[kWorkers] = {};
  std::atomic<int> violations{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      for (int step = 1; step <= kSteps; ++step) {
        if (w == kWorkers - 1) {
          for (int i = 0; i < 20; ++i) std::this_thread::yield();  // the slow one
        }
        pushed[w].store(step);
        for (int chunk = 0; chunk < 2; ++chunk) gate.Advance(w, chunk);
        for (int chunk = 0; chunk < 2; ++chunk) {
          int64_t waited_ns = 0;
          ASSERT_TRUE(gate.Wait(w, chunk, absl::Now() + kLong, &waited_ns).ok());
        }
        for (int other = 0; other < kWorkers; ++other) {
          if (pushed[other].load() < step - kStaleness) violations.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : workers) t.join();
  EXPECT_EQ(violations.load(), 0);
}

TEST(StalenessGateTest, AReleasedWorkerIsNoLongerWaitedFor) {
  StalenessGate gate("ps:0", 3, 1, 0);
  gate.Advance(0, 0);
  gate.Advance(1, 0);  // worker 2 never pushes: it finished (or died)
  std::atomic<bool> released{false};
  absl::Status status;
  bool after_release = false;
  std::thread held([&] {
    int64_t waited_ns = 0;
    status = gate.Wait(0, 0, absl::Now() + kLong, &waited_ns);
    after_release = released.load();
  });
  released = true;
  gate.Release(2);
  gate.Release(2);  // idempotent
  gate.Release(7);  // not a worker: ignored
  held.join();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(after_release);
  EXPECT_THAT(gate.Released(), ElementsAre(2));
  // The others still wait for each other.
  gate.Advance(0, 0);
  int64_t waited_ns = 0;
  EXPECT_EQ(gate.Wait(0, 0, Soon(), &waited_ns).code(), absl::StatusCode::kDeadlineExceeded);
  // All released: nobody is waited for.
  gate.Release(1);
  gate.Release(0);
  EXPECT_TRUE(gate.Wait(0, 0, Soon(), &waited_ns).ok());
}

TEST(StalenessGateTest, StopWakesEveryWaiterAndLaterWaitsPass) {
  StalenessGate gate("ps:0", 2, 2, 0);
  gate.Advance(0, 0);
  gate.Advance(0, 1);
  std::atomic<bool> stopped{false};
  std::vector<std::thread> held;
  std::atomic<int> ok_after_stop{0};
  for (int chunk = 0; chunk < 2; ++chunk) {
    held.emplace_back([&, chunk] {
      int64_t waited_ns = 0;
      const absl::Status s = gate.Wait(0, chunk, absl::Now() + kLong, &waited_ns);
      if (s.ok() && stopped.load()) ok_after_stop.fetch_add(1);
    });
  }
  stopped = true;
  gate.Stop();
  for (auto& t : held) t.join();
  EXPECT_EQ(ok_after_stop.load(), 2);
  gate.Advance(0, 0);
  int64_t waited_ns = 0;
  EXPECT_TRUE(gate.Wait(0, 0, Soon(), &waited_ns).ok());
}

}  // namespace
}  // namespace fulcrum::ps
