// base: allocator tuning for training processes.
// Thread-safety: call once from main() before other threads start.
#pragma once

namespace fulcrum {

// Keeps freed memory in the process instead of returning it to the kernel after every step:
// without this glibc trims the heap top (and maps big blocks afresh) each time a GEMM frees
// its packing buffers, and the kernel spends ~20% of a logreg step zeroing the pages again.
// (The same as MALLOC_TRIM_THRESHOLD_/MALLOC_MMAP_THRESHOLD_, which docs/performance.md gives
// PyTorch.) Call once from main() before allocating.
void TuneMallocForTraining();

}  // namespace fulcrum
