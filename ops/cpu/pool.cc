#include "ops/cpu/pool.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ops/cpu/nhwc_check.h"

namespace fulcrum::ops {
namespace {

// `n` elements of per-thread scratch of type T, grown (never shrunk) on demand: after a
// layer's first step, a call allocates nothing.
template <typename T>
std::span<T> ThreadScratch(int64_t n) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < static_cast<size_t>(n)) buffer.resize(static_cast<size_t>(n));
  return std::span<T>(buffer.data(), static_cast<size_t>(n));
}

// Geometry from x's shape, checking y's (or dx from dy's, for the gradients).
absl::StatusOr<Pool2DGeometry> GeometryAndCheck(const Tensor& in, const char* in_what,
                                                const Tensor* out, const char* out_what,
                                                const Pool2DParams& params,
                                                const std::string& name) {
  if (in.empty()) return absl::InvalidArgumentError(absl::StrCat(name, ": ", in_what, " is empty"));
  absl::StatusOr<Pool2DGeometry> g = Pool2DGeometryFor(in.shape(), params, name);
  if (!g.ok()) return g.status();
  const Shape in_shape = g->input_shape(), out_shape = g->output_shape();
  if (auto s = CheckNhwcTensor(&in, &in_shape, name, in_what); !s.ok()) return s;
  if (auto s = CheckNhwcTensor(out, &out_shape, name, out_what); !s.ok()) return s;
  return g;
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

// The valid rows [h0, h1) and columns [w0, w1) of window (oh, ow).
struct Window {
  int64_t h0, h1, w0, w1;
  int64_t count() const { return (h1 - h0) * (w1 - w0); }
};

Window WindowAt(const Pool2DGeometry& g, int64_t oh, int64_t ow) {
  const int64_t hs = oh * g.stride_h - g.pad_top, ws = ow * g.stride_w - g.pad_left;
  return {std::max<int64_t>(hs, 0), std::min(hs + g.window_h, g.in_h), std::max<int64_t>(ws, 0),
          std::min(ws + g.window_w, g.in_w)};
}

// best[c] = max over the window of x[., ., c], arg[c] = its offset in the image (first on
// ties). x: one image [H, W, C]; best, arg: [C]. Every window has a valid element (TF's
// padding never exceeds window - 1 in total).
void WindowMax(const Pool2DGeometry& g, const float* x, const Window& win, float* best,
               int32_t* arg) {
  const int64_t c = g.channels;
  const int64_t first = (win.h0 * g.in_w + win.w0) * c;
  for (int64_t k = 0; k < c; ++k) {
    best[k] = x[first + k];
    arg[k] = static_cast<int32_t>(first + k);
  }
  for (int64_t h = win.h0; h < win.h1; ++h) {
    for (int64_t w = win.w0; w < win.w1; ++w) {
      const int64_t base = (h * g.in_w + w) * c;
      const float* row = x + base;
      for (int64_t k = 0; k < c; ++k) {
        if (row[k] > best[k]) {
          best[k] = row[k];
          arg[k] = static_cast<int32_t>(base + k);
        }
      }
    }
  }
}

int64_t ImageSize(const Pool2DGeometry& g) { return g.in_h * g.in_w * g.channels; }
int64_t OutImageSize(const Pool2DGeometry& g) { return g.out_h * g.out_w * g.channels; }

// Whether the windows tile the image: stride = window and no padding before, so each input
// element lies in at most one window (TF's 2x2 stride-2 pools, VALID or SAME).
bool WindowsTile(const Pool2DGeometry& g) {
  return g.stride_h == g.window_h && g.stride_w == g.window_w && g.pad_top == 0 &&
         g.pad_left == 0;
}

// dx of one image [H, W, C] for tiling windows: each element is written once (dy at its
// window's first maximum, 0 elsewhere), so nothing is cleared first except the rows and
// columns no window covers (VALID's remainder). best, arg: [C] scratch.
void TiledMaxPoolGrad(const Pool2DGeometry& g, const float* x, const float* dy, float* dx,
                      float* best, int32_t* arg) {
  const int64_t c = g.channels, row = g.in_w * c;
  const int64_t covered_h = std::min(g.out_h * g.window_h, g.in_h);
  const int64_t covered_w = std::min(g.out_w * g.window_w, g.in_w);
  std::fill(dx + covered_h * row, dx + g.in_h * row, 0.0f);
  for (int64_t h = 0; h < covered_h && covered_w < g.in_w; ++h) {
    std::fill(dx + h * row + covered_w * c, dx + (h + 1) * row, 0.0f);
  }
  for (int64_t oh = 0; oh < g.out_h; ++oh) {
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      const Window win = WindowAt(g, oh, ow);
      const float* dyrow = dy + (oh * g.out_w + ow) * c;
      std::copy_n(x + (win.h0 * g.in_w + win.w0) * c, c, best);
      std::fill_n(arg, c, 0);
      int32_t j = 0;  // the element's position in the window, row-major
      for (int64_t h = win.h0; h < win.h1; ++h) {
        for (int64_t w = win.w0; w < win.w1; ++w, ++j) {
          const float* xr = x + (h * g.in_w + w) * c;
          for (int64_t k = 0; k < c; ++k) {
            const bool more = xr[k] > best[k];
            best[k] = more ? xr[k] : best[k];
            arg[k] = more ? j : arg[k];
          }
        }
      }
      j = 0;
      for (int64_t h = win.h0; h < win.h1; ++h) {
        for (int64_t w = win.w0; w < win.w1; ++w, ++j) {
          float* dxr = dx + (h * g.in_w + w) * c;
          for (int64_t k = 0; k < c; ++k) dxr[k] = arg[k] == j ? dyrow[k] : 0.0f;
        }
      }
    }
  }
}

}  // namespace

