// The host-wide and extra process /proc parsers on known text (as the kernel prints it), their
// errors on malformed text, and the sampler turning two readings into totals and rates.
#include "profiler/host_stats.h"

#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "profiler/proc_stats.h"
#include "profiler/sampler.h"

namespace fulcrum::profiler {
namespace {

TEST(HostStatsTest, HostStatSumsStatesAsSar) {
  auto t = ParseHostStat(
      "cpu  100 5 40 1000 20 3 2 1 0 0\n"
      "cpu0 50 5 20 500 10 3 2 1 0 0\n"
      "intr 123 0\nctxt 987654\nbtime 1\n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->user, 105u);   // user + nice
  EXPECT_EQ(t->system, 45u);  // system + irq + softirq
  EXPECT_EQ(t->idle, 1000u);
  EXPECT_EQ(t->iowait, 20u);
  EXPECT_EQ(t->other, 1u);  // steal
  EXPECT_EQ(t->context_switches, 987654u);
  EXPECT_EQ(t->total(), 1171u);
}

TEST(HostStatsTest, HostStatErrorsNameTheField) {
  auto no_ctxt = ParseHostStat("cpu  1 2 3 4 5\n");
  EXPECT_EQ(no_ctxt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_ctxt.status().message().find("ctxt"), std::string::npos);
  auto bad = ParseHostStat("cpu  1 -2 3 4 5\nctxt 1\n");
  EXPECT_NE(bad.status().message().find("cpu column 2"), std::string::npos) << bad.status();
}

TEST(HostStatsTest, MeminfoInBytesAndUsedAsSar) {
  auto m = ParseMeminfo(
      "MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    600 kB\n"
      "Buffers:          10 kB\nCached:          300 kB\nSwapCached: 0 kB\nSlab:  90 kB\n");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->total_bytes, 1000 * 1024);
  EXPECT_EQ(m->available_bytes, 600 * 1024);
  EXPECT_EQ(m->cached_bytes, 300 * 1024);  // "SwapCached" is not "Cached"
  EXPECT_EQ(m->used_bytes(), (1000 - 100 - 10 - 300 - 90) * 1024);
  auto missing = ParseMeminfo("MemTotal: 1 kB\n");
  EXPECT_NE(missing.status().message().find("is missing"), std::string::npos);
  auto bad = ParseMeminfo("MemTotal: 1 MB\n");
  EXPECT_NE(bad.status().message().find("MemTotal"), std::string::npos);
}

TEST(HostStatsTest, Loadavg) {
  auto l = ParseLoadavg("0.52 1.25 2.00 3/456 7890\n");
  ASSERT_TRUE(l.ok());
  EXPECT_DOUBLE_EQ(l->one, 0.52);
  EXPECT_DOUBLE_EQ(l->five, 1.25);
  EXPECT_DOUBLE_EQ(l->fifteen, 2.0);
  EXPECT_FALSE(ParseLoadavg("0.5 x").ok());
}

TEST(HostStatsTest, NetSnmpTcpByName) {
  auto tcp = ParseNetSnmp(
      "Ip: Forwarding DefaultTTL\nIp: 1 64\n"
      "Tcp: RtoAlgorithm RtoMin InSegs OutSegs RetransSegs InErrs\n"
      "Tcp: 1 200 1000 900 7 0\nUdp: InDatagrams\nUdp: 5\n");
  ASSERT_TRUE(tcp.ok()) << tcp.status();
  EXPECT_EQ(tcp->in_segs, 1000u);
  EXPECT_EQ(tcp->out_segs, 900u);
  EXPECT_EQ(tcp->retrans_segs, 7u);
  EXPECT_FALSE(ParseNetSnmp("Tcp: InSegs OutSegs\nTcp: 1\n").ok());
  EXPECT_NE(ParseNetSnmp("Tcp: InSegs OutSegs\nTcp: 1 2\n").status().message().find("RetransSegs"),
            std::string::npos);
}

TEST(HostStatsTest, DiskstatsAndWholeDisks) {
  auto d = ParseDiskstats(
      " 254 0 vda 10 0 8 0 20 0 16 0 0 0 0\n"
      " 254 1 vda1 1 0 2 0 3 0 4 0 0 0 0\n"
      " 259 0 nvme0n1 0 0 0 0 0 0 0 0 0 0 0\n"
      " 259 1 nvme0n1p2 0 0 0 0 0 0 0 0 0 0 0\n"
      "   7 0 loop0 0 0 0 0 0 0 0 0 0 0 0\n"
      " 253 0 dm-0 0 0 0 0 0 0 0 0 0 0 0\n");
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->size(), 6u);
  EXPECT_EQ((*d)[0].read_bytes, 8u * 512);
  EXPECT_EQ((*d)[0].write_bytes, 16u * 512);
  std::vector<std::string> whole;
  for (const DiskCounters& disk : *d) {
    if (IsWholeDisk(disk.name, *d)) whole.push_back(disk.name);
  }
  EXPECT_EQ(whole, (std::vector<std::string>{"vda", "nvme0n1"}));
  EXPECT_FALSE(ParseDiskstats("8 0 sda 1 2\n").ok());
}

TEST(HostStatsTest, SelfIoAndContextSwitches) {
  auto io = ParseSelfIo("rchar: 5\nwchar: 6\nread_bytes: 4096\nwrite_bytes: 8192\n");
  ASSERT_TRUE(io.ok());
  EXPECT_EQ(io->read_bytes, 4096u);
  EXPECT_EQ(io->write_bytes, 8192u);
  auto cs = ParseContextSwitches(
      "Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n");
  ASSERT_TRUE(cs.ok());
  EXPECT_EQ(cs->voluntary, 12u);
  EXPECT_EQ(cs->nonvoluntary, 3u);
  EXPECT_FALSE(ParseSelfIo("read_bytes: -1\nwrite_bytes: 0\n").ok());
}

TEST(HostStatsTest, ThreadStatKeepsNameWithSpacesAndParens) {
  auto t = ParseThreadStat("42 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 11 22 0 0 20 0 1 0 1 2 3\n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->name, "a (b) c");
  EXPECT_EQ(t->user_ticks, 11u);
  EXPECT_EQ(t->system_ticks, 22u);
}

TEST(HostStatsTest, PidSourceReadsTheSameProcessAsSelf) {
  auto pid_source = PidProcSource(::getpid());
  auto stat = pid_source->Read("self/stat");
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(stat->rfind(absl::StrCat(::getpid(), " ("), 0), 0u) << *stat;
  auto tasks = pid_source->List("self/task");
  ASSERT_TRUE(tasks.ok());
  EXPECT_NE(std::find(tasks->begin(), tasks->end(), std::to_string(::getpid())), tasks->end());
  EXPECT_TRUE(pid_source->Read("net/dev").ok());
  EXPECT_EQ(PidProcSource(0x3fffffff)->Read("self/stat").status().code(),
            absl::StatusCode::kNotFound);
}

// /proc text from a map, for the sampler.
class MapProcSource : public ProcSource {
 public:
  explicit MapProcSource(std::map<std::string, std::string>* files) : files_(files) {}
  absl::StatusOr<std::string> Read(absl::string_view name) override {
    auto it = files_->find(std::string(name));
    if (it == files_->end()) return absl::NotFoundError(absl::StrCat("no ", name));
    return it->second;
  }
  int64_t ClockTicksPerSecond() const override { return 100; }
  absl::StatusOr<std::vector<std::string>> List(absl::string_view name) override {
    std::vector<std::string> out;
    const std::string prefix = absl::StrCat(name, "/");
    for (const auto& [path, text] : *files_) {
      if (path.rfind(prefix, 0) != 0) continue;
      const std::string rest = path.substr(prefix.size());
      const std::string entry = rest.substr(0, rest.find('/'));
      if (std::find(out.begin(), out.end(), entry) == out.end()) out.push_back(entry);
    }
    return out;
  }

 private:
  std::map<std::string, std::string>* files_;
};

std::map<std::string, std::string> Files(int k) {
  // Reading k (0 or 1) of a process over one second; every counter grows by a known step.
  auto n = [k](int base, int step) { return std::to_string(base + k * step); };
  return {
      {"self/stat", "1 (p) S 1 1 1 0 -1 0 0 0 0 0 " + n(100, 60) + " " + n(50, 20) + " 0 0\n"},
      {"stat", "cpu  " + n(1000, 100) + " 0 " + n(500, 40) + " " + n(5000, 50) + " " + n(10, 10) +
                   " 0 0 0 0 0\ncpu0 1 0 1 1 0 0 0 0 0 0\nctxt " + n(7000, 3000) + "\n"},
      {"self/status", "VmHWM:\t 10 kB\nVmRSS:\t 8 kB\nvoluntary_ctxt_switches:\t" + n(5, 40) +
                          "\nnonvoluntary_ctxt_switches:\t" + n(1, 2) + "\n"},
      {"net/dev", "h1|\nh2|\n eth0: " + n(1000, 5000) + " " + n(10, 50) + " " + n(0, 2) + " " +
                      n(0, 3) + " 0 0 0 0 " + n(0, 7000) + " " + n(0, 70) + " 0 " + n(0, 1) +
                      " 0 0 0 0\n"},
      {"net/snmp", "Tcp: InSegs OutSegs RetransSegs\nTcp: " + n(10, 300) + " " + n(20, 400) + " " +
                       n(0, 4) + "\n"},
      {"meminfo", "MemTotal: 4000 kB\nMemFree: " + n(1000, -100) +
                      " kB\nMemAvailable: 2000 kB\nBuffers: 10 kB\nCached: 500 kB\nSlab: 90 kB\n"},
      {"loadavg", "1.50 1.00 0.50 1/2 3\n"},
      {"diskstats", " 8 0 sda 0 0 " + n(0, 8) + " 0 0 0 " + n(0, 16) + " 0 0 0 0\n 8 1 sda1 0 0 " +
                        n(0, 8) + " 0 0 0 " + n(0, 16) + " 0 0 0 0\n"},
      {"self/io", "read_bytes: " + n(0, 4096) + "\nwrite_bytes: " + n(0, 8192) + "\n"},
      {"self/task/1/stat",
       "1 (p) S 1 1 1 0 -1 0 0 0 0 0 " + n(60, 30) + " " + n(40, 10) + " 0 0\n"},
      {"self/task/2/stat",
       "2 (fulcrum-compute) R 1 1 1 0 -1 0 0 0 0 0 " + n(40, 30) + " " + n(10, 10) + " 0 0\n"},
      {"self/task/3/stat", "3 (fulcrum-compute) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0\n"},
  };
}

TEST(BreadthSamplerTest, TwoReadingsGiveTotalsAndRates) {
  std::map<std::string, std::string> files = Files(0);
  absl::Time now = absl::FromUnixSeconds(1000);
  Sampler sampler(std::make_unique<MapProcSource>(&files), absl::Seconds(1), [&] { return now; });
  ASSERT_TRUE(sampler.SampleNow().ok());
  files = Files(1);
  files.erase("self/task/3/stat");  // a thread that ended: its last interval is lost
  files["self/task/4/stat"] = "4 (fulcrum-compute) R 1 1 1 0 -1 0 0 0 0 0 5 5 0 0\n";  // born
  now += absl::Seconds(2);
  ASSERT_TRUE(sampler.SampleNow().ok());
  SystemSample s;
  ASSERT_TRUE(sampler.Latest(&s));
  EXPECT_DOUBLE_EQ(s.cpu_user_percent, 30.0);  // 60 ticks of 100/s over 2 s
  EXPECT_DOUBLE_EQ(s.cpu_system_percent, 10.0);
  EXPECT_EQ(s.voluntary_switches, 40u);
  EXPECT_DOUBLE_EQ(s.voluntary_switches_per_sec, 20.0);
  EXPECT_EQ(s.io_write_bytes, 8192u);
  EXPECT_DOUBLE_EQ(s.io_read_bytes_per_sec, 2048.0);
  const HostSample& h = s.host;
  // 100 user + 40 system + 50 idle + 10 iowait jiffies.
  EXPECT_DOUBLE_EQ(h.cpu_user_percent, 50.0);
  EXPECT_DOUBLE_EQ(h.cpu_system_percent, 20.0);
  EXPECT_DOUBLE_EQ(h.cpu_idle_percent, 25.0);
  EXPECT_DOUBLE_EQ(h.cpu_iowait_percent, 5.0);
  EXPECT_EQ(h.context_switches, 3000u);
  EXPECT_DOUBLE_EQ(h.context_switches_per_sec, 1500.0);
  EXPECT_EQ(h.tcp_out_segs, 400u);
  EXPECT_EQ(h.tcp_retrans_segs, 4u);
  EXPECT_DOUBLE_EQ(h.tcp_in_segs_per_sec, 150.0);
  EXPECT_EQ(h.disk_write_bytes, 16u * 512);  // sda only: sda1 is inside it
  EXPECT_EQ(h.mem_free_bytes, 900 * 1024);
  EXPECT_EQ(h.mem_used_bytes, (4000 - 900 - 10 - 500 - 90) * 1024);
  EXPECT_DOUBLE_EQ(h.load1, 1.5);
  ASSERT_EQ(s.interfaces.size(), 1u);
  EXPECT_DOUBLE_EQ(s.interfaces[0].rx_packets_per_sec, 25.0);
  EXPECT_EQ(s.interfaces[0].rx_packets, 50u);
  EXPECT_EQ(s.interfaces[0].tx_packets, 70u);
  EXPECT_EQ(s.interfaces[0].rx_errors, 2u);
  EXPECT_EQ(s.interfaces[0].rx_drops, 3u);
  EXPECT_EQ(s.interfaces[0].tx_drops, 1u);
  ASSERT_EQ(s.threads.size(), 2u);
  EXPECT_EQ(s.threads[0].name, "fulcrum-compute");
  EXPECT_EQ(s.threads[0].threads, 2);
  // tid 2: 30 user ticks; tid 4 born: 5 user + 5 system; tid 3 gone.
  EXPECT_DOUBLE_EQ(s.threads[0].user_percent, 17.5);
  EXPECT_DOUBLE_EQ(s.threads[0].system_percent, 7.5);
  EXPECT_EQ(s.threads[1].name, "p");
  EXPECT_DOUBLE_EQ(s.threads[1].cpu_percent(), 20.0);
}

TEST(BreadthSamplerTest, AnUnreadablePartKeepsItsLastFigures) {
  std::map<std::string, std::string> files = Files(0);
  absl::Time now = absl::FromUnixSeconds(1000);
  Sampler sampler(std::make_unique<MapProcSource>(&files), absl::Seconds(1), [&] { return now; });
  ASSERT_TRUE(sampler.SampleNow().ok());
  files = Files(1);
  now += absl::Seconds(1);
  ASSERT_TRUE(sampler.SampleNow().ok());
  files.erase("net/snmp");
  files.erase("meminfo");
  files["diskstats"] = "garbage\n";
  now += absl::Seconds(1);
  ASSERT_TRUE(sampler.SampleNow().ok());
  SystemSample s;
  ASSERT_TRUE(sampler.Latest(&s));
  EXPECT_EQ(s.host.tcp_out_segs, 400u);
  EXPECT_EQ(s.host.mem_free_bytes, 900 * 1024);
  EXPECT_EQ(s.host.disk_write_bytes, 16u * 512);
}

}  // namespace
}  // namespace fulcrum::profiler
