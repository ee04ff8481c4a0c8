// The /proc parsers on files recorded from a real machine (testdata/README.md says what each
// holds), their edge cases and malformed text, and CounterDelta across wrap-around.
#include "profiler/proc_stats.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fulcrum::profiler {
namespace {

using ::testing::HasSubstr;

const std::string kTestdata = std::string(FULCRUM_SOURCE_DIR) + "/tests/profiler/testdata";

std::string ReadTestdata(const std::string& dir, const std::string& name) {
  auto text = DirProcSource(kTestdata + "/" + dir)->Read(name);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : std::string();
}

void ExpectInvalid(const absl::Status& status, const std::string& what) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr(what));
}

TEST(ParseSelfStatTest, CommWithSpacesAndParenthesis) {
  // comm is "ps) task 0 (x": a parser that splits on spaces or stops at the first ')' reads
  // the wrong columns.
  const std::string text = ReadTestdata("t0", "self/stat");
  ASSERT_THAT(text, HasSubstr("(ps) task 0 (x)"));
  auto times = ParseSelfStat(text);
  ASSERT_TRUE(times.ok()) << times.status();
  EXPECT_EQ(times->user_ticks, 1500u);
  EXPECT_EQ(times->system_ticks, 300u);
}

TEST(ParseSelfStatTest, KernelThread) {
  auto times = ParseSelfStat(ReadTestdata("edge", "kthread_stat"));
  ASSERT_TRUE(times.ok()) << times.status();
  EXPECT_EQ(times->user_ticks, 0u);
  EXPECT_EQ(times->system_ticks, 0u);
}

TEST(ParseSelfStatTest, MalformedNamesTheField) {
  ExpectInvalid(ParseSelfStat("7488 ps R 1 2 3").status(), "comm");
  ExpectInvalid(ParseSelfStat("7488 (ps) R 7484 7484 3729 0 -1 4194304 2845 6529 0 0 5").status(),
                "field 15 (stime)");
  ExpectInvalid(
      ParseSelfStat("7488 (ps) R 7484 7484 3729 0 -1 4194304 2845 6529 0 0 x5 1 4 3").status(),
      "field 14 (utime)");
  ExpectInvalid(
      ParseSelfStat("7488 (ps) R 7484 7484 3729 0 -1 4194304 2845 6529 0 0 5 -1 4 3").status(),
      "field 15 (stime)");
  ExpectInvalid(ParseSelfStat("").status(), "self/stat");
}

TEST(ParseCpuStatTest, RecordedCoresSkipAggregateLine) {
  auto cores = ParseCpuStat(ReadTestdata("t0", "stat"));
  ASSERT_TRUE(cores.ok()) << cores.status();
  ASSERT_EQ(cores->size(), 2u);
  // cpu0 32089 0 3559 397950 114 0 20 216 0 0
  EXPECT_EQ((*cores)[0].core, 0);
  EXPECT_EQ((*cores)[0].busy, 32089u + 3559u + 20u + 216u);
  EXPECT_EQ((*cores)[0].total, 32089u + 3559u + 20u + 216u + 397950u + 114u);
  // cpu1 32406 0 4312 396387 493 0 104 250 0 0
  EXPECT_EQ((*cores)[1].core, 1);
  EXPECT_EQ((*cores)[1].busy, 32406u + 4312u + 104u + 250u);
  EXPECT_EQ((*cores)[1].total, 32406u + 4312u + 104u + 250u + 396387u + 493u);
}

TEST(ParseCpuStatTest, GuestIsNotCountedTwice) {
  // t2's cpu0 has guest = 60, already inside user.
  auto cores = ParseCpuStat(ReadTestdata("t2", "stat"));
  ASSERT_TRUE(cores.ok()) << cores.status();
  EXPECT_EQ((*cores)[0].busy, 32239u + 3569u + 20u + 216u);
  EXPECT_EQ((*cores)[0].total, 32239u + 3569u + 20u + 216u + 398090u + 114u);
}

