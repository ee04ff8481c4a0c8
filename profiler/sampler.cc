#include "profiler/sampler.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/mutex.h"
#include "base/status_macros.h"
#include "base/thread_name.h"
#include "profiler/sampler_breadth.h"
#include "spdlog/spdlog.h"

namespace fulcrum::profiler {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Intervals come from the steady clock so that a wall-clock step (NTP) cannot make a rate
// negative or huge; only unix_micros is wall-clock time.
absl::Time MonotonicNow() {
  return absl::UnixEpoch() + absl::FromChrono(SteadyClock::now().time_since_epoch());
}

// The figures read at one moment; a part is empty when its file could not be read or parsed.
struct Readings {
  std::optional<ProcessTimes> process;
  std::optional<std::vector<CoreTimes>> cores;
  std::optional<MemoryStatus> memory;
  std::optional<std::vector<InterfaceCounters>> net;
  internal::BreadthReadings breadth;
};

// The share of `now` over `before` that was busy, in percent. Per-core iowait is known to go
// backwards on some kernels, so a shrinking counter is taken as no progress (not a wrap of a
// 64-bit jiffy count, which cannot happen) and the result is capped at 100.
double BusyPercent(const CoreTimes& before, const CoreTimes& now) {
  const uint64_t busy = now.busy >= before.busy ? now.busy - before.busy : 0;
  const uint64_t total = now.total >= before.total ? now.total - before.total : 0;
  if (total == 0) return 0.0;
  return std::min(100.0, 100.0 * static_cast<double>(busy) / static_cast<double>(total));
}

double PerSecond(uint64_t delta, double seconds) {
  return seconds > 0 ? static_cast<double>(delta) / seconds : 0.0;
}

void AddErrors(const InterfaceCounters& before, const InterfaceCounters& now,
               InterfaceTotals* totals) {
  totals->rx_errors += CounterDelta(before.rx_errors, now.rx_errors);
  totals->tx_errors += CounterDelta(before.tx_errors, now.tx_errors);
  totals->rx_drops += CounterDelta(before.rx_drops, now.rx_drops);
  totals->tx_drops += CounterDelta(before.tx_drops, now.tx_drops);
}

// Turns successive Readings into SystemSamples: keeps the previous kernel counters, the
// per-interface totals (in order of first appearance, vanished ones included) and the last
// sample, whose figures stand in for a part that could not be read.
class SeriesBuilder {
 public:
  explicit SeriesBuilder(int64_t ticks_per_second)
      : ticks_per_second_(static_cast<double>(ticks_per_second > 0 ? ticks_per_second : 100)),
        breadth_(ticks_per_second_) {}

  bool has_baseline() const { return has_baseline_; }

  // The first call is the baseline and needs every part.
  SystemSample Add(const Readings& readings, absl::Time now, int64_t unix_micros) {
    SystemSample sample;
    if (!has_baseline_) baseline_time_ = now;
    sample.seconds = absl::ToDoubleSeconds(now - baseline_time_);
    sample.unix_micros = unix_micros;
    AddProcess(readings, now, &sample);
    AddCores(readings, &sample);
    if (readings.memory.has_value()) {
      sample.rss_bytes = readings.memory->rss_bytes;
      // The kernel raises VmHWM only when RSS is about to shrink (munmap, reclaim), from
      // approximate per-CPU counters, so after a free it can read a little below an RSS seen
      // earlier; a peak is never below any RSS we saw.
      sample.peak_rss_bytes = std::max(
          {readings.memory->peak_rss_bytes, readings.memory->rss_bytes, last_.peak_rss_bytes});
    } else {
      sample.rss_bytes = last_.rss_bytes;
      sample.peak_rss_bytes = last_.peak_rss_bytes;
    }
    AddNet(readings, now, &sample);
    breadth_.Add(readings.breadth, now, last_, &sample);
    has_baseline_ = true;
    last_ = sample;
    return sample;
  }

  std::vector<InterfaceTotals> Totals() const {
    std::vector<InterfaceTotals> totals;
    totals.reserve(interfaces_.size());
    for (const Tracked& tracked : interfaces_) totals.push_back(tracked.totals);
    return totals;
  }

 private:
  struct Tracked {
    InterfaceTotals totals;
    InterfaceCounters last;  // the kernel's counters when last listed
    bool listed = false;     // in the latest net/dev that could be read
  };

