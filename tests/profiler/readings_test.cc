// The Sampler on this live process against loads whose size the test knows independently: a
// thread that spins, memory it touches, bytes it sends over a real TCP connection on lo.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/config.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "profiler/sampler.h"

namespace fulcrum::profiler {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// Samples the live /proc on the test's thread, without the background thread.
SystemSample TakeSample(Sampler& sampler) {
  EXPECT_TRUE(sampler.SampleNow().ok());
  SystemSample sample;
  EXPECT_TRUE(sampler.Latest(&sample));
  return sample;
}

const InterfaceSample* Loopback(const SystemSample& sample) {
  for (const InterfaceSample& i : sample.interfaces) {
    if (i.loopback) return &i;
  }
  return nullptr;
}

TEST(ReadingsTest, BusyThreadReadsAboutOneCore) {
  Sampler sampler(LiveProcSource(), absl::Seconds(1));
  TakeSample(sampler);
  std::thread busy([] {
    // The machine has 2 cores and other builds and tests run beside this one, so the spinner
    // asks for a larger CPU share (nice -10, allowed when the test runs as root or with
    // CAP_SYS_NICE; otherwise it keeps nice 0 and competes evenly).
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), -10);
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    volatile uint64_t spins = 0;
    while (std::chrono::steady_clock::now() < end) spins = spins + 1;
  });
  busy.join();  // the test thread sleeps meanwhile: the process's CPU is the spinner's
  const SystemSample sample = TakeSample(sampler);
  // 100 = one core. The band is wide because CPU time comes in 10 ms ticks (±2 % over 1 s),
  // the sampled span is a little longer than the spin, and on a loaded 2-core machine the
  // spinner may still lose part of its core to others (below 100) while this process's other
  // threads (gtest, the allocator) add a little (above).
  EXPECT_GT(sample.cpu_percent, 60.0);
  EXPECT_LT(sample.cpu_percent, 140.0);
  // The cores together were at least as busy as the spinner made them.
  const double all_cores =
      std::accumulate(sample.core_percent.begin(), sample.core_percent.end(), 0.0);
  EXPECT_GT(all_cores, 60.0);
  EXPECT_LE(all_cores, 100.0 * static_cast<double>(sample.core_percent.size()));
}

TEST(ReadingsTest, RssGrowsByTouchedMemory) {
#ifdef ABSL_HAVE_THREAD_SANITIZER
  GTEST_SKIP() << "ThreadSanitizer's shadow memory for the touched pages counts in RSS too";
#endif
  constexpr int64_t kBytes = 200 * kMiB;
  Sampler sampler(LiveProcSource(), absl::Seconds(1));
  const SystemSample before = TakeSample(sampler);
  // mmap rather than malloc so no allocator cache hands back memory that is already resident.
  void* memory =
      ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(memory, MAP_FAILED) << std::strerror(errno);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  auto* bytes = static_cast<volatile char*>(memory);
  for (size_t offset = 0; offset < static_cast<size_t>(kBytes); offset += page) {
    bytes[offset] = 1;  // every page becomes resident
  }
  const SystemSample after = TakeSample(sampler);
  ::munmap(memory, kBytes);
  const SystemSample released = TakeSample(sampler);

  // Touched pages, plus page tables and whatever else the process does meanwhile (small);
  // transparent huge pages can round the mapping up to 2 MiB units.
  const int64_t grown = after.rss_bytes - before.rss_bytes;
  EXPECT_GE(grown, 180 * kMiB) << grown;
  EXPECT_LE(grown, 230 * kMiB) << grown;
  EXPECT_GE(after.peak_rss_bytes, after.rss_bytes);
  EXPECT_GE(after.peak_rss_bytes - before.rss_bytes, 180 * kMiB);
  // Unmapped: RSS falls back, the peak stays.
  EXPECT_LE(released.rss_bytes, after.rss_bytes - 180 * kMiB);
  EXPECT_GE(released.peak_rss_bytes, after.rss_bytes);
}

// A connected pair of TCP sockets over 127.0.0.1; -1s on failure.
struct TcpPair {
  int client = -1;
  int server = -1;
  ~TcpPair() {
    if (client >= 0) ::close(client);
    if (server >= 0) ::close(server);
  }
};

void ConnectOverLoopback(TcpPair* pair) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0) << std::strerror(errno);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;  // any free port
  socklen_t length = sizeof(address);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0)
      << std::strerror(errno);
  ASSERT_EQ(::listen(listener, 1), 0) << std::strerror(errno);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  pair->client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(pair->client, 0) << std::strerror(errno);
  ASSERT_EQ(::connect(pair->client, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0)
      << std::strerror(errno);
  pair->server = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ::close(listener);
  ASSERT_GE(pair->server, 0) << std::strerror(errno);
}