absl::StatusOr<Pool2DGeometry> Pool2DGeometryFor(const Shape& x, const Pool2DParams& params,
                                                 const std::string& name) {
  if (x.rank() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": input ", x.ToString(), " must be rank 4 [N, H, W, C]"));
  }
  if (auto s = ValidateShape(x, "input"); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", s.message()));
  }
  Pool2DGeometry g;
  g.batch = x.dim(0);
  g.in_h = x.dim(1);
  g.in_w = x.dim(2);
  g.channels = x.dim(3);
  g.window_h = params.window_h;
  g.window_w = params.window_w;
  g.stride_h = params.stride_h;
  g.stride_w = params.stride_w;
  if (g.in_h * g.in_w * g.channels > int64_t{1} << 31) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": input image ", x.ToString(), " has more than 2^31 elements"));
  }
  // The names go into a message only on an error: a step calls this for every pooling layer.
  if (auto s = ConvOutputSize(g.in_h, g.window_h, g.stride_h, params.padding, "window height",
                              &g.out_h, &g.pad_top);
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", s.message()));
  }
  if (auto s = ConvOutputSize(g.in_w, g.window_w, g.stride_w, params.padding, "window width",
                              &g.out_w, &g.pad_left);
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", s.message()));
  }
  return g;
}

absl::StatusOr<Shape> Pool2DOutputShape(const Shape& x, const Pool2DParams& params,
                                        const std::string& name) {
  absl::StatusOr<Pool2DGeometry> g = Pool2DGeometryFor(x, params, name);
  if (!g.ok()) return g.status();
  return g->output_shape();
}

absl::Status MaxPool(const Tensor& x, const Pool2DParams& params, Tensor* y, ThreadPool* pool,
                     std::span<int32_t> argmax) {
  absl::StatusOr<Pool2DGeometry> g = GeometryAndCheck(x, "x", y, "y", params, "MaxPool");
  if (!g.ok()) return g.status();
  if (!argmax.empty() && static_cast<int64_t>(argmax.size()) != y->num_elements()) {
    return absl::InvalidArgumentError(
        absl::StrCat("MaxPool: argmax has ", argmax.size(), " entries, y has ", y->num_elements()));
  }
  const Pool2DGeometry& geo = *g;
  const float* xd = x.data();
  float* yd = y->data();
  ForEachImage(pool, geo.batch, [&](int64_t b) {
    const float* xi = xd + b * ImageSize(geo);
    std::span<int32_t> scratch = ThreadScratch<int32_t>(argmax.empty() ? geo.channels : 0);
    for (int64_t oh = 0; oh < geo.out_h; ++oh) {
      for (int64_t ow = 0; ow < geo.out_w; ++ow) {
        const int64_t o = b * OutImageSize(geo) + (oh * geo.out_w + ow) * geo.channels;
        int32_t* arg = argmax.empty() ? scratch.data() : argmax.data() + o;
        WindowMax(geo, xi, WindowAt(geo, oh, ow), yd + o, arg);
      }
    }
  });
  return absl::OkStatus();
}

absl::Status MaxPoolGrad(const Tensor& x, const Tensor& dy, const Pool2DParams& params, Tensor* dx,
                         ThreadPool* pool) {
  absl::StatusOr<Pool2DGeometry> g = GeometryAndCheck(x, "x", &dy, "dy", params, "MaxPoolGrad");
  if (!g.ok()) return g.status();
  if (auto s = CheckNhwcTensor(dx, &x.shape(), "MaxPoolGrad", "dx"); !s.ok()) return s;
  const Pool2DGeometry& geo = *g;
  const bool tiles = WindowsTile(geo);
  const float* xd = x.data();
  const float* dyd = dy.data();
  float* dxd = dx->data();
  ForEachImage(pool, geo.batch, [&](int64_t b) {
    const float* xi = xd + b * ImageSize(geo);
    float* dxi = dxd + b * ImageSize(geo);
    std::span<float> best = ThreadScratch<float>(geo.channels);
    std::span<int32_t> arg = ThreadScratch<int32_t>(geo.channels);
    if (tiles) {
      TiledMaxPoolGrad(geo, xi, dyd + b * OutImageSize(geo), dxi, best.data(), arg.data());
      return;
    }
    std::fill(dxi, dxi + ImageSize(geo), 0.0f);
    for (int64_t oh = 0; oh < geo.out_h; ++oh) {
      for (int64_t ow = 0; ow < geo.out_w; ++ow) {
        WindowMax(geo, xi, WindowAt(geo, oh, ow), best.data(), arg.data());
        const float* dyrow = dyd + b * OutImageSize(geo) + (oh * geo.out_w + ow) * geo.channels;
        for (int64_t k = 0; k < geo.channels; ++k) dxi[arg[static_cast<size_t>(k)]] += dyrow[k];
      }
    }
  });
  return absl::OkStatus();
}

