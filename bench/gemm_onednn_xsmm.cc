#include <dnnl.h>
#include <libxsmm.h>

#include <map>
#include <tuple>

#include "bench/gemm_libs.h"

extern "C" void omp_set_num_threads(int num_threads);
extern "C" void bli_thread_set_num_threads(int64_t value);

namespace fulcrum::bench {

void SingleThreadedLibraries() {
  omp_set_num_threads(1);
  bli_thread_set_num_threads(1);
  libxsmm_init();
}

// oneDNN's BLAS-like SGEMM is row-major already.
bool OneDnnSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                 const float* b, float* c) {
  return dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a, trans_a ? m : k, b,
                    trans_b ? k : n, 0.0f, c, n) == dnnl_success;
}

// libxsmm is column-major: row-major c = op(a) op(b) is column-major c^T = op(b)^T op(a)^T,
// i.e. a kernel (m' = n, n' = m) reading b's buffer first. Kernels are JIT-generated once per
// shape; NULL (not generated) for shapes outside libxsmm's small-matrix range.
bool LibxsmmSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                  const float* b, float* c) {
  static std::map<std::tuple<bool, bool, int64_t, int64_t, int64_t>, libxsmm_smmfunction> cache;
  auto key = std::make_tuple(trans_a, trans_b, m, n, k);
  auto it = cache.find(key);
  if (it == cache.end()) {
    const libxsmm_blasint mm = n, nn = m, kk = k;
    const libxsmm_blasint lda = trans_b ? k : n, ldb = trans_a ? m : k, ldc = n;
    const float alpha = 1.0f, beta = 0.0f;
    const int flags =
        (trans_b ? LIBXSMM_GEMM_FLAG_TRANS_A : 0) | (trans_a ? LIBXSMM_GEMM_FLAG_TRANS_B : 0);
    it = cache
             .emplace(key, libxsmm_smmdispatch(mm, nn, kk, &lda, &ldb, &ldc, &alpha, &beta, &flags,
                                               nullptr))
             .first;
  }
  if (it->second == nullptr) return false;
  it->second(b, a, c);
  return true;
}

}  // namespace fulcrum::bench
