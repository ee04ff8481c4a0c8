// tests: the real `ps` binary as a child process on 127.0.0.1, with the test playing the
// chief over GrpcPsClient: the full lifecycle (create, push, stats, Shutdown, summary.json,
// exit 0), the startup and heartbeat timeouts, a port already in use and a bad flag.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/ps.pb.h"
#include "runtime/client/grpc_ps_client.h"
#include "runtime/frames/tensor_coding.h"
#include "tests/testing/frame_calls.h"
#include "tests/testing/subprocess.h"

namespace fulcrum {
namespace {

namespace fs = std::filesystem;
using ::fulcrum::testing::FreshDir;
using ::fulcrum::testing::RunBinary;
using ::fulcrum::testing::RunResult;
using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(30);

// A socket bound to a kernel-chosen loopback port; `listen` keeps the port taken.
class PortHolder {
 public:
  explicit PortHolder(bool listen) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
    if (listen) {
      EXPECT_EQ(::listen(fd_, 1), 0);
    }
  }
  ~PortHolder() { Release(); }
  void Release() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A spec whose ps:0 is 127.0.0.1:<ps_port>; the chief and worker addresses are never bound.
fs::path WriteSpec(const fs::path& dir, int ps_port) {
  const fs::path path = dir / "cluster.json";
  nlohmann::json spec;
  spec["chief"] = {"127.0.0.1:1"};
  spec["ps"] = {absl::StrCat("127.0.0.1:", ps_port)};
  spec["worker"] = {"127.0.0.1:2"};
  std::ofstream(path) << spec.dump();
  return path;
}

pb::CreateVariablesRequest Definition(const fs::path& run_dir) {
  pb::CreateVariablesRequest r;
  r.set_run_id("task-test");
  pb::VariableDef* v = r.add_variables();
  v->set_name("w");
  v->set_source("w");
  v->add_full_shape(4);
  v->add_full_shape(2);
  v->set_row_begin(0);
  v->set_row_end(4);
  v->mutable_initializer()->set_kind("zeros");
  r.mutable_optimizer()->set_kind("sgd");
  r.mutable_optimizer()->set_learning_rate(1.0f);
  r.set_mode(pb::MODE_ASYNC);
  r.set_chunk_bytes(16);
  r.set_run_dir(run_dir.string());
  r.set_task_index(0);
  return r;
}

TEST(PsTaskTest, ServesUntilShutdownAndWritesItsSummary) {
  const fs::path dir = FreshDir("ps_task_lifecycle");
  PortHolder port(/*listen=*/false);
  const int ps_port = port.port();
  port.Release();
  const fs::path spec = WriteSpec(dir, ps_port);
  RunResult result;
  // No --train_steps: the ps does not need one.
  std::thread ps([&] {
    result =
        RunBinary("ps", {absl::StrCat("--cluster_spec=", spec.string()), "--task_index=0"}, 120);
  });
  runtime::GrpcPsClient client("ps:0", absl::StrCat("127.0.0.1:", ps_port));
  ASSERT_TRUE(client.WaitUntilReady(kTimeout));
  pb::CreateVariablesResponse created;
  ASSERT_TRUE(client.CreateVariables(Definition(dir), &created, kTimeout).ok());
  EXPECT_EQ(created.bytes_held(), 32);
  EXPECT_EQ(created.num_chunks(), 2);

  pb::PushRequest push;
  push.set_task("worker:0");
  push.set_request_id(1);
  for (int c = 0; c < 2; ++c) {
    const std::vector<float> grad(4, -1.0f);
    const std::span<const float> part(grad);
    pb::ChunkData* g = push.add_gradients();
    g->set_chunk(c);
    runtime::EncodeFloats({&part, 1}, g->mutable_data());
  }
  pb::PushResponse pushed;
  ASSERT_TRUE(testing::CallPush(client, push, &pushed, kTimeout).ok());
  pb::StatsResponse stats;
  ASSERT_TRUE(client.Stats(&stats, kTimeout).ok());
  EXPECT_EQ(stats.global_step(), 1);
  ASSERT_TRUE(client.Shutdown("test done", kTimeout).ok());
  ps.join();

  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr(absl::StrCat("ps:0 listening on 127.0.0.1:", ps_port)));
  EXPECT_THAT(result.output, HasSubstr("ps:0 holds 1 variables, 32 bytes"));
  std::ifstream in(dir / "ps-0" / "summary.json");
  ASSERT_TRUE(in) << result.output;
  const nlohmann::json summary = nlohmann::json::parse(in);
  EXPECT_EQ(summary["job"], "ps");
  EXPECT_EQ(summary["task_index"], 0);
  EXPECT_EQ(summary["mode"], "async");
  EXPECT_EQ(summary["global_step"], 1);
  EXPECT_EQ(summary["bytes_held"], 32);
  ASSERT_EQ(summary["variables"].size(), 1u);
  EXPECT_EQ(summary["variables"][0]["name"], "w");
  EXPECT_EQ(summary["variables"][0]["bytes"], 32);
  EXPECT_EQ(summary["pushes_received"], 2);
  EXPECT_EQ(summary["pushes_applied"], 2);
  EXPECT_EQ(summary["bytes_pushed"], 32);
  for (const char* key : {"pushes_dropped", "pushes_duplicate", "steps_applied", "pulls",
                          "bytes_pulled", "pull_wait_timeouts"}) {
    EXPECT_TRUE(summary.contains(key)) << key;
  }
}

TEST(PsTaskTest, GivesUpWhenTheChiefNeverCreatesVariables) {
  const fs::path dir = FreshDir("ps_task_startup");
  PortHolder port(/*listen=*/false);
  const int ps_port = port.port();
  port.Release();
  const RunResult r = RunBinary("ps",
                                {absl::StrCat("--cluster_spec=", WriteSpec(dir, ps_port).string()),
                                 "--startup_timeout=0.5", "--train_steps=10"},
                                60);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("ps:0: no chief contact in 500ms"));
}

