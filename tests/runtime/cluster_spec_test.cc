// runtime/cluster_spec: parsing and validating ClusterSpec JSON, TF_CONFIG, and resolving this
// process's task from flags; plus every spec shipped in cluster_specs/.
#include "runtime/cluster/cluster_spec.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace fulcrum::runtime {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kGoodSpec[] = R"({
  "chief": ["localhost:2222"],
  "ps": ["localhost:2223", "localhost:2224"],
  "worker": ["localhost:2225", "localhost:2226"]
})";

// A fresh scratch folder for this test.
fs::path TestDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  fs::path dir =
      fs::path(::testing::TempDir()) /
      absl::StrCat("fulcrum_rt_", getpid(), "_", info->test_suite_name(), "_", info->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string WriteSpec(const std::string& text, const std::string& name = "spec.json") {
  const fs::path path = TestDir() / name;
  std::ofstream(path) << text;
  return path.string();
}

absl::Status ParseError(const std::string& json) {
  return ParseClusterSpec(json, "specs/x.json").status();
}

// ---------------------------------------------------------------------------------------
// SplitHostPort

TEST(SplitHostPortTest, HostAndPort) {
  std::string host;
  int port = 0;
  ASSERT_TRUE(SplitHostPort("node0:2222", &host, &port).ok());
  EXPECT_EQ(host, "node0");
  EXPECT_EQ(port, 2222);
  ASSERT_TRUE(SplitHostPort("10.0.0.1:1", &host, &port).ok());
  EXPECT_EQ(host, "10.0.0.1");
  EXPECT_EQ(port, 1);
  ASSERT_TRUE(SplitHostPort("node1.exp.cloudlab.us:65535", &host, &port).ok());
  EXPECT_EQ(port, 65535);
}

TEST(SplitHostPortTest, BracketedIpv6) {
  std::string host;
  int port = 0;
  ASSERT_TRUE(SplitHostPort("[::1]:80", &host, &port).ok());
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 80);
  ASSERT_TRUE(SplitHostPort("[fe80::1:2]:2222", &host, &port).ok());
  EXPECT_EQ(host, "fe80::1:2");
}

TEST(SplitHostPortTest, Malformed) {
  struct Case {
    const char* address;
    const char* message;
  };
  const Case cases[] = {
      {"", "empty address"},
      {":2222", "empty host"},
      {"localhost", "missing port"},
      {"localhost:", "missing port"},
      {"localhost:http", "not a number"},
      {"localhost:-1", "not a number"},
      {"localhost:+80", "not a number"},
      {"localhost:0", "out of range"},
      {"localhost:65536", "out of range"},
      {"localhost:99999999999", "out of range"},
      {"::1:2222", "brackets"},
      {"fe80::1", "brackets"},
      {"[::1]", "missing port"},
      {"[::1]:", "missing port"},
      {"[::1]x:80", "after \"]\""},
      {"[::1]:80x", "not a number"},
      {"[::1:80", "closing"},
      {"[]:80", "empty host"},
      {"local host:80", "invalid character"},
  };
  for (const Case& c : cases) {
    std::string host = "unchanged";
    int port = -7;
    const absl::Status status = SplitHostPort(c.address, &host, &port);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.address;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message)) << c.address;
    EXPECT_THAT(std::string(status.message()), HasSubstr(absl::StrCat("\"", c.address, "\"")));
    EXPECT_EQ(host, "unchanged") << c.address;
    EXPECT_EQ(port, -7) << c.address;
  }
}

// ---------------------------------------------------------------------------------------
// ParseClusterSpec

