// profiler: parsers of the host-wide /proc counters (the aggregate "cpu" line and ctxt of
// /proc/stat, /proc/meminfo, /proc/loadavg, /proc/net/snmp, /proc/diskstats) and of the
// process's own extra ones (/proc/self/io, the context switches of /proc/self/status, the
// threads' /proc/self/task/TID/stat). Each turns a file's text into numbers, with
// InvalidArgument naming the file and field on malformed text; the sampler reads the files
// through a ProcSource (proc_stats.h). Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fulcrum::profiler {

// /proc/stat: the aggregate "cpu" line (jiffies per state, summed over the cores) and ctxt.
struct HostCpuTimes {
  uint64_t user = 0;    // user + nice (as sar's %user + %nice)
  uint64_t system = 0;  // system + irq + softirq (as sar -u's %system)
  uint64_t iowait = 0;
  uint64_t idle = 0;
  uint64_t other = 0;             // steal
  uint64_t context_switches = 0;  // ctxt
  uint64_t total() const { return user + system + iowait + idle + other; }
};
absl::StatusOr<HostCpuTimes> ParseHostStat(absl::string_view text);

// /proc/meminfo, converted from kB to bytes. `used` is sar's kbmemused: total - free -
// buffers - cached - slab (clamped at 0).
struct HostMemory {
  int64_t total_bytes = 0;
  int64_t free_bytes = 0;
  int64_t available_bytes = 0;
  int64_t buffers_bytes = 0;
  int64_t cached_bytes = 0;
  int64_t slab_bytes = 0;
  int64_t used_bytes() const;
};
absl::StatusOr<HostMemory> ParseMeminfo(absl::string_view text);

// /proc/loadavg: the 1, 5 and 15 minute load averages.
struct LoadAverage {
  double one = 0.0;
  double five = 0.0;
  double fifteen = 0.0;
};
absl::StatusOr<LoadAverage> ParseLoadavg(absl::string_view text);

// /proc/net/snmp "Tcp:" InSegs, OutSegs and RetransSegs (of the reader's network namespace).
struct TcpCounters {
  uint64_t in_segs = 0;
  uint64_t out_segs = 0;
  uint64_t retrans_segs = 0;
};
absl::StatusOr<TcpCounters> ParseNetSnmp(absl::string_view text);

// One /proc/diskstats row: sectors of 512 bytes read and written, as bytes.
struct DiskCounters {
  std::string name;
  uint64_t read_bytes = 0;
  uint64_t write_bytes = 0;
};
absl::StatusOr<std::vector<DiskCounters>> ParseDiskstats(absl::string_view text);
// Whether a diskstats device counts towards the host's disk totals: a whole physical disk
// (sda, vda, nvme0n1, mmcblk0, xvda), not a partition of one listed in `all` (sda1,
// nvme0n1p1), nor a virtual layer over disks whose I/O the disks already count (loop, ram,
// zram, dm-, md).
bool IsWholeDisk(const std::string& name, const std::vector<DiskCounters>& all);

// /proc/self/io read_bytes and write_bytes: bytes the process caused to be fetched from or
// sent to the storage layer.
struct ProcessIo {
  uint64_t read_bytes = 0;
  uint64_t write_bytes = 0;
};
absl::StatusOr<ProcessIo> ParseSelfIo(absl::string_view text);

// /proc/self/status voluntary_ctxt_switches and nonvoluntary_ctxt_switches. For a process
// they are its main thread's (the kernel reports the thread-group leader's), as pidstat -w.
struct ContextSwitches {
  uint64_t voluntary = 0;
  uint64_t nonvoluntary = 0;
};
absl::StatusOr<ContextSwitches> ParseContextSwitches(absl::string_view text);

// /proc/self/task/TID/stat: a thread's name (comm) and CPU time in clock ticks.
struct ThreadTimes {
  std::string name;
  uint64_t user_ticks = 0;
  uint64_t system_ticks = 0;
};
absl::StatusOr<ThreadTimes> ParseThreadStat(absl::string_view text);

}  // namespace fulcrum::profiler
