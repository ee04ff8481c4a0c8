#include "profiler/proc_stats.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "profiler/proc_text.h"

namespace fulcrum::profiler {
namespace {

using proc_text::FieldError;
using proc_text::Fields;
using proc_text::ParseCounter;
using proc_text::ParseKbLine;

// /proc files report a size of 0 and are generated as they are read, so they are read whole
// with read(2) until EOF rather than sized with stat or mapped.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string message = absl::StrCat("cannot open ", path, ": ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(message) : absl::UnavailableError(message);
  }
  std::string text;
  char buffer[8192];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return absl::UnavailableError(absl::StrCat("cannot read ", path, ": ", std::strerror(err)));
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

// Reads `root`/name; with `pid` > 0, "self/x" is read as `root`/PID/x and "net/x" as
// `root`/PID/net/x.
class FileProcSource : public ProcSource {
 public:
  FileProcSource(std::string root, int64_t ticks_per_second, int pid = 0)
      : root_(std::move(root)), ticks_per_second_(ticks_per_second), pid_(pid) {}

  absl::StatusOr<std::string> Read(absl::string_view name) override {
    return ReadWholeFile(Path(name));
  }
  int64_t ClockTicksPerSecond() const override { return ticks_per_second_; }

  absl::StatusOr<std::vector<std::string>> List(absl::string_view name) override {
    const std::string path = Path(name);
    DIR* dir = ::opendir(path.c_str());
    if (dir == nullptr) {
      const int err = errno;
      const std::string message = absl::StrCat("cannot list ", path, ": ", std::strerror(err));
      return err == ENOENT ? absl::NotFoundError(message) : absl::UnavailableError(message);
    }
    std::vector<std::string> names;
    while (const dirent* entry = ::readdir(dir)) {
      const absl::string_view n = entry->d_name;
      if (n != "." && n != "..") names.emplace_back(n);
    }
    ::closedir(dir);
    return names;
  }

 private:
  std::string Path(absl::string_view name) const {
    absl::string_view rest = name;
    if (pid_ > 0 && absl::ConsumePrefix(&rest, "self/"))
      return absl::StrCat(root_, "/", pid_, "/", rest);
    if (pid_ > 0 && absl::StartsWith(name, "net/"))
      return absl::StrCat(root_, "/", pid_, "/", name);
    return absl::StrCat(root_, "/", name);
  }

  const std::string root_;
  const int64_t ticks_per_second_;
  const int pid_;
};

}  // namespace

std::unique_ptr<ProcSource> LiveProcSource() {
  // /proc/net/dev is a link to /proc/self/net/dev, so it follows the namespace of the reading
  // thread, which is the process's unless someone setns()es a single thread.
  return std::make_unique<FileProcSource>("/proc", static_cast<int64_t>(::sysconf(_SC_CLK_TCK)));
}

std::unique_ptr<ProcSource> PidProcSource(int pid) {
  return std::make_unique<FileProcSource>("/proc", static_cast<int64_t>(::sysconf(_SC_CLK_TCK)),
                                          pid);
}

std::unique_ptr<ProcSource> DirProcSource(std::string dir, int64_t ticks_per_second) {
  return std::make_unique<FileProcSource>(std::move(dir), ticks_per_second);
}

absl::StatusOr<ProcessTimes> ParseSelfStat(absl::string_view text) {
  // comm (field 2) is any 16 bytes in parentheses, ')' and spaces included; only the last ')'
  // in the line closes it, as proc(5) recommends.
  const size_t open = text.find('(');
  const size_t close = text.rfind(')');
  if (open == absl::string_view::npos || close == absl::string_view::npos || close < open) {
    return FieldError("self/stat", "field 2 (comm)", "is not enclosed in parentheses");
  }
  // After ')' the fields start at 3 (state); utime is 14 and stime 15.
  const std::vector<absl::string_view> fields = Fields(text.substr(close + 1));
  constexpr size_t kUtime = 14 - 3;
  constexpr size_t kStime = 15 - 3;
  if (fields.size() <= kStime) {
    return FieldError("self/stat", "field 15 (stime)",
                      absl::StrCat("is missing: only ", fields.size() + 2, " fields"));
  }
  ProcessTimes times;
  auto user = ParseCounter("self/stat", "field 14 (utime)", fields[kUtime]);
  if (!user.ok()) return user.status();
  auto system = ParseCounter("self/stat", "field 15 (stime)", fields[kStime]);
  if (!system.ok()) return system.status();
  times.user_ticks = *user;
  times.system_ticks = *system;
  return times;
}