TEST(ParseCpuStatTest, OldKernelWithoutSteal) {
  auto cores = ParseCpuStat(ReadTestdata("edge", "stat_2_6_9"));
  ASSERT_TRUE(cores.ok()) << cores.status();
  ASSERT_EQ(cores->size(), 2u);
  // cpu1 681 6 576 125433 580 6 15
  EXPECT_EQ((*cores)[1].busy, 681u + 6u + 576u + 6u + 15u);
  EXPECT_EQ((*cores)[1].total, 681u + 6u + 576u + 6u + 15u + 125433u + 580u);
}

TEST(ParseCpuStatTest, CoreNumbersWithAGap) {
  auto cores = ParseCpuStat(
      "cpu  2 0 2 20 0 0 0 0 0 0\ncpu0 1 0 1 10 0 0 0 0 0 0\n"
      "cpu3 1 0 1 10 0 0 0 0 0 0\n");
  ASSERT_TRUE(cores.ok()) << cores.status();
  ASSERT_EQ(cores->size(), 2u);
  EXPECT_EQ((*cores)[1].core, 3);
}

TEST(ParseCpuStatTest, MalformedNamesTheField) {
  ExpectInvalid(ParseCpuStat("cpu  1 2 3 4\nintr 5\n").status(), "cpuN lines");
  ExpectInvalid(ParseCpuStat("cpu0 1 2 x3 4 5 6 7 8 0 0\n").status(), "cpu0 system");
  ExpectInvalid(ParseCpuStat("cpu1 1 2 3\n").status(), "cpu1");
  ExpectInvalid(ParseCpuStat("cpu2x 1 2 3 4 5 6 7 8 0 0\n").status(), "core number");
}

TEST(ParseSelfStatusTest, RecordedInBytes) {
  auto memory = ParseSelfStatus(ReadTestdata("t2", "self/status"));
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(memory->rss_bytes, int64_t{116000} * 1024);
  EXPECT_EQ(memory->peak_rss_bytes, int64_t{218352} * 1024);
}

TEST(ParseSelfStatusTest, KernelThreadHasNoRss) {
  ExpectInvalid(ParseSelfStatus(ReadTestdata("edge", "kthread_status")).status(), "VmRSS");
}

TEST(ParseSelfStatusTest, MalformedNamesTheField) {
  ExpectInvalid(ParseSelfStatus("VmRSS:\t  100 kB\n").status(), "VmHWM");
  ExpectInvalid(ParseSelfStatus("VmHWM:\t  100 kB\nVmRSS:\t  100 MB\n").status(), "VmRSS");
  ExpectInvalid(ParseSelfStatus("VmHWM:\t  1x0 kB\nVmRSS:\t  100 kB\n").status(), "VmHWM");
  ExpectInvalid(ParseSelfStatus("VmHWM:\t  100 kB\nVmRSS:\n").status(), "VmRSS");
}

TEST(ParseNetDevTest, LoopbackEthernetAndVeth) {
  auto interfaces = ParseNetDev(ReadTestdata("t0", "net/dev"));
  ASSERT_TRUE(interfaces.ok()) << interfaces.status();
  ASSERT_EQ(interfaces->size(), 4u);
  const std::vector<std::string> names = {"lo", "ifb0", "eth0", "veth-h1"};
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ((*interfaces)[i].name, names[i]);
  const InterfaceCounters& eth0 = (*interfaces)[2];
  EXPECT_EQ(eth0.rx_bytes, 4294966296u);
  EXPECT_EQ(eth0.rx_packets, 1642u);
  EXPECT_EQ(eth0.tx_bytes, 75334u);
  EXPECT_EQ(eth0.tx_packets, 1036u);
  // veth-h1 is wider than the name column, so its colon touches the left edge.
  const InterfaceCounters& veth = (*interfaces)[3];
  EXPECT_EQ(veth.rx_bytes, 5000u);
  EXPECT_EQ(veth.rx_packets, 50u);
  EXPECT_EQ(veth.tx_bytes, 7000u);
  EXPECT_EQ(veth.tx_packets, 70u);
}

