// Tests of the coordinator: its logic on proto messages (no gRPC), then the same logic
// behind its gRPC adapter on 127.0.0.1:0 with a real client stub, and the server start-up
// helper (runtime/grpc/grpc_server.h) refusing a port in use with one line naming the address.
#include "chief/coordinator.h"

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/clock.h"
#include "base/exit_code.h"
#include "base/mutex.h"
#include "chief/grpc_coordinator_service.h"
#include "chief/watchdog.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "runtime/client/call_tracker.h"
#include "runtime/config/flags.h"
#include "runtime/grpc/grpc_server.h"
#include "runtime/grpc/grpc_util.h"

namespace fulcrum::chief {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// Long enough never to pass on a loaded machine; waits end on the event, not on this.
constexpr absl::Duration kLong = absl::Seconds(60);

std::string Fingerprint(int batch_size) {
  runtime::TrainingOptions t;
  t.batch_size = batch_size;
  runtime::ClusterOptions c;
  return runtime::ConfigFingerprint(t, c);
}

pb::TaskId Worker(int index) {
  pb::TaskId task;
  task.set_job("worker");
  task.set_index(index);
  return task;
}

pb::RegisterTaskRequest Register(int index, const std::string& fingerprint) {
  pb::RegisterTaskRequest request;
  *request.mutable_task() = Worker(index);
  request.set_config_fingerprint(fingerprint);
  request.set_hostname("testhost");
  request.set_pid(42);
  return request;
}

pb::WaitForStartRequest StartPoll(int index, int64_t timeout_ms) {
  pb::WaitForStartRequest request;
  *request.mutable_task() = Worker(index);
  request.set_timeout_ms(timeout_ms);
  return request;
}

pb::ReportSummaryRequest Summary(int index, const std::string& json) {
  pb::ReportSummaryRequest request;
  *request.mutable_task() = Worker(index);
  request.set_summary_json(json);
  return request;
}

class CoordinatorTest : public ::testing::Test {
 protected:
  // The workers' signs of life are timed by this clock: the tests move it instead of sleeping.
  ManualClock clock_;
  Coordinator coordinator_{"run-1", "/tmp/run-1", Fingerprint(32), /*num_workers=*/2, &clock_};
};

TEST_F(CoordinatorTest, RegisterWithTheChiefsFingerprintAnswersTheRun) {
  pb::RegisterTaskResponse response;
  ASSERT_TRUE(coordinator_.RegisterTask(Register(0, Fingerprint(32)), &response).ok());
  EXPECT_EQ(response.run_id(), "run-1");
  EXPECT_EQ(response.run_dir(), "/tmp/run-1");
  EXPECT_THAT(coordinator_.WaitForWorkers(absl::Now()), ElementsAre(1));
  ASSERT_TRUE(coordinator_.RegisterTask(Register(1, Fingerprint(32)), &response).ok());
  EXPECT_THAT(coordinator_.WaitForWorkers(absl::Now() + kLong), IsEmpty());
}

TEST_F(CoordinatorTest, RegisterWithOtherFlagsIsInvalidArgumentNamingTheDifference) {
  pb::RegisterTaskResponse response;
  const absl::Status s = coordinator_.RegisterTask(Register(1, Fingerprint(64)), &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("worker:1's flags differ from the chief's"));
  EXPECT_THAT(s.message(), HasSubstr("batch_size: 64 vs 32"));
  EXPECT_THAT(coordinator_.WaitForWorkers(absl::Now()), ElementsAre(0, 1));
}

// Two processes started as worker:0: the second is refused while the first is heard from,
// naming the first's host and pid; a restart (the first silent past the window) is accepted.
TEST_F(CoordinatorTest, ASecondProcessUnderARegisteredNameIsRefusedWhileTheFirstLives) {
  pb::RegisterTaskResponse response;
  ASSERT_TRUE(coordinator_.RegisterTask(Register(0, Fingerprint(32)), &response).ok());
  // The same process again (a retried call) is fine.
  ASSERT_TRUE(coordinator_.RegisterTask(Register(0, Fingerprint(32)), &response).ok());
  pb::RegisterTaskRequest second = Register(0, Fingerprint(32));
  second.set_pid(43);
  absl::Status s = coordinator_.RegisterTask(second, &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
  EXPECT_THAT(s.message(), HasSubstr("worker:0 is already registered from testhost (pid 42)"));
  EXPECT_THAT(s.message(), HasSubstr("second task started as worker:0"));
  second.set_pid(42);
  second.set_hostname("otherhost");
  EXPECT_EQ(coordinator_.RegisterTask(second, &response).code(), absl::StatusCode::kAlreadyExists);
  // The first stops heartbeating; past the window the newcomer is a restart and is accepted.
  clock_.Advance(kDuplicateWindow + absl::Milliseconds(200));
  s = coordinator_.RegisterTask(second, &response);
  EXPECT_TRUE(s.ok()) << s;
}

TEST_F(CoordinatorTest, AnUnknownTaskIsInvalidArgument) {
  pb::RegisterTaskResponse response;
  const absl::Status s = coordinator_.RegisterTask(Register(2, Fingerprint(32)), &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("unknown task worker:2; the cluster spec has 2 worker(s)"));

  pb::HeartbeatRequest heartbeat;
  heartbeat.mutable_task()->set_job("ps");
  heartbeat.mutable_task()->set_index(0);
  pb::HeartbeatResponse beat;
  EXPECT_EQ(coordinator_.Heartbeat(heartbeat, &beat).code(), absl::StatusCode::kInvalidArgument);
  pb::WaitForStartResponse start;
  EXPECT_EQ(coordinator_.WaitForStart(StartPoll(-1, 0), absl::Now(), &start).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CoordinatorTest, WaitForStartReturnsAtItsDeadlineNotStarted) {
  pb::WaitForStartResponse response;
  // The request's own timeout, then the caller's deadline (already passed).
  ASSERT_TRUE(coordinator_.WaitForStart(StartPoll(0, 10), absl::Now() + kLong, &response).ok());
  EXPECT_FALSE(response.started());
  EXPECT_FALSE(response.should_stop());
  EXPECT_EQ(response.run_id(), "run-1");
  ASSERT_TRUE(coordinator_.WaitForStart(StartPoll(0, 60000), absl::Now(), &response).ok());
  EXPECT_FALSE(response.started());
}

TEST_F(CoordinatorTest, StartReleasesAWaitingPoll) {
  pb::WaitForStartResponse response;
  std::thread waiter([&] {
    // Polls as a worker does, until the start arrives.
    do {
      ASSERT_TRUE(
          coordinator_.WaitForStart(StartPoll(1, 5000), absl::Now() + kLong, &response).ok());
    } while (!response.started());
  });
  coordinator_.Start();
  waiter.join();
  EXPECT_TRUE(response.started());
  EXPECT_FALSE(response.should_stop());
  // After the start a poll answers at once, whatever its timeout.
  ASSERT_TRUE(coordinator_.WaitForStart(StartPoll(0, 60000), absl::Now() + kLong, &response).ok());
  EXPECT_TRUE(response.started());
}

TEST_F(CoordinatorTest, RequestStopReachesHeartbeatsShouldStopAndStartPolls) {
  pb::HeartbeatRequest heartbeat;
  *heartbeat.mutable_task() = Worker(0);
  heartbeat.set_local_step(7);
  pb::HeartbeatResponse beat;
  ASSERT_TRUE(coordinator_.Heartbeat(heartbeat, &beat).ok());
  EXPECT_FALSE(beat.should_stop());
  EXPECT_EQ(coordinator_.max_worker_step(), 7);

  coordinator_.RequestStop("reached train_steps 10");
  coordinator_.RequestStop("a later reason");  // the first one is kept
  ASSERT_TRUE(coordinator_.Heartbeat(heartbeat, &beat).ok());
  EXPECT_TRUE(beat.should_stop());
  pb::ShouldStopRequest ask;
  *ask.mutable_task() = Worker(1);
  pb::ShouldStopResponse stop;
  ASSERT_TRUE(coordinator_.ShouldStop(ask, &stop).ok());
  EXPECT_TRUE(stop.should_stop());
  EXPECT_EQ(stop.reason(), "reached train_steps 10");
  // A stop before the start releases the start poll too: the worker learns the run ended.
  pb::WaitForStartResponse start;
  ASSERT_TRUE(coordinator_.WaitForStart(StartPoll(1, 60000), absl::Now() + kLong, &start).ok());
  EXPECT_FALSE(start.started());
  EXPECT_TRUE(start.should_stop());
}

TEST_F(CoordinatorTest, WaitForSummariesNamesTheMissingAndReturnsOnceAllReported) {
  pb::ReportSummaryResponse response;
  ASSERT_TRUE(coordinator_.ReportSummary(Summary(0, R"({"a": 1})"), &response).ok());
  EXPECT_THAT(coordinator_.WaitForSummaries(absl::Now()), ElementsAre(1));
  std::thread late(
      [&] { ASSERT_TRUE(coordinator_.ReportSummary(Summary(1, R"({"b": 2})"), &response).ok()); });
  EXPECT_THAT(coordinator_.WaitForSummaries(absl::Now() + kLong), IsEmpty());
  late.join();
  const std::map<int, std::string> summaries = coordinator_.summaries();
  ASSERT_EQ(summaries.size(), 2u);
  EXPECT_EQ(summaries.at(0), R"({"a": 1})");
  EXPECT_EQ(summaries.at(1), R"({"b": 2})");
}

TEST_F(CoordinatorTest, SilentWorkersAreThoseNeitherHeardFromNorDone) {
  pb::RegisterTaskResponse response;
  ASSERT_TRUE(coordinator_.RegisterTask(Register(0, Fingerprint(32)), &response).ok());
  // Worker 1 never registered: silent for any age; worker 0 was just heard from.
  EXPECT_THAT(coordinator_.SilentWorkers(absl::Hours(1)), ElementsAre(1));
  pb::ReportSummaryResponse reported;
  ASSERT_TRUE(coordinator_.ReportSummary(Summary(1, "{}"), &reported).ok());
  EXPECT_THAT(coordinator_.SilentWorkers(absl::Hours(1)), IsEmpty());
}

// The logic behind its gRPC adapter, called through a real stub over loopback.
TEST(GrpcCoordinatorServiceTest, ServesTheLogicOverGrpc) {
  Coordinator coordinator("run-2", "/tmp/run-2", Fingerprint(32), /*num_workers=*/1);
  GrpcCoordinatorService service(&coordinator);
  absl::StatusOr<runtime::StartedServer> started =
      runtime::StartGrpcServer("chief:0", "127.0.0.1:0", {&service});
  ASSERT_TRUE(started.ok()) << started.status();
  ASSERT_GT(started->port, 0);
  auto stub =
      pb::Coordinator::NewStub(runtime::MakeChannel(absl::StrCat("127.0.0.1:", started->port)));

  {  // Refused: the code and message cross the wire unchanged.
    grpc::ClientContext context;
    context.set_deadline(runtime::DeadlineIn(kLong));
    pb::RegisterTaskResponse response;
    const grpc::Status s = stub->RegisterTask(&context, Register(0, Fingerprint(16)), &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("batch_size: 16 vs 32"));
  }
  {
    grpc::ClientContext context;
    context.set_deadline(runtime::DeadlineIn(kLong));
    pb::RegisterTaskResponse response;
    ASSERT_TRUE(stub->RegisterTask(&context, Register(0, Fingerprint(32)), &response).ok());
    EXPECT_EQ(response.run_id(), "run-2");
    EXPECT_EQ(response.run_dir(), "/tmp/run-2");
  }
  EXPECT_THAT(coordinator.WaitForWorkers(absl::Now()), IsEmpty());
  coordinator.Start();
  {
    grpc::ClientContext context;
    context.set_deadline(runtime::DeadlineIn(kLong));
    pb::WaitForStartResponse response;
    ASSERT_TRUE(stub->WaitForStart(&context, StartPoll(0, 5000), &response).ok());
    EXPECT_TRUE(response.started());
  }
  {
    grpc::ClientContext context;
    context.set_deadline(runtime::DeadlineIn(kLong));
    pb::ReportSummaryResponse response;
    ASSERT_TRUE(stub->ReportSummary(&context, Summary(0, R"({"done": true})"), &response).ok());
  }
  EXPECT_THAT(coordinator.WaitForSummaries(absl::Now() + kLong), IsEmpty());
  EXPECT_EQ(coordinator.summaries().at(0), R"({"done": true})");
  started->server->Shutdown(runtime::DeadlineIn(absl::Seconds(1)));
}

pb::HeartbeatRequest Beat(int index, int64_t step, const std::string& waiting_for = "",
                          int64_t waiting_ms = 0) {
  pb::HeartbeatRequest request;
  *request.mutable_task() = Worker(index);
  request.set_local_step(step);
  request.set_waiting_for(waiting_for);
  request.set_waiting_ms(waiting_ms);
  return request;
}

// The watchdog (chief/watchdog.h) on a real coordinator and call tracker, checked by the test
// on the test's clock (a 0.5 s floor): a worker whose step stops moving is named past the threshold
// with the call it waits for, and only then; one that stops beating as stopped or hung; a ps by the
// chief's own call that does not come back. Each episode ends when the task moves again.
TEST_F(CoordinatorTest, TheWatchdogNamesTheStuckTaskAndWhatItWaitsFor) {
  pb::RegisterTaskResponse registered;
  pb::HeartbeatResponse answer;
  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(coordinator_.RegisterTask(Register(w, Fingerprint(32)), &registered).ok());
  }
  runtime::CallTracker chief_calls(&clock_);
  Mutex mu;
  std::map<std::string, double> gauges;
  Watchdog::Options o;
  o.min_interval = absl::Milliseconds(500);
  o.poll = absl::Hours(1);  // the test calls Check itself
  o.on_stuck = [&](const std::string& task, double seconds) {
    MutexLock lock(&mu);
    gauges[task] = seconds;
  };
  Watchdog dog(&coordinator_, &chief_calls, o);
  auto episode = [&](const std::string& task) -> nlohmann::json {
    const nlohmann::json report = dog.Report();
    for (const auto& e : report["episodes"]) {
      if (e["task"] == task && e["ongoing"].get<bool>()) return e;
    }
    return nullptr;
  };
  // Beats (both workers moving unless `stuck1`), then a check, 20 ms apart on the test's
  // clock, until `done` or 20 s of it.
  int64_t step0 = 0, step1 = 0;
  auto drive = [&](bool beat0, bool stuck1, auto done) {
    for (int beat = 0; !done() && beat < 1000; ++beat) {
      if (beat0) {
        EXPECT_TRUE(coordinator_.Heartbeat(Beat(0, ++step0), &answer).ok());
      }
      EXPECT_TRUE(coordinator_
                      .Heartbeat(stuck1 ? Beat(1, step1, "PushPull on ps:0", 1234)
                                        : Beat(1, ++step1),
                                 &answer)
                      .ok());
      dog.Check(clock_.Now());
      clock_.Advance(absl::Milliseconds(20));
    }
    return done();
  };
  ASSERT_TRUE(drive(true, false, [&] { return step1 >= 10; }));
  EXPECT_EQ(dog.Threshold(), absl::Milliseconds(500));  // 5 x 20 ms is below the floor
  // worker:1 stops at its step, waiting on a PushPull: not named at once, named past 0.5 s.
  EXPECT_TRUE(coordinator_.Heartbeat(Beat(1, step1, "PushPull on ps:0", 1234), &answer).ok());
  dog.Check(clock_.Now());
  EXPECT_TRUE(episode("worker:1").is_null()) << dog.Report().dump(2);
  ASSERT_TRUE(drive(true, true, [&] { return !episode("worker:1").is_null(); }))
      << dog.Report().dump(2);
  EXPECT_THAT(episode("worker:1")["what"].get<std::string>(),
              HasSubstr(absl::StrCat("stuck at local step ", step1)));
  EXPECT_THAT(episode("worker:1")["what"].get<std::string>(),
              HasSubstr("waiting for PushPull on ps:0 for 1.2 s"));
  EXPECT_TRUE(episode("worker:0").is_null());
  // It moves again: the episode ends and its gauge goes back to 0.
  ASSERT_TRUE(drive(true, false, [&] { return episode("worker:1").is_null(); }));
  {
    MutexLock lock(&mu);
    EXPECT_EQ(gauges["worker:1"], 0.0);
  }
  // worker:0 stops beating altogether (SIGSTOP): named, then as silent past 3 s.
  ASSERT_TRUE(drive(false, false, [&] {
    const nlohmann::json e = episode("worker:0");
    return !e.is_null() && e["what"].get<std::string>().find("no heartbeat") != std::string::npos;
  })) << dog.Report().dump(2);
  // The chief's Stats to ps:1 that does not come back names ps:1; its return ends that.
  const int64_t stats = chief_calls.Begin("Stats", "ps:1");
  ASSERT_TRUE(drive(true, false, [&] { return !episode("ps:1").is_null(); }));
  EXPECT_THAT(episode("ps:1")["what"].get<std::string>(),
              HasSubstr("has not answered the chief's Stats for"));
  chief_calls.End(stats);
  dog.Check(clock_.Now());
  EXPECT_TRUE(episode("ps:1").is_null());
}

TEST(StartGrpcServerTest, APortInUseFailsWithOneLineNamingTheAddress) {
  Coordinator coordinator("run-3", "", Fingerprint(32), 1);
  GrpcCoordinatorService first_service(&coordinator);
  GrpcCoordinatorService second_service(&coordinator);
  absl::StatusOr<runtime::StartedServer> first =
      runtime::StartGrpcServer("chief:0", "127.0.0.1:0", {&first_service});
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string address = absl::StrCat("127.0.0.1:", first->port);

  absl::StatusOr<runtime::StartedServer> second =
      runtime::StartGrpcServer("chief:0", address, {&second_service});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(second.status().message(),
            absl::StrCat("chief:0 cannot listen on ", address, " (in use?)"));
  EXPECT_EQ(ExitCodeForStatus(second.status()), kExitRuntimeFailure);
  first->server->Shutdown(runtime::DeadlineIn(absl::Seconds(1)));
}

TEST(StartGrpcServerTest, ListensOnEveryAddressGiven) {
  Coordinator coordinator("run-5", "", Fingerprint(32), 1);
  GrpcCoordinatorService service(&coordinator);
  absl::StatusOr<runtime::StartedServer> started =
      runtime::StartGrpcServer("ps:0", std::vector<std::string>(2, "127.0.0.1:0"), {&service});
  ASSERT_TRUE(started.ok()) << started.status();
  ASSERT_EQ(started->ports.size(), 2u);
  EXPECT_GT(started->ports[0], 0);
  EXPECT_GT(started->ports[1], 0);
  EXPECT_NE(started->ports[0], started->ports[1]);
  EXPECT_EQ(started->port, started->ports[0]);
  started->server->Shutdown(runtime::DeadlineIn(absl::Seconds(1)));
}

TEST(StartGrpcServerTest, AnAddressThatCannotBeBoundSaysWhy) {
  Coordinator coordinator("run-4", "", Fingerprint(32), 1);
  GrpcCoordinatorService service(&coordinator);
  // 192.0.2.1 is TEST-NET-1 (RFC 5737): never an address of this host.
  absl::StatusOr<runtime::StartedServer> foreign =
      runtime::StartGrpcServer("ps:1", "192.0.2.1:2222", {&service});
  ASSERT_FALSE(foreign.ok());
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(foreign.status().message(),
            "ps:1 cannot listen on 192.0.2.1:2222 (not an address of this host)");
  // gRPC alone would listen on port 70000 - 65536; the helper refuses it.
  absl::StatusOr<runtime::StartedServer> malformed =
      runtime::StartGrpcServer("ps:1", "127.0.0.1:70000", {&service});
  ASSERT_FALSE(malformed.ok());
  EXPECT_EQ(malformed.status().message(),
            "ps:1 cannot listen on 127.0.0.1:70000 (not host:port with a port in 0-65535)");
  EXPECT_THAT(malformed.status().message(), Not(HasSubstr("\n")));
}

}  // namespace
}  // namespace fulcrum::chief