  void AddProcess(const Readings& readings, absl::Time now, SystemSample* sample) {
    if (!readings.process.has_value()) {
      sample->cpu_percent = last_.cpu_percent;
      sample->cpu_seconds = last_.cpu_seconds;
      sample->cpu_user_percent = last_.cpu_user_percent;
      sample->cpu_system_percent = last_.cpu_system_percent;
      return;
    }
    const uint64_t user = readings.process->user_ticks;
    const uint64_t ticks = user + readings.process->system_ticks;
    sample->cpu_seconds = static_cast<double>(ticks) / ticks_per_second_;
    if (has_baseline_) {
      // Measured from the last time self/stat was read, which a failed read may make longer
      // than one interval: the percentage is still the true average over that span.
      const double seconds = absl::ToDoubleSeconds(now - process_time_);
      const uint64_t used = ticks >= process_ticks_ ? ticks - process_ticks_ : 0;
      const uint64_t used_user = user >= process_user_ticks_ ? user - process_user_ticks_ : 0;
      sample->cpu_percent = 100.0 * PerSecond(used, seconds) / ticks_per_second_;
      sample->cpu_user_percent =
          std::min(sample->cpu_percent, 100.0 * PerSecond(used_user, seconds) / ticks_per_second_);
      sample->cpu_system_percent = sample->cpu_percent - sample->cpu_user_percent;
    }
    process_ticks_ = ticks;
    process_user_ticks_ = user;
    process_time_ = now;
  }

  void AddCores(const Readings& readings, SystemSample* sample) {
    if (!readings.cores.has_value()) {
      sample->core_percent = last_.core_percent;
      return;
    }
    // Indexed by core number: with a core offline (absent from /proc/stat) the others keep
    // their places and the gap reads 0.
    int max_core = -1;
    for (const CoreTimes& core : *readings.cores) max_core = std::max(max_core, core.core);
    sample->core_percent.assign(static_cast<size_t>(max_core + 1), 0.0);
    for (const CoreTimes& core : *readings.cores) {
      auto before = std::find_if(cores_.begin(), cores_.end(),
                                 [&](const CoreTimes& c) { return c.core == core.core; });
      if (before != cores_.end()) sample->core_percent[core.core] = BusyPercent(*before, core);
    }
    cores_ = *readings.cores;
  }

  void AddNet(const Readings& readings, absl::Time now, SystemSample* sample) {
    if (!readings.net.has_value()) {
      sample->interfaces = last_.interfaces;
      return;
    }
    const double seconds = absl::ToDoubleSeconds(now - net_time_);
    std::vector<bool> listed(interfaces_.size(), false);
    for (const InterfaceCounters& row : *readings.net) {
      auto [it, inserted] = index_.try_emplace(row.name, interfaces_.size());
      if (inserted) {
        Tracked tracked;
        tracked.totals.name = row.name;
        tracked.totals.loopback = row.name == "lo";
        interfaces_.push_back(std::move(tracked));
        listed.push_back(false);
      }
      Tracked& tracked = interfaces_[it->second];
      InterfaceSample out;
      out.name = row.name;
      out.loopback = tracked.totals.loopback;
      // An interface not listed last time is new (or re-created, with counters from 0): its
      // counters now are its starting point, whatever it carried before we saw it.
      if (tracked.listed) {
        const uint64_t rx = CounterDelta(tracked.last.rx_bytes, row.rx_bytes);
        const uint64_t tx = CounterDelta(tracked.last.tx_bytes, row.tx_bytes);
        tracked.totals.rx_bytes += rx;
        tracked.totals.tx_bytes += tx;
        const uint64_t rx_packets = CounterDelta(tracked.last.rx_packets, row.rx_packets);
        const uint64_t tx_packets = CounterDelta(tracked.last.tx_packets, row.tx_packets);
        tracked.totals.rx_packets += rx_packets;
        tracked.totals.tx_packets += tx_packets;
        AddErrors(tracked.last, row, &tracked.totals);
        out.rx_bytes_per_sec = PerSecond(rx, seconds);
        out.tx_bytes_per_sec = PerSecond(tx, seconds);
        out.rx_packets_per_sec = PerSecond(rx_packets, seconds);
        out.tx_packets_per_sec = PerSecond(tx_packets, seconds);
      }
      tracked.last = row;
      listed[it->second] = true;
      out.rx_bytes = tracked.totals.rx_bytes;
      out.tx_bytes = tracked.totals.tx_bytes;
      out.rx_packets = tracked.totals.rx_packets;
      out.tx_packets = tracked.totals.tx_packets;
      out.rx_errors = tracked.totals.rx_errors;
      out.tx_errors = tracked.totals.tx_errors;
      out.rx_drops = tracked.totals.rx_drops;
      out.tx_drops = tracked.totals.tx_drops;
      sample->interfaces.push_back(std::move(out));
    }
    for (size_t i = 0; i < interfaces_.size(); ++i) interfaces_[i].listed = listed[i];
    net_time_ = now;
  }

