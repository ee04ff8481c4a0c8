#include "ops/cpu/kernels.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>
#ifdef FULCRUM_HAVE_OPENBLAS
#include <cblas.h>
#endif
#ifdef FULCRUM_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif
#ifdef FULCRUM_HAVE_LIBXSMM
#include <libxsmm.h>
#endif

#include "absl/strings/str_cat.h"

namespace fulcrum::ops {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const RowMatrix, Eigen::Unaligned>;
using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

ConstMatrixMap AsMatrix(const Tensor& t) { return ConstMatrixMap(t.data(), t.rows(), t.cols()); }
Eigen::Map<RowMatrix> AsMutableMatrix(Tensor* t) {
  return Eigen::Map<RowMatrix>(t->data(), t->rows(), t->cols());
}
ConstArrayMap AsArray(const Tensor& t) { return ConstArrayMap(t.data(), t.num_elements()); }
ArrayMap AsMutableArray(Tensor* t) { return ArrayMap(t->data(), t->num_elements()); }

absl::Status CheckCpu(const Tensor& t, const char* what) {
  if (t.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": tensor is empty"));
  if (t.device() != Device::kCpu) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": expected a cpu tensor, got ", DeviceName(t.device())));
  }
  return absl::OkStatus();
}

absl::Status CheckSameSize(const Tensor& a, const char* a_name, const Tensor& b,
                           const char* b_name) {
  if (a.num_elements() != b.num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat(a_name, " ", a.shape().ToString(), " and ",
                                                   b_name, " ", b.shape().ToString(),
                                                   " have different element counts"));
  }
  return absl::OkStatus();
}

absl::Status CheckUnary(const Tensor& x, const Tensor* y, const char* op) {
  if (y == nullptr) return absl::InvalidArgumentError(absl::StrCat(op, ": output is null"));
  if (auto s = CheckCpu(x, op); !s.ok()) return s;
  if (auto s = CheckCpu(*y, op); !s.ok()) return s;
  return CheckSameSize(x, "input", *y, "output");
}

absl::Status CheckGrad(const Tensor& y, const Tensor& dy, const Tensor* dx, const char* op) {
  if (auto s = CheckUnary(y, dx, op); !s.ok()) return s;
  if (auto s = CheckCpu(dy, op); !s.ok()) return s;
  return CheckSameSize(y, "y", dy, "dy");
}

absl::Status CheckLabels(const Tensor& logits, std::span<const int32_t> labels, const char* op) {
  if (auto s = CheckCpu(logits, op); !s.ok()) return s;
  if (static_cast<int64_t>(labels.size()) != logits.rows()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", labels.size(), " labels for ", logits.rows(), " rows of logits"));
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= logits.cols()) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": label ", labels[i], " at row ", i,
                                                     " is outside [0, ", logits.cols(), ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

template <typename A, typename B, typename C>
void Gemm(const A& a, const B& b, C& c, bool accumulate) {
  // noalias(): the output never overlaps the inputs, so Eigen writes straight into it.
  if (accumulate) {
    c.noalias() += a * b;
  } else {
    c.noalias() = a * b;
  }
}

#ifdef FULCRUM_HAVE_LIBXSMM
// libxsmm's JIT kernels, where they measured faster than OpenBLAS on the models' shapes
// (bench/gemm_bench.cc, docs/performance.md): products without a transposed b (libxsmm 1.17
// generates no kernel for that layout), except deep untransposed ones (mnist_cnn's 3136-deep
// dense layer ran 0-15 % slower on libxsmm than on OpenBLAS; the 100352-deep transposed
// filter gradient of its conv1 2.3x faster). FULCRUM_GEMM=openblas in the environment turns
// the path off (for measuring both in one build).
constexpr int64_t kMaxXsmmDepthUntransposed = 2048;

bool XsmmEnabled() {
  static const bool enabled = [] {
    const char* choice = std::getenv("FULCRUM_GEMM");
    if (choice != nullptr && std::strcmp(choice, "openblas") == 0) return false;
    libxsmm_init();
    return true;
  }();
  return enabled;
}

// Row-major c = op(a) op(b) is column-major c^T = op(b)^T op(a)^T: a kernel of M = n, N = m
// reading b's buffer as its first operand (no transpose when b is not transposed) and a's as
// its second (transposed when a is). False when no kernel fits (the caller uses OpenBLAS).
bool XsmmGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
              int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  if (trans_b || (!trans_a && k > kMaxXsmmDepthUntransposed) || !XsmmEnabled()) return false;
  const libxsmm_blasint mm = n, nn = m, kk = k;
  const libxsmm_blasint ld_first = ldb, ld_second = lda, ld_out = ldc;
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const int flags = trans_a ? LIBXSMM_GEMM_FLAG_TRANS_B : 0;
  const libxsmm_smmfunction kernel = libxsmm_smmdispatch(mm, nn, kk, &ld_first, &ld_second, &ld_out,
                                                         &alpha, &beta, &flags, nullptr);
  if (kernel == nullptr) return false;
  kernel(b, a, c);
  return true;
}
#endif