TEST(ReadingsTest, LoopbackCountsBytesSentOverTcp) {
  constexpr size_t kBytes = 8 * kMiB;
  TcpPair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectOverLoopback(&pair));
  Sampler sampler(LiveProcSource(), absl::Seconds(1));
  const SystemSample before = TakeSample(sampler);

  std::atomic<size_t> received{0};
  std::thread reader([&] {
    std::vector<char> buffer(256 * 1024);
    while (received.load() < kBytes) {
      const ssize_t n = ::recv(pair.server, buffer.data(), buffer.size(), 0);
      if (n <= 0) return;
      received.fetch_add(static_cast<size_t>(n));
    }
  });
  const std::vector<char> payload(kBytes, 'x');
  size_t sent = 0;
  while (sent < kBytes) {
    const ssize_t n = ::send(pair.client, payload.data() + sent, kBytes - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  ::shutdown(pair.client, SHUT_WR);
  reader.join();
  ASSERT_EQ(sent, kBytes);
  ASSERT_EQ(received.load(), kBytes);
  const SystemSample after = TakeSample(sampler);

  const InterfaceSample* lo_before = Loopback(before);
  const InterfaceSample* lo_after = Loopback(after);
  ASSERT_NE(lo_before, nullptr);
  ASSERT_NE(lo_after, nullptr);
  EXPECT_EQ(lo_after->name, "lo");
  // Every payload byte crossed lo once: out (tx) and in (rx) of the same interface, with TCP/IP
  // headers on top. Other processes in this network namespace may add more, never less.
  EXPECT_GE(lo_after->tx_bytes - lo_before->tx_bytes, kBytes);
  EXPECT_GE(lo_after->rx_bytes - lo_before->rx_bytes, kBytes);
  EXPECT_GT(lo_after->tx_packets, lo_before->tx_packets);
  EXPECT_GT(lo_after->rx_bytes_per_sec, 0.0);
  // The totals agree with the latest sample.
  bool found = false;
  for (const InterfaceTotals& totals : sampler.Totals()) {
    if (totals.name != "lo") continue;
    found = true;
    EXPECT_TRUE(totals.loopback);
    EXPECT_EQ(totals.rx_bytes, lo_after->rx_bytes);
    EXPECT_EQ(totals.tx_bytes, lo_after->tx_bytes);
  }
  EXPECT_TRUE(found);
}

// Sends `bytes` from pair->client to pair->server and reads them all.
void MoveBytes(TcpPair* pair, size_t bytes) {
  std::thread reader([&] {
    std::vector<char> buffer(256 * 1024);
    size_t got = 0;
    while (got < bytes) {
      const ssize_t n = ::recv(pair->server, buffer.data(), buffer.size(), 0);
      if (n <= 0) return;
      got += static_cast<size_t>(n);
    }
  });
  const std::vector<char> payload(bytes, 'x');
  size_t sent = 0;
  while (sent < bytes) {
    const ssize_t n = ::send(pair->client, payload.data() + sent, bytes - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  reader.join();
  ASSERT_EQ(sent, bytes);
}

// The TCP layer: each connection's own kernel counters, from the baseline on, kept after the
// connection closes, and a connection made later counted from its beginning.
TEST(ReadingsTest, TcpConnectionsCountTheirBytesFromTheBaseline) {
  TcpPair early;
  ASSERT_NO_FATAL_FAILURE(ConnectOverLoopback(&early));
  ASSERT_NO_FATAL_FAILURE(MoveBytes(&early, kMiB));  // before the baseline: not counted
  Sampler sampler(LiveProcSource(), absl::Seconds(1));
  sampler.SetSocketReader(&ReadOwnTcpSockets);
  const SystemSample baseline = TakeSample(sampler);
  ASSERT_TRUE(baseline.has_tcp);
  EXPECT_EQ(baseline.tcp_loopback.bytes_sent, 0u);
  EXPECT_EQ(baseline.tcp_loopback.sockets, 2);  // both ends are this process's

  ASSERT_NO_FATAL_FAILURE(MoveBytes(&early, 8 * kMiB));
  const SystemSample moved = TakeSample(sampler);
  // One end sent what the other got, and more only by what it sent twice: loopback does drop
  // under load (CI's parallel tests once made 6 retransmits, 393 KB, here), and the kernel
  // counts a retransmitted byte in bytes_sent again.
  EXPECT_EQ(moved.tcp_loopback.bytes_sent - moved.tcp_loopback.bytes_retransmitted, 8 * kMiB);
  EXPECT_EQ(moved.tcp_loopback.bytes_received, 8 * kMiB);
  EXPECT_GT(moved.tcp_loopback.segs_out, 0u);
  EXPECT_GE(moved.tcp_loopback.segs_out, moved.tcp_loopback.segs_in);
  EXPECT_EQ(moved.tcp_loopback.retransmits == 0, moved.tcp_loopback.bytes_retransmitted == 0);
  EXPECT_EQ(moved.tcp_external.bytes_sent, 0u);

  {
    TcpPair later;
    ASSERT_NO_FATAL_FAILURE(ConnectOverLoopback(&later));
    ASSERT_NO_FATAL_FAILURE(MoveBytes(&later, 2 * kMiB));
    const SystemSample both = TakeSample(sampler);
    EXPECT_EQ(both.tcp_loopback.bytes_sent - both.tcp_loopback.bytes_retransmitted, 10 * kMiB);
    EXPECT_EQ(both.tcp_loopback.sockets, 4);
  }
  ::close(early.client);
  ::close(early.server);
  early.client = early.server = -1;
  // Closed connections keep what was last read of them.
  const SystemSample closed = TakeSample(sampler);
  EXPECT_EQ(closed.tcp_loopback.bytes_sent - closed.tcp_loopback.bytes_retransmitted, 10 * kMiB);
  EXPECT_EQ(closed.tcp_loopback.bytes_received, 10 * kMiB);
  EXPECT_EQ(closed.tcp_loopback.sockets, 4);
}

}  // namespace
}  // namespace fulcrum::profiler