TEST(ParseClusterSpecTest, GoodSpec) {
  auto spec = ParseClusterSpec(kGoodSpec, "good.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->num_tasks(kChiefJob), 1);
  EXPECT_EQ(spec->num_tasks(kPsJob), 2);
  EXPECT_EQ(spec->num_tasks(kWorkerJob), 2);
  EXPECT_EQ(spec->num_tasks("evaluator"), 0);
  EXPECT_EQ(spec->address(kChiefJob, 0), "localhost:2222");
  EXPECT_EQ(spec->address(kPsJob, 1), "localhost:2224");
  EXPECT_EQ(spec->address(kWorkerJob, 0), "localhost:2225");
  EXPECT_EQ(spec->jobs().size(), 3u);
}

// TensorFlow 1.x names the chief "master": a spec with a master job, or a task started as
// --job_name=master, is the chief; both names at once are refused.
TEST(ParseClusterSpecTest, MasterIsTheChief) {
  const std::string tf1 = R"({"master": ["localhost:2222"], "ps": ["localhost:2223"],
                              "worker": ["localhost:2224"]})";
  auto spec = ParseClusterSpec(tf1, "tf1.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->address(kChiefJob, 0), "localhost:2222");
  const absl::Status both = ParseError(
      R"({"master": ["localhost:1"], "chief": ["localhost:2"], "ps": ["localhost:3"],
          "worker": ["localhost:4"]})");
  EXPECT_EQ(both.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(both.message(), HasSubstr("both \"chief\" and \"master\""));
  const std::string path = WriteSpec(tf1, "tf1.json");
  auto task = ResolveTask(path, nullptr, "master", 0, kChiefJob);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->job_name, kChiefJob);
}

TEST(ParseClusterSpecTest, ToJsonRoundTrips) {
  auto spec = ParseClusterSpec(kGoodSpec, "good.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const nlohmann::json json = nlohmann::json::parse(spec->ToJson());
  EXPECT_EQ(json, nlohmann::json::parse(kGoodSpec));
  auto again = ParseClusterSpec(spec->ToJson(), "again");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->jobs(), spec->jobs());
}

TEST(ParseClusterSpecTest, Ipv6AddressesAreAccepted) {
  auto spec = ParseClusterSpec(
      R"({"chief": ["[::1]:2222"], "ps": ["[::1]:2223"], "worker": ["[fe80::1]:2222"]})", "v6");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->address(kPsJob, 0), "[::1]:2223");
}

TEST(ParseClusterSpecTest, SamePortOnDifferentHostsIsFine) {
  auto spec = ParseClusterSpec(
      R"({"chief": ["node0:2222"], "ps": ["node1:2222"], "worker": ["node2:2222"]})", "hosts");
  EXPECT_TRUE(spec.ok()) << spec.status();
}

TEST(ParseClusterSpecTest, NotJson) {
  const absl::Status s = ParseError(R"({"chief": ["localhost:2222"],)");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("specs/x.json"), HasSubstr("not valid JSON"),
                    HasSubstr("parse error")));  // the parser's own message
}

TEST(ParseClusterSpecTest, NotAnObject) {
  for (const char* json : {R"(["localhost:2222"])", "42", R"("chief")", "null"}) {
    const absl::Status s = ParseError(json);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << json;
    EXPECT_THAT(std::string(s.message()),
                AllOf(HasSubstr("specs/x.json"), HasSubstr("JSON object")))
        << json;
  }
}

TEST(ParseClusterSpecTest, UnknownJob) {
  const absl::Status s =
      ParseError(R"({"chief": ["h:1"], "ps": ["h:2"], "worker": ["h:3"], "evaluator": ["h:4"]})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("specs/x.json"), HasSubstr("unknown job \"evaluator\""),
                    HasSubstr("chief, ps or worker")));
}

TEST(ParseClusterSpecTest, JobNotAListOfStrings) {
  {
    const absl::Status s = ParseError(R"({"chief": "h:1", "ps": ["h:2"], "worker": ["h:3"]})");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()),
                AllOf(HasSubstr("specs/x.json"), HasSubstr("\"chief\""), HasSubstr("list")));
  }
  {
    const absl::Status s =
        ParseError(R"({"chief": ["h:1"], "ps": ["h:2"], "worker": ["h:3", 2224]})");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("specs/x.json"),
                                                HasSubstr("\"worker\" task 1"), HasSubstr("2224")));
  }
}

