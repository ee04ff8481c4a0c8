// ops/cpu: the convolution algorithm of each layer shape, chosen by measurement as cudnnFind
// does: the first call of a direction (forward, backward-data, backward-filter) on a shape runs
// both candidates, the project's im2col + GEMM (conv.h) and oneDNN (onednn_conv.h), once to
// warm up and twice timed, on the call's own tensors (every candidate overwrites its output,
// so the last run leaves the right answer), and keeps the faster for every later call. The
// record of every choice (choices()) goes into the run's report. Forward fuses the bias and
// the activation on both paths; backward-filter computes the bias gradient with it.
// A shape oneDNN cannot build a primitive for runs on im2col, with one log line naming the
// layer and the shape. Buffers are made on a shape's first call; later calls allocate nothing.
// Thread-safety: one thread at a time (as the CpuBackend that owns it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ops/cpu/conv.h"
#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"

namespace fulcrum::ops {

// --conv_algo: auto (measure per shape), im2col, onednn (wherever it builds a primitive).
enum class ConvAlgo { kAuto, kIm2col, kOneDnn };
// InvalidArgument naming --conv_algo and the choices for anything else.
absl::StatusOr<ConvAlgo> ParseConvAlgo(absl::string_view text);
const char* ConvAlgoName(ConvAlgo algo);

// What one shape runs, for the report.
struct ConvChoice {
  struct Direction {
    std::string algo;       // "im2col", "onednn" or "" (not run yet)
    std::string impl;       // oneDNN's implementation name ("brgconv:avx512_core"), if built
    double im2col_ms = -1;  // measured per call (auto mode), -1 when not measured
    double onednn_ms = -1;
  };
  std::string layers;        // the layers that ran this shape, "conv1,conv2"
  std::string shape;         // "128x28x28x1 * 5x5x1x32 stride 1x1 SAME"
  double forward_gflop = 0;  // per forward call: 2 * N * OH * OW * KH * KW * C_in * C_out / 1e9
  Direction forward, backward_data, backward_filter;
  int64_t reorders = 0;  // oneDNN filter reorders so far, and their time
  double reorder_ms = 0;
  std::string fallback;  // why oneDNN is not a candidate, when it is not
};

class ConvPlanner {
 public:
  explicit ConvPlanner(ConvAlgo algo = ConvAlgo::kAuto, ThreadPool* pool = nullptr);
  ~ConvPlanner();
  ConvPlanner(const ConvPlanner&) = delete;
  ConvPlanner& operator=(const ConvPlanner&) = delete;

  // Another pool: shapes are planned again when its thread count differs.
  void set_pool(ThreadPool* pool);
  // Another algorithm: every shape is planned (and measured) again.
  void set_algo(ConvAlgo algo);
  ConvAlgo algo() const { return algo_; }

  // The ops of conv.h on the chosen path (same shapes, errors and results).
  absl::Status Forward(const Tensor& x, const Tensor& filter, const Tensor& bias,
                       const Conv2DParams& params, ConvPostOp post_op, Tensor* y,
                       Tensor* workspace);
  absl::Status BackwardData(const Tensor& dy, const Tensor& filter, const Conv2DParams& params,
                            Tensor* dx, Tensor* workspace);
  // dfilter and dbias (null: none) overwritten.
  absl::Status BackwardFilter(const Tensor& x, const Tensor& dy, const Conv2DParams& params,
                              Tensor* dfilter, Tensor* dbias, Tensor* workspace);

  std::vector<ConvChoice> choices() const;

 private:
  struct Plan;
  enum Dir { kFwd = 0, kBwdData = 1, kBwdFilter = 2 };
  absl::StatusOr<Plan*> PlanFor(const Conv2DGeometry& g, const Conv2DParams& params,
                                ConvPostOp post_op, bool match_post_op);
  // Runs direction `dir` of `plan` on its chosen path (choosing first if not yet chosen).
  absl::Status Run(Plan* plan, Dir dir, absl::FunctionRef<absl::Status()> im2col,
                   absl::FunctionRef<absl::Status()> onednn);
  void BindThreads() const;

  ConvAlgo algo_;
  ThreadPool* pool_;
  std::vector<std::unique_ptr<Plan>> plans_;
};

}  // namespace fulcrum::ops
