#include "ops/cpu/conv.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ops/cpu/kernels.h"

namespace fulcrum::ops {
namespace {

// Without a caller workspace, one GEMM takes enough images for about this many im2col rows
// (so a 2-thread pool has work to split), within kMaxColElements floats of scratch.
constexpr int64_t kTargetColRows = 4096;
constexpr int64_t kMaxColElements = int64_t{1} << 23;  // 32 MiB

absl::Status CheckCpu(const Tensor* t, absl::string_view name, const char* what) {
  if (t == nullptr) return absl::InvalidArgumentError(absl::StrCat(name, ": ", what, " is null"));
  if (t->empty()) return absl::InvalidArgumentError(absl::StrCat(name, ": ", what, " is empty"));
  if (t->device() != Device::kCpu) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", what, " is a ", DeviceName(t->device()), " tensor, expected cpu"));
  }
  return absl::OkStatus();
}

absl::Status CheckShape(const Tensor& t, const Shape& want, absl::string_view name,
                        const char* what) {
  if (t.shape() == want) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(name, ": ", what, " is ", t.shape().ToString(), ", expected ", want.ToString()));
}

// True when im2col is the identity (1x1 kernel, stride 1, no padding): x is the col matrix.
bool IsPointwise(const Conv2DGeometry& g) {
  return g.kernel_h == 1 && g.kernel_w == 1 && g.stride_h == 1 && g.stride_w == 1 &&
         g.pad_top == 0 && g.pad_left == 0;
}

// Copies image x: [H, W, C_in] into col: [OH * OW, KH * KW * C_in], zeros where padded.
// The kernel columns [kw_begin, kw_end) that read inside the image for output column ow.
// Consecutive kernel columns read consecutive input columns (no dilation), so the valid part
// of a window row is one contiguous run of (kw_end - kw_begin) * C floats of the input.
void ValidKernelColumns(const Conv2DGeometry& g, int64_t ow, int64_t* kw_begin, int64_t* kw_end) {
  const int64_t iw0 = ow * g.stride_w - g.pad_left;
  *kw_begin = std::clamp<int64_t>(-iw0, 0, g.kernel_w);
  *kw_end = std::clamp<int64_t>(g.in_w - iw0, *kw_begin, g.kernel_w);
}

// col: [OH * OW, KH * KW * C_in] rows of the image x: [H, W, C_in]; zeros where the window
// leaves the image. Each window row is copied as one run.
void Im2ColImage(const Conv2DGeometry& g, const float* x, float* col) {
  const int64_t c = g.in_c;
  for (int64_t oh = 0; oh < g.out_h; ++oh) {
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      float* row = col + (oh * g.out_w + ow) * g.col_cols();
      int64_t kw_begin = 0, kw_end = 0;
      ValidKernelColumns(g, ow, &kw_begin, &kw_end);
      const int64_t iw0 = ow * g.stride_w - g.pad_left;
      for (int64_t kh = 0; kh < g.kernel_h; ++kh, row += g.kernel_w * c) {
        const int64_t ih = oh * g.stride_h - g.pad_top + kh;
        if (ih < 0 || ih >= g.in_h || kw_begin == kw_end) {
          std::fill(row, row + g.kernel_w * c, 0.0f);
          continue;
        }
        std::fill(row, row + kw_begin * c, 0.0f);
        std::memcpy(row + kw_begin * c, x + (ih * g.in_w + iw0 + kw_begin) * c,
                    static_cast<size_t>((kw_end - kw_begin) * c) * sizeof(float));
        std::fill(row + kw_end * c, row + g.kernel_w * c, 0.0f);
      }
    }
  }
}

// The adjoint of Im2ColImage: dx: [H, W, C_in] = sum of col's entries over where they came from.
void Col2ImImage(const Conv2DGeometry& g, const float* col, float* dx) {
  const int64_t c = g.in_c;
  std::fill(dx, dx + g.in_h * g.in_w * c, 0.0f);
  for (int64_t oh = 0; oh < g.out_h; ++oh) {
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      const float* row = col + (oh * g.out_w + ow) * g.col_cols();
      int64_t kw_begin = 0, kw_end = 0;
      ValidKernelColumns(g, ow, &kw_begin, &kw_end);
      const int64_t iw0 = ow * g.stride_w - g.pad_left;
      for (int64_t kh = 0; kh < g.kernel_h; ++kh, row += g.kernel_w * c) {
        const int64_t ih = oh * g.stride_h - g.pad_top + kh;
        if (ih < 0 || ih >= g.in_h) continue;
        const float* src = row + kw_begin * c;
        float* dst = dx + (ih * g.in_w + iw0 + kw_begin) * c;
        const int64_t n = (kw_end - kw_begin) * c;
        for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
      }
    }
  }
}

