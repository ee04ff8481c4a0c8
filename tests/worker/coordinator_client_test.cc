// tests: the worker's side of the coordinator contract. GrpcCoordinatorClient against a
// scripted Coordinator service on 127.0.0.1 (port chosen by the kernel): retries while the
// chief is unreachable, bad input passed through, remote errors mapped, the long poll's
// outcomes, every call reported to the observer. Heartbeat over a fake client: the chief's
// stop request and a silent chief. Waits that must succeed have generous deadlines; no
// timing assertions.
#include "runtime/client/coordinator_client.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/mutex.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "worker/heartbeat.h"

namespace fulcrum {
namespace {

// What the scripted chief answers, and what it was told.
struct Script {
  grpc::Status register_status = grpc::Status::OK;
  bool started = true;
  bool stop = false;
  grpc::Status summary_status = grpc::Status::OK;
  int registrations = 0;
  int64_t last_step = -1;
  std::string summary;
};

// A chief whose answers the test sets (from the test's thread, read on gRPC's).
class ScriptedChief final : public pb::Coordinator::Service {
 public:
  template <typename Edit>
  void Set(Edit edit) {
    MutexLock lock(&mu_);
    edit(script_);
  }
  Script Get() {
    MutexLock lock(&mu_);
    return script_;
  }

  grpc::Status RegisterTask(grpc::ServerContext*, const pb::RegisterTaskRequest* request,
                            pb::RegisterTaskResponse* response) override {
    MutexLock lock(&mu_);
    ++script_.registrations;
    if (!script_.register_status.ok()) return script_.register_status;
    response->set_run_dir(absl::StrCat("/runs/", request->config_fingerprint()));
    return grpc::Status::OK;
  }
  grpc::Status WaitForStart(grpc::ServerContext*, const pb::WaitForStartRequest*,
                            pb::WaitForStartResponse* response) override {
    MutexLock lock(&mu_);
    response->set_started(script_.started);
    response->set_should_stop(script_.stop);
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const pb::HeartbeatRequest* request,
                         pb::HeartbeatResponse* response) override {
    MutexLock lock(&mu_);
    script_.last_step = request->local_step();
    response->set_should_stop(script_.stop);
    return grpc::Status::OK;
  }
  grpc::Status ReportSummary(grpc::ServerContext*, const pb::ReportSummaryRequest* request,
                             pb::ReportSummaryResponse*) override {
    MutexLock lock(&mu_);
    script_.summary = request->summary_json();
    return script_.summary_status;
  }

 private:
  Mutex mu_;
  Script script_ ABSL_GUARDED_BY(mu_);
};

class RecordingObserver final : public profiler::RpcObserver {
 public:
  void OnRpc(const profiler::RpcEvent& event) override {
    MutexLock lock(&mu_);
    events_.push_back(absl::StrCat(*event.peer, " ", event.method));
  }
  std::vector<std::string> events() {
    MutexLock lock(&mu_);
    return events_;
  }

 private:
  Mutex mu_;
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
};

pb::TaskId Worker(int index) {
  pb::TaskId id;
  id.set_job("worker");
  id.set_index(index);
  return id;
}

class CoordinatorClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&chief_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    client_ = std::make_unique<runtime::GrpcCoordinatorClient>(Worker(1),
                                                               absl::StrCat("127.0.0.1:", port_));
    client_->set_observer(&observer_);
  }
  void TearDown() override {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    server_->Wait();
  }

  ScriptedChief chief_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  RecordingObserver observer_;
  std::unique_ptr<runtime::GrpcCoordinatorClient> client_;
};

