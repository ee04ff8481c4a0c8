// base: process set-up: logging over spdlog, allocator tuning. Call InitLogging once from main() before any
// thread starts; afterwards spdlog's default logger is thread-safe.
#pragma once

#include <string_view>

namespace fulcrum {

// Sets spdlog's default logger to stderr with a "[time] [task] [level] msg" pattern.
// `task` names the process in every line (e.g. "worker-1", "single").
void InitLogging(std::string_view task);

}  // namespace fulcrum

namespace fulcrum {

// Keeps freed memory in the process instead of returning it to the kernel after every step:
// without this glibc trims the heap top (and maps big blocks afresh) each time a GEMM frees
// its packing buffers, and the kernel spends ~20% of a logreg step zeroing the pages again.
// (The same as MALLOC_TRIM_THRESHOLD_/MALLOC_MMAP_THRESHOLD_, which BENCHMARKING.md gives
// PyTorch.) Call once from main() before allocating.
void TuneMallocForTraining();

}  // namespace fulcrum