// Runs fn(i) for i in [0, n), on the pool when there is one.
template <typename Fn>
void ForEachImage(ThreadPool* pool, int64_t n, const Fn& fn) {
  if (pool == nullptr || pool->num_threads() <= 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  pool->ParallelFor(static_cast<int>(n), [&](int i) { fn(i); });
}

}  // namespace

int64_t Conv2DPreferredWorkspaceElements(const Conv2DGeometry& g) {
  const int64_t per_image = Conv2DWorkspaceElements(g, 1);
  const int64_t by_rows = (kTargetColRows + g.col_rows() - 1) / g.col_rows();
  const int64_t images =
      std::clamp<int64_t>(std::min(by_rows, kMaxColElements / per_image), 1, g.batch);
  return images * per_image;
}

namespace {

// The im2col scratch: the caller's workspace, or a new buffer; `images` is how many images
// it holds.
absl::Status ColBuffer(const Conv2DGeometry& g, Tensor* workspace, absl::string_view name,
                       Tensor* col, int64_t* images) {
  const int64_t per_image = Conv2DWorkspaceElements(g, 1);
  if (workspace != nullptr) {
    if (auto s = CheckCpu(workspace, name, "workspace"); !s.ok()) return s;
    if (workspace->num_elements() < per_image) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": workspace has ",
                                                     workspace->num_elements(),
                                                     " floats, one image needs ", per_image));
    }
    *images = std::min(g.batch, workspace->num_elements() / per_image);
    *col = *workspace;
    return absl::OkStatus();
  }
  *images = Conv2DPreferredWorkspaceElements(g) / per_image;
  *col = Tensor::Zeros({*images * per_image});
  return absl::OkStatus();
}

// A 2-D view [rows, cols] of the first rows * cols floats of t. Tensor has no const view, so
// these drop const; a view of an input is only ever passed to MatMul as an input.
Tensor Matrix(const Tensor& t, int64_t rows, int64_t cols) {
  return Tensor::View(const_cast<float*>(t.data()), Shape({rows, cols}));
}

// Images [n0, n0 + count) of a [N, ...] tensor as the matrix [count * rows_per_image, cols].
Tensor ImageRows(const Tensor& t, int64_t n0, int64_t count, int64_t rows_per_image, int64_t cols) {
  return Tensor::View(const_cast<float*>(t.data()) + n0 * rows_per_image * cols,
                      Shape({count * rows_per_image, cols}));
}

// im2col of images [n0, n0 + count) of x into col (or x itself when pointwise).
Tensor Im2Col(const Conv2DGeometry& g, const Tensor& x, int64_t n0, int64_t count,
              const Tensor& col, ThreadPool* pool) {
  if (IsPointwise(g)) return ImageRows(x, n0, count, g.col_rows(), g.col_cols());
  const int64_t in_image = g.in_h * g.in_w * g.in_c;
  const int64_t col_image = Conv2DWorkspaceElements(g, 1);
  float* cols = const_cast<float*>(col.data());
  ForEachImage(pool, count, [&](int64_t i) {
    Im2ColImage(g, x.data() + (n0 + i) * in_image, cols + i * col_image);
  });
  return Matrix(col, count * g.col_rows(), g.col_cols());
}

}  // namespace

const char* PaddingName(Padding padding) { return padding == Padding::kSame ? "SAME" : "VALID"; }

absl::Status ConvOutputSize(int64_t in, int64_t kernel, int64_t stride, Padding padding,
                            const std::string& what, int64_t* out, int64_t* pad_before) {
  if (in <= 0 || kernel <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": input size ", in, " and kernel size ", kernel, " must be positive"));
  }
  if (stride <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": stride is ", stride, ", must be positive"));
  }
  if (padding == Padding::kValid) {
    if (kernel > in) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": kernel ", kernel, " is larger than the input ", in, " with VALID padding"));
    }
    *out = (in - kernel) / stride + 1;
    *pad_before = 0;
    return absl::OkStatus();
  }
  *out = (in + stride - 1) / stride;
  const int64_t pad_total = std::max<int64_t>((*out - 1) * stride + kernel - in, 0);
  *pad_before = pad_total / 2;
  return absl::OkStatus();
}