// TensorFlow 1.x's layout: no chief job, worker 0 is the chief (and the coordinator listens
// on its address).
TEST(ParseClusterSpecTest, WithoutAChiefWorkerZeroIsTheChief) {
  auto spec = ParseClusterSpec(R"({"ps": ["h:2"], "worker": ["h:3", "h:4"]})", "specs/x.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->has_chief_job());
  EXPECT_EQ(spec->coordinator_address(), "h:3");
  EXPECT_EQ(spec->ToJson(), R"({"ps":["h:2"],"worker":["h:3","h:4"]})");
  TaskConfig chief;
  chief.cluster = *spec;
  chief.job_name = "chief";
  EXPECT_EQ(chief.address(), "h:3");
  auto with_chief = ParseClusterSpec(kGoodSpec, "good");
  ASSERT_TRUE(with_chief.ok());
  EXPECT_TRUE(with_chief->has_chief_job());
  EXPECT_EQ(with_chief->coordinator_address(), with_chief->address("chief", 0));
}

TEST(ParseClusterSpecTest, ChiefNotExactlyOne) {
  for (const char* chiefs : {"[]", R"(["h:1", "h:4"])"}) {
    const absl::Status s =
        ParseError(absl::StrCat(R"({"chief": )", chiefs, R"(, "ps": ["h:2"], "worker": ["h:3"]})"));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << chiefs;
    EXPECT_THAT(std::string(s.message()),
                AllOf(HasSubstr("specs/x.json"), HasSubstr("chief"), HasSubstr("exactly 1")))
        << chiefs;
  }
}

TEST(ParseClusterSpecTest, NoPs) {
  for (const char* json : {R"({"chief": ["h:1"], "worker": ["h:3"]})",
                           R"({"chief": ["h:1"], "ps": [], "worker": ["h:3"]})"}) {
    const absl::Status s = ParseError(json);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << json;
    EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("specs/x.json"), HasSubstr("no ps")))
        << json;
  }
}

TEST(ParseClusterSpecTest, NoWorker) {
  for (const char* json : {R"({"chief": ["h:1"], "ps": ["h:2"]})",
                           R"({"chief": ["h:1"], "ps": ["h:2"], "worker": []})"}) {
    const absl::Status s = ParseError(json);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << json;
    EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("specs/x.json"), HasSubstr("no worker")))
        << json;
  }
}

TEST(ParseClusterSpecTest, MalformedAddressNamesJobIndexAndAddress) {
  struct Case {
    const char* worker1;
    const char* message;
  };
  const Case cases[] = {
      {":2226", "empty host"},
      {"localhost", "missing port"},
      {"localhost:abc", "not a number"},
      {"localhost:0", "out of range"},
      {"localhost:70000", "out of range"},
      {"::1:2226", "brackets"},
      {"[::1]garbage:2226", "after \"]\""},
  };
  for (const Case& c : cases) {
    const std::string json = absl::StrCat(
        R"({"chief": ["localhost:2222"], "ps": ["localhost:2223"], "worker": ["localhost:2225", ")",
        c.worker1, R"("]})");
    const absl::Status s = ParseError(json);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << json;
    EXPECT_THAT(std::string(s.message()),
                AllOf(HasSubstr("specs/x.json"), HasSubstr("job \"worker\" task 1"),
                      HasSubstr(absl::StrCat("\"", c.worker1, "\"")), HasSubstr(c.message)))
        << json;
  }
}

TEST(ParseClusterSpecTest, DuplicateAddressNamesBothTasks) {
  {
    const absl::Status s = ParseError(
        R"({"chief": ["localhost:2222"], "ps": ["localhost:2223"],
            "worker": ["localhost:2224", "localhost:2223"]})");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()),
                AllOf(HasSubstr("specs/x.json"), HasSubstr("localhost:2223"), HasSubstr("ps:0"),
                      HasSubstr("worker:1")));
  }
  {
    // Same host:port spelt differently is still the same socket.
    const absl::Status s =
        ParseError(R"({"chief": ["Node0:2222"], "ps": ["node0:02222"], "worker": ["node1:2222"]})");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("chief:0"), HasSubstr("ps:0")));
  }
}

// ---------------------------------------------------------------------------------------
// ResolveTask

TEST(ResolveTaskTest, FromFileWithFlags) {
  const std::string path = WriteSpec(kGoodSpec);
  auto task = ResolveTask(path, nullptr, "worker", 1, kWorkerJob);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->job_name, "worker");
  EXPECT_EQ(task->task_index, 1);
  EXPECT_EQ(task->source, path);
  EXPECT_EQ(task->task_name(), "worker:1");
  EXPECT_EQ(task->dir_name(), "worker-1");
  EXPECT_EQ(task->address(), "localhost:2226");
  EXPECT_EQ(task->cluster.num_tasks(kPsJob), 2);
}

