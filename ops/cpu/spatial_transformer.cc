#include "ops/cpu/spatial_transformer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/cpu/nhwc_check.h"

namespace fulcrum::ops {
namespace {

// Runs fn(i) for i in [0, n), on the pool when there is one.
template <typename Fn>
void ForEachImage(ThreadPool* pool, int64_t n, const Fn& fn) {
  if (pool == nullptr || pool->num_threads() <= 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  pool->ParallelFor(static_cast<int>(n), [&](int i) { fn(i); });
}

// theta: a CPU tensor [N, 2, 3] (N from the tensor itself when batch < 0).
absl::Status CheckTheta(const Tensor* theta, int64_t batch, const char* op, const char* what) {
  if (theta == nullptr) return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, " is null"));
  if (theta->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, " is empty"));
  }
  if (theta->device() != Device::kCpu) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", what, " is on ", DeviceName(theta->device()), ", expected cpu"));
  }
  const Shape& s = theta->shape();
  if (s.rank() != 3 || s.dim(0) <= 0 || s.dim(1) != 2 || s.dim(2) != 3 ||
      (batch >= 0 && s.dim(0) != batch)) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", what, " has shape ", s.ToString(), ", expected [",
                     batch >= 0 ? absl::StrCat(batch) : std::string("N"), ", 2, 3]"));
  }
  return absl::OkStatus();
}

// grid: a CPU tensor [batch, H_out, W_out, 2] with positive dimensions.
absl::Status CheckGrid(const Tensor* grid, int64_t batch, const char* op, const char* what) {
  FULCRUM_RETURN_IF_ERROR(CheckNhwcTensor(grid, nullptr, op, what));
  const Shape& s = grid->shape();
  if (s.dim(0) != batch || s.dim(1) <= 0 || s.dim(2) <= 0 || s.dim(3) != 2) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", what, " has shape ", s.ToString(),
                                                   ", expected [", batch, ", H_out, W_out, 2]"));
  }
  return absl::OkStatus();
}

// The normalised coordinates of `n` output pixels along an axis: linspace(-1, 1, n).
std::vector<double> Linspace(int64_t n) {
  std::vector<double> t(static_cast<size_t>(n), 0.0);
  if (n == 1) return t;
  for (int64_t i = 0; i < n; ++i) {
    t[static_cast<size_t>(i)] = -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(n - 1);
  }
  return t;
}

// One axis of the source image: normalised x -> pixel coordinate.
struct Axis {
  explicit Axis(int64_t n)
      : size(n),
        scale(static_cast<double>(n - 1) / 2.0),
        // AffineGrid rounds an exact coordinate to float once (error <= 2^-25 for |x| < 1),
        // which is (n - 1) * 2^-26 pixels: snap within four times that.
        snap(static_cast<double>(n - 1) * 0x1p-24) {}

  double ToPixel(float x) const {
    double p = (static_cast<double>(x) + 1.0) * scale;
    const double r = std::nearbyint(p);
    if (std::abs(p - r) <= snap) p = r;
    return p;
  }

  int64_t size;
  double scale;  // d(pixel)/d(normalised)
  double snap;
};

// Where one output pixel reads: the cell's top-left corner, the fractions within it, and
// which of its four corners lie inside the image. `inside` is false when none does.
struct Cell {
  bool inside = false;
  int64_t x0 = 0, y0 = 0;
  float fx = 0, fy = 0;
  bool x0_ok = false, x1_ok = false, y0_ok = false, y1_ok = false;
};

Cell CellAt(const Axis& ax, const Axis& ay, float gx, float gy) {
  Cell c;
  const double px = ax.ToPixel(gx), py = ay.ToPixel(gy);
  // Also false for NaN: a point with no corner in the image reads zero.
  if (!(px > -1.0 && px < static_cast<double>(ax.size) && py > -1.0 &&
        py < static_cast<double>(ay.size))) {
    return c;
  }
  c.inside = true;
  const double fx0 = std::floor(px), fy0 = std::floor(py);
  c.x0 = static_cast<int64_t>(fx0);
  c.y0 = static_cast<int64_t>(fy0);
  c.fx = static_cast<float>(px - fx0);
  c.fy = static_cast<float>(py - fy0);
  c.x0_ok = c.x0 >= 0;
  c.x1_ok = c.x0 + 1 < ax.size;
  c.y0_ok = c.y0 >= 0;
  c.y1_ok = c.y0 + 1 < ay.size;
  return c;
}

// The four corners of a cell in one image [H, W, C]: pointers to their C values, null outside.
struct Corners {
  const float* v00 = nullptr;  // (y0, x0)
  const float* v01 = nullptr;  // (y0, x0 + 1)
  const float* v10 = nullptr;  // (y0 + 1, x0)
  const float* v11 = nullptr;  // (y0 + 1, x0 + 1)
};

int64_t Offset(const Cell& c, int64_t dy, int64_t dx, int64_t width, int64_t channels) {
  return ((c.y0 + dy) * width + (c.x0 + dx)) * channels;
}

