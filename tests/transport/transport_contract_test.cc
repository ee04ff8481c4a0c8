// The transport contract (transport/data_channel.h), one suite over both implementations: a
// real gRPC server with a GrpcDataService and a GrpcDataChannel to it, and a real tcp data
// server with a TcpDataChannel presenting a ticket, both on loopback. The handler is this
// test's own small protocol on the body: "<task> <command> <rest>".
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "transport/data_channel.h"
#include "transport/grpc_channel.h"
#include "transport/grpc_slices.h"
#include "transport/limits.h"
#include "transport/tcp_channel.h"
#include "transport/tcp_server.h"

namespace fulcrum::transport {
namespace {

constexpr char kService[] = "/fulcrum.test.Data";
constexpr char kCaller[] = "worker:0";  // the one task the caller may act as
constexpr absl::Duration kTimeout = absl::Seconds(20);

enum class Kind { kGrpc, kTcp };

std::string Join(const Pieces& pieces) {
  std::string out;
  for (const auto& p : pieces) out.append(p.data(), p.size());
  return out;
}

// The server's side of the test protocol:
//   echo: authorize(task), then the reply "<method>:<rest>";
//   fail: the status FailedPrecondition("refused: <rest>");
//   block: waits for the deadline the request carries, then answers "late";
//   deadline: answers the milliseconds left until the request's deadline.
absl::Status Serve(const DataRequest& request, std::vector<Slice>* reply) {
  const std::string body = Join(*request.body);
  std::vector<std::string> parts = absl::StrSplit(body, absl::MaxSplits(' ', 2));
  if (parts.size() < 2) return absl::InvalidArgumentError("body without task and command");
  const std::string rest = parts.size() == 3 ? parts[2] : "";
  if (parts[1] == "fail") return absl::FailedPreconditionError(absl::StrCat("refused: ", rest));
  if (parts[1] == "block") {
    absl::SleepFor(request.deadline - absl::Now() + absl::Milliseconds(200));
    reply->push_back(Slice::Own("late"));
    return absl::OkStatus();
  }
  if (parts[1] == "deadline") {
    reply->push_back(
        Slice::Own(absl::StrCat(absl::ToInt64Milliseconds(request.deadline - absl::Now()))));
    return absl::OkStatus();
  }
  if (absl::Status s = request.authorize(parts[0]); !s.ok()) return s;
  reply->push_back(Slice::Own(absl::StrCat(DataMethodName(request.method), ":")));
  reply->push_back(Slice::Own(rest));
  return absl::OkStatus();
}

// A call's end, waited for.
struct Result {
  absl::Notification done;
  absl::Status status;
  std::string reply;
};

class TransportContractTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    if (GetParam() == Kind::kGrpc) {
      StartGrpc();
    } else {
      StartTcp();
    }
  }
  ~TransportContractTest() override { StopServer(); }

  void StartGrpc() {
    service_ = std::make_unique<GrpcDataService>(
        kService, Serve,
        [](const grpc::ServerContext&, DataMethod method, const std::string& task) {
          if (task == kCaller) return absl::OkStatus();
          return absl::PermissionDeniedError(
              absl::StrCat(DataMethodName(method), " as ", task, " by ", kCaller));
        });
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
    builder.RegisterService(service_.get());
    grpc_server_ = builder.BuildAndStart();
    ASSERT_NE(grpc_server_, nullptr);
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxMessageBytes);
    channel_ = std::make_shared<GrpcDataChannel>(
        grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                  grpc::InsecureChannelCredentials(), args),
        kService, "test server (gRPC)");
  }

  void StartTcp() {
    absl::StatusOr<std::unique_ptr<TcpDataServer>> server =
        TcpDataServer::Start("test server", "127.0.0.1", Serve);
    ASSERT_TRUE(server.ok()) << server.status();
    tcp_server_ = std::move(*server);
    absl::StatusOr<std::unique_ptr<TcpDataChannel>> channel =
        TcpDataChannel::Connect("127.0.0.1", tcp_server_->port(), tcp_server_->IssueTicket(kCaller),
                                absl::Now() + kTimeout, "test server (tcp)");
    ASSERT_TRUE(channel.ok()) << channel.status();
    channel_ = std::move(*channel);
  }

  void StopServer() {
    if (grpc_server_ != nullptr) grpc_server_->Shutdown(std::chrono::system_clock::now());
    if (tcp_server_ != nullptr) tcp_server_->Shutdown();
  }

  // Starts a call whose reply's body lands in result->reply.
  void Start(DataMethod method, std::vector<Slice> body, absl::Duration timeout, Result* result) {
    channel_->Call(
        method, std::move(body), timeout,
        [result](const Pieces& reply) {
          result->reply = Join(reply);
          return absl::OkStatus();
        },
        [result](absl::Status s) {
          result->status = std::move(s);
          result->done.Notify();
        });
  }
  // A call's end, once it came.
  struct Ended {
    absl::Status status;
    std::string reply;
  };
  Ended Call(DataMethod method, const std::string& body, absl::Duration timeout = kTimeout) {
    Result result;
    Start(method, {Slice::Own(body)}, timeout, &result);
    if (!result.done.WaitForNotificationWithTimeout(timeout + absl::Seconds(10))) {
      return {absl::InternalError("the call never ended"), ""};
    }
    return {result.status, result.reply};
  }

  std::unique_ptr<GrpcDataService> service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<TcpDataServer> tcp_server_;
  std::shared_ptr<DataChannel> channel_;
};

