// ops/cuda: the small kernels of the CUDA backend (see kernels.h). Each mirrors the CPU
// kernel of the same name in ops/cpu, formula for formula, so the conformance suite can hold
// them to the CPU result.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "base/random.h"
#include "ops/cuda/kernels.h"

namespace fulcrum::ops::cuda::kernels {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 8192));
}

#define FULCRUM_GRID_LOOP(i, n)                                                         \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

__global__ void FillKernel(float* p, int64_t n, float value) {
  FULCRUM_GRID_LOOP(i, n) p[i] = value;
}

__global__ void AddKernel(const float* x, float* y, int64_t n) {
  FULCRUM_GRID_LOOP(i, n) y[i] += x[i];
}

__global__ void MultiplyKernel(const float* a, const float* b, float* out, int64_t n) {
  FULCRUM_GRID_LOOP(i, n) out[i] = a[i] * b[i];
}

__global__ void BiasAddKernel(const float* bias, float* x, int64_t rows, int64_t cols) {
  FULCRUM_GRID_LOOP(i, rows * cols) x[i] += bias[i % cols];
}

__global__ void ActivateKernel(int kind, float* y, int64_t n) {
  FULCRUM_GRID_LOOP(i, n) {
    const float v = y[i];
    if (kind == 0) {
      y[i] = v > 0.0f ? v : 0.0f;
    } else if (kind == 1) {
      y[i] = 1.0f / (1.0f + expf(-v));
    } else {
      y[i] = tanhf(v);
    }
  }
}

__global__ void ActivationGradKernel(int kind, const float* y, float* dy, int64_t n) {
  FULCRUM_GRID_LOOP(i, n) {
    const float v = y[i];
    if (kind == 0) {
      dy[i] = v > 0.0f ? dy[i] : 0.0f;
    } else if (kind == 1) {
      dy[i] *= v * (1.0f - v);
    } else {
      dy[i] *= 1.0f - v * v;
    }
  }
}