#ifdef FULCRUM_HAVE_OPENBLAS
// out[rows, cols] (+)= op(a) op(b) on libxsmm's JIT kernels where they win, else OpenBLAS, one
// thread: Fulcrum's pool splits the work. Pointers and leading dimensions are those of the
// row-major operands (see MatMul).
void BlasGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
              int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
#ifdef FULCRUM_HAVE_LIBXSMM
  if (XsmmGemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, accumulate)) return;
#endif
#ifdef FULCRUM_HAVE_ONEDNN
  // oneDNN's sgemm dispatches on the CPU's own ISA; Debian's OpenBLAS 0.3.21 does not know
  // CPUs newer than it (on a Sapphire Rapids VM it runs its SSE3 "Prescott" kernels, 2-3x
  // slower: docs/performance.md). Inside a ParallelFor part it runs on the calling thread.
  static const bool use_onednn = [] {
    const char* choice = std::getenv("FULCRUM_GEMM");
    return choice == nullptr || std::strcmp(choice, "openblas") != 0;
  }();
  if (use_onednn) {
    // One OpenMP thread: MatMul splits the work over the pool itself. Unbound, oneDNN's sgemm
    // opens a team of every core's thread on the calling thread, whose idle member spins after
    // each call: with the ps and other workers on the same cores a cluster worker's mlp backward
    // took 13.8 ms instead of 0.9 (perf: 80 % of the worker's samples in libgomp).
    ThreadPool::BindCallerThreads(1);
    dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb,
               accumulate ? 1.0f : 0.0f, c, ldc);
    return;
  }
#endif
  static const bool single_threaded = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)single_threaded;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb),
              accumulate ? 1.0f : 0.0f, c, static_cast<int>(ldc));
}
#endif

// [begin, begin + size) of part p when `total` is cut into `parts` near-equal parts.
std::pair<int64_t, int64_t> Part(int64_t total, int parts, int p) {
  const int64_t base = total / parts, extra = total % parts;
  const int64_t begin = p * base + std::min<int64_t>(p, extra);
  return {begin, base + (p < extra ? 1 : 0)};
}

// Runs fn(begin, size) over [0, n) in near-equal parts on the pool, one per thread, when n
// is large enough to pay for the handoff; else on the calling thread.
template <typename Fn>
void ForEachRange(int64_t n, ThreadPool* pool, const Fn& fn) {
  constexpr int64_t kMinPart = int64_t{1} << 15;
  const int parts =
      pool == nullptr ? 1 : static_cast<int>(std::min<int64_t>(pool->num_threads(), n / kMinPart));
  if (parts <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  pool->ParallelFor(parts, [&](int p) {
    const auto [begin, size] = Part(n, parts, p);
    fn(begin, size);
  });
}

}  // namespace

