// The Sampler over recorded /proc trees (testdata/t0..t3, described in testdata/README.md)
// that the test copies into a temporary directory between samples, with a stepped clock: the
// figures are exact. Then Start()/Stop() with the real thread on the live /proc.
#include "profiler/sampler.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fulcrum::profiler {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const fs::path kTestdata = fs::path(FULCRUM_SOURCE_DIR) / "tests/profiler/testdata";
const absl::Time kT0 = absl::FromUnixSeconds(1795441024);

// A temporary /proc tree that the test rewrites from the recorded snapshots, and a clock the
// test steps.
class RecordedProcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("fulcrum_sampler_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Install(const std::string& snapshot) {
    fs::copy(kTestdata / snapshot, dir_,
             fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  }

  std::unique_ptr<Sampler> MakeSampler() {
    return std::make_unique<Sampler>(DirProcSource(dir_.string(), 100), absl::Seconds(1),
                                     [this] { return now_; });
  }

  // Installs `snapshot`, moves the clock to kT0 + `seconds` and samples.
  void SampleAt(Sampler& sampler, const std::string& snapshot, double seconds) {
    Install(snapshot);
    now_ = kT0 + absl::Seconds(seconds);
    ASSERT_TRUE(sampler.SampleNow().ok());
  }

  fs::path dir_;
  absl::Time now_ = kT0;
};

const InterfaceSample* Find(const SystemSample& sample, const std::string& name) {
  for (const InterfaceSample& i : sample.interfaces) {
    if (i.name == name) return &i;
  }
  return nullptr;
}

std::vector<std::string> Names(const SystemSample& sample) {
  std::vector<std::string> names;
  for (const InterfaceSample& i : sample.interfaces) names.push_back(i.name);
  return names;
}

TEST_F(RecordedProcTest, BaselineHasZeroRatesAndTotals) {
  auto sampler = MakeSampler();
  SystemSample latest;
  EXPECT_FALSE(sampler->Latest(&latest));
  SampleAt(*sampler, "t0", 0);
  ASSERT_TRUE(sampler->Latest(&latest));
  EXPECT_EQ(latest.seconds, 0.0);
  EXPECT_EQ(latest.unix_micros, absl::ToUnixMicros(kT0));
  EXPECT_EQ(latest.cpu_percent, 0.0);
  EXPECT_DOUBLE_EQ(latest.cpu_seconds, 18.0);  // (1500 + 300) / 100
  EXPECT_THAT(latest.core_percent, ElementsAre(0.0, 0.0));
  EXPECT_EQ(latest.rss_bytes, 13552 * 1024);
  EXPECT_EQ(latest.peak_rss_bytes, 13552 * 1024);
  EXPECT_THAT(Names(latest), ElementsAre("lo", "ifb0", "eth0", "veth-h1"));
  for (const InterfaceSample& i : latest.interfaces) {
    EXPECT_EQ(i.loopback, i.name == "lo") << i.name;
    EXPECT_EQ(i.rx_bytes + i.tx_bytes + i.rx_packets + i.tx_packets, 0u) << i.name;
    EXPECT_EQ(i.rx_bytes_per_sec + i.tx_bytes_per_sec, 0.0) << i.name;
  }
}