TEST(ResolveTaskTest, DefaultsToTheBinarysJobAndIndexZero) {
  const std::string path = WriteSpec(kGoodSpec);
  auto task = ResolveTask(path, nullptr, "", -1, kPsJob);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->job_name, "ps");
  EXPECT_EQ(task->task_index, 0);
  EXPECT_EQ(task->task_name(), "ps:0");
  EXPECT_EQ(task->dir_name(), "ps-0");
  EXPECT_EQ(task->address(), "localhost:2223");

  auto chief = ResolveTask(path, "", "", -1, kChiefJob);
  ASSERT_TRUE(chief.ok()) << chief.status();
  EXPECT_EQ(chief->dir_name(), "chief-0");
  EXPECT_EQ(chief->address(), "localhost:2222");
}

TEST(ResolveTaskTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = (TestDir() / "nope.json").string();
  auto task = ResolveTask(path, nullptr, "", -1, kWorkerJob);
  EXPECT_EQ(task.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(task.status().message()), HasSubstr(path));
}

TEST(ResolveTaskTest, DirectoryIsNotFound) {
  const std::string path = TestDir().string();
  auto task = ResolveTask(path, nullptr, "", -1, kWorkerJob);
  EXPECT_EQ(task.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(task.status().message()), HasSubstr(path));
}

TEST(ResolveTaskTest, BadFileNamesThePath) {
  const std::string path = WriteSpec(R"({"chief": ["localhost:2222"], "ps": ["localhost:2223"]})");
  auto task = ResolveTask(path, nullptr, "", -1, kWorkerJob);
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(task.status().message()), AllOf(HasSubstr(path), HasSubstr("no worker")));
}

TEST(ResolveTaskTest, NoClusterAtAll) {
  for (const char* tf_config : {static_cast<const char*>(nullptr), ""}) {
    auto task = ResolveTask("", tf_config, "", -1, kWorkerJob);
    EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(task.status().message()),
                AllOf(HasSubstr("--cluster_spec=FILE"), HasSubstr("TF_CONFIG")));
  }
}

TEST(ResolveTaskTest, TfConfigWithTask) {
  const std::string tf_config =
      absl::StrCat(R"({"cluster": )", kGoodSpec, R"(, "task": {"type": "worker", "index": 1}})");
  auto task = ResolveTask("", tf_config.c_str(), "", -1, kWorkerJob);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->source, "TF_CONFIG");
  EXPECT_EQ(task->job_name, "worker");
  EXPECT_EQ(task->task_index, 1);
  EXPECT_EQ(task->address(), "localhost:2226");
}

TEST(ResolveTaskTest, TfConfigExtraKeysAreIgnored) {
  const std::string tf_config = absl::StrCat(
      R"({"cluster": )", kGoodSpec,
      R"(, "task": {"type": "ps", "index": 1, "trial": "3"}, "environment": "cloud"})");
  auto task = ResolveTask("", tf_config.c_str(), "", -1, kPsJob);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->task_name(), "ps:1");
}

TEST(ResolveTaskTest, TfConfigWithoutTaskUsesFlags) {
  const std::string tf_config = absl::StrCat(R"({"cluster": )", kGoodSpec, "}");
  auto task = ResolveTask("", tf_config.c_str(), "ps", 1, kPsJob);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->task_name(), "ps:1");
  EXPECT_EQ(task->address(), "localhost:2224");

  auto defaults = ResolveTask("", tf_config.c_str(), "", -1, kWorkerJob);
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->task_name(), "worker:0");
}

TEST(ResolveTaskTest, FlagsOverrideTfConfigTask) {
  const std::string tf_config =
      absl::StrCat(R"({"cluster": )", kGoodSpec, R"(, "task": {"type": "worker", "index": 1}})");
  auto task = ResolveTask("", tf_config.c_str(), "", 0, kWorkerJob);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->task_index, 0);
  // TF_CONFIG says worker but --job_name says ps: the flag wins (and the ps binary accepts it).
  auto ps = ResolveTask("", tf_config.c_str(), "ps", -1, kPsJob);
  ASSERT_TRUE(ps.ok()) << ps.status();
  EXPECT_EQ(ps->task_name(), "ps:1");
}