  const double ticks_per_second_;
  bool has_baseline_ = false;
  absl::Time baseline_time_;
  uint64_t process_ticks_ = 0;
  uint64_t process_user_ticks_ = 0;
  absl::Time process_time_;
  std::vector<CoreTimes> cores_;
  absl::Time net_time_;
  std::vector<Tracked> interfaces_;
  std::map<std::string, size_t> index_;  // name -> position in interfaces_
  SystemSample last_;
  internal::BreadthBuilder breadth_;
};

}  // namespace

struct Sampler::State {
  State(std::unique_ptr<ProcSource> proc, absl::Duration every, std::function<absl::Time()> clock)
      : interval(every),
        wall_from_clock(clock != nullptr),
        now(clock != nullptr ? std::move(clock) : MonotonicNow),
        source(std::move(proc)),
        builder(source->ClockTicksPerSecond()) {}

  absl::Status TakeSample(bool strict) ABSL_LOCKS_EXCLUDED(sample_mu, mu);
  // The TCP connections' part of `sample` (the last one may be the baseline).
  void AddSockets(SystemSample* sample) ABSL_EXCLUSIVE_LOCKS_REQUIRED(sample_mu);
  // Logs a part's failure when it starts (not every interval) and remembers it.
  void NoteFailure(size_t part, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(sample_mu);
  void Run() ABSL_LOCKS_EXCLUDED(sample_mu, mu);
  // Waits until `deadline` on the steady clock or a stop request; true when stop was asked.
  bool WaitForStop(SteadyClock::time_point deadline) ABSL_LOCKS_EXCLUDED(mu);

  const absl::Duration interval;
  const bool wall_from_clock;  // an injected clock also gives unix_micros (tests)
  const std::function<absl::Time()> now;

  // Serializes sampling (the thread's, SampleNow()'s, Start()'s and Stop()'s) and the listener.
  // Taken before mu when both are held.
  Mutex sample_mu ABSL_ACQUIRED_BEFORE(mu);
  std::unique_ptr<ProcSource> source ABSL_GUARDED_BY(sample_mu);
  SeriesBuilder builder ABSL_GUARDED_BY(sample_mu);
  std::function<void(const SystemSample&)> listener ABSL_GUARDED_BY(sample_mu);
  // Whether each of the files failed at the last sample, so a lasting failure is logged
  // once and not every interval.
  std::array<bool, 5 + internal::kBreadthParts> failing ABSL_GUARDED_BY(sample_mu) = {};
  std::unique_ptr<NvmlGpus> gpus ABSL_GUARDED_BY(sample_mu);
  SocketReader sockets ABSL_GUARDED_BY(sample_mu);
  SocketTrack socket_track ABSL_GUARDED_BY(sample_mu);
  bool has_tcp ABSL_GUARDED_BY(sample_mu) = false;

  // What readers see, and the stop request; never held while reading /proc.
  mutable Mutex mu;
  CondVar wake;
  bool stop ABSL_GUARDED_BY(mu) = false;
  std::vector<SystemSample> samples ABSL_GUARDED_BY(mu);
  std::vector<InterfaceTotals> totals ABSL_GUARDED_BY(mu);
  std::vector<ConnectionTotals> connections ABSL_GUARDED_BY(mu);

  // Held by Start() and Stop() so concurrent calls see one consistent thread.
  Mutex thread_mu ABSL_ACQUIRED_BEFORE(sample_mu);
  std::thread thread ABSL_GUARDED_BY(thread_mu);
};

absl::Status Sampler::State::TakeSample(bool strict) {
  MutexLock lock(&sample_mu);
  strict = strict || !builder.has_baseline();
  Readings readings;
  internal::OnceProcSource once(source.get());
  const std::array<absl::Status, 4> status = {
      internal::ReadPart(once, "self/stat", &ParseSelfStat, &readings.process),
      internal::ReadPart(once, "stat", &ParseCpuStat, &readings.cores),
      internal::ReadPart(once, "self/status", &ParseSelfStatus, &readings.memory),
      internal::ReadPart(once, "net/dev", &ParseNetDev, &readings.net)};
  for (size_t i = 0; i < status.size(); ++i) {
    if (strict && !status[i].ok()) {
      return absl::Status(status[i].code(),
                          absl::StrCat("profiler sampler: ", status[i].message()));
    }
    NoteFailure(i, status[i]);
  }
  // The wider figures never fail a sample (a container may hide diskstats, a foreign pid's io
  // may be unreadable): their columns stay at the previous figures, the failure logged once.
  const std::vector<absl::Status> breadth =
      internal::ReadBreadth(once, gpus.get(), &readings.breadth);
  for (size_t i = 0; i < breadth.size(); ++i) NoteFailure(status.size() + i, breadth[i]);
  const absl::Time time = now();
  const int64_t unix_micros = absl::ToUnixMicros(wall_from_clock ? time : absl::Now());
  SystemSample sample = builder.Add(readings, time, unix_micros);
  if (sockets) AddSockets(&sample);
  {
    MutexLock data_lock(&mu);
    samples.push_back(sample);
    totals = builder.Totals();
    if (sockets) connections = socket_track.Connections();
  }
  if (listener) listener(sample);
  return absl::OkStatus();
}

void Sampler::State::AddSockets(SystemSample* sample) {
  absl::StatusOr<std::vector<SocketReading>> read = sockets();
  NoteFailure(failing.size() - 1, read.status());
  if (read.ok()) {
    socket_track.Add(*read);
    has_tcp = true;
  }
  sample->has_tcp = has_tcp;
  sample->tcp_loopback = socket_track.loopback();
  sample->tcp_external = socket_track.external();
}

void Sampler::State::NoteFailure(size_t part, const absl::Status& status) {
  if (!status.ok() && !failing[part]) {
    spdlog::warn("profiler sampler: {}; keeping the previous figures until it reads again",
                 std::string(status.message()));
  }
  failing[part] = !status.ok();
}

bool Sampler::State::WaitForStop(SteadyClock::time_point deadline) {
  MutexLock lock(&mu);
  // CondVar's deadline is wall-clock time: re-derived from the steady clock after every wake,
  // so a wall-clock step (NTP) can neither stretch nor cut short an interval. Wakes at the
  // deadline or at once on Stop(); spurious wake-ups just wait again.
  while (!stop) {
    const SteadyClock::duration left = deadline - SteadyClock::now();
    if (left <= SteadyClock::duration::zero()) return false;
    wake.WaitFor(&mu, absl::FromChrono(left));
  }
  return true;
}

void Sampler::State::Run() {
  SetCurrentThreadName("fulcrum-sampler");
  const auto period = absl::ToChronoNanoseconds(interval);
  SteadyClock::time_point next = SteadyClock::now() + period;
  while (true) {
    if (WaitForStop(next)) return;
    absl::Status status = TakeSample(/*strict=*/false);
    if (!status.ok()) spdlog::warn("{}", std::string(status.message()));
    next += period;
    // After a stall (a suspended machine, a slow read) skip the missed ticks rather than
    // sample in a burst.
    const SteadyClock::time_point now_steady = SteadyClock::now();
    if (next < now_steady) next = now_steady + period;
  }
}

Sampler::Sampler(std::unique_ptr<ProcSource> source, absl::Duration interval,
                 std::function<absl::Time()> now)
    : state_(std::make_unique<State>(std::move(source), interval, std::move(now))) {}

Sampler::~Sampler() { Stop(); }

absl::Status Sampler::Start() {
  MutexLock lock(&state_->thread_mu);
  if (state_->thread.joinable()) {
    return absl::FailedPreconditionError("profiler sampler: already started");
  }
  if (state_->interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("profiler sampler: interval must be > 0, got ",
                                                   absl::FormatDuration(state_->interval)));
  }
  FULCRUM_RETURN_IF_ERROR(state_->TakeSample(/*strict=*/true));
  state_->thread = std::thread([state = state_.get()] { state->Run(); });
  return absl::OkStatus();
}

