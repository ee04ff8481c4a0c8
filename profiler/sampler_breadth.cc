#include "profiler/sampler_breadth.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fulcrum::profiler::internal {
namespace {

enum Part { kHostCpu, kMemory, kLoad, kTcp, kDisks, kIo, kSwitches, kThreads, kGpus };

// Every thread's stat. A thread that ends between the listing and its read is skipped.
absl::Status ReadThreads(ProcSource& source, std::optional<std::vector<ThreadReading>>* out) {
  absl::StatusOr<std::vector<std::string>> tids = source.List("self/task");
  if (!tids.ok()) return absl::UnavailableError(tids.status().message());
  std::vector<ThreadReading> threads;
  for (const std::string& tid : *tids) {
    absl::StatusOr<std::string> text = source.Read(absl::StrCat("self/task/", tid, "/stat"));
    if (!text.ok()) continue;
    absl::StatusOr<ThreadTimes> times = ParseThreadStat(*text);
    if (!times.ok()) return times.status();
    threads.push_back({tid, *std::move(times)});
  }
  *out = std::move(threads);
  return absl::OkStatus();
}

double PerSecond(uint64_t delta, double seconds) {
  return seconds > 0 ? static_cast<double>(delta) / seconds : 0.0;
}

// Share of `part` in `total` jiffies, in percent.
double Share(uint64_t part, uint64_t total) {
  return total > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(total) : 0.0;
}

uint64_t Grown(uint64_t before, uint64_t now) { return now >= before ? now - before : 0; }

}  // namespace

absl::StatusOr<std::string> OnceProcSource::Read(absl::string_view name) {
  auto it = read_.find(name);
  if (it == read_.end()) it = read_.emplace(std::string(name), source_->Read(name)).first;
  return it->second;
}

std::vector<absl::Status> ReadBreadth(ProcSource& source, NvmlGpus* gpus, BreadthReadings* out) {
  std::vector<absl::Status> status = {
      ReadPart(source, "stat", &ParseHostStat, &out->host_cpu),
      ReadPart(source, "meminfo", &ParseMeminfo, &out->memory),
      ReadPart(source, "loadavg", &ParseLoadavg, &out->load),
      ReadPart(source, "net/snmp", &ParseNetSnmp, &out->tcp),
      ReadPart(source, "diskstats", &ParseDiskstats, &out->disks),
      ReadPart(source, "self/io", &ParseSelfIo, &out->io),
      ReadPart(source, "self/status", &ParseContextSwitches, &out->switches),
      ReadThreads(source, &out->threads),
      absl::OkStatus()};
  if (gpus != nullptr) {
    absl::StatusOr<std::vector<GpuReading>> read = gpus->Read();
    if (read.ok()) {
      out->gpus = *std::move(read);
    } else {
      status[kGpus] = read.status();
    }
  }
  return status;
}

uint64_t CounterTrack::Advance(uint64_t value) {
  const uint64_t delta = has_ ? CounterDelta(last_, value) : 0;
  has_ = true;
  last_ = value;
  total_ += delta;
  return delta;
}

double BreadthBuilder::Elapsed(int part, absl::Time now) {
  auto [it, inserted] = read_at_.try_emplace(part, now);
  const double seconds = inserted ? 0.0 : absl::ToDoubleSeconds(now - it->second);
  it->second = now;
  return seconds;
}

void BreadthBuilder::Add(const BreadthReadings& r, absl::Time now, const SystemSample& last,
                         SystemSample* out) {
  AddHostCpu(r, last, out);
  AddHostCounters(r, now, out);
  AddProcessCounters(r, now, last, out);
  AddThreads(r, now, last, out);
  out->gpus = r.gpus.has_value() ? *r.gpus : last.gpus;
}

void BreadthBuilder::AddHostCpu(const BreadthReadings& r, const SystemSample& last,
                                SystemSample* out) {
  HostSample& h = out->host;
  h = last.host;  // what is not read again stays as it was
  if (r.host_cpu.has_value() && host_cpu_.has_value()) {
    // Per-state growth over the interval; a state that shrank (iowait does on some kernels)
    // counts as no time, as in sar.
    const HostCpuTimes& a = *host_cpu_;
    const HostCpuTimes& b = *r.host_cpu;
    const uint64_t user = Grown(a.user, b.user), system = Grown(a.system, b.system);
    const uint64_t iowait = Grown(a.iowait, b.iowait), idle = Grown(a.idle, b.idle);
    const uint64_t total = user + system + iowait + idle + Grown(a.other, b.other);
    h.cpu_user_percent = Share(user, total);
    h.cpu_system_percent = Share(system, total);
    h.cpu_iowait_percent = Share(iowait, total);
    h.cpu_idle_percent = Share(idle, total);
  }
  if (r.host_cpu.has_value()) host_cpu_ = r.host_cpu;
  if (r.memory.has_value()) {
    h.mem_total_bytes = r.memory->total_bytes;
    h.mem_used_bytes = r.memory->used_bytes();
    h.mem_free_bytes = r.memory->free_bytes;
    h.mem_available_bytes = r.memory->available_bytes;
    h.mem_cached_bytes = r.memory->cached_bytes;
    h.mem_buffers_bytes = r.memory->buffers_bytes;
  }
  if (r.load.has_value()) {
    h.load1 = r.load->one;
    h.load5 = r.load->five;
    h.load15 = r.load->fifteen;
  }
}