TEST(ResolveTaskTest, FileWinsOverTfConfig) {
  const std::string path =
      WriteSpec(R"({"chief": ["node0:2222"], "ps": ["node0:2223"], "worker": ["node1:2222"]})");
  // A TF_CONFIG naming another cluster (even a malformed one) does not matter.
  for (const char* tf_config :
       {R"({"cluster": {"chief": ["x:1"], "ps": ["x:2"], "worker": ["x:3", "x:4"]},
            "task": {"type": "worker", "index": 1}})",
        "not json"}) {
    auto task = ResolveTask(path, tf_config, "", -1, kWorkerJob);
    ASSERT_TRUE(task.ok()) << task.status();
    EXPECT_EQ(task->source, path);
    EXPECT_EQ(task->task_name(), "worker:0");
    EXPECT_EQ(task->address(), "node1:2222");
  }
}

TEST(ResolveTaskTest, TfConfigNotJson) {
  auto task = ResolveTask("", "{cluster:", "", -1, kWorkerJob);
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(task.status().message()),
              AllOf(HasSubstr("TF_CONFIG"), HasSubstr("not valid JSON")));
}

TEST(ResolveTaskTest, TfConfigNotAnObject) {
  auto task = ResolveTask("", "[1, 2]", "", -1, kWorkerJob);
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(task.status().message()),
              AllOf(HasSubstr("TF_CONFIG"), HasSubstr("object")));
}

TEST(ResolveTaskTest, TfConfigWithoutCluster) {
  auto task = ResolveTask("", R"({"task": {"type": "worker", "index": 0}})", "", -1, kWorkerJob);
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(task.status().message()),
              AllOf(HasSubstr("TF_CONFIG"), HasSubstr("\"cluster\"")));
}

TEST(ResolveTaskTest, TfConfigBadClusterNamesTfConfig) {
  auto task =
      ResolveTask("", R"({"cluster": {"chief": ["h:1"], "ps": ["h:2"], "worker": ["h:x"]}})", "",
                  -1, kWorkerJob);
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(task.status().message()),
      AllOf(HasSubstr("TF_CONFIG"), HasSubstr("job \"worker\" task 0"), HasSubstr("\"h:x\"")));
}

TEST(ResolveTaskTest, TfConfigBadTask) {
  const std::string base = absl::StrCat(R"({"cluster": )", kGoodSpec, R"(, "task": )");
  for (const char* bad_task : {R"("worker")", R"({"type": 3})", R"({"index": "1"})",
                               R"({"index": -1})", R"({"index": 1.5})"}) {
    const std::string tf_config = absl::StrCat(base, bad_task, "}");
    auto task = ResolveTask("", tf_config.c_str(), "", -1, kWorkerJob);
    EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument) << bad_task;
    EXPECT_THAT(std::string(task.status().message()), HasSubstr("TF_CONFIG")) << bad_task;
  }
}

TEST(ResolveTaskTest, JobMismatchNamesTheRightBinary) {
  const std::string path = WriteSpec(kGoodSpec);
  auto task = ResolveTask(path, nullptr, "worker", -1, kPsJob);
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(task.status().message()),
              AllOf(HasSubstr("--job_name=worker"), HasSubstr("this is the ps binary"),
                    HasSubstr("build/bin/worker")));

  const std::string tf_config =
      absl::StrCat(R"({"cluster": )", kGoodSpec, R"(, "task": {"type": "chief", "index": 0}})");
  auto from_tf = ResolveTask("", tf_config.c_str(), "", -1, kWorkerJob);
  EXPECT_EQ(from_tf.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(from_tf.status().message()),
              AllOf(HasSubstr("TF_CONFIG"), HasSubstr("this is the worker binary"),
                    HasSubstr("build/bin/chief")));
}

TEST(ResolveTaskTest, TheChiefBinaryOnASpecWithoutAChiefSaysWorkerZeroIsIt) {
  const std::string path = WriteSpec(R"({"ps": ["h:2"], "worker": ["h:3"]})");
  auto chief = ResolveTask(path, nullptr, "", -1, kChiefJob);
  EXPECT_EQ(chief.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(chief.status().message()),
      AllOf(HasSubstr(path), HasSubstr("no chief job"), HasSubstr("worker 0 is the chief")));
  auto worker = ResolveTask(path, nullptr, "", 0, kWorkerJob);
  ASSERT_TRUE(worker.ok()) << worker.status();
}