TEST(ParseNetDevTest, CountGluedToTheColon) {
  auto interfaces = ParseNetDev(ReadTestdata("edge", "net_dev_glued"));
  ASSERT_TRUE(interfaces.ok()) << interfaces.status();
  ASSERT_EQ(interfaces->size(), 2u);
  EXPECT_EQ((*interfaces)[1].name, "eth0");
  EXPECT_EQ((*interfaces)[1].rx_bytes, 4294967295u);
  EXPECT_EQ((*interfaces)[1].rx_packets, 3105712u);
  EXPECT_EQ((*interfaces)[1].tx_bytes, 1840222910u);
  EXPECT_EQ((*interfaces)[1].tx_packets, 2451087u);
}

TEST(ParseNetDevTest, HeadersOnlyIsNoInterfaces) {
  std::string text = ReadTestdata("t0", "net/dev");
  text.resize(text.find("lo:") - 4);  // the two header lines
  auto interfaces = ParseNetDev(text);
  ASSERT_TRUE(interfaces.ok()) << interfaces.status();
  EXPECT_TRUE(interfaces->empty());
}

TEST(ParseNetDevTest, MalformedNamesTheField) {
  ExpectInvalid(ParseNetDev("  eth0 1 2 3\n").status(), "name:");
  ExpectInvalid(ParseNetDev("  eth0: 1 2 3 4 5 6 7 8 9 10\n").status(), "eth0 has 10 columns");
  ExpectInvalid(ParseNetDev("  eth0: 1 2 3 4 5 6 7 8 9 x 11 12 13 14 15 16\n").status(),
                "eth0 tx packets");
  ExpectInvalid(ParseNetDev("    : 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n").status(),
                "empty name");
}

TEST(CounterDeltaTest, PlainIncrease) {
  EXPECT_EQ(CounterDelta(100, 100), 0u);
  EXPECT_EQ(CounterDelta(100, 350), 250u);
  EXPECT_EQ(CounterDelta(4294967295u, 4294967296u), 1u);  // crossing 2^32 upwards is no wrap
}

TEST(CounterDeltaTest, WrapsAt2To32WhenBothFit32Bits) {
  EXPECT_EQ(CounterDelta(4294966296u, 3000u), 4000u);
  EXPECT_EQ(CounterDelta(4294967295u, 0u), 1u);
  EXPECT_EQ(CounterDelta(1u, 0u), 4294967295u);
}

TEST(CounterDeltaTest, WrapsAt2To64Otherwise) {
  constexpr uint64_t kMax = UINT64_MAX;
  EXPECT_EQ(CounterDelta(kMax, 0u), 1u);
  EXPECT_EQ(CounterDelta(kMax - 99, 50u), 150u);
  // `before` beyond 32 bits: the counter is 64-bit even if `after` is small.
  EXPECT_EQ(CounterDelta(uint64_t{1} << 40, 5u), kMax - (uint64_t{1} << 40) + 6);
}

TEST(DirProcSourceTest, MissingFileIsNotFoundNamingIt) {
  auto source = DirProcSource(kTestdata + "/no-such-dir", 250);
  EXPECT_EQ(source->ClockTicksPerSecond(), 250);
  auto text = source->Read("net/dev");
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(text.status().message(), HasSubstr("no-such-dir/net/dev"));
}

TEST(LiveProcSourceTest, ReadsAndParsesThisProcess) {
  auto source = LiveProcSource();
  EXPECT_GT(source->ClockTicksPerSecond(), 0);
  for (const char* name : {"self/stat", "stat", "self/status", "net/dev"}) {
    auto text = source->Read(name);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_FALSE(text->empty()) << name;
  }
  auto memory = ParseSelfStatus(*source->Read("self/status"));
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_GT(memory->rss_bytes, 0);
  EXPECT_GE(memory->peak_rss_bytes, memory->rss_bytes);
  auto interfaces = ParseNetDev(*source->Read("net/dev"));
  ASSERT_TRUE(interfaces.ok()) << interfaces.status();
  bool has_lo = false;
  for (const InterfaceCounters& counters : *interfaces) has_lo |= counters.name == "lo";
  EXPECT_TRUE(has_lo);
}

}  // namespace
}  // namespace fulcrum::profiler