TEST_F(CoordinatorClientTest, RegistersWaitsForTheStartBeatsAndReports) {
  auto registered = client_->Register("fp", absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(registered.ok()) << registered.status();
  EXPECT_EQ(registered->run_dir(), "/runs/fp");
  EXPECT_TRUE(client_->WaitForStart(absl::Now() + absl::Seconds(30)).ok());
  auto stop = client_->Heartbeat(42, "", 0);
  ASSERT_TRUE(stop.ok()) << stop.status();
  EXPECT_FALSE(stop->should_stop());
  EXPECT_EQ(chief_.Get().last_step, 42);
  EXPECT_TRUE(client_->ReportSummary("{}\n").ok());
  EXPECT_EQ(chief_.Get().summary, "{}\n");
  EXPECT_EQ(observer_.events(),
            (std::vector<std::string>{"chief-0 RegisterTask", "chief-0 WaitForStart",
                                      "chief-0 Heartbeat", "chief-0 ReportSummary"}));
}

TEST_F(CoordinatorClientTest, TheChiefRefusingOurFlagsIsBadInputAndNotRetried) {
  chief_.Set([](Script& s) {
    s.register_status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                     "worker:1's flags differ from the chief's");
  });
  auto registered = client_->Register("fp", absl::Now() + absl::Seconds(30));
  EXPECT_EQ(registered.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registered.status().message(), "worker:1's flags differ from the chief's");
  EXPECT_EQ(chief_.Get().registrations, 1);
}

TEST_F(CoordinatorClientTest, OtherRefusalsAreRetriedUntilTheDeadline) {
  chief_.Set([](Script& s) {
    s.register_status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "not yet");
  });
  auto registered = client_->Register("fp", absl::Now() + absl::Milliseconds(500));
  EXPECT_EQ(registered.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(registered.status().message().find("worker:1: chief:0 at 127.0.0.1:"),
            std::string::npos)
      << registered.status();
  EXPECT_GE(chief_.Get().registrations, 1);
}

TEST_F(CoordinatorClientTest, ARunEndedBeforeItsStartIsAborted) {
  chief_.Set([](Script& s) {
    s.started = false;
    s.stop = true;
  });
  EXPECT_EQ(client_->WaitForStart(absl::Now() + absl::Seconds(30)).code(),
            absl::StatusCode::kAborted);
}

TEST_F(CoordinatorClientTest, ARunThatNeverStartsEndsAtTheDeadline) {
  chief_.Set([](Script& s) { s.started = false; });
  runtime::GrpcCoordinatorClient::Options options;
  options.start_poll = absl::Milliseconds(50);
  runtime::GrpcCoordinatorClient client(Worker(1), absl::StrCat("127.0.0.1:", port_), options);
  EXPECT_EQ(client.WaitForStart(absl::Now() + absl::Milliseconds(300)).code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST_F(CoordinatorClientTest, TheChiefsOwnErrorsAreRuntimeFailures) {
  // FailedPrecondition would mean bad input of this process; from the chief it is not.
  chief_.Set([](Script& s) {
    s.summary_status = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "too late");
  });
  const absl::Status s = client_->ReportSummary("{}");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find("too late"), std::string::npos) << s;
}

TEST(CoordinatorClientUnreachableTest, HeartbeatToNoChiefIsUnavailable) {
  // Port 1 on loopback: nothing listens there.
  runtime::GrpcCoordinatorClient client(Worker(0), "127.0.0.1:1");
  auto stop = client.Heartbeat(0, "", 0);
  EXPECT_FALSE(stop.ok());
  EXPECT_TRUE(stop.status().code() == absl::StatusCode::kUnavailable ||
              stop.status().code() == absl::StatusCode::kDeadlineExceeded)
      << stop.status();
}

// A client the test drives: answers Heartbeat from `stop`, or fails while `fail` is set.
class FakeChief final : public runtime::CoordinatorClient {
 public:
  std::atomic<bool> stop{false};
  std::atomic<bool> fail{false};
  std::atomic<bool> failed{false};  // with stop: the run failed
  Mutex mu;
  std::string last_waiting_for ABSL_GUARDED_BY(mu);
  std::atomic<int64_t> last_step{-1};