TEST_F(RecordedProcTest, ExactFiguresAcrossWrapVanishAndAppear) {
  auto sampler = MakeSampler();
  SampleAt(*sampler, "t0", 0);

  // t1 (+2 s): 180 ticks of CPU; eth0's rx bytes wrap at 2^32.
  SampleAt(*sampler, "t1", 2);
  SystemSample s;
  ASSERT_TRUE(sampler->Latest(&s));
  EXPECT_DOUBLE_EQ(s.seconds, 2.0);
  EXPECT_DOUBLE_EQ(s.cpu_percent, 90.0);
  EXPECT_DOUBLE_EQ(s.cpu_seconds, 19.8);
  EXPECT_THAT(s.core_percent, ElementsAre(50.0, 25.0));
  EXPECT_EQ(s.rss_bytes, 218352 * 1024);
  EXPECT_EQ(s.peak_rss_bytes, 218352 * 1024);
  const InterfaceSample* eth0 = Find(s, "eth0");
  ASSERT_NE(eth0, nullptr);
  EXPECT_EQ(eth0->rx_bytes, 4000u);
  EXPECT_EQ(eth0->rx_packets, 40u);
  EXPECT_EQ(eth0->tx_bytes, 2000u);
  EXPECT_EQ(eth0->tx_packets, 20u);
  EXPECT_DOUBLE_EQ(eth0->rx_bytes_per_sec, 2000.0);
  EXPECT_DOUBLE_EQ(eth0->tx_bytes_per_sec, 1000.0);
  const InterfaceSample* lo = Find(s, "lo");
  ASSERT_NE(lo, nullptr);
  EXPECT_TRUE(lo->loopback);
  EXPECT_EQ(lo->rx_bytes, 4096u);
  EXPECT_DOUBLE_EQ(lo->rx_bytes_per_sec, 2048.0);
  const InterfaceSample* veth1 = Find(s, "veth-h1");
  ASSERT_NE(veth1, nullptr);
  EXPECT_FALSE(veth1->loopback);
  EXPECT_EQ(veth1->rx_bytes, 5000u);
  EXPECT_EQ(veth1->tx_bytes, 3000u);
  EXPECT_DOUBLE_EQ(veth1->rx_bytes_per_sec, 2500.0);
  EXPECT_DOUBLE_EQ(veth1->tx_bytes_per_sec, 1500.0);

  // t2 (+1 s): veth-h1 vanished, veth-h2 appeared (starts at 0); cpu0's guest time is already
  // in its user time.
  SampleAt(*sampler, "t2", 3);
  ASSERT_TRUE(sampler->Latest(&s));
  EXPECT_DOUBLE_EQ(s.cpu_percent, 100.0);
  EXPECT_THAT(s.core_percent, ElementsAre(60.0, 0.0));
  EXPECT_EQ(s.rss_bytes, 116000 * 1024);
  EXPECT_EQ(s.peak_rss_bytes, 218352 * 1024);
  EXPECT_THAT(Names(s), ElementsAre("lo", "ifb0", "eth0", "veth-h2"));
  const InterfaceSample* veth2 = Find(s, "veth-h2");
  ASSERT_NE(veth2, nullptr);
  EXPECT_EQ(veth2->rx_bytes + veth2->tx_bytes + veth2->rx_packets + veth2->tx_packets, 0u);
  EXPECT_EQ(veth2->rx_bytes_per_sec, 0.0);
  EXPECT_EQ(Find(s, "eth0")->rx_bytes, 14000u);
  EXPECT_DOUBLE_EQ(Find(s, "eth0")->rx_bytes_per_sec, 10000.0);
  EXPECT_EQ(Find(s, "eth0")->tx_bytes_per_sec, 0.0);
  std::vector<InterfaceTotals> totals = sampler->Totals();
  ASSERT_EQ(totals.size(), 5u);
  EXPECT_EQ(totals[3].name, "veth-h1");  // vanished, still counted
  EXPECT_EQ(totals[3].rx_bytes, 5000u);

  // t3 (+1 s): veth-h2 grows; veth-h1 is back with fresh counters, which start again.
  SampleAt(*sampler, "t3", 4);
  ASSERT_TRUE(sampler->Latest(&s));
  EXPECT_DOUBLE_EQ(s.seconds, 4.0);
  EXPECT_DOUBLE_EQ(s.cpu_percent, 15.0);
  EXPECT_THAT(s.core_percent, ElementsAre(30.0, 75.0));
  EXPECT_THAT(Names(s), ElementsAre("lo", "ifb0", "eth0", "veth-h2", "veth-h1"));
  veth2 = Find(s, "veth-h2");
  ASSERT_NE(veth2, nullptr);
  EXPECT_EQ(veth2->rx_bytes, 1000u);
  EXPECT_DOUBLE_EQ(veth2->rx_bytes_per_sec, 1000.0);
  EXPECT_DOUBLE_EQ(veth2->tx_bytes_per_sec, 500.0);
  veth1 = Find(s, "veth-h1");
  ASSERT_NE(veth1, nullptr);
  EXPECT_EQ(veth1->rx_bytes, 5000u);  // its earlier total, nothing added on re-appearing
  EXPECT_EQ(veth1->rx_bytes_per_sec, 0.0);

  totals = sampler->Totals();
  ASSERT_EQ(totals.size(), 5u);
  struct Want {
    const char* name;
    bool loopback;
    uint64_t rx_bytes, rx_packets, tx_bytes, tx_packets;
  };
  const Want want[] = {{"lo", true, 5096, 20, 5096, 20},
                       {"ifb0", false, 0, 0, 0, 0},
                       {"eth0", false, 14000, 58, 3000, 25},
                       {"veth-h1", false, 5000, 40, 3000, 30},
                       {"veth-h2", false, 1000, 5, 500, 3}};
  for (size_t i = 0; i < totals.size(); ++i) {
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(totals[i].name, want[i].name);
    EXPECT_EQ(totals[i].loopback, want[i].loopback);
    EXPECT_EQ(totals[i].rx_bytes, want[i].rx_bytes);
    EXPECT_EQ(totals[i].rx_packets, want[i].rx_packets);
    EXPECT_EQ(totals[i].tx_bytes, want[i].tx_bytes);
    EXPECT_EQ(totals[i].tx_packets, want[i].tx_packets);
  }
  EXPECT_EQ(sampler->Samples().size(), 4u);
}

