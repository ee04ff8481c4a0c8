#include "base/malloc.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace fulcrum {

int64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? static_cast<int64_t>(pages) * page_size : 0;
}

int64_t AvailableMemoryBytes() {
  FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return -1;
  char line[256];
  int64_t kib = -1;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    long long v = 0;
    if (std::sscanf(line, "MemAvailable: %lld kB", &v) == 1) {
      kib = v;
      break;
    }
  }
  std::fclose(f);
  return kib < 0 ? -1 : kib * 1024;
}

absl::Status CheckFitsInMemory(double bytes, const std::string& what) {
  const int64_t physical = PhysicalMemoryBytes();
  if (physical <= 0 || bytes <= static_cast<double>(physical)) return absl::OkStatus();
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  return absl::InvalidArgumentError(absl::StrCat(what, " need ", absl::SixDigits(bytes / kGiB),
                                                 " GiB; this machine has ",
                                                 absl::SixDigits(physical / kGiB), " GiB"));
}

namespace {

// The process's resident bytes (/proc/self/statm's second field); 0 when unreadable.
int64_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long long pages_total = 0, pages_resident = 0;
  const int read = std::fscanf(f, "%lld %lld", &pages_total, &pages_resident);
  std::fclose(f);
  return read == 2 ? pages_resident * sysconf(_SC_PAGESIZE) : 0;
}

}  // namespace

int64_t ReturnFreeMemoryAbove(int64_t slack) {
  static int64_t free_after_last_trim = 0;
  static int64_t resident_after_last_trim = 0;
  const auto free_bytes = static_cast<int64_t>(mallinfo2().fordblks);
  // Freed memory taken again lowers the level; the next burst is measured from there.
  free_after_last_trim = std::min(free_after_last_trim, free_bytes);
  // Free chunks a burst touched again and freed again leave the free total where it was but
  // are resident once more: the process's own growth since the last trim tells them.
  const int64_t resident = ResidentBytes();
  const bool regrown = free_bytes > slack && resident - resident_after_last_trim > slack;
  // A free total above the slack that nothing has taken from for three calls in a row, and
  // that no trim has seen: what a burst left after a trim in its middle (the level and the
  // resident size were measured then, so neither test above fires again).
  static int64_t previous_free = 0;
  static int quiet_calls = 0;
  quiet_calls = free_bytes > slack && free_bytes >= previous_free ? quiet_calls + 1 : 0;
  previous_free = free_bytes;
  const bool quiet = quiet_calls >= 3 && free_bytes != free_after_last_trim;
  if (free_bytes - free_after_last_trim <= slack && !regrown && !quiet) return 0;
  malloc_trim(0);  // every arena; pages inside free chunks too (glibc >= 2.8)
  free_after_last_trim = free_bytes;
  resident_after_last_trim = ResidentBytes();
  return free_bytes;
}

void TuneMallocForTraining() {
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum on 64-bit
}

}  // namespace fulcrum
