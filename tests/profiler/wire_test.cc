// App-level bytes against the kernel's: a real ps server and GrpcPsClient move a 32 MiB model
// over loopback in a network namespace of their own (so no other process's traffic shows on
// its lo), and the bytes the runtime counted per RPC must match the lo counters within the
// protocol overhead. On lo every byte sent shows once as tx and once as rx, and both ends of
// every connection are in this namespace: lo tx = lo rx = all bytes in both directions =
// app bytes + HTTP/2 framing + TCP/IP headers and ACKs.
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ops/tensor.h"
#include "profiler/profiler.h"
#include "profiler/sampler.h"
#include "ps/service.h"
#include "ps/shard.h"
#include "runtime/client/grpc_ps_client.h"
#include "runtime/client/sharded_variables.h"
#include "runtime/cluster/placement.h"
#include "runtime/frames/proto_convert.h"

namespace fulcrum {
namespace {

constexpr int kSkip = 77;

struct Figures {
  uint64_t app_sent = 0;      // client side: requests
  uint64_t app_received = 0;  // client side: replies
  uint64_t server_sent = 0;   // server side, as the PS counted them
  uint64_t server_received = 0;
  uint64_t lo_tx = 0;
  uint64_t lo_rx = 0;
  uint64_t lo_tx_packets = 0;
  profiler::SocketTotals tcp;  // every connection's own counters (both ends are this process)
};

bool LoopbackUp() {
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return false;
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  bool ok = ::ioctl(fd, SIOCGIFFLAGS, &ifr) == 0;
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  ok = ok && ::ioctl(fd, SIOCSIFFLAGS, &ifr) == 0;
  ::close(fd);
  return ok;
}

uint64_t AppTotal(const std::vector<profiler::RpcTrafficPoint>& points, bool sent) {
  uint64_t total = 0;
  for (const auto& p : points) total += sent ? p.bytes_sent : p.bytes_received;
  return total;
}

// Runs in the forked child, inside its own network namespace. Returns an exit code.
int MoveModelAndMeasure(int out_fd) {
  if (::unshare(CLONE_NEWNET) != 0) return kSkip;  // needs root (CAP_SYS_ADMIN)
  if (!LoopbackUp()) return 3;

  ps::Shard shard(0);
  // Disabled profilers still count traffic (what is compared here) and sample nothing.
  profiler::ProfilerOptions off;
  off.enabled = false;
  auto server_prof = profiler::Profiler::Start(off);
  auto client_prof = profiler::Profiler::Start(off);
  if (!server_prof.ok() || !client_prof.ok()) return 4;
  ps::PsService service(&shard, server_prof->get());
  int port = 0;
  auto server = ps::StartServer(&service, "ps:0", "127.0.0.1:0", &port);
  if (!server.ok()) return 5;

  // 32 MiB: one [8192, 1024] variable, cut into 2 MiB chunks that travel in parallel.
  const std::vector<runtime::VariableInfo> infos = {{"w", ops::Shape({8192, 1024})}};
  auto placement =
      runtime::PlaceVariables(infos, 1, runtime::PlacementStrategy::kRoundRobin, int64_t{1} << 40);
  if (!placement.ok()) return 6;
  pb::CreateVariablesRequest def;
  def.set_run_id("wire");
  def.set_mode(pb::MODE_ASYNC);
  def.set_chunk_bytes(2 << 20);
  def.set_task_index(0);
  ops::OptimizerConfig sgd;
  sgd.learning_rate = 0.01f;
  *def.mutable_optimizer() = runtime::OptimizerToProto(sgd);
  pb::VariableDef* v = def.add_variables();
  v->set_name("w");
  v->set_source("w");
  v->add_full_shape(8192);
  v->add_full_shape(1024);
  v->set_row_begin(0);
  v->set_row_end(8192);
  *v->mutable_initializer() = runtime::InitializerToProto(ops::Initializer::Constant(0.0f));

  runtime::GrpcPsClient client("ps:0", absl::StrCat("127.0.0.1:", port));
  if (!client.WaitUntilReady(absl::Seconds(10))) return 7;
  pb::CreateVariablesResponse created;
  if (!client.CreateVariables(def, &created, absl::Seconds(30)).ok()) return 8;
  // Grown flow-control windows first, as a worker does; then count from here.
  if (!client.Warm(2 << 20, 2, absl::Seconds(30)).ok()) return 9;
  client.set_observer(client_prof->get());

  profiler::Sampler sampler(profiler::LiveProcSource(), absl::Seconds(60));
  sampler.SetSocketReader(&profiler::ReadOwnTcpSockets);
  if (!sampler.Start().ok()) return 10;
  const uint64_t server_sent0 = AppTotal((*server_prof)->Traffic(), true);
  const uint64_t server_received0 = AppTotal((*server_prof)->Traffic(), false);
  runtime::ShardedVariables sharded(*placement, 2 << 20, {&client}, "worker:0");
  std::vector<ops::Tensor> values = {ops::Tensor::Zeros(ops::Shape({8192, 1024}))};
  std::vector<ops::Tensor> grads = {ops::Tensor::Zeros(ops::Shape({8192, 1024}))};
  runtime::TransferResult xfer;
  if (!sharded.PullAll(0, absl::Seconds(60), values, &xfer).ok()) return 11;
  for (int i = 0; i < 3; ++i) {
    if (!sharded.PushPullAll(i, 0, grads, values, absl::Seconds(60), &xfer).ok()) return 12;
  }
  sampler.Stop();

  Figures f;
  f.app_sent = AppTotal((*client_prof)->Traffic(), true);
  f.app_received = AppTotal((*client_prof)->Traffic(), false);
  f.server_sent = AppTotal((*server_prof)->Traffic(), true) - server_sent0;
  f.server_received = AppTotal((*server_prof)->Traffic(), false) - server_received0;
  for (const auto& t : sampler.Totals()) {
    if (t.name == "lo") {
      f.lo_tx = t.tx_bytes;
      f.lo_rx = t.rx_bytes;
      f.lo_tx_packets = t.tx_packets;
    }
  }
  profiler::SystemSample last;
  if (!sampler.Latest(&last) || !last.has_tcp) return 14;
  f.tcp = last.tcp_loopback;
  shard.Stop("done");
  (*server)->Shutdown();
  return ::write(out_fd, &f, sizeof(f)) == static_cast<ssize_t>(sizeof(f)) ? 0 : 13;
}

TEST(WireTest, AppBytesMatchLoopbackCountersWithinProtocolOverhead) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    ::_exit(MoveModelAndMeasure(fds[1]));
  }
  ::close(fds[1]);
  Figures f;
  const ssize_t n = ::read(fds[0], &f, sizeof(f));
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == kSkip) {
    GTEST_SKIP() << "unshare(CLONE_NEWNET) refused: a private network namespace needs root";
  }
  ASSERT_EQ(WEXITSTATUS(status), 0) << "the child failed at step " << WEXITSTATUS(status);
  ASSERT_EQ(n, static_cast<ssize_t>(sizeof(f)));

  // 1 pull + 3 push-pulls of 32 MiB each way: 3 x 32 MiB out, 4 x 32 MiB back.
  constexpr uint64_t kModel = uint64_t{32} << 20;
  EXPECT_GE(f.app_sent, 3 * kModel);
  EXPECT_LT(f.app_sent, 3 * kModel + (1 << 20));
  EXPECT_GE(f.app_received, 4 * kModel);
  EXPECT_LT(f.app_received, 4 * kModel + (1 << 20));
  // Both ends counted the same messages.
  EXPECT_EQ(f.server_received, f.app_sent);
  EXPECT_EQ(f.server_sent, f.app_received);
  // lo: every byte once as tx and once as rx.
  EXPECT_EQ(f.lo_tx, f.lo_rx);
  const uint64_t app = f.app_sent + f.app_received;
  EXPECT_GE(f.lo_tx, app) << "the kernel saw fewer bytes than the runtime sent";
  // HTTP/2 frame headers (9 B per <= 16 KiB frame), gRPC's 5-byte message prefix, TCP/IP
  // headers (~52 B per <= 64 KiB segment on lo) and ACKs: well under 2% here; 3% + 256 KiB
  // leaves room for HTTP/2 PINGs and window updates.
  EXPECT_LE(f.lo_tx, app + app * 3 / 100 + (256 << 10)) << "lo tx " << f.lo_tx << " vs app " << app;
  std::printf("app bytes %llu, lo tx %llu (overhead %.3f%%)\n",
              static_cast<unsigned long long>(app), static_cast<unsigned long long>(f.lo_tx),
              100.0 * static_cast<double>(f.lo_tx - app) / static_cast<double>(app));
  // The TCP layer between them (every connection's own counters, both ends in this process):
  // what one end sent the other received; the runtime's payload plus its framing; and lo's
  // bytes less one TCP/IP header per packet (52 B: IPv4, TCP, timestamps; no Ethernet header
  // on lo), the figure chief/layers.cc takes off.
  // (lo drops nothing, but a busy machine can fire a retransmission timer: the data sent
  // again counts in bytes_sent and on lo, once in bytes_received.)
  EXPECT_EQ(f.tcp.bytes_sent - f.tcp.bytes_retransmitted, f.tcp.bytes_received);
  EXPECT_GE(f.tcp.bytes_received, app);
  EXPECT_LE(f.tcp.bytes_received, app + app * 2 / 100);
  const double lo_payload =
      static_cast<double>(f.lo_tx) - 52.0 * static_cast<double>(f.lo_tx_packets);
  EXPECT_NEAR(lo_payload, static_cast<double>(f.tcp.bytes_sent),
              0.02 * static_cast<double>(f.tcp.bytes_sent));
  std::printf("tcp sent %llu received %llu segs_out %llu retrans %llu; lo tx packets %llu\n",
              static_cast<unsigned long long>(f.tcp.bytes_sent),
              static_cast<unsigned long long>(f.tcp.bytes_received),
              static_cast<unsigned long long>(f.tcp.segs_out),
              static_cast<unsigned long long>(f.tcp.retransmits),
              static_cast<unsigned long long>(f.lo_tx_packets));
}

}  // namespace
}  // namespace fulcrum