void BreadthBuilder::AddHostCounters(const BreadthReadings& r, absl::Time now, SystemSample* out) {
  HostSample& h = out->host;  // AddHostCpu copied the last sample's: unread parts stay
  if (r.host_cpu.has_value()) {
    const double s = Elapsed(kHostCpu, now);
    h.context_switches_per_sec = PerSecond(ctxt_.Advance(r.host_cpu->context_switches), s);
    h.context_switches = ctxt_.total();
  }
  if (r.tcp.has_value()) {
    const double s = Elapsed(kTcp, now);
    h.tcp_in_segs_per_sec = PerSecond(tcp_in_.Advance(r.tcp->in_segs), s);
    h.tcp_out_segs_per_sec = PerSecond(tcp_out_.Advance(r.tcp->out_segs), s);
    h.tcp_retrans_segs_per_sec = PerSecond(tcp_retrans_.Advance(r.tcp->retrans_segs), s);
    h.tcp_in_segs = tcp_in_.total();
    h.tcp_out_segs = tcp_out_.total();
    h.tcp_retrans_segs = tcp_retrans_.total();
  }
  if (r.disks.has_value()) {
    const double s = Elapsed(kDisks, now);
    uint64_t read = 0, written = 0;
    for (const DiskCounters& d : *r.disks) {
      if (!IsWholeDisk(d.name, *r.disks)) continue;
      read += disk_reads_[d.name].Advance(d.read_bytes);
      written += disk_writes_[d.name].Advance(d.write_bytes);
    }
    h.disk_read_bytes += read;
    h.disk_write_bytes += written;
    h.disk_read_bytes_per_sec = PerSecond(read, s);
    h.disk_write_bytes_per_sec = PerSecond(written, s);
  }
}

void BreadthBuilder::AddProcessCounters(const BreadthReadings& r, absl::Time now,
                                        const SystemSample& last, SystemSample* out) {
  if (r.io.has_value()) {
    const double s = Elapsed(kIo, now);
    out->io_read_bytes_per_sec = PerSecond(io_read_.Advance(r.io->read_bytes), s);
    out->io_write_bytes_per_sec = PerSecond(io_write_.Advance(r.io->write_bytes), s);
    out->io_read_bytes = io_read_.total();
    out->io_write_bytes = io_write_.total();
  } else {
    out->io_read_bytes = last.io_read_bytes;
    out->io_write_bytes = last.io_write_bytes;
    out->io_read_bytes_per_sec = last.io_read_bytes_per_sec;
    out->io_write_bytes_per_sec = last.io_write_bytes_per_sec;
  }
  if (r.switches.has_value()) {
    const double s = Elapsed(kSwitches, now);
    out->voluntary_switches_per_sec = PerSecond(voluntary_.Advance(r.switches->voluntary), s);
    out->nonvoluntary_switches_per_sec =
        PerSecond(nonvoluntary_.Advance(r.switches->nonvoluntary), s);
    out->voluntary_switches = voluntary_.total();
    out->nonvoluntary_switches = nonvoluntary_.total();
  } else {
    out->voluntary_switches = last.voluntary_switches;
    out->nonvoluntary_switches = last.nonvoluntary_switches;
    out->voluntary_switches_per_sec = last.voluntary_switches_per_sec;
    out->nonvoluntary_switches_per_sec = last.nonvoluntary_switches_per_sec;
  }
}

void BreadthBuilder::AddThreads(const BreadthReadings& r, absl::Time now, const SystemSample& last,
                                SystemSample* out) {
  if (!r.threads.has_value()) {
    out->threads = last.threads;
    return;
  }
  const double seconds = Elapsed(kThreads, now);
  std::map<std::string, ThreadSample> by_name;
  std::map<std::string, ThreadTimes> now_threads;
  for (const ThreadReading& t : *r.threads) {
    ThreadSample& group = by_name[t.times.name];
    group.name = t.times.name;
    ++group.threads;
    now_threads[t.tid] = t.times;
    if (threads_baseline_) continue;
    // A tid not listed last time was born since: all its time is in this interval.
    auto before = threads_.find(t.tid);
    const ThreadTimes zero;
    const ThreadTimes& b = before != threads_.end() ? before->second : zero;
    const double scale = seconds > 0 ? 100.0 / ticks_per_second_ / seconds : 0.0;
    group.user_percent += static_cast<double>(Grown(b.user_ticks, t.times.user_ticks)) * scale;
    group.system_percent +=
        static_cast<double>(Grown(b.system_ticks, t.times.system_ticks)) * scale;
  }
  threads_ = std::move(now_threads);
  threads_baseline_ = false;
  out->threads.clear();
  for (auto& [name, group] : by_name) out->threads.push_back(std::move(group));
}

}  // namespace fulcrum::profiler::internal