  absl::StatusOr<pb::RegisterTaskResponse> Register(const std::string&, absl::Time) override {
    return pb::RegisterTaskResponse();
  }
  absl::Status WaitForStart(absl::Time) override { return absl::OkStatus(); }
  absl::StatusOr<pb::HeartbeatResponse> Heartbeat(int64_t local_step,
                                                  const std::string& waiting_for,
                                                  int64_t) override {
    last_step = local_step;
    {
      MutexLock lock(&mu);
      last_waiting_for = waiting_for;
    }
    if (fail) return absl::UnavailableError("chief:0 unreachable");
    pb::HeartbeatResponse answer;
    answer.set_should_stop(stop.load());
    answer.set_run_failed(stop.load() && failed.load());
    if (stop.load()) answer.set_stop_reason(failed.load() ? "ps:0 diverged" : "done");
    return answer;
  }
  absl::Status ReportSummary(const std::string&) override { return absl::OkStatus(); }
};

// Polls `done` every few milliseconds for up to a minute (the heartbeat thread's pace).
template <typename Done>
bool Eventually(Done done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

TEST(HeartbeatTest, ReportsTheStepAndLearnsTheChiefsStop) {
  FakeChief chief;
  worker::Heartbeat heartbeat(&chief, absl::Seconds(60), absl::Milliseconds(10));
  heartbeat.set_step(7);
  EXPECT_TRUE(Eventually([&] { return chief.last_step == 7; }));
  EXPECT_FALSE(heartbeat.should_stop());
  chief.stop = true;
  EXPECT_TRUE(Eventually([&] { return heartbeat.should_stop(); }));
  EXPECT_FALSE(heartbeat.chief_lost());
}

// A failed run is never taken for a finished one: the answer says so, and the end of
// training asks at once (PollNow) instead of waiting for the next beat.
TEST(HeartbeatTest, LearnsThatTheRunFailedAndWhyWhenAskedNow) {
  FakeChief chief;
  worker::Heartbeat heartbeat(&chief, absl::Seconds(60), absl::Hours(1));
  EXPECT_TRUE(Eventually([&] { return chief.last_step == 0; }));  // the first beat
  EXPECT_FALSE(heartbeat.should_stop());
  chief.failed = true;
  chief.stop = true;
  heartbeat.PollNow();
  EXPECT_TRUE(heartbeat.should_stop());
  EXPECT_TRUE(heartbeat.run_failed());
  EXPECT_EQ(heartbeat.stop_reason(), "ps:0 diverged");
}

// Each heartbeat names the worker's oldest call in flight, for the chief's watchdog.
TEST(HeartbeatTest, SaysWhichCallTheWorkerWaitsFor) {
  FakeChief chief;
  runtime::CallTracker calls;
  worker::Heartbeat heartbeat(&chief, absl::Seconds(60), absl::Milliseconds(10), &calls);
  const int64_t pull = calls.Begin("PushPull", "ps:0");
  const int64_t later = calls.Begin("Pull", "ps:1");
  auto waiting = [&] {
    MutexLock lock(&chief.mu);
    return chief.last_waiting_for;
  };
  EXPECT_TRUE(Eventually([&] { return waiting() == "PushPull on ps:0"; }));
  calls.End(pull);
  EXPECT_TRUE(Eventually([&] { return waiting() == "Pull on ps:1"; }));
  calls.End(later);
  EXPECT_TRUE(Eventually([&] { return waiting().empty(); }));
}

TEST(HeartbeatTest, NoticesASilentChief) {
  FakeChief chief;
  chief.fail = true;
  worker::Heartbeat heartbeat(&chief, absl::Milliseconds(50), absl::Milliseconds(10));
  EXPECT_TRUE(Eventually([&] { return heartbeat.chief_lost(); }));
  EXPECT_FALSE(heartbeat.should_stop());
}

TEST(HeartbeatTest, StopsPromptlyWithALongInterval) {
  FakeChief chief;
  // The destructor wakes the thread; the test would hang (and time out) otherwise.
  { worker::Heartbeat heartbeat(&chief, absl::Seconds(60), absl::Hours(1)); }
  SUCCEED();
}

}  // namespace
}  // namespace fulcrum
