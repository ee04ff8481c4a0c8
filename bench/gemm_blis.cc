#include <blis.h>

#include "bench/gemm_libs.h"

namespace fulcrum::bench {

// BLIS's typed API takes each operand's row and column strides, so row-major needs no
// transposition tricks: a stored [m, k] (or [k, m] when transposed) has strides (cols, 1).
bool BlisSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
               const float* b, float* c) {
  float alpha = 1.0f, beta = 0.0f;
  const inc_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
  bli_sgemm(trans_a ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE,
            trans_b ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, m, n, k, &alpha, const_cast<float*>(a),
            lda, 1, const_cast<float*>(b), ldb, 1, &beta, c, n, 1);
  return true;
}

}  // namespace fulcrum::bench
