#include "ops/cuda/gemm_plan.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace fulcrum::ops::cuda {

namespace {

absl::Status CheckOperand(const Tensor* t, Device device, absl::string_view name) {
  if (t == nullptr || t->empty()) {
    return absl::InvalidArgumentError(absl::StrCat("MatMul: ", name, " is null or empty"));
  }
  if (t->device() != device) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MatMul: ", name, " is on ", DeviceName(t->device()), ", expected ", DeviceName(device)));
  }
  return absl::OkStatus();
}

// "[r, c]" of the 2-D view a kernel sees (tensor shapes may have any rank).
std::string Dims(int64_t rows, int64_t cols) { return absl::StrCat("[", rows, ", ", cols, "]"); }

bool FitsInt(int64_t v) { return v <= std::numeric_limits<int>::max(); }

}  // namespace

absl::Status CheckMatMulDevices(const Tensor& a, const Tensor& b, const Tensor* out,
                                Device device) {
  if (absl::Status s = CheckOperand(&a, device, "a"); !s.ok()) return s;
  if (absl::Status s = CheckOperand(&b, device, "b"); !s.ok()) return s;
  return CheckOperand(out, device, "out");
}

absl::StatusOr<ColumnMajorGemm> PlanRowMajorMatMul(const Tensor& a, bool trans_a, const Tensor& b,
                                                   bool trans_b, const Tensor& out) {
  const int64_t m = trans_a ? a.cols() : a.rows();
  const int64_t k = trans_a ? a.rows() : a.cols();
  const int64_t k_b = trans_b ? b.cols() : b.rows();
  const int64_t n = trans_b ? b.rows() : b.cols();
  if (k != k_b) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MatMul: inner dimensions differ: op(a) is ", Dims(m, k), " (a ", a.shape().ToString(),
        trans_a ? ", transposed" : "", "), op(b) is ", Dims(k_b, n), " (b ", b.shape().ToString(),
        trans_b ? ", transposed" : "", ")"));
  }
  if (out.rows() != m || out.cols() != n) {
    return absl::InvalidArgumentError(absl::StrCat("MatMul: out is ", out.shape().ToString(),
                                                   ", expected ", Dims(m, n), " = op(a) ",
                                                   Dims(m, k), " * op(b) ", Dims(k, n)));
  }
  for (int64_t v : {a.rows(), a.cols(), b.rows(), b.cols(), out.rows(), out.cols()}) {
    if (!FitsInt(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("MatMul: dimension ", v, " exceeds the int range of cublasSgemm"));
    }
  }
  ColumnMajorGemm g;
  g.trans_x = trans_b;  // op(X) must be op(b)^T; X read column-major is already b^T.
  g.trans_y = trans_a;  // likewise op(Y) = op(a)^T.
  g.m = static_cast<int>(n);
  g.n = static_cast<int>(m);
  g.k = static_cast<int>(k);
  g.ldx = static_cast<int>(b.cols());
  g.ldy = static_cast<int>(a.cols());
  g.ldc = static_cast<int>(n);
  return g;
}

}  // namespace fulcrum::ops::cuda