Corners CornersOf(const Cell& c, const float* image, int64_t width, int64_t channels) {
  Corners k;
  if (c.y0_ok && c.x0_ok) k.v00 = image + Offset(c, 0, 0, width, channels);
  if (c.y0_ok && c.x1_ok) k.v01 = image + Offset(c, 0, 1, width, channels);
  if (c.y1_ok && c.x0_ok) k.v10 = image + Offset(c, 1, 0, width, channels);
  if (c.y1_ok && c.x1_ok) k.v11 = image + Offset(c, 1, 1, width, channels);
  return k;
}

inline float At(const float* corner, int64_t ch) { return corner == nullptr ? 0.0f : corner[ch]; }

// Shapes of a sampling op: input [N, H, W, C], grid [N, HO, WO, 2].
struct SampleGeometry {
  int64_t n, h, w, c, out_h, out_w;
  int64_t image() const { return h * w * c; }
  int64_t out_pixels() const { return out_h * out_w; }
};

absl::StatusOr<SampleGeometry> SampleGeometryOf(const Tensor& input, const Tensor& grid,
                                                const char* op) {
  FULCRUM_RETURN_IF_ERROR(CheckNhwcTensor(&input, nullptr, op, "input"));
  FULCRUM_RETURN_IF_ERROR(ValidateShape(input.shape(), absl::StrCat(op, ": input")));
  const Shape& s = input.shape();
  FULCRUM_RETURN_IF_ERROR(CheckGrid(&grid, s.dim(0), op, "grid"));
  return SampleGeometry{s.dim(0),           s.dim(1), s.dim(2), s.dim(3), grid.shape().dim(1),
                        grid.shape().dim(2)};
}

// One image's gradients: dinput (zeroed by the caller) and dgrid, either may be null.
void SampleGradImage(const SampleGeometry& g, const float* in, const float* grid, const float* dout,
                     float* din, float* dgrid) {
  const Axis ax(g.w), ay(g.h);
  for (int64_t p = 0; p < g.out_pixels(); ++p) {
    const Cell cell = CellAt(ax, ay, grid[2 * p], grid[2 * p + 1]);
    const float* d = dout + p * g.c;
    if (!cell.inside) {
      if (dgrid != nullptr) dgrid[2 * p] = dgrid[2 * p + 1] = 0.0f;
      continue;
    }
    const float fx = cell.fx, fy = cell.fy;
    if (dgrid != nullptr) {
      const Corners k = CornersOf(cell, in, g.w, g.c);
      double gx = 0.0, gy = 0.0;
      for (int64_t ch = 0; ch < g.c; ++ch) {
        const float v00 = At(k.v00, ch), v01 = At(k.v01, ch);
        const float v10 = At(k.v10, ch), v11 = At(k.v11, ch);
        gx += static_cast<double>(d[ch]) * ((1 - fy) * (v01 - v00) + fy * (v11 - v10));
        gy += static_cast<double>(d[ch]) * ((1 - fx) * (v10 - v00) + fx * (v11 - v01));
      }
      dgrid[2 * p] = static_cast<float>(gx * ax.scale);
      dgrid[2 * p + 1] = static_cast<float>(gy * ay.scale);
    }
    if (din != nullptr) {
      const float w[4] = {(1 - fx) * (1 - fy), fx * (1 - fy), (1 - fx) * fy, fx * fy};
      const bool ok[4] = {cell.y0_ok && cell.x0_ok, cell.y0_ok && cell.x1_ok,
                          cell.y1_ok && cell.x0_ok, cell.y1_ok && cell.x1_ok};
      for (int k = 0; k < 4; ++k) {
        if (!ok[k]) continue;
        float* dst = din + Offset(cell, k / 2, k % 2, g.w, g.c);
        for (int64_t ch = 0; ch < g.c; ++ch) dst[ch] += w[k] * d[ch];
      }
    }
  }
}

}  // namespace

absl::Status AffineGrid(const Tensor& theta, Tensor* grid, ThreadPool* pool) {
  FULCRUM_RETURN_IF_ERROR(CheckTheta(&theta, -1, "AffineGrid", "theta"));
  const int64_t n = theta.shape().dim(0);
  FULCRUM_RETURN_IF_ERROR(CheckGrid(grid, n, "AffineGrid", "grid"));
  const int64_t out_h = grid->shape().dim(1), out_w = grid->shape().dim(2);
  const std::vector<double> xt = Linspace(out_w), yt = Linspace(out_h);
  const float* th = theta.data();
  float* gd = grid->data();
  ForEachImage(pool, n, [&](int64_t b) {
    const float* t = th + 6 * b;
    float* out = gd + b * out_h * out_w * 2;
    for (int64_t i = 0; i < out_h; ++i) {
      const double y = yt[static_cast<size_t>(i)];
      for (int64_t j = 0; j < out_w; ++j) {
        const double x = xt[static_cast<size_t>(j)];
        // In double and rounded once, so the identity gives float(x_t) exactly.
        out[2 * (i * out_w + j)] = static_cast<float>(t[0] * x + t[1] * y + t[2]);
        out[2 * (i * out_w + j) + 1] = static_cast<float>(t[3] * x + t[4] * y + t[5]);
      }
    }
  });
  return absl::OkStatus();
}