TEST(ResolveTaskTest, UnknownJobName) {
  const std::string path = WriteSpec(kGoodSpec);
  auto task = ResolveTask(path, nullptr, "evaluator", -1, kWorkerJob);
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(task.status().message()),
              AllOf(HasSubstr("--job_name=evaluator"), HasSubstr("chief, ps or worker")));
}

TEST(ResolveTaskTest, IndexOutOfRange) {
  const std::string path = WriteSpec(kGoodSpec);
  auto task = ResolveTask(path, nullptr, "worker", 3, kWorkerJob);
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(task.status().message()),
              AllOf(HasSubstr("--task_index=3: the cluster spec has 2 worker task(s) (0..1)"),
                    HasSubstr(path)));

  auto chief = ResolveTask(path, nullptr, "", 1, kChiefJob);
  EXPECT_THAT(std::string(chief.status().message()),
              HasSubstr("--task_index=1: the cluster spec has 1 chief task(s) (0..0)"));

  const std::string tf_config =
      absl::StrCat(R"({"cluster": )", kGoodSpec, R"(, "task": {"type": "ps", "index": 2}})");
  auto from_tf = ResolveTask("", tf_config.c_str(), "", -1, kPsJob);
  EXPECT_EQ(from_tf.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(from_tf.status().message()),
              AllOf(HasSubstr("TF_CONFIG task index 2"), HasSubstr("2 ps task(s) (0..1)")));
}

// ---------------------------------------------------------------------------------------
// TensorFlow 1.x's host flags: --ps_hosts=h:p,h:p --worker_hosts=... --chief_hosts=...

std::vector<HostsFlag> Hosts(const std::string& chief, const std::string& ps,
                             const std::string& worker, const std::string& master = "") {
  return {{"chief_hosts", "chief", chief},
          {"master_hosts", "master", master},
          {"ps_hosts", "ps", ps},
          {"worker_hosts", "worker", worker}};
}