INSTANTIATE_TEST_SUITE_P(BothTransports, TransportContractTest,
                         ::testing::Values(Kind::kGrpc, Kind::kTcp),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                           return info.param == Kind::kGrpc ? "Grpc" : "Tcp";
                         });

TEST_P(TransportContractTest, EachMethodReachesTheHandlerWithTheBodyByteForByte) {
  // A body of borrowed and shared slices, 3 MiB in all, every byte distinct by position.
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 % 251);
  for (DataMethod method : {DataMethod::kPull, DataMethod::kPush, DataMethod::kPushPull}) {
    Result result;
    Start(method,
          {Slice::Own("worker:0 "), Slice::Own("echo "), Slice::Borrow(big.data(), big.size())},
          kTimeout, &result);
    ASSERT_TRUE(result.done.WaitForNotificationWithTimeout(kTimeout));
    ASSERT_TRUE(result.status.ok()) << result.status;
    EXPECT_EQ(result.reply, absl::StrCat(DataMethodName(method), ":", big));
  }
  EXPECT_TRUE(channel_->healthy());
}

TEST_P(TransportContractTest, ManyCallsInFlightEachGetTheirOwnReply) {
  constexpr int kCalls = 64;
  std::vector<Result> results(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    Start(DataMethod::kPush, {Slice::Own(absl::StrCat("worker:0 echo call ", i))}, kTimeout,
          &results[i]);
  }
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(results[i].done.WaitForNotificationWithTimeout(kTimeout));
    ASSERT_TRUE(results[i].status.ok()) << results[i].status;
    EXPECT_EQ(results[i].reply, absl::StrCat("Push:call ", i));
  }
}

TEST_P(TransportContractTest, TheHandlersStatusReachesTheCallerWithItsCodeAndMessage) {
  Ended r = Call(DataMethod::kPull, "worker:0 fail no variables yet");
  EXPECT_EQ(r.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status.message(), "refused: no variables yet");
  EXPECT_EQ(r.reply, "");  // the parser never ran
  EXPECT_TRUE(channel_->healthy());
}

TEST_P(TransportContractTest, TheCallerMayActOnlyAsItsOwnTask) {
  Ended r = Call(DataMethod::kPush, "worker:1 echo x");
  EXPECT_EQ(r.status.code(), absl::StatusCode::kPermissionDenied) << r.status;
  EXPECT_NE(r.status.message().find("worker:1"), absl::string_view::npos) << r.status;
  EXPECT_TRUE(Call(DataMethod::kPush, "worker:0 echo x").status.ok());
}

TEST_P(TransportContractTest, TheHandlerSeesTheCallersDeadline) {
  Ended r = Call(DataMethod::kPull, "worker:0 deadline", absl::Seconds(8));
  ASSERT_TRUE(r.status.ok()) << r.status;
  const int64_t left_ms = std::stoll(r.reply);
  EXPECT_GT(left_ms, 7000);
  EXPECT_LE(left_ms, 8100);  // gRPC sends the timeout rounded up to its unit
}

TEST_P(TransportContractTest, ACallEndsAtItsDeadlineAndTheChannelGoesOn) {
  const absl::Time start = absl::Now();
  Ended r = Call(DataMethod::kPull, "worker:0 block", absl::Milliseconds(300));
  EXPECT_EQ(r.status.code(), absl::StatusCode::kDeadlineExceeded) << r.status;
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(r.reply, "");
  Ended next = Call(DataMethod::kPull, "worker:0 echo again");
  ASSERT_TRUE(next.status.ok()) << next.status;
  EXPECT_EQ(next.reply, "Pull:again");
}

TEST_P(TransportContractTest, TheParsersErrorIsTheCallsError) {
  Result result;
  channel_->Call(
      DataMethod::kPull, {Slice::Own("worker:0 echo y")}, kTimeout,
      [](const Pieces&) { return absl::InvalidArgumentError("chunk 3: wrong length"); },
      [&](absl::Status s) {
        result.status = std::move(s);
        result.done.Notify();
      });
  ASSERT_TRUE(result.done.WaitForNotificationWithTimeout(kTimeout));
  EXPECT_EQ(result.status, absl::InvalidArgumentError("chunk 3: wrong length"));
}

TEST_P(TransportContractTest, AServerThatWentEndsCallsUnavailable) {
  ASSERT_TRUE(Call(DataMethod::kPull, "worker:0 echo before").status.ok());
  StopServer();
  Ended r = Call(DataMethod::kPull, "worker:0 echo after", absl::Seconds(5));
  EXPECT_EQ(r.status.code(), absl::StatusCode::kUnavailable) << r.status;
}

}  // namespace
}  // namespace fulcrum::transport