void Sampler::Stop() {
  MutexLock lock(&state_->thread_mu);
  if (!state_->thread.joinable()) return;
  {
    MutexLock data_lock(&state_->mu);
    state_->stop = true;
    state_->wake.SignalAll();
  }
  state_->thread.join();
  {
    MutexLock data_lock(&state_->mu);
    state_->stop = false;
  }
  absl::Status status = state_->TakeSample(/*strict=*/false);
  if (!status.ok()) spdlog::warn("{}", std::string(status.message()));
}

absl::Status Sampler::SampleNow() { return state_->TakeSample(/*strict=*/false); }

std::vector<SystemSample> Sampler::Samples() const {
  MutexLock lock(&state_->mu);
  return state_->samples;
}

bool Sampler::Latest(SystemSample* out) const {
  MutexLock lock(&state_->mu);
  if (state_->samples.empty()) return false;
  *out = state_->samples.back();
  return true;
}

std::vector<InterfaceTotals> Sampler::Totals() const {
  MutexLock lock(&state_->mu);
  return state_->totals;
}

std::vector<ConnectionTotals> Sampler::Connections() const {
  MutexLock lock(&state_->mu);
  return state_->connections;
}

void Sampler::SetListener(std::function<void(const SystemSample&)> listener) {
  MutexLock lock(&state_->sample_mu);
  state_->listener = std::move(listener);
}

void Sampler::SetGpus(std::unique_ptr<NvmlGpus> gpus) {
  MutexLock lock(&state_->sample_mu);
  state_->gpus = std::move(gpus);
}

void Sampler::SetSocketReader(SocketReader reader) {
  MutexLock lock(&state_->sample_mu);
  state_->sockets = std::move(reader);
}

}  // namespace fulcrum::profiler