TEST(PsTaskTest, GivesUpWhenTheChiefFallsSilent) {
  const fs::path dir = FreshDir("ps_task_heartbeat");
  PortHolder port(/*listen=*/false);
  const int ps_port = port.port();
  port.Release();
  const fs::path spec = WriteSpec(dir, ps_port);
  RunResult result;
  std::thread ps([&] {
    result = RunBinary(
        "ps", {absl::StrCat("--cluster_spec=", spec.string()), "--heartbeat_timeout=1"}, 60);
  });
  runtime::GrpcPsClient client("ps:0", absl::StrCat("127.0.0.1:", ps_port));
  ASSERT_TRUE(client.WaitUntilReady(kTimeout));
  pb::CreateVariablesResponse created;
  ASSERT_TRUE(client.CreateVariables(Definition(dir), &created, kTimeout).ok());
  ps.join();  // then silence
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output, HasSubstr("ps:0: chief silent for 1s"));
}

TEST(PsTaskTest, APortInUseIsAnError) {
  const fs::path dir = FreshDir("ps_task_port");
  PortHolder port(/*listen=*/true);
  const RunResult r =
      RunBinary("ps", {absl::StrCat("--cluster_spec=", WriteSpec(dir, port.port()).string())}, 60);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("ps:0 cannot listen on 127.0.0.1:", port.port(),
                                               " (in use?)")));
}

TEST(PsTaskTest, BadFlagsExitWithCode2) {
  const fs::path dir = FreshDir("ps_task_flags");
  const RunResult r = RunBinary(
      "ps", {absl::StrCat("--cluster_spec=", WriteSpec(dir, 3).string()), "--mode=bogus"}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("ps: --mode=bogus"));
}

}  // namespace
}  // namespace fulcrum