TEST_F(RecordedProcTest, UnreadableFileFailsTheBaselineNamingIt) {
  Install("t0");
  fs::remove(dir_ / "net/dev");
  auto sampler = MakeSampler();
  absl::Status status = sampler->Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr("net/dev"));
  status = sampler->SampleNow();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_TRUE(sampler->Samples().empty());
}

TEST_F(RecordedProcTest, MalformedFileFailsTheBaselineNamingTheField) {
  Install("t0");
  std::ofstream(dir_ / "self/status") << "Name:\tps\nVmRSS:\t  12 MB\nVmHWM:\t  12 kB\n";
  auto sampler = MakeSampler();
  absl::Status status = sampler->SampleNow();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("VmRSS"));
}

TEST_F(RecordedProcTest, FileThatVanishesLaterKeepsThePreviousFigures) {
  auto sampler = MakeSampler();
  SampleAt(*sampler, "t0", 0);
  SampleAt(*sampler, "t1", 2);
  // At +3 s net/dev and self/stat cannot be read: the sample keeps t1's figures for them.
  Install("t2");
  fs::remove(dir_ / "net/dev");
  fs::remove(dir_ / "self/stat");
  now_ = kT0 + absl::Seconds(3);
  ASSERT_TRUE(sampler->SampleNow().ok());
  SystemSample s;
  ASSERT_TRUE(sampler->Latest(&s));
  EXPECT_DOUBLE_EQ(s.cpu_percent, 90.0);
  EXPECT_THAT(s.core_percent, ElementsAre(60.0, 0.0));  // stat was readable
  EXPECT_EQ(s.rss_bytes, 116000 * 1024);
  EXPECT_THAT(Names(s), ElementsAre("lo", "ifb0", "eth0", "veth-h1"));
  EXPECT_DOUBLE_EQ(Find(s, "eth0")->rx_bytes_per_sec, 2000.0);
  // At +4 s they read again (t3): CPU and bytes are measured from +2 s, the last reading.
  SampleAt(*sampler, "t3", 4);
  ASSERT_TRUE(sampler->Latest(&s));
  EXPECT_DOUBLE_EQ(s.cpu_percent, 57.5);  // (2095 - 1980) ticks over 2 s
  const InterfaceSample* eth0 = Find(s, "eth0");
  ASSERT_NE(eth0, nullptr);
  EXPECT_EQ(eth0->rx_bytes, 14000u);
  EXPECT_DOUBLE_EQ(eth0->rx_bytes_per_sec, 5000.0);
  EXPECT_DOUBLE_EQ(eth0->tx_bytes_per_sec, 500.0);
  // veth-h1 was listed at +2 s and again at +4 s with counters that went down: a 32-bit wrap
  // is the only reading the counters allow (the vanishing was never seen).
  EXPECT_EQ(Find(s, "veth-h1")->rx_bytes, 5000u + (uint64_t{1} << 32) - 10000 + 10);
}