absl::Status AffineGridGrad(const Tensor& dgrid, Tensor* dtheta, ThreadPool* pool) {
  FULCRUM_RETURN_IF_ERROR(CheckNhwcTensor(&dgrid, nullptr, "AffineGridGrad", "dgrid"));
  const int64_t n = dgrid.shape().dim(0);
  FULCRUM_RETURN_IF_ERROR(CheckGrid(&dgrid, n, "AffineGridGrad", "dgrid"));
  FULCRUM_RETURN_IF_ERROR(CheckTheta(dtheta, n, "AffineGridGrad", "dtheta"));
  const int64_t out_h = dgrid.shape().dim(1), out_w = dgrid.shape().dim(2);
  const std::vector<double> xt = Linspace(out_w), yt = Linspace(out_h);
  const float* dg = dgrid.data();
  float* dt = dtheta->data();
  ForEachImage(pool, n, [&](int64_t b) {
    const float* d = dg + b * out_h * out_w * 2;
    double acc[6] = {0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < out_h; ++i) {
      const double y = yt[static_cast<size_t>(i)];
      for (int64_t j = 0; j < out_w; ++j) {
        const double x = xt[static_cast<size_t>(j)];
        const double gx = d[2 * (i * out_w + j)], gy = d[2 * (i * out_w + j) + 1];
        acc[0] += gx * x;
        acc[1] += gx * y;
        acc[2] += gx;
        acc[3] += gy * x;
        acc[4] += gy * y;
        acc[5] += gy;
      }
    }
    for (int k = 0; k < 6; ++k) dt[6 * b + k] = static_cast<float>(acc[k]);
  });
  return absl::OkStatus();
}

absl::Status BilinearSample(const Tensor& input, const Tensor& grid, Tensor* output,
                            ThreadPool* pool) {
  FULCRUM_ASSIGN_OR_RETURN(const SampleGeometry g, SampleGeometryOf(input, grid, "BilinearSample"));
  const Shape out_shape({g.n, g.out_h, g.out_w, g.c});
  FULCRUM_RETURN_IF_ERROR(CheckNhwcTensor(output, &out_shape, "BilinearSample", "output"));
  const float* in = input.data();
  const float* gd = grid.data();
  float* od = output->data();
  ForEachImage(pool, g.n, [&](int64_t b) {
    const Axis ax(g.w), ay(g.h);
    const float* image = in + b * g.image();
    const float* points = gd + b * g.out_pixels() * 2;
    float* out = od + b * g.out_pixels() * g.c;
    for (int64_t p = 0; p < g.out_pixels(); ++p) {
      const Cell cell = CellAt(ax, ay, points[2 * p], points[2 * p + 1]);
      float* o = out + p * g.c;
      if (!cell.inside) {
        std::fill(o, o + g.c, 0.0f);
        continue;
      }
      const Corners k = CornersOf(cell, image, g.w, g.c);
      const float fx = cell.fx, fy = cell.fy;
      const float w00 = (1 - fx) * (1 - fy), w01 = fx * (1 - fy);
      const float w10 = (1 - fx) * fy, w11 = fx * fy;
      for (int64_t ch = 0; ch < g.c; ++ch) {
        o[ch] =
            w00 * At(k.v00, ch) + w01 * At(k.v01, ch) + w10 * At(k.v10, ch) + w11 * At(k.v11, ch);
      }
    }
  });
  return absl::OkStatus();
}

absl::Status BilinearSampleGrad(const Tensor& input, const Tensor& grid, const Tensor& dout,
                                Tensor* dinput, Tensor* dgrid, ThreadPool* pool) {
  FULCRUM_ASSIGN_OR_RETURN(const SampleGeometry g,
                           SampleGeometryOf(input, grid, "BilinearSampleGrad"));
  const Shape out_shape({g.n, g.out_h, g.out_w, g.c});
  FULCRUM_RETURN_IF_ERROR(CheckNhwcTensor(&dout, &out_shape, "BilinearSampleGrad", "dout"));
  if (dinput != nullptr) {
    FULCRUM_RETURN_IF_ERROR(
        CheckNhwcTensor(dinput, &input.shape(), "BilinearSampleGrad", "dinput"));
  }
  if (dgrid != nullptr) {
    FULCRUM_RETURN_IF_ERROR(CheckNhwcTensor(dgrid, &grid.shape(), "BilinearSampleGrad", "dgrid"));
  }
  if (dinput == nullptr && dgrid == nullptr) return absl::OkStatus();
  ForEachImage(pool, g.n, [&](int64_t b) {
    float* din = dinput == nullptr ? nullptr : dinput->data() + b * g.image();
    if (din != nullptr) std::fill(din, din + g.image(), 0.0f);
    SampleGradImage(g, input.data() + b * g.image(), grid.data() + b * g.out_pixels() * 2,
                    dout.data() + b * g.out_pixels() * g.c, din,
                    dgrid == nullptr ? nullptr : dgrid->data() + b * g.out_pixels() * 2);
  });
  return absl::OkStatus();
}

}  // namespace fulcrum::ops