// One block per row: max, then sum of exp, shared-memory reductions.
__global__ void SoftmaxCrossEntropyKernel(const float* logits, const int32_t* labels,
                                          int64_t rows, int64_t classes, float* row_loss,
                                          float* dlogits) {
  __shared__ float red[kThreads];
  const int64_t row = blockIdx.x;
  const float* l = logits + row * classes;
  float m = -INFINITY;
  for (int64_t k = threadIdx.x; k < classes; k += blockDim.x) m = fmaxf(m, l[k]);
  red[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  const float max = red[0];
  __syncthreads();
  float sum = 0.0f;
  for (int64_t k = threadIdx.x; k < classes; k += blockDim.x) sum += expf(l[k] - max);
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  const float total = red[0];
  const int32_t label = labels[row];
  if (threadIdx.x == 0) row_loss[row] = logf(total) + max - l[label];
  if (dlogits != nullptr) {
    const float inv_rows = 1.0f / static_cast<float>(rows);
    for (int64_t k = threadIdx.x; k < classes; k += blockDim.x) {
      const float p = expf(l[k] - max) / total;
      dlogits[row * classes + k] = (p - (k == label ? 1.0f : 0.0f)) * inv_rows;
    }
  }
}

__global__ void ArgMaxMatchesKernel(const float* logits, const int32_t* labels, int64_t rows,
                                    int64_t classes, int32_t* correct) {
  FULCRUM_GRID_LOOP(row, rows) {
    const float* l = logits + row * classes;
    int64_t best = 0;
    for (int64_t k = 1; k < classes; ++k) {
      if (l[k] > l[best]) best = k;
    }
    correct[row] = best == labels[row] ? 1 : 0;
  }
}

// Block-wide sum of a double into out[blockIdx.x].
__device__ void BlockSum(double v, double* out) {
  __shared__ double red[kThreads];
  red[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = red[0];
}

__global__ void SquaredErrorKernel(const float* pred, const float* target, int64_t n, float scale,
                                   float* dpred, double* partials) {
  double acc = 0.0;
  FULCRUM_GRID_LOOP(i, n) {
    const float d = pred[i] - target[i];
    acc += static_cast<double>(d) * d;
    if (dpred != nullptr) dpred[i] = scale * d;
  }
  BlockSum(acc, partials);
}

__global__ void WeightDecayKernel(float weight_decay, const float* value, float* grad, int64_t n,
                                  double* partials) {
  double acc = 0.0;
  FULCRUM_GRID_LOOP(i, n) {
    const float v = value[i];
    grad[i] += weight_decay * v;
    acc += static_cast<double>(v) * v;
  }
  BlockSum(acc, partials);
}

__global__ void TransposeKernel(const float* in, float* out, int64_t rows, int64_t cols) {
  FULCRUM_GRID_LOOP(i, rows * cols) {
    const int64_t r = i / cols, c = i % cols;
    out[c * rows + r] = in[i];
  }
}

__global__ void CopyWindowKernel(const float* src, int64_t src_h, int64_t src_w, float* dst,
                                 int64_t dst_h, int64_t dst_w, int64_t batch, int64_t channels,
                                 int64_t h, int64_t w) {
  FULCRUM_GRID_LOOP(i, batch * h * w * channels) {
    const int64_t c = i % channels;
    const int64_t x = (i / channels) % w;
    const int64_t y = (i / (channels * w)) % h;
    const int64_t b = i / (channels * w * h);
    dst[((b * dst_h + y) * dst_w + x) * channels + c] =
        src[((b * src_h + y) * src_w + x) * channels + c];
  }
}

// Decomposes output element i of a pooling op and clips its window to the image.
struct Window {
  int64_t b, c, h0, h1, w0, w1;
};

__device__ Window WindowOf(int64_t i, const PoolGeometry& g) {
  Window win;
  win.c = i % g.channels;
  const int64_t ow = (i / g.channels) % g.out_w;
  const int64_t oh = (i / (g.channels * g.out_w)) % g.out_h;
  win.b = i / (g.channels * g.out_w * g.out_h);
  const int64_t hs = oh * g.stride_h - g.pad_top, ws = ow * g.stride_w - g.pad_left;
  win.h0 = hs > 0 ? hs : 0;
  win.w0 = ws > 0 ? ws : 0;
  win.h1 = hs + g.window_h < g.in_h ? hs + g.window_h : g.in_h;
  win.w1 = ws + g.window_w < g.in_w ? ws + g.window_w : g.in_w;
  return win;
}

__device__ int64_t PoolInputIndex(const PoolGeometry& g, const Window& win, int64_t h, int64_t w) {
  return ((win.b * g.in_h + h) * g.in_w + w) * g.channels + win.c;
}

__device__ int64_t ArgMaxOfWindow(const float* x, const PoolGeometry& g, const Window& win) {
  int64_t best = -1;
  float best_value = -INFINITY;
  for (int64_t h = win.h0; h < win.h1; ++h) {
    for (int64_t w = win.w0; w < win.w1; ++w) {
      const int64_t idx = PoolInputIndex(g, win, h, w);
      if (best < 0 || x[idx] > best_value) {
        best = idx;
        best_value = x[idx];
      }
    }
  }
  return best;
}

__global__ void MaxPoolKernel(const float* x, PoolGeometry g, float* y) {
  FULCRUM_GRID_LOOP(i, g.batch * g.out_h * g.out_w * g.channels) {
    const int64_t best = ArgMaxOfWindow(x, g, WindowOf(i, g));
    y[i] = best < 0 ? 0.0f : x[best];
  }
}

// floor(a / b) for b > 0 and any a.
__device__ int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Input element i of a pooling op gathers from the windows that hold it, in output order
// (rows, then columns): each dx element is written by one thread, in the CPU kernel's order of
// addition, so the result is deterministic (no atomics). `visit(o, win)` gets each window.
template <typename Visit>
__device__ void ForEachWindowHolding(int64_t i, const PoolGeometry& g, Visit visit) {
  const int64_t c = i % g.channels;
  const int64_t w = (i / g.channels) % g.in_w;
  const int64_t h = (i / (g.channels * g.in_w)) % g.in_h;
  const int64_t b = i / (g.channels * g.in_w * g.in_h);
  const int64_t oh0 = FloorDiv(h + g.pad_top - g.window_h, g.stride_h) + 1;
  const int64_t oh1 = FloorDiv(h + g.pad_top, g.stride_h);
  const int64_t ow0 = FloorDiv(w + g.pad_left - g.window_w, g.stride_w) + 1;
  const int64_t ow1 = FloorDiv(w + g.pad_left, g.stride_w);
  for (int64_t oh = oh0 > 0 ? oh0 : 0; oh <= oh1 && oh < g.out_h; ++oh) {
    for (int64_t ow = ow0 > 0 ? ow0 : 0; ow <= ow1 && ow < g.out_w; ++ow) {
      const int64_t o = ((b * g.out_h + oh) * g.out_w + ow) * g.channels + c;
      visit(o, WindowOf(o, g));
    }
  }
}

__global__ void MaxPoolGradKernel(const float* x, const float* dy, PoolGeometry g, float* dx) {
  FULCRUM_GRID_LOOP(i, g.batch * g.in_h * g.in_w * g.channels) {
    float acc = 0.0f;
    ForEachWindowHolding(i, g, [&](int64_t o, const Window& win) {
      if (ArgMaxOfWindow(x, g, win) == i) acc += dy[o];
    });
    dx[i] = acc;
  }
}

__global__ void AvgPoolKernel(const float* x, PoolGeometry g, float* y) {
  FULCRUM_GRID_LOOP(i, g.batch * g.out_h * g.out_w * g.channels) {
    const Window win = WindowOf(i, g);
    float sum = 0.0f;
    for (int64_t h = win.h0; h < win.h1; ++h) {
      for (int64_t w = win.w0; w < win.w1; ++w) sum += x[PoolInputIndex(g, win, h, w)];
    }
    const int64_t count = (win.h1 - win.h0) * (win.w1 - win.w0);
    y[i] = count > 0 ? sum / static_cast<float>(count) : 0.0f;
  }
}

__global__ void AvgPoolGradKernel(const float* dy, PoolGeometry g, float* dx) {
  FULCRUM_GRID_LOOP(i, g.batch * g.in_h * g.in_w * g.channels) {
    float acc = 0.0f;
    ForEachWindowHolding(i, g, [&](int64_t o, const Window& win) {
      const int64_t count = (win.h1 - win.h0) * (win.w1 - win.w0);
      if (count > 0) acc += dy[o] / static_cast<float>(count);
    });
    dx[i] = acc;
  }
}

// bias + alpha * (sum of x^2 over channels [c - radius, c + radius]) at one pixel.
__device__ double LrnNorm(const float* xp, int64_t channels, int64_t c, int64_t radius,
                          float bias, float alpha) {
  const int64_t lo = c - radius > 0 ? c - radius : 0;
  const int64_t hi = c + radius < channels - 1 ? c + radius : channels - 1;
  double sum = 0.0;
  for (int64_t k = lo; k <= hi; ++k) sum += static_cast<double>(xp[k]) * xp[k];
  return static_cast<double>(bias) + static_cast<double>(alpha) * sum;
}

__global__ void LrnKernel(const float* x, int64_t pixels, int64_t channels, int64_t radius,
                          float bias, float alpha, float beta, float* y) {
  FULCRUM_GRID_LOOP(i, pixels * channels) {
    const int64_t c = i % channels;
    const float* xp = x + (i - c);
    y[i] = static_cast<float>(x[i] * pow(LrnNorm(xp, channels, c, radius, bias, alpha), -beta));
  }
}

// dx_j = dy_j s_j^-beta - 2 alpha beta x_j sum_{c in window(j)} dy_c x_c s_c^(-beta - 1).
__global__ void LrnGradKernel(const float* x, const float* dy, int64_t pixels, int64_t channels,
                              int64_t radius, float bias, float alpha, float beta, float* dx) {
  FULCRUM_GRID_LOOP(i, pixels * channels) {
    const int64_t j = i % channels;
    const float* xp = x + (i - j);
    const float* dyp = dy + (i - j);
    const int64_t lo = j - radius > 0 ? j - radius : 0;
    const int64_t hi = j + radius < channels - 1 ? j + radius : channels - 1;
    double t_sum = 0.0;
    for (int64_t c = lo; c <= hi; ++c) {
      const double s = LrnNorm(xp, channels, c, radius, bias, alpha);
      t_sum += static_cast<double>(dyp[c]) * xp[c] * pow(s, -static_cast<double>(beta)) / s;
    }
    const double sj = LrnNorm(xp, channels, j, radius, bias, alpha);
    dx[i] = static_cast<float>(dyp[j] * pow(sj, -static_cast<double>(beta)) -
                               2.0 * alpha * beta * xp[j] * t_sum);
  }
}

__global__ void DropoutKernel(const float* x, int64_t n, uint64_t stream, uint32_t threshold,
                              float scale, float* y, float* mask) {
  FULCRUM_GRID_LOOP(i, n) {
    const uint32_t u = static_cast<uint32_t>(Mix64(stream ^ static_cast<uint64_t>(i)) >> 40);
    const float m = u >= threshold ? scale : 0.0f;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

// -1 + 2 i / (n - 1), 0 for n == 1: the normalised coordinate of pixel i (AffineGrid).
__device__ double Linspace(int64_t i, int64_t n) {
  return n == 1 ? 0.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(n - 1);
}

__global__ void AffineGridKernel(const float* theta, int64_t batch, int64_t out_h, int64_t out_w,
                                 float* grid) {
  FULCRUM_GRID_LOOP(p, batch * out_h * out_w) {
    const int64_t j = p % out_w, i = (p / out_w) % out_h, b = p / (out_w * out_h);
    const float* t = theta + 6 * b;
    const double x = Linspace(j, out_w), y = Linspace(i, out_h);
    grid[2 * p] = static_cast<float>(t[0] * x + t[1] * y + t[2]);
    grid[2 * p + 1] = static_cast<float>(t[3] * x + t[4] * y + t[5]);
  }
}

// One thread per (image, theta entry), summing over the image's grid points.
__global__ void AffineGridGradKernel(const float* dgrid, int64_t batch, int64_t out_h,
                                     int64_t out_w, float* dtheta) {
  FULCRUM_GRID_LOOP(e, batch * 6) {
    const int64_t b = e / 6, k = e % 6;
    const float* d = dgrid + b * out_h * out_w * 2;
    double acc = 0.0;
    for (int64_t i = 0; i < out_h; ++i) {
      const double y = Linspace(i, out_h);
      for (int64_t j = 0; j < out_w; ++j) {
        const double x = Linspace(j, out_w);
        const double g = d[2 * (i * out_w + j) + (k < 3 ? 0 : 1)];
        const int64_t which = k % 3;
        acc += which == 0 ? g * x : (which == 1 ? g * y : g);
      }
    }
    dtheta[e] = static_cast<float>(acc);
  }
}

// ops/cpu/spatial_transformer.cc's Axis and Cell: where a grid point reads the image.
struct Cell {
  bool inside;
  int64_t x0, y0;
  float fx, fy;
  bool ok[4];  // (y0, x0), (y0, x0 + 1), (y0 + 1, x0), (y0 + 1, x0 + 1) inside the image
};

__device__ double ToPixel(float v, int64_t size) {
  const double scale = static_cast<double>(size - 1) / 2.0;
  const double snap = static_cast<double>(size - 1) * 0x1p-24;
  double p = (static_cast<double>(v) + 1.0) * scale;
  const double r = nearbyint(p);
  if (fabs(p - r) <= snap) p = r;
  return p;
}

__device__ Cell CellAt(int64_t w, int64_t h, float gx, float gy) {
  Cell c{};
  const double px = ToPixel(gx, w), py = ToPixel(gy, h);
  c.inside = px > -1.0 && px < static_cast<double>(w) && py > -1.0 && py < static_cast<double>(h);
  if (!c.inside) return c;
  const double fx0 = floor(px), fy0 = floor(py);
  c.x0 = static_cast<int64_t>(fx0);
  c.y0 = static_cast<int64_t>(fy0);
  c.fx = static_cast<float>(px - fx0);
  c.fy = static_cast<float>(py - fy0);
  const bool x0_ok = c.x0 >= 0, x1_ok = c.x0 + 1 < w, y0_ok = c.y0 >= 0, y1_ok = c.y0 + 1 < h;
  c.ok[0] = y0_ok && x0_ok;
  c.ok[1] = y0_ok && x1_ok;
  c.ok[2] = y1_ok && x0_ok;
  c.ok[3] = y1_ok && x1_ok;
  return c;
}

__device__ int64_t CornerOffset(const Cell& c, int k, int64_t w, int64_t channels) {
  return ((c.y0 + k / 2) * w + (c.x0 + k % 2)) * channels;
}

__global__ void BilinearSampleKernel(const float* input, int64_t batch, int64_t h, int64_t w,
                                     int64_t c, const float* grid, int64_t out_h, int64_t out_w,
                                     float* output) {
  FULCRUM_GRID_LOOP(i, batch * out_h * out_w * c) {
    const int64_t ch = i % c;
    const int64_t p = i / c;  // output pixel over the whole batch
    const int64_t b = p / (out_h * out_w);
    const Cell cell = CellAt(w, h, grid[2 * p], grid[2 * p + 1]);
    if (!cell.inside) {
      output[i] = 0.0f;
      continue;
    }
    const float* image = input + b * h * w * c;
    const float fx = cell.fx, fy = cell.fy;
    const float weight[4] = {(1 - fx) * (1 - fy), fx * (1 - fy), (1 - fx) * fy, fx * fy};
    float v = 0.0f;
    for (int k = 0; k < 4; ++k) {
      if (cell.ok[k]) v += weight[k] * image[CornerOffset(cell, k, w, c) + ch];
    }
    output[i] = v;
  }
}

// One thread per output pixel: its d(grid) and its scatter into d(input).
__global__ void BilinearSampleGradKernel(const float* input, int64_t batch, int64_t h, int64_t w,
                                         int64_t c, const float* grid, int64_t out_h,
                                         int64_t out_w, const float* dout, float* dinput,
                                         float* dgrid) {
  FULCRUM_GRID_LOOP(p, batch * out_h * out_w) {
    const int64_t b = p / (out_h * out_w);
    const Cell cell = CellAt(w, h, grid[2 * p], grid[2 * p + 1]);
    const float* d = dout + p * c;
    if (!cell.inside) {
      if (dgrid != nullptr) dgrid[2 * p] = dgrid[2 * p + 1] = 0.0f;
      continue;
    }
    const float* image = input + b * h * w * c;
    const float fx = cell.fx, fy = cell.fy;
    if (dgrid != nullptr) {
      double gx = 0.0, gy = 0.0;
      for (int64_t ch = 0; ch < c; ++ch) {
        float v[4];
        for (int k = 0; k < 4; ++k) {
          v[k] = cell.ok[k] ? image[CornerOffset(cell, k, w, c) + ch] : 0.0f;
        }
        gx += static_cast<double>(d[ch]) * ((1 - fy) * (v[1] - v[0]) + fy * (v[3] - v[2]));
        gy += static_cast<double>(d[ch]) * ((1 - fx) * (v[2] - v[0]) + fx * (v[3] - v[1]));
      }
      dgrid[2 * p] = static_cast<float>(gx * (static_cast<double>(w - 1) / 2.0));
      dgrid[2 * p + 1] = static_cast<float>(gy * (static_cast<double>(h - 1) / 2.0));
    }
    if (dinput != nullptr) {
      float* din = dinput + b * h * w * c;
      const float weight[4] = {(1 - fx) * (1 - fy), fx * (1 - fy), (1 - fx) * fy, fx * fy};
      for (int k = 0; k < 4; ++k) {
        if (!cell.ok[k]) continue;
        float* dst = din + CornerOffset(cell, k, w, c);
        for (int64_t ch = 0; ch < c; ++ch) atomicAdd(dst + ch, weight[k] * d[ch]);
      }
    }
  }
}

cudaError_t Launched() { return cudaGetLastError(); }

}  // namespace

cudaError_t Fill(float* p, int64_t n, float value) {
  FillKernel<<<Blocks(n), kThreads>>>(p, n, value);
  return Launched();
}

cudaError_t Add(const float* x, float* y, int64_t n) {
  AddKernel<<<Blocks(n), kThreads>>>(x, y, n);
  return Launched();
}

cudaError_t Multiply(const float* a, const float* b, float* out, int64_t n) {
  MultiplyKernel<<<Blocks(n), kThreads>>>(a, b, out, n);
  return Launched();
}

cudaError_t BiasAdd(const float* bias, float* x, int64_t rows, int64_t cols) {
  BiasAddKernel<<<Blocks(rows * cols), kThreads>>>(bias, x, rows, cols);
  return Launched();
}

cudaError_t Activate(int kind, float* y, int64_t n) {
  ActivateKernel<<<Blocks(n), kThreads>>>(kind, y, n);
  return Launched();
}

cudaError_t ActivationGrad(int kind, const float* y, float* dy, int64_t n) {
  ActivationGradKernel<<<Blocks(n), kThreads>>>(kind, y, dy, n);
  return Launched();
}

cudaError_t SoftmaxCrossEntropy(const float* logits, const int32_t* labels, int64_t rows,
                                int64_t classes, float* row_loss, float* dlogits) {
  SoftmaxCrossEntropyKernel<<<static_cast<unsigned>(rows), kThreads>>>(logits, labels, rows,
                                                                       classes, row_loss, dlogits);
  return Launched();
}

cudaError_t ArgMaxMatches(const float* logits, const int32_t* labels, int64_t rows,
                          int64_t classes, int32_t* correct) {
  ArgMaxMatchesKernel<<<Blocks(rows), kThreads>>>(logits, labels, rows, classes, correct);
  return Launched();
}

cudaError_t SquaredError(const float* pred, const float* target, int64_t n, float scale,
                         float* dpred, double* partials) {
  SquaredErrorKernel<<<kReduceBlocks, kThreads>>>(pred, target, n, scale, dpred, partials);
  return Launched();
}

cudaError_t WeightDecay(float weight_decay, const float* value, float* grad, int64_t n,
                        double* partials) {
  WeightDecayKernel<<<kReduceBlocks, kThreads>>>(weight_decay, value, grad, n, partials);
  return Launched();
}

cudaError_t Transpose(const float* in, float* out, int64_t rows, int64_t cols) {
  TransposeKernel<<<Blocks(rows * cols), kThreads>>>(in, out, rows, cols);
  return Launched();
}

cudaError_t CopyWindow(const float* src, int64_t src_h, int64_t src_w, float* dst, int64_t dst_h,
                       int64_t dst_w, int64_t batch, int64_t channels) {
  const int64_t h = std::min(src_h, dst_h), w = std::min(src_w, dst_w);
  CopyWindowKernel<<<Blocks(batch * h * w * channels), kThreads>>>(
      src, src_h, src_w, dst, dst_h, dst_w, batch, channels, h, w);
  return Launched();
}

cudaError_t MaxPool(const float* x, const PoolGeometry& g, float* y) {
  MaxPoolKernel<<<Blocks(g.batch * g.out_h * g.out_w * g.channels), kThreads>>>(x, g, y);
  return Launched();
}

cudaError_t MaxPoolGrad(const float* x, const float* dy, const PoolGeometry& g, float* dx) {
  MaxPoolGradKernel<<<Blocks(g.batch * g.in_h * g.in_w * g.channels), kThreads>>>(x, dy, g, dx);
  return Launched();
}

cudaError_t AvgPool(const float* x, const PoolGeometry& g, float* y) {
  AvgPoolKernel<<<Blocks(g.batch * g.out_h * g.out_w * g.channels), kThreads>>>(x, g, y);
  return Launched();
}

cudaError_t AvgPoolGrad(const float* dy, const PoolGeometry& g, float* dx) {
  AvgPoolGradKernel<<<Blocks(g.batch * g.in_h * g.in_w * g.channels), kThreads>>>(dy, g, dx);
  return Launched();
}

cudaError_t Lrn(const float* x, int64_t pixels, int64_t channels, int64_t radius, float bias,
                float alpha, float beta, float* y) {
  LrnKernel<<<Blocks(pixels * channels), kThreads>>>(x, pixels, channels, radius, bias, alpha,
                                                     beta, y);
  return Launched();
}

cudaError_t LrnGrad(const float* x, const float* dy, int64_t pixels, int64_t channels,
                    int64_t radius, float bias, float alpha, float beta, float* dx) {
  LrnGradKernel<<<Blocks(pixels * channels), kThreads>>>(x, dy, pixels, channels, radius, bias,
                                                         alpha, beta, dx);
  return Launched();
}

cudaError_t Dropout(const float* x, int64_t n, uint64_t stream, uint32_t threshold, float scale,
                    float* y, float* mask) {
  DropoutKernel<<<Blocks(n), kThreads>>>(x, n, stream, threshold, scale, y, mask);
  return Launched();
}

cudaError_t AffineGrid(const float* theta, int64_t batch, int64_t out_h, int64_t out_w,
                       float* grid) {
  AffineGridKernel<<<Blocks(batch * out_h * out_w), kThreads>>>(theta, batch, out_h, out_w, grid);
  return Launched();
}

cudaError_t AffineGridGrad(const float* dgrid, int64_t batch, int64_t out_h, int64_t out_w,
                           float* dtheta) {
  AffineGridGradKernel<<<Blocks(batch * 6), kThreads>>>(dgrid, batch, out_h, out_w, dtheta);
  return Launched();
}

cudaError_t BilinearSample(const float* input, int64_t batch, int64_t h, int64_t w, int64_t c,
                           const float* grid, int64_t out_h, int64_t out_w, float* output) {
  BilinearSampleKernel<<<Blocks(batch * out_h * out_w * c), kThreads>>>(input, batch, h, w, c,
                                                                        grid, out_h, out_w, output);
  return Launched();
}

cudaError_t BilinearSampleGrad(const float* input, int64_t batch, int64_t h, int64_t w, int64_t c,
                               const float* grid, int64_t out_h, int64_t out_w, const float* dout,
                               float* dinput, float* dgrid) {
  BilinearSampleGradKernel<<<Blocks(batch * out_h * out_w), kThreads>>>(
      input, batch, h, w, c, grid, out_h, out_w, dout, dinput, dgrid);
  return Launched();
}

}  // namespace fulcrum::ops::cuda::kernels
