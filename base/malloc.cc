#include "base/malloc.h"

#include <malloc.h>
#include <unistd.h>

#include <climits>

#include "absl/strings/str_cat.h"

namespace fulcrum {

int64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? static_cast<int64_t>(pages) * page_size : 0;
}

absl::Status CheckFitsInMemory(double bytes, const std::string& what) {
  const int64_t physical = PhysicalMemoryBytes();
  if (physical <= 0 || bytes <= static_cast<double>(physical)) return absl::OkStatus();
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  return absl::InvalidArgumentError(absl::StrCat(what, " need ", absl::SixDigits(bytes / kGiB),
                                                 " GiB; this machine has ",
                                                 absl::SixDigits(physical / kGiB), " GiB"));
}

void TuneMallocForTraining() {
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum on 64-bit
}

}  // namespace fulcrum