absl::Status MatMul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor* out,
                    bool accumulate, ThreadPool* pool) {
  if (out == nullptr) return absl::InvalidArgumentError("MatMul: output is null");
  for (const auto* t : {&a, &b, static_cast<const Tensor*>(out)}) {
    if (auto s = CheckCpu(*t, "MatMul"); !s.ok()) return s;
  }
  const int64_t m = trans_a ? a.cols() : a.rows();
  const int64_t k = trans_a ? a.rows() : a.cols();
  const int64_t kb = trans_b ? b.cols() : b.rows();
  const int64_t n = trans_b ? b.rows() : b.cols();
  if (k != kb || out->rows() != m || out->cols() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MatMul: shapes do not match: a ", a.shape().ToString(), trans_a ? "^T" : "", " * b ",
        b.shape().ToString(), trans_b ? "^T" : "", " -> out ", out->shape().ToString()));
  }
  int parts = pool == nullptr ? 1 : pool->num_threads();
  if (m * n * k < kMinParallelGemmWork * parts) parts = 1;
  // Split the longer side of out, so each part keeps a sizeable block of the product.
  const bool split_rows = m >= n;
  if (parts > std::max<int64_t>(1, split_rows ? m : n)) parts = 1;
#ifdef FULCRUM_HAVE_OPENBLAS
  if (m * n * k >= kMinBlasGemmWork) {
    // Row-major operands: a is [m, k] (lda = k) or [k, m] (lda = m); b is [k, n] (ldb = n) or
    // [n, k] (ldb = k). A block of rows of op(a) starts `begin` rows down a (or `begin`
    // columns across a^T); a block of columns of op(b) likewise.
    const int64_t lda = a.cols(), ldb = b.cols();
    auto part = [&](int64_t begin, int64_t size) {
      if (split_rows) {
        const float* ap = a.data() + (trans_a ? begin : begin * lda);
        BlasGemm(trans_a, trans_b, size, n, k, ap, lda, b.data(), ldb, out->data() + begin * n, n,
                 accumulate);
      } else {
        const float* bp = b.data() + (trans_b ? begin * ldb : begin);
        BlasGemm(trans_a, trans_b, m, size, k, a.data(), lda, bp, ldb, out->data() + begin, n,
                 accumulate);
      }
    };
    if (parts == 1) {
      part(0, split_rows ? m : n);
    } else {
      pool->ParallelFor(parts, [&](int p) {
        const auto [begin, size] = Part(split_rows ? m : n, parts, p);
        part(begin, size);
      });
    }
    return absl::OkStatus();
  }
#endif
  auto c = AsMutableMatrix(out);
  const auto am = AsMatrix(a);
  const auto bm = AsMatrix(b);
  auto run = [&](const auto& opa, const auto& opb) {
    if (parts == 1) {
      Gemm(opa, opb, c, accumulate);
      return;
    }
    pool->ParallelFor(parts, [&](int p) {
      const auto [begin, size] = Part(split_rows ? m : n, parts, p);
      if (split_rows) {
        auto block = c.middleRows(begin, size);
        Gemm(opa.middleRows(begin, size), opb, block, accumulate);
      } else {
        auto block = c.middleCols(begin, size);
        Gemm(opa, opb.middleCols(begin, size), block, accumulate);
      }
    });
  };
  if (!trans_a && !trans_b) run(am, bm);
  if (!trans_a && trans_b) run(am, bm.transpose());
  if (trans_a && !trans_b) run(am.transpose(), bm);
  if (trans_a && trans_b) run(am.transpose(), bm.transpose());
  return absl::OkStatus();
}

absl::Status BiasAdd(const Tensor& bias, Tensor* x) {
  if (x == nullptr) return absl::InvalidArgumentError("BiasAdd: x is null");
  if (auto s = CheckCpu(bias, "BiasAdd"); !s.ok()) return s;
  if (auto s = CheckCpu(*x, "BiasAdd"); !s.ok()) return s;
  if (bias.num_elements() != x->cols()) {
    return absl::InvalidArgumentError(absl::StrCat("BiasAdd: bias ", bias.shape().ToString(),
                                                   " does not match x ", x->shape().ToString()));
  }
  auto xm = AsMutableMatrix(x);
  const auto bv = Eigen::Map<const Eigen::RowVectorXf>(bias.data(), bias.num_elements());
  xm.rowwise() += bv;
  return absl::OkStatus();
}