absl::Status MaxPoolGradWithArgmax(const Tensor& dy, std::span<const int32_t> argmax,
                                   const Pool2DParams& params, Tensor* dx, ThreadPool* pool) {
  const std::string name = "MaxPoolGradWithArgmax";
  if (dx == nullptr) return absl::InvalidArgumentError(name + ": dx is null");
  absl::StatusOr<Pool2DGeometry> g = GeometryAndCheck(*dx, "dx", &dy, "dy", params, name);
  if (!g.ok()) return g.status();
  if (static_cast<int64_t>(argmax.size()) != dy.num_elements()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": argmax has ", argmax.size(), " entries, dy has ", dy.num_elements()));
  }
  const Pool2DGeometry& geo = *g;
  const int64_t image = ImageSize(geo);
  for (int32_t a : argmax) {
    if (a < 0 || a >= image) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": argmax offset ", a, " is outside an image of ", image, " elements"));
    }
  }
  std::fill(dx->flat().begin(), dx->flat().end(), 0.0f);
  const float* dyd = dy.data();
  float* dxd = dx->data();
  ForEachImage(pool, geo.batch, [&](int64_t b) {
    float* dxi = dxd + b * image;
    const int64_t o0 = b * OutImageSize(geo);
    for (int64_t o = o0; o < o0 + OutImageSize(geo); ++o) {
      dxi[argmax[static_cast<size_t>(o)]] += dyd[o];
    }
  });
  return absl::OkStatus();
}

absl::Status AvgPool(const Tensor& x, const Pool2DParams& params, Tensor* y, ThreadPool* pool) {
  absl::StatusOr<Pool2DGeometry> g = GeometryAndCheck(x, "x", y, "y", params, "AvgPool");
  if (!g.ok()) return g.status();
  const Pool2DGeometry& geo = *g;
  const int64_t c = geo.channels;
  const float* xd = x.data();
  float* yd = y->data();
  ForEachImage(pool, geo.batch, [&](int64_t b) {
    const float* xi = xd + b * ImageSize(geo);
    for (int64_t oh = 0; oh < geo.out_h; ++oh) {
      for (int64_t ow = 0; ow < geo.out_w; ++ow) {
        const Window win = WindowAt(geo, oh, ow);
        float* yrow = yd + b * OutImageSize(geo) + (oh * geo.out_w + ow) * c;
        std::fill(yrow, yrow + c, 0.0f);
        for (int64_t h = win.h0; h < win.h1; ++h) {
          for (int64_t w = win.w0; w < win.w1; ++w) {
            const float* row = xi + (h * geo.in_w + w) * c;
            for (int64_t k = 0; k < c; ++k) yrow[k] += row[k];
          }
        }
        const float scale = 1.0f / static_cast<float>(win.count());
        for (int64_t k = 0; k < c; ++k) yrow[k] *= scale;
      }
    }
  });
  return absl::OkStatus();
}

absl::Status AvgPoolGrad(const Tensor& dy, const Pool2DParams& params, Tensor* dx,
                         ThreadPool* pool) {
  if (dx == nullptr) return absl::InvalidArgumentError("AvgPoolGrad: dx is null");
  absl::StatusOr<Pool2DGeometry> g = GeometryAndCheck(*dx, "dx", &dy, "dy", params, "AvgPoolGrad");
  if (!g.ok()) return g.status();
  const Pool2DGeometry& geo = *g;
  const int64_t c = geo.channels;
  std::fill(dx->flat().begin(), dx->flat().end(), 0.0f);
  const float* dyd = dy.data();
  float* dxd = dx->data();
  ForEachImage(pool, geo.batch, [&](int64_t b) {
    float* dxi = dxd + b * ImageSize(geo);
    for (int64_t oh = 0; oh < geo.out_h; ++oh) {
      for (int64_t ow = 0; ow < geo.out_w; ++ow) {
        const Window win = WindowAt(geo, oh, ow);
        const float* dyrow = dyd + b * OutImageSize(geo) + (oh * geo.out_w + ow) * c;
        const float scale = 1.0f / static_cast<float>(win.count());
        for (int64_t h = win.h0; h < win.h1; ++h) {
          for (int64_t w = win.w0; w < win.w1; ++w) {
            float* row = dxi + (h * geo.in_w + w) * c;
            for (int64_t k = 0; k < c; ++k) row[k] += dyrow[k] * scale;
          }
        }
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace fulcrum::ops