absl::StatusOr<Conv2DGeometry> Conv2DGeometryFor(const Shape& x, const Shape& filter,
                                                 const Conv2DParams& params,
                                                 absl::string_view name) {
  if (x.rank() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": input ", x.ToString(), " is not [N, H, W, C_in]"));
  }
  if (filter.rank() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": filter ", filter.ToString(), " is not [KH, KW, C_in, C_out]"));
  }
  if (auto s = ValidateShape(x, "input"); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", s.message()));
  }
  if (auto s = ValidateShape(filter, "filter"); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", s.message()));
  }
  if (filter.dim(2) != x.dim(3)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": filter ", filter.ToString(), " expects ", filter.dim(2),
                     " input channels, input ", x.ToString(), " has ", x.dim(3)));
  }
  Conv2DGeometry g;
  g.batch = x.dim(0), g.in_h = x.dim(1), g.in_w = x.dim(2), g.in_c = x.dim(3);
  g.kernel_h = filter.dim(0), g.kernel_w = filter.dim(1), g.out_c = filter.dim(3);
  g.stride_h = params.stride_h, g.stride_w = params.stride_w;
  if (auto s = ConvOutputSize(g.in_h, g.kernel_h, g.stride_h, params.padding, "height", &g.out_h,
                              &g.pad_top);
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", s.message()));
  }
  if (auto s = ConvOutputSize(g.in_w, g.kernel_w, g.stride_w, params.padding, "width", &g.out_w,
                              &g.pad_left);
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", s.message()));
  }
  return g;
}

absl::StatusOr<Shape> Conv2DOutputShape(const Shape& x, const Shape& filter,
                                        const Conv2DParams& params, absl::string_view name) {
  auto g = Conv2DGeometryFor(x, filter, params, name);
  if (!g.ok()) return g.status();
  return g->output_shape();
}