absl::Status BiasAddGrad(const Tensor& dy, Tensor* dbias, bool accumulate) {
  if (dbias == nullptr) return absl::InvalidArgumentError("BiasAddGrad: dbias is null");
  if (auto s = CheckCpu(dy, "BiasAddGrad"); !s.ok()) return s;
  if (auto s = CheckCpu(*dbias, "BiasAddGrad"); !s.ok()) return s;
  if (dbias->num_elements() != dy.cols()) {
    return absl::InvalidArgumentError(absl::StrCat("BiasAddGrad: dbias ", dbias->shape().ToString(),
                                                   " does not match dy ", dy.shape().ToString()));
  }
  auto db = Eigen::Map<Eigen::RowVectorXf>(dbias->data(), dbias->num_elements());
  if (accumulate) {
    db += AsMatrix(dy).colwise().sum();
  } else {
    db = AsMatrix(dy).colwise().sum();
  }
  return absl::OkStatus();
}

absl::Status Relu(const Tensor& x, Tensor* y) {
  if (auto s = CheckUnary(x, y, "Relu"); !s.ok()) return s;
  AsMutableArray(y) = AsArray(x).max(0.0f);
  return absl::OkStatus();
}

absl::Status Sigmoid(const Tensor& x, Tensor* y) {
  if (auto s = CheckUnary(x, y, "Sigmoid"); !s.ok()) return s;
  // Eigen's logistic() is vectorised and saturates cleanly for large |x|.
  AsMutableArray(y) = AsArray(x).logistic();
  return absl::OkStatus();
}

absl::Status Tanh(const Tensor& x, Tensor* y) {
  if (auto s = CheckUnary(x, y, "Tanh"); !s.ok()) return s;
  AsMutableArray(y) = AsArray(x).tanh();
  return absl::OkStatus();
}

absl::Status ReluGrad(const Tensor& y, const Tensor& dy, Tensor* dx, ThreadPool* pool) {
  if (auto s = CheckGrad(y, dy, dx, "ReluGrad"); !s.ok()) return s;
  ForEachRange(y.num_elements(), pool, [&](int64_t b, int64_t n) {
    ArrayMap(dx->data() + b, n) =
        (ConstArrayMap(y.data() + b, n) > 0.0f).select(ConstArrayMap(dy.data() + b, n), 0.0f);
  });
  return absl::OkStatus();
}

absl::Status SigmoidGrad(const Tensor& y, const Tensor& dy, Tensor* dx, ThreadPool* pool) {
  if (auto s = CheckGrad(y, dy, dx, "SigmoidGrad"); !s.ok()) return s;
  ForEachRange(y.num_elements(), pool, [&](int64_t b, int64_t n) {
    const ConstArrayMap ya(y.data() + b, n);
    ArrayMap(dx->data() + b, n) = ConstArrayMap(dy.data() + b, n) * ya * (1.0f - ya);
  });
  return absl::OkStatus();
}

absl::Status TanhGrad(const Tensor& y, const Tensor& dy, Tensor* dx, ThreadPool* pool) {
  if (auto s = CheckGrad(y, dy, dx, "TanhGrad"); !s.ok()) return s;
  ForEachRange(y.num_elements(), pool, [&](int64_t b, int64_t n) {
    const ConstArrayMap ya(y.data() + b, n);
    ArrayMap(dx->data() + b, n) = ConstArrayMap(dy.data() + b, n) * (1.0f - ya.square());
  });
  return absl::OkStatus();
}

