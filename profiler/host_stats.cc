#include "profiler/host_stats.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "profiler/proc_stats.h"
#include "profiler/proc_text.h"

namespace fulcrum::profiler {
namespace {

using proc_text::FieldError;
using proc_text::Fields;
using proc_text::ParseCounter;

std::vector<absl::string_view> Lines(absl::string_view text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

// Fills `*out[name]` from "Name: value" lines whose name is a key of `out`; every key must be
// present. `parse` turns the rest of the line into the value.
template <typename T, typename Parse>
absl::Status ParseNamedLines(absl::string_view file, absl::string_view text,
                             const std::map<std::string, T*>& out, Parse parse) {
  std::set<std::string> seen;
  for (absl::string_view line : Lines(text)) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    auto it = out.find(std::string(line.substr(0, colon)));
    if (it == out.end()) continue;
    auto value = parse(it->first, line.substr(colon + 1));
    if (!value.ok()) return value.status();
    *it->second = *value;
    seen.insert(it->first);
  }
  for (const auto& entry : out) {
    if (seen.count(entry.first) == 0) return FieldError(file, entry.first, "is missing");
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> CounterLine(absl::string_view file, absl::string_view field,
                                     absl::string_view rest) {
  return ParseCounter(file, field, absl::StripAsciiWhitespace(rest));
}

}  // namespace

absl::StatusOr<HostCpuTimes> ParseHostStat(absl::string_view text) {
  HostCpuTimes t;
  bool have_cpu = false, have_ctxt = false;
  for (absl::string_view line : Lines(text)) {
    const std::vector<absl::string_view> f = Fields(line);
    if (f.size() >= 5 && f[0] == "cpu") {
      // user nice system idle iowait irq softirq steal (guest* are inside user and nice).
      uint64_t v[8] = {};
      for (size_t i = 0; i < 8 && i + 1 < f.size(); ++i) {
        auto value = ParseCounter("stat", absl::StrCat("cpu column ", i + 1), f[i + 1]);
        if (!value.ok()) return value.status();
        v[i] = *value;
      }
      t.user = v[0] + v[1];
      t.system = v[2] + v[5] + v[6];  // sar -u's %system includes irq and softirq
      t.idle = v[3];
      t.iowait = v[4];
      t.other = v[7];
      have_cpu = true;
    } else if (f.size() == 2 && f[0] == "ctxt") {
      auto value = ParseCounter("stat", "ctxt", f[1]);
      if (!value.ok()) return value.status();
      t.context_switches = *value;
      have_ctxt = true;
    }
  }
  if (!have_cpu) return FieldError("stat", "the aggregate cpu line", "is missing");
  if (!have_ctxt) return FieldError("stat", "ctxt", "is missing");
  return t;
}

int64_t HostMemory::used_bytes() const {
  return std::max<int64_t>(0, total_bytes - free_bytes - buffers_bytes - cached_bytes - slab_bytes);
}

absl::StatusOr<HostMemory> ParseMeminfo(absl::string_view text) {
  HostMemory m;
  const std::map<std::string, int64_t*> wanted = {
      {"MemTotal", &m.total_bytes},         {"MemFree", &m.free_bytes},
      {"MemAvailable", &m.available_bytes}, {"Buffers", &m.buffers_bytes},
      {"Cached", &m.cached_bytes},          {"Slab", &m.slab_bytes}};
  absl::Status st = ParseNamedLines("meminfo", text, wanted,
                                    [](const std::string& field, absl::string_view rest) {
                                      return proc_text::ParseKbLine("meminfo", field, rest);
                                    });
  if (!st.ok()) return st;
  return m;
}

absl::StatusOr<LoadAverage> ParseLoadavg(absl::string_view text) {
  const std::vector<absl::string_view> f = Fields(text);
  LoadAverage load;
  double* out[] = {&load.one, &load.five, &load.fifteen};
  static constexpr const char* kNames[] = {"1-minute load", "5-minute load", "15-minute load"};
  for (size_t i = 0; i < 3; ++i) {
    if (i >= f.size() || !absl::SimpleAtod(f[i], out[i]) || *out[i] < 0) {
      return FieldError("loadavg", kNames[i], "is not a non-negative number");
    }
  }
  return load;
}

absl::StatusOr<TcpCounters> ParseNetSnmp(absl::string_view text) {
  // Two "Tcp:" lines: the names, then the values in the same order.
  std::vector<absl::string_view> names, values;
  for (absl::string_view line : Lines(text)) {
    if (!absl::StartsWith(line, "Tcp:")) continue;
    (names.empty() ? names : values) = Fields(line);
  }
  if (names.empty() || values.size() != names.size()) {
    return FieldError("net/snmp", "the Tcp: lines", "are missing or of unequal length");
  }
  TcpCounters tcp;
  const std::pair<const char*, uint64_t*> wanted[] = {
      {"InSegs", &tcp.in_segs}, {"OutSegs", &tcp.out_segs}, {"RetransSegs", &tcp.retrans_segs}};
  for (const auto& [name, out] : wanted) {
    auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) return FieldError("net/snmp", absl::StrCat("Tcp ", name), "is missing");
    auto value = ParseCounter("net/snmp", absl::StrCat("Tcp ", name), values[it - names.begin()]);
    if (!value.ok()) return value.status();
    *out = *value;
  }
  return tcp;
}

absl::StatusOr<std::vector<DiskCounters>> ParseDiskstats(absl::string_view text) {
  // major minor name reads merged sectors_read ms writes merged sectors_written ...
  constexpr size_t kSectorsRead = 5, kSectorsWritten = 9;
  std::vector<DiskCounters> disks;
  for (absl::string_view line : Lines(text)) {
    const std::vector<absl::string_view> f = Fields(line);
    if (f.empty()) continue;
    if (f.size() <= kSectorsWritten) {
      return FieldError("diskstats", absl::StrCat("line '", line, "'"), "has too few columns");
    }
    DiskCounters d;
    d.name = std::string(f[2]);
    auto read = ParseCounter("diskstats", absl::StrCat(d.name, " sectors read"), f[kSectorsRead]);
    if (!read.ok()) return read.status();
    auto written =
        ParseCounter("diskstats", absl::StrCat(d.name, " sectors written"), f[kSectorsWritten]);
    if (!written.ok()) return written.status();
    // diskstats counts 512-byte sectors whatever the device's sector size.
    d.read_bytes = *read * 512;
    d.write_bytes = *written * 512;
    disks.push_back(std::move(d));
  }
  return disks;
}

bool IsWholeDisk(const std::string& name, const std::vector<DiskCounters>& all) {
  for (const char* layer : {"loop", "ram", "zram", "dm-", "md"}) {
    if (absl::StartsWith(name, layer)) return false;
  }
  for (const DiskCounters& other : all) {
    absl::string_view rest = name;
    if (other.name == name || !absl::ConsumePrefix(&rest, other.name)) continue;
    absl::ConsumePrefix(&rest, "p");  // nvme0n1p1, mmcblk0p1
    if (!rest.empty() && std::all_of(rest.begin(), rest.end(), absl::ascii_isdigit)) return false;
  }
  return true;
}

absl::StatusOr<ProcessIo> ParseSelfIo(absl::string_view text) {
  ProcessIo io;
  const std::map<std::string, uint64_t*> wanted = {{"read_bytes", &io.read_bytes},
                                                   {"write_bytes", &io.write_bytes}};
  absl::Status st = ParseNamedLines(
      "self/io", text, wanted,
      [](const std::string& f, absl::string_view rest) { return CounterLine("self/io", f, rest); });
  if (!st.ok()) return st;
  return io;
}

absl::StatusOr<ContextSwitches> ParseContextSwitches(absl::string_view text) {
  ContextSwitches cs;
  const std::map<std::string, uint64_t*> wanted = {
      {"voluntary_ctxt_switches", &cs.voluntary}, {"nonvoluntary_ctxt_switches", &cs.nonvoluntary}};
  absl::Status st = ParseNamedLines("self/status", text, wanted,
                                    [](const std::string& f, absl::string_view rest) {
                                      return CounterLine("self/status", f, rest);
                                    });
  if (!st.ok()) return st;
  return cs;
}

absl::StatusOr<ThreadTimes> ParseThreadStat(absl::string_view text) {
  const size_t open = text.find('(');
  const size_t close = text.rfind(')');
  if (open == absl::string_view::npos || close == absl::string_view::npos || close < open) {
    return FieldError("task/stat", "field 2 (comm)", "is not enclosed in parentheses");
  }
  auto times = ParseSelfStat(text);  // proc_stats.h: the same layout as the process's stat
  if (!times.ok()) return times.status();
  ThreadTimes t;
  t.name = std::string(text.substr(open + 1, close - open - 1));
  t.user_ticks = times->user_ticks;
  t.system_ticks = times->system_ticks;
  return t;
}

}  // namespace fulcrum::profiler