namespace {

float PostOp(ConvPostOp op, float v) {
  switch (op) {
    case ConvPostOp::kNone:
      return v;
    case ConvPostOp::kRelu:
      return v > 0.0f ? v : 0.0f;
    case ConvPostOp::kSigmoid:
      return 1.0f / (1.0f + std::exp(-v));
    case ConvPostOp::kTanh:
      return std::tanh(v);
  }
  return v;
}

// rows [rows, c] of one image: row += bias, then post_op; one pass while the rows are warm.
void Epilogue(const float* bias, ConvPostOp op, int64_t rows, int64_t c, float* out) {
  for (int64_t r = 0; r < rows; ++r, out += c) {
    if (op == ConvPostOp::kRelu) {
      for (int64_t j = 0; j < c; ++j) out[j] = std::max(out[j] + bias[j], 0.0f);
    } else {
      for (int64_t j = 0; j < c; ++j) out[j] = PostOp(op, out[j] + bias[j]);
    }
  }
}

// Conv2D, with the epilogue on each block of images when bias is non-null.
absl::Status Conv2DImpl(const Tensor& x, const Tensor& filter, const Tensor* bias,
                        const Conv2DParams& params, ConvPostOp post_op, Tensor* y, ThreadPool* pool,
                        Tensor* workspace) {
  const char* name = "Conv2D";
  if (auto s = CheckCpu(&x, name, "input"); !s.ok()) return s;
  if (auto s = CheckCpu(&filter, name, "filter"); !s.ok()) return s;
  if (auto s = CheckCpu(y, name, "output"); !s.ok()) return s;
  auto g = Conv2DGeometryFor(x.shape(), filter.shape(), params, name);
  if (!g.ok()) return g.status();
  if (auto s = CheckShape(*y, g->output_shape(), name, "output"); !s.ok()) return s;
  if (bias != nullptr) {
    if (auto s = CheckCpu(bias, name, "bias"); !s.ok()) return s;
    if (auto s = CheckShape(*bias, Shape({g->out_c}), name, "bias"); !s.ok()) return s;
  }
  Tensor col;
  int64_t images = 0;
  if (auto s = ColBuffer(*g, workspace, name, &col, &images); !s.ok()) return s;
  const Tensor filter2d = Matrix(filter, g->col_cols(), g->out_c);
  const int64_t out_image = g->col_rows() * g->out_c;
  for (int64_t n0 = 0; n0 < g->batch; n0 += images) {
    const int64_t count = std::min(images, g->batch - n0);
    const Tensor cols = Im2Col(*g, x, n0, count, col, pool);
    Tensor out = ImageRows(*y, n0, count, g->col_rows(), g->out_c);
    if (auto s = MatMul(cols, false, filter2d, false, &out, false, pool); !s.ok()) return s;
    if (bias == nullptr) continue;
    ForEachImage(pool, count, [&](int64_t i) {
      Epilogue(bias->data(), post_op, g->col_rows(), g->out_c, out.data() + i * out_image);
    });
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Conv2D(const Tensor& x, const Tensor& filter, const Conv2DParams& params, Tensor* y,
                    ThreadPool* pool, Tensor* workspace) {
  return Conv2DImpl(x, filter, nullptr, params, ConvPostOp::kNone, y, pool, workspace);
}

absl::Status Conv2DBiasActivation(const Tensor& x, const Tensor& filter, const Tensor& bias,
                                  const Conv2DParams& params, ConvPostOp post_op, Tensor* y,
                                  ThreadPool* pool, Tensor* workspace) {
  return Conv2DImpl(x, filter, &bias, params, post_op, y, pool, workspace);
}

absl::Status Conv2DBackpropInput(const Tensor& dy, const Tensor& filter, const Conv2DParams& params,
                                 Tensor* dx, ThreadPool* pool, Tensor* workspace) {
  const char* name = "Conv2DBackpropInput";
  if (auto s = CheckCpu(&dy, name, "dy"); !s.ok()) return s;
  if (auto s = CheckCpu(&filter, name, "filter"); !s.ok()) return s;
  if (auto s = CheckCpu(dx, name, "dx"); !s.ok()) return s;
  auto g = Conv2DGeometryFor(dx->shape(), filter.shape(), params, name);
  if (!g.ok()) return g.status();
  if (auto s = CheckShape(dy, g->output_shape(), name, "dy"); !s.ok()) return s;
  const Tensor filter2d = Matrix(filter, g->col_cols(), g->out_c);
  if (IsPointwise(*g)) {  // dx = dy * filter^T directly
    Tensor dx2d = Matrix(*dx, g->batch * g->col_rows(), g->col_cols());
    return MatMul(Matrix(dy, g->batch * g->col_rows(), g->out_c), false, filter2d, true, &dx2d,
                  false, pool);
  }
  Tensor col;
  int64_t images = 0;
  if (auto s = ColBuffer(*g, workspace, name, &col, &images); !s.ok()) return s;
  const int64_t in_image = g->in_h * g->in_w * g->in_c;
  const int64_t col_image = Conv2DWorkspaceElements(*g, 1);
  for (int64_t n0 = 0; n0 < g->batch; n0 += images) {
    const int64_t count = std::min(images, g->batch - n0);
    Tensor dcol = Matrix(col, count * g->col_rows(), g->col_cols());
    const Tensor dy_rows = ImageRows(dy, n0, count, g->col_rows(), g->out_c);
    if (auto s = MatMul(dy_rows, false, filter2d, true, &dcol, false, pool); !s.ok()) return s;
    ForEachImage(pool, count, [&](int64_t i) {
      Col2ImImage(*g, dcol.data() + i * col_image, dx->data() + (n0 + i) * in_image);
    });
  }
  return absl::OkStatus();
}

absl::Status Conv2DBackpropFilter(const Tensor& x, const Tensor& dy, const Conv2DParams& params,
                                  Tensor* dfilter, bool accumulate, ThreadPool* pool,
                                  Tensor* workspace) {
  const char* name = "Conv2DBackpropFilter";
  if (auto s = CheckCpu(&x, name, "input"); !s.ok()) return s;
  if (auto s = CheckCpu(&dy, name, "dy"); !s.ok()) return s;
  if (auto s = CheckCpu(dfilter, name, "dfilter"); !s.ok()) return s;
  auto g = Conv2DGeometryFor(x.shape(), dfilter->shape(), params, name);
  if (!g.ok()) return g.status();
  if (auto s = CheckShape(dy, g->output_shape(), name, "dy"); !s.ok()) return s;
  Tensor col;
  int64_t images = g->batch;
  if (!IsPointwise(*g)) {
    if (auto s = ColBuffer(*g, workspace, name, &col, &images); !s.ok()) return s;
  }
  Tensor dfilter2d = Matrix(*dfilter, g->col_cols(), g->out_c);
  for (int64_t n0 = 0; n0 < g->batch; n0 += images) {
    const int64_t count = std::min(images, g->batch - n0);
    const Tensor cols = Im2Col(*g, x, n0, count, col, pool);
    const Tensor dy_rows = ImageRows(dy, n0, count, g->col_rows(), g->out_c);
    if (auto s = MatMul(cols, true, dy_rows, false, &dfilter2d, accumulate || n0 > 0, pool);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace fulcrum::ops