absl::StatusOr<float> SoftmaxCrossEntropy(const Tensor& logits, std::span<const int32_t> labels,
                                          Tensor* dlogits) {
  if (auto s = CheckLabels(logits, labels, "SoftmaxCrossEntropy"); !s.ok()) return s;
  if (dlogits != nullptr) {
    if (auto s = CheckCpu(*dlogits, "SoftmaxCrossEntropy"); !s.ok()) return s;
    if (auto s = CheckSameSize(logits, "logits", *dlogits, "dlogits"); !s.ok()) return s;
  }
  const int64_t rows = logits.rows();
  const int64_t cols = logits.cols();
  const float inv_rows = 1.0f / static_cast<float>(rows);
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const auto z = Eigen::Map<const Eigen::ArrayXf>(logits.data() + r * cols, cols);
    const float max = z.maxCoeff();
    // log-sum-exp shifted by the row max: exp never overflows, the sum is >= 1.
    const float sum = (z - max).exp().sum();
    const float log_sum = std::log(sum);
    const int32_t label = labels[static_cast<size_t>(r)];
    total += static_cast<double>(max + log_sum - z[label]);
    if (dlogits != nullptr) {
      auto g = Eigen::Map<Eigen::ArrayXf>(dlogits->data() + r * cols, cols);
      g = (z - max - log_sum).exp() * inv_rows;
      g[label] -= inv_rows;
    }
  }
  return static_cast<float>(total / static_cast<double>(rows));
}

absl::StatusOr<float> MeanSquaredError(const Tensor& pred, const Tensor& target, Tensor* dpred) {
  if (auto s = CheckCpu(pred, "MeanSquaredError"); !s.ok()) return s;
  if (auto s = CheckCpu(target, "MeanSquaredError"); !s.ok()) return s;
  if (auto s = CheckSameSize(pred, "pred", target, "target"); !s.ok()) return s;
  const auto p = AsArray(pred);
  const auto t = AsArray(target);
  const float n = static_cast<float>(pred.num_elements());
  if (dpred != nullptr) {
    if (auto s = CheckCpu(*dpred, "MeanSquaredError"); !s.ok()) return s;
    if (auto s = CheckSameSize(pred, "pred", *dpred, "dpred"); !s.ok()) return s;
    AsMutableArray(dpred) = (p - t) * (2.0f / n);
  }
  // Sum per row in float (vectorised), accumulate rows in double for accuracy on big tensors.
  double total = 0.0;
  const int64_t cols = pred.cols();
  for (int64_t r = 0; r < pred.rows(); ++r) {
    const auto pr = Eigen::Map<const Eigen::ArrayXf>(pred.data() + r * cols, cols);
    const auto tr = Eigen::Map<const Eigen::ArrayXf>(target.data() + r * cols, cols);
    total += static_cast<double>((pr - tr).square().sum());
  }
  return static_cast<float>(total / static_cast<double>(n));
}

absl::Status ArgMaxRows(const Tensor& x, std::span<int32_t> out) {
  if (auto s = CheckCpu(x, "ArgMaxRows"); !s.ok()) return s;
  if (static_cast<int64_t>(out.size()) != x.rows()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ArgMaxRows: output has ", out.size(), " slots for ", x.rows(), " rows"));
  }
  const int64_t cols = x.cols();
  for (int64_t r = 0; r < x.rows(); ++r) {
    const float* row = x.data() + r * cols;
    out[static_cast<size_t>(r)] = static_cast<int32_t>(std::max_element(row, row + cols) - row);
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> CountCorrect(const Tensor& logits, std::span<const int32_t> labels) {
  if (auto s = CheckLabels(logits, labels, "CountCorrect"); !s.ok()) return s;
  std::vector<int32_t> predicted(static_cast<size_t>(logits.rows()));
  if (auto s = ArgMaxRows(logits, predicted); !s.ok()) return s;
  int64_t correct = 0;
  for (size_t i = 0; i < predicted.size(); ++i) correct += predicted[i] == labels[i];
  return correct;
}

double SumSquares(const Tensor& x) {
  double total = 0.0;
  for (float v : x.flat()) total += static_cast<double>(v) * v;
  return total;
}

}  // namespace fulcrum::ops
