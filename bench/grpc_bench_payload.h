// bench/grpc_bench: the messages it moves. A payload is a list of buffer sizes (one buffer:
// a single-buffer message; K buffers: an iovec-style message, or a parameter set of K
// tensors) and the bytes themselves, one contiguous block with every buffer back to back.
//
// Two kinds of payload:
//   size sweep  S bytes in K equal buffers (the last one takes the remainder);
//   schemes     TF-gRPC-Bench's payload generation over three buffer classes (small: bytes,
//               medium: KiB, large: MiB; PayloadOptions::classes): uniform-<class> gives every
//               buffer the class's uniform size; random draws each buffer's class with equal
//               chances; skew gives the classes buffers in proportion to
//               PayloadOptions::skew_weights (largest remainders; mostly small buffers by
//               default) in shuffled order. Random and skew sizes are log-uniform inside the
//               class, from a fixed seed, so every mode and every process of a run moves the
//               same layout.
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/grpc_bench_options.h"

namespace fulcrum::bench {

struct PayloadSpec {
  std::string name;    // "1 MiB x8", "skew"
  std::string scheme;  // "size" or the scheme's name
  std::vector<int64_t> sizes;
  int64_t bytes() const;
  int buffers() const { return static_cast<int>(sizes.size()); }
};

// `total` bytes in `k` buffers (k clamped to total).
PayloadSpec SizePayload(int64_t total, int k);
// The scheme's layout of options.scheme_buffers buffers; InvalidArgument for an unknown scheme.
absl::StatusOr<PayloadSpec> SchemePayload(const std::string& scheme, const PayloadOptions& options);

class PayloadData {
 public:
  // Allocates and fills the bytes (a pattern that depends on the offset, so a misplaced or
  // truncated echo is caught by Matches).
  explicit PayloadData(PayloadSpec spec);

  const PayloadSpec& spec() const { return spec_; }
  int64_t bytes() const { return static_cast<int64_t>(data_.size()); }
  std::span<const char> all() const { return data_; }
  std::span<const char> buffer(int i) const;
  const std::vector<std::span<const char>>& buffers() const { return buffers_; }
  // Whether `echo` holds exactly buffers [first, first + n) back to back.
  bool Matches(std::span<const char> echo, int first, int n) const;

 private:
  PayloadSpec spec_;
  std::vector<char> data_;
  std::vector<int64_t> offsets_;
  std::vector<std::span<const char>> buffers_;
};

}  // namespace fulcrum::bench
