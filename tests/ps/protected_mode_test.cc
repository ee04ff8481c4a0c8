// Protected mode (issue 27): a ps service whose task has no credentials answers only loopback
// peers. A real gRPC server listens on every interface (as --insecure or a spec of 0.0.0.0
// would have it), and a real client calls it twice: through 127.0.0.1 (answered) and through
// this machine's own non-loopback address (refused, naming protected mode, nothing created).
// The address parsers the check relies on are tested on gRPC's peer strings.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/net.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps/service.h"
#include "ps/shard.h"
#include "runtime/client/grpc_ps_client.h"
#include "runtime/grpc/security.h"

namespace fulcrum::ps {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(10);

// The first IPv4 address of an interface that is up and not loopback; empty when none.
std::string NonLoopbackAddress() {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return "";
  std::string found;
  for (const ifaddrs* i = all; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    if (!IsLoopbackLiteral(text)) found = text;
  }
  freeifaddrs(all);
  return found;
}

TEST(ProtectedModeTest, APeerOffLoopbackIsRefusedAndALoopbackPeerAnswered) {
  const std::string outside = NonLoopbackAddress();
  if (outside.empty()) GTEST_SKIP() << "this machine has no non-loopback IPv4 address to call from";
  Shard shard(0);
  const runtime::TransportSecurity none;  // no credentials, no --insecure
  ASSERT_TRUE(none.protected_mode());
  PsService service(&shard, nullptr, runtime::CallGuard(none));
  int port = 0;
  auto server = StartServer(&service, "ps:0", "0.0.0.0:0", &port);
  ASSERT_TRUE(server.ok()) << server.status();

  runtime::GrpcPsClient local("ps:0", absl::StrCat("127.0.0.1:", port));
  pb::PingResponse pong;
  EXPECT_TRUE(local.Ping(pb::PingRequest(), &pong, kTimeout).ok());

  runtime::GrpcPsClient stranger("ps:0", absl::StrCat(outside, ":", port));
  const absl::Status ping = stranger.Ping(pb::PingRequest(), &pong, kTimeout);
  EXPECT_EQ(ping.code(), absl::StatusCode::kPermissionDenied) << ping;
  EXPECT_THAT(ping.message(), HasSubstr("protected mode"));
  EXPECT_THAT(ping.message(), HasSubstr(outside));
  pb::StatsResponse stats;
  EXPECT_EQ(stranger.Stats(&stats, kTimeout).code(), absl::StatusCode::kPermissionDenied);
  pb::CreateVariablesRequest definition;
  definition.set_run_id("stranger");
  pb::CreateVariablesResponse created;
  EXPECT_EQ(stranger.CreateVariables(definition, &created, kTimeout).code(),
            absl::StatusCode::kPermissionDenied);
  // Nothing was created: the ps still waits for its chief's definition.
  EXPECT_TRUE(local.Stats(&stats, kTimeout).ok());
  EXPECT_EQ(stats.variables_size(), 0);

  shard.Stop("test over");
  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  (*server)->Wait();
}

TEST(ProtectedModeTest, PeerStringsOfLoopbackAndLocalSocketsAreLocal) {
  for (const char* peer :
       {"ipv4:127.0.0.1:5000", "ipv4:127.9.8.7:1", "ipv6:[::1]:5000", "ipv6:%5B::1%5D:5000",
        "ipv6:[::ffff:127.0.0.1]:80", "unix:/tmp/s", "unix-abstract:x", "inproc"}) {
    EXPECT_TRUE(runtime::IsLocalPeer(peer)) << peer;
  }
  for (const char* peer : {"ipv4:192.0.2.2:5000", "ipv4:0.0.0.0:1", "ipv6:[2001:db8::1]:5000",
                           "ipv6:%5B::ffff:10.0.0.1%5D:80", "ipv4:localhost:1", "", "garbage"}) {
    EXPECT_FALSE(runtime::IsLocalPeer(peer)) << peer;
  }
}

TEST(ProtectedModeTest, LoopbackHostsAreToldApartFromEveryOtherAddress) {
  for (const char* host : {"127.0.0.1", "127.0.1.1", "::1", "[::1]", "localhost"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (const char* host :
       {"0.0.0.0", "198.18.0.1", "::", "[2001:db8::1]", "", "no-such-host.invalid"}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
  EXPECT_FALSE(IsLoopbackLiteral("localhost"));  // a name: only IsLoopbackHost resolves
}

TEST(ProtectedModeTest, InsecureWithCredentialsIsRefusedNamingBoth) {
  runtime::SecurityFlags flags;
  flags.auth_token_file = "/nonexistent/token";
  flags.insecure = true;
  const auto loaded = runtime::TransportSecurity::Load(flags, "ps:0", "ps-0");
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loaded.status().message(), HasSubstr("--insecure with --auth_token_file"));
  runtime::SecurityFlags insecure;
  insecure.insecure = true;
  const auto open = runtime::TransportSecurity::Load(insecure, "ps:0", "ps-0");
  ASSERT_TRUE(open.ok()) << open.status();
  EXPECT_FALSE(open->protected_mode());
  EXPECT_TRUE(open->CheckReachableOnlyLocally("ps:0", "198.18.0.1").ok());
  const absl::Status refused =
      runtime::TransportSecurity().CheckReachableOnlyLocally("ps:0's address", "198.18.0.1");
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("scripts/make_certs.sh"));
  EXPECT_THAT(refused.message(), HasSubstr("--insecure"));
}

}  // namespace
}  // namespace fulcrum::ps