TEST(ClusterSpecFromHostsTest, BuildsTheSpecTheFlagsDescribe) {
  auto spec = ClusterSpecFromHosts(Hosts("h:1", "h:2, h:3", "h:4,[::1]:5"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->num_tasks("chief"), 1);
  EXPECT_EQ(spec->address("ps", 1), "h:3");  // blanks around an entry are dropped
  EXPECT_EQ(spec->address("worker", 1), "[::1]:5");
  EXPECT_EQ(spec->ToJson(), R"({"chief":["h:1"],"ps":["h:2","h:3"],"worker":["h:4","[::1]:5"]})");
  // --master_hosts is TensorFlow 1.x's name for the chief.
  auto master = ClusterSpecFromHosts(Hosts("", "h:2", "h:4", "h:1"));
  ASSERT_TRUE(master.ok()) << master.status();
  EXPECT_EQ(master->address("chief", 0), "h:1");
  // As TensorFlow 1.x scripts give them: no chief, worker 0 is the chief.
  auto tf1 = ClusterSpecFromHosts(Hosts("", "h:2", "h:4,h:5"));
  ASSERT_TRUE(tf1.ok()) << tf1.status();
  EXPECT_FALSE(tf1->has_chief_job());
  EXPECT_EQ(tf1->coordinator_address(), "h:4");
}

TEST(ClusterSpecFromHostsTest, MalformedEntryNamesTheFlagAndTheEntry) {
  struct Case {
    std::vector<HostsFlag> flags;
    std::vector<std::string> needles;
  };
  const Case cases[] = {
      {Hosts("h:1", "h:2,h", "h:4"), {"--ps_hosts=h:2,h", "entry 1", "\"h\"", "missing port"}},
      {Hosts("h:1", "h:2", "h:4,,h:5"), {"--worker_hosts=h:4,,h:5", "entry 1", "empty address"}},
      {Hosts("h:1", "h:2", "h:99999"), {"--worker_hosts", "h:99999", "out of range"}},
      {Hosts("h", "h:2", "h:4"), {"--chief_hosts=h", "entry 0", "missing port"}},
  };
  for (const Case& c : cases) {
    const absl::Status s = ClusterSpecFromHosts(c.flags).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    for (const auto& needle : c.needles) EXPECT_THAT(std::string(s.message()), HasSubstr(needle));
  }
}

TEST(ClusterSpecFromHostsTest, MissingOrConflictingJobsAreNamed) {
  EXPECT_THAT(std::string(ClusterSpecFromHosts(Hosts("h:1", "", "h:4")).status().message()),
              HasSubstr("no --ps_hosts"));
  EXPECT_THAT(std::string(ClusterSpecFromHosts(Hosts("h:1", "h:2", "")).status().message()),
              HasSubstr("no --worker_hosts"));
  EXPECT_THAT(
      std::string(ClusterSpecFromHosts(Hosts("h:1", "h:2", "h:4", "h:5")).status().message()),
      AllOf(HasSubstr("--chief_hosts and --master_hosts"), HasSubstr("give one")));
  EXPECT_THAT(std::string(ClusterSpecFromHosts(Hosts("h:1,h:6", "h:2", "h:4")).status().message()),
              HasSubstr("exactly 1"));
  EXPECT_THAT(std::string(ClusterSpecFromHosts(Hosts("h:1", "h:2", "h:2")).status().message()),
              AllOf(HasSubstr("\"h:2\" is used by both ps:0 and worker:0")));
}

TEST(ClusterSpecFromHostsTest, ResolvesTheTaskLikeAFile) {
  auto spec = ClusterSpecFromHosts(Hosts("h:1", "h:2", "h:4,h:5"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto task = ResolveTaskInSpec(*spec, "--ps_hosts --worker_hosts", "", 1, kWorkerJob);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->address(), "h:5");
  auto out_of_range = ResolveTaskInSpec(*spec, "--ps_hosts --worker_hosts", "", 2, kWorkerJob);
  EXPECT_THAT(std::string(out_of_range.status().message()),
              AllOf(HasSubstr("--task_index=2"), HasSubstr("--ps_hosts --worker_hosts")));
}

// ---------------------------------------------------------------------------------------
// cluster_specs/: every shipped spec is valid, and each of its tasks resolves.

TEST(ShippedClusterSpecsTest, EveryJsonFileIsValid) {
  const fs::path dir = fs::path(FULCRUM_SOURCE_DIR) / "cluster_specs";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  ASSERT_GE(files.size(), 4u) << "expected the local and CloudLab specs in " << dir;
  // The layout presets (scripts/make_spec.py output): layouts/<name>/spec.json.
  for (const auto& entry : fs::directory_iterator(dir / "layouts")) {
    files.push_back(entry.path() / "spec.json");
  }
  ASSERT_GE(files.size(), 10u) << "expected the six layout presets in " << dir / "layouts";
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.string());
    for (const char* job : {kChiefJob, kPsJob, kWorkerJob}) {
      auto first = ResolveTask(file.string(), nullptr, "", -1, job);
      ASSERT_TRUE(first.ok()) << first.status();
      const int tasks = first->cluster.num_tasks(job);
      ASSERT_GE(tasks, 1);
      for (int i = 0; i < tasks; ++i) {
        auto task = ResolveTask(file.string(), nullptr, job, i, job);
        ASSERT_TRUE(task.ok()) << task.status();
        EXPECT_FALSE(task->address().empty());
      }
    }
  }
}

TEST(ShippedClusterSpecsTest, LocalSpecsHaveTheirNamedShape) {
  const fs::path dir = fs::path(FULCRUM_SOURCE_DIR) / "cluster_specs";
  struct Case {
    const char* file;
    int ps;
    int workers;
  };
  for (const Case& c : {Case{"local_1ps_2w.json", 1, 2}, Case{"local_2ps_2w.json", 2, 2},
                        Case{"local_1ps_3w.json", 1, 3}, Case{"cloudlab_3node.json", 1, 2}}) {
    SCOPED_TRACE(c.file);
    auto task = ResolveTask((dir / c.file).string(), nullptr, "", -1, kChiefJob);
    ASSERT_TRUE(task.ok()) << task.status();
    EXPECT_EQ(task->cluster.num_tasks(kChiefJob), 1);
    EXPECT_EQ(task->cluster.num_tasks(kPsJob), c.ps);
    EXPECT_EQ(task->cluster.num_tasks(kWorkerJob), c.workers);
  }
}

}  // namespace
}  // namespace fulcrum::runtime