absl::StatusOr<std::vector<CoreTimes>> ParseCpuStat(absl::string_view text) {
  // Column order of a cpuN line: user nice system idle iowait irq softirq steal guest
  // guest_nice. guest and guest_nice are already inside user and nice, so they are not added.
  static constexpr const char* kColumns[] = {"user",   "nice", "system",  "idle",
                                             "iowait", "irq",  "softirq", "steal"};
  constexpr size_t kIdle = 3;
  constexpr size_t kIowait = 4;
  std::vector<CoreTimes> cores;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    const std::vector<absl::string_view> fields = Fields(line);
    absl::string_view label = fields.empty() ? "" : fields[0];
    if (!absl::ConsumePrefix(&label, "cpu") || label.empty() || !absl::ascii_isdigit(label[0])) {
      continue;  // not a cpuN line (the aggregate "cpu" line, intr, ctxt, ...)
    }
    CoreTimes core;
    if (!absl::SimpleAtoi(label, &core.core) || core.core < 0) {
      return FieldError("stat", absl::StrCat("line '", line, "'"), "has no core number");
    }
    // Kernels before 2.6.11 lack steal (and older ones iowait, irq, softirq): missing = 0.
    if (fields.size() < 1 + kIowait) {
      return FieldError("stat", absl::StrCat("cpu", core.core),
                        absl::StrCat("has ", fields.size() - 1, " columns, want at least 4"));
    }
    for (size_t i = 0; i < std::size(kColumns) && i + 1 < fields.size(); ++i) {
      auto value =
          ParseCounter("stat", absl::StrCat("cpu", core.core, " ", kColumns[i]), fields[i + 1]);
      if (!value.ok()) return value.status();
      if (i != kIdle && i != kIowait) core.busy += *value;
      core.total += *value;
    }
    cores.push_back(core);
  }
  if (cores.empty()) return FieldError("stat", "cpuN lines", "are missing");
  return cores;
}

absl::StatusOr<MemoryStatus> ParseSelfStatus(absl::string_view text) {
  bool have_rss = false;
  bool have_hwm = false;
  MemoryStatus memory;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&line, "VmRSS:")) {
      auto bytes = ParseKbLine("self/status", "VmRSS", line);
      if (!bytes.ok()) return bytes.status();
      memory.rss_bytes = *bytes;
      have_rss = true;
    } else if (absl::ConsumePrefix(&line, "VmHWM:")) {
      auto bytes = ParseKbLine("self/status", "VmHWM", line);
      if (!bytes.ok()) return bytes.status();
      memory.peak_rss_bytes = *bytes;
      have_hwm = true;
    }
  }
  if (!have_rss) return FieldError("self/status", "VmRSS", "is missing");
  if (!have_hwm) return FieldError("self/status", "VmHWM", "is missing");
  return memory;
}

absl::StatusOr<std::vector<InterfaceCounters>> ParseNetDev(absl::string_view text) {
  // Receive: bytes packets errs drop fifo frame compressed multicast; then Transmit: bytes
  // packets errs drop fifo colls carrier compressed.
  constexpr size_t kColumns = 16;
  constexpr size_t kRxBytes = 0, kRxPackets = 1, kRxErrs = 2, kRxDrop = 3, kTxBytes = 8,
                   kTxPackets = 9, kTxErrs = 10, kTxDrop = 11;
  std::vector<InterfaceCounters> interfaces;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::StripAsciiWhitespace(line).empty() || line.find('|') != absl::string_view::npos) {
      continue;  // the two header lines
    }
    // Interface names cannot contain ':' (dev_valid_name), and old kernels print large rx
    // byte counts glued to it ("eth0:123"), so the first ':' ends the name.
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) {
      return FieldError("net/dev", absl::StrCat("line '", line, "'"), "has no 'name:'");
    }
    InterfaceCounters counters;
    counters.name = std::string(absl::StripAsciiWhitespace(line.substr(0, colon)));
    if (counters.name.empty()) {
      return FieldError("net/dev", absl::StrCat("line '", line, "'"), "has an empty name");
    }
    const std::vector<absl::string_view> fields = Fields(line.substr(colon + 1));
    if (fields.size() < kColumns) {
      return FieldError("net/dev", counters.name,
                        absl::StrCat("has ", fields.size(), " columns, want ", kColumns));
    }
    const std::pair<size_t, uint64_t*> wanted[] = {
        {kRxBytes, &counters.rx_bytes}, {kRxPackets, &counters.rx_packets},
        {kTxBytes, &counters.tx_bytes}, {kTxPackets, &counters.tx_packets},
        {kRxErrs, &counters.rx_errors}, {kRxDrop, &counters.rx_drops},
        {kTxErrs, &counters.tx_errors}, {kTxDrop, &counters.tx_drops}};
    static constexpr const char* kNames[] = {"rx bytes", "rx packets", "tx bytes", "tx packets",
                                             "rx errs",  "rx drop",    "tx errs",  "tx drop"};
    for (size_t i = 0; i < std::size(wanted); ++i) {
      auto value = ParseCounter("net/dev", absl::StrCat(counters.name, " ", kNames[i]),
                                fields[wanted[i].first]);
      if (!value.ok()) return value.status();
      *wanted[i].second = *value;
    }
    interfaces.push_back(std::move(counters));
  }
  return interfaces;
}

uint64_t CounterDelta(uint64_t before, uint64_t after) {
  constexpr uint64_t k32 = uint64_t{1} << 32;
  if (after >= before) return after - before;
  if (before < k32 && after < k32) return k32 - before + after;
  return after - before;  // unsigned arithmetic is modulo 2^64
}

}  // namespace fulcrum::profiler
