// ops/cpu: choosing, by measurement, between the project's own kernel for an op shape and
// oneDNN's, as cudnnFind does: the first call of a direction (forward, a backward) on a shape
// times both, once each to warm up and then three times each, interleaved, on the call's own
// tensors (each overwrites its output, so both leave the same answer), and the faster (best
// of its three) runs every later call. The choice is
// kept per process (a table keyed by op, shape, direction and thread count), so every replica
// and every model of one process runs the same algorithm for the same layer. The records
// (KernelChoice) go into the run's report.
// Thread-safety: RunChosen may be called from many threads (the table is locked); a
// ChoiceState belongs to one planner (one thread at a time).
#pragma once

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fulcrum::ops {

// --conv_algo (it decides pooling and LRN too): auto (measure per shape), im2col (the
// project's own kernels only), onednn (oneDNN wherever it builds a primitive).
enum class ConvAlgo { kAuto, kIm2col, kOneDnn };
const char* ConvAlgoName(ConvAlgo algo);
// --conv_algo's spellings (ConvAlgoName's), parsed by Abseil (base/enum_flag.h).
bool AbslParseFlag(absl::string_view text, ConvAlgo* algo, std::string* error);
std::string AbslUnparseFlag(ConvAlgo algo);

// What one op shape runs, for the report.
struct KernelChoice {
  struct Direction {
    std::string algo;    // "own" kernel name ("im2col", "fulcrum"), "onednn", or "" (not run)
    std::string impl;    // oneDNN's implementation name ("brgconv:avx512_core"), if built
    double own_ms = -1;  // measured per call (auto mode), -1 when not measured
    double onednn_ms = -1;
  };
  std::string op;            // "conv2d", "max_pool", "avg_pool", "lrn"
  std::string layers;        // the layers that ran this shape, "conv1,conv2"
  std::string shape;         // "128x28x28x1 * 5x5x1x32 stride 1x1 SAME"
  double forward_gflop = 0;  // conv: 2 * N * OH * OW * KH * KW * C_in * C_out / 1e9 per call
  Direction forward, backward_data, backward_filter;  // pooling, LRN: backward_data only
  int64_t reorders = 0;  // oneDNN filter reorders so far, and their time
  double reorder_ms = 0;
  std::string fallback;  // why oneDNN is not a candidate, when it is not
};

// One direction of one planned shape: decided yet, and on which side.
struct ChoiceState {
  bool chosen = false;
  bool use_dnn = false;
};

// Runs one call of a direction on the chosen side. The first call decides: oneDNN when
// `mode` is kOneDnn, the own kernel when it is kIm2col or `dnn_available` is false, else the
// process's recorded choice for `key` (own_name, shape, direction and threads), measured now
// if there is none. `bind` sizes the calling thread's team before oneDNN runs. `*rec` gets the
// algorithm and the times.
absl::Status RunChosen(ConvAlgo mode, bool dnn_available, const std::string& key,
                       const char* own_name, ChoiceState* state, KernelChoice::Direction* rec,
                       absl::FunctionRef<absl::Status()> own,
                       absl::FunctionRef<absl::Status()> onednn, absl::FunctionRef<void()> bind);

}  // namespace fulcrum::ops