TEST_F(RecordedProcTest, ListenerSeesEverySample) {
  auto sampler = MakeSampler();
  std::vector<double> seen;
  sampler->SetListener([&](const SystemSample& s) { seen.push_back(s.cpu_percent); });
  SampleAt(*sampler, "t0", 0);
  SampleAt(*sampler, "t1", 2);
  EXPECT_THAT(seen, ElementsAre(0.0, 90.0));
}

TEST(SamplerThreadTest, StartStopOnLiveProcFinishes) {
  // A long interval: Stop() must wake the thread rather than wait it out.
  Sampler sampler(LiveProcSource(), absl::Hours(1));
  std::atomic<int> listened{0};
  sampler.SetListener([&](const SystemSample&) { listened.fetch_add(1); });
  ASSERT_TRUE(sampler.Start().ok());
  EXPECT_EQ(sampler.Start().code(), absl::StatusCode::kFailedPrecondition);
  sampler.Stop();
  sampler.Stop();  // idempotent
  // The baseline from Start() and the final one from Stop().
  const std::vector<SystemSample> samples = sampler.Samples();
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(listened.load(), 2);
  EXPECT_EQ(samples[0].seconds, 0.0);
  EXPECT_GT(samples[1].rss_bytes, 0);
  EXPECT_GE(samples[1].peak_rss_bytes, samples[1].rss_bytes);
  EXPECT_GE(samples[1].cpu_seconds, samples[0].cpu_seconds);
  EXPECT_EQ(samples[1].core_percent.size(), samples[0].core_percent.size());
  bool has_lo = false;
  for (const InterfaceSample& i : samples[1].interfaces) has_lo |= i.loopback;
  EXPECT_TRUE(has_lo);
}

TEST(SamplerThreadTest, ThreadSamplesEveryInterval) {
  Sampler sampler(LiveProcSource(), absl::Milliseconds(10));
  ASSERT_TRUE(sampler.Start().ok());
  // Waits for samples from the thread itself. No speed is asserted: the generous limit only
  // turns a thread that never samples into a failure instead of a hang.
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (sampler.Samples().size() < 4 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_GE(sampler.Samples().size(), 4u);
  sampler.Stop();
  const std::vector<SystemSample> samples = sampler.Samples();
  for (size_t i = 1; i < samples.size(); ++i) {
    EXPECT_GT(samples[i].seconds, samples[i - 1].seconds);
    EXPECT_GE(samples[i].cpu_percent, 0.0);
  }
  // Stopped: no more samples arrive.
  const size_t count = samples.size();
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(sampler.Samples().size(), count);
}

TEST(SamplerThreadTest, RestartsAfterStopAndDestructorStops) {
  auto sampler = std::make_unique<Sampler>(LiveProcSource(), absl::Minutes(1));
  ASSERT_TRUE(sampler->Start().ok());
  sampler->Stop();
  ASSERT_TRUE(sampler->Start().ok());
  EXPECT_EQ(sampler->Samples().size(), 3u);
  sampler.reset();  // joins the thread; a hang here is the failure
}

TEST(SamplerThreadTest, NonPositiveIntervalIsInvalid) {
  Sampler sampler(LiveProcSource(), absl::ZeroDuration());
  EXPECT_EQ(sampler.Start().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fulcrum::profiler
