#include "base/malloc.h"

#include <malloc.h>

#include <climits>

namespace fulcrum {

void TuneMallocForTraining() {
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum on 64-bit
}

}  // namespace fulcrum
