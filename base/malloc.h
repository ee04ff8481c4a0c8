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

// Gives the allocator's free memory back to the kernel (malloc_trim) once it has grown by
// more than `slack` bytes since the last time, once the process's resident memory has
// (with more than `slack` free: freed chunks a burst touched again), or once more than
// `slack` has lain free untouched for three calls without a trim having seen it (a burst
// that a trim caught in its middle): a server that keeps freed memory for speed
// (TuneMallocForTraining) must not keep a burst's forever (four 200 MiB requests once left a
// ps at 1.9 GB). Returns the free bytes the allocator held when it trimmed, 0 when it did not.
// Call from one thread, periodically.
int64_t ReturnFreeMemoryAbove(int64_t slack);

// This machine's physical memory in bytes (sysconf), or 0 when it cannot be read.
int64_t PhysicalMemoryBytes();
// What the kernel says could be allocated now without swapping (/proc/meminfo's
// MemAvailable), in bytes; -1 when unreadable.
int64_t AvailableMemoryBytes();

// OK when `bytes` (a double, so absurd requests do not overflow) fits in this machine's
// physical memory; otherwise InvalidArgument "<what> need(s) X GiB; this machine has Y GiB".
// For checking what a flag or a request asks for before allocating it.
absl::Status CheckFitsInMemory(double bytes, const std::string& what);

}  // namespace fulcrum
