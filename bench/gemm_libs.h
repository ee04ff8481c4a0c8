// bench: row-major SGEMM through the other libraries gemm_bench measures (BLIS, oneDNN,
// libxsmm), each in its own translation unit so their headers never meet OpenBLAS's cblas.h.
// Every call: c[m, n] = op(a) op(b), op(x) = x^T when the flag says so, one thread.
// Returns false when the library cannot run the shape (libxsmm's JIT covers small ones only).
#pragma once

#include <cstdint>

namespace fulcrum::bench {

bool BlisSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
               const float* b, float* c);
bool OneDnnSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                 const float* b, float* c);
bool LibxsmmSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                  const float* b, float* c);
// Every library single-threaded (BLIS and oneDNN are Debian's OpenMP builds).
void SingleThreadedLibraries();

}  // namespace fulcrum::bench
