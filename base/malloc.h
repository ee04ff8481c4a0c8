// base: allocator tuning for training processes.
// Thread-safety: call once from main() before other threads start.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace fulcrum {

// Keeps freed memory in the process instead of returning it to the kernel after every step:
// without this glibc trims the heap top (and maps big blocks afresh) each time a GEMM frees
// its packing buffers, and the kernel spends ~20% of a logreg step zeroing the pages again.
// (The same as MALLOC_TRIM_THRESHOLD_/MALLOC_MMAP_THRESHOLD_, which docs/performance.md gives
// PyTorch.) Call once from main() before allocating.
void TuneMallocForTraining();

// This machine's physical memory in bytes (sysconf), or 0 when it cannot be read.
int64_t PhysicalMemoryBytes();

// OK when `bytes` (a double, so absurd requests do not overflow) fits in this machine's
// physical memory; otherwise InvalidArgument "<what> need(s) X GiB; this machine has Y GiB".
// For checking what a flag or a request asks for before allocating it.
absl::Status CheckFitsInMemory(double bytes, const std::string& what);

}  // namespace fulcrum
