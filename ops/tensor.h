// ops: Tensor, the float32 n-d array every Fulcrum module passes around.
// A Tensor is a cheap handle (shape + shared storage): copying it aliases the same memory.
// Storage is 64-byte aligned when Fulcrum allocates it; a view wraps memory it does not own.
// Thread-safety: a Tensor may be read from many threads; writers need external synchronisation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"

namespace fulcrum::ops {

// Where a tensor's bytes live. CPU code only dereferences kCpu tensors; the CUDA backend
// (ops/cuda) allocates kCuda tensors and is the only code that reads them. kArena is host
// memory posing as a device (ops/arena_backend.h): only the arena backend reads it, and it
// counts every copy across, so that what a GPU would copy is tested without one.
enum class Device { kCpu, kCuda, kArena };

const char* DeviceName(Device device);

// Dimensions of a tensor, outermost first (row-major). Up to kInlineRank dimensions are held
// inline: making, copying or reshaping a shape allocates nothing (a training step makes many).
class Shape {
 public:
  static constexpr size_t kInlineRank = 6;
  using Dims = absl::InlinedVector<int64_t, kInlineRank>;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(const std::vector<int64_t>& dims) : dims_(dims.begin(), dims.end()) {}
  explicit Shape(Dims dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t dim(int i) const { return dims_[static_cast<size_t>(i)]; }
  const Dims& dims() const { return dims_; }
  std::vector<int64_t> dims_vector() const { return {dims_.begin(), dims_.end()}; }
  // Product of all dimensions (1 for a scalar shape).
  int64_t num_elements() const;
  // Shape as "[a, b, c]".
  std::string ToString() const;

  friend bool operator==(const Shape& a, const Shape& b) { return a.dims_ == b.dims_; }

 private:
  Dims dims_;
};

// The most elements one tensor may hold: 2^34 floats (64 GiB). Far above any model here,
// far below where int64 element and byte counts overflow.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 34;

// Returns OK iff every dimension is positive and the element count, computed without
// overflow, is at most kMaxTensorElements; names `what` and the shape in the error. Call it
// on every shape that comes from outside (a request, a flag, a file) before num_elements().
absl::Status ValidateShape(const Shape& shape, const std::string& what);

inline constexpr size_t kTensorAlignment = 64;

class Tensor {
 public:
  // An empty tensor: no storage, shape [].
  Tensor() = default;

  // Allocates an owned, zero-filled, 64-byte aligned CPU tensor.
  static Tensor Zeros(const Shape& shape);
  // Allocates an owned CPU tensor with every element set to `value`.
  static Tensor Filled(const Shape& shape, float value);
  // Wraps memory the caller owns; the caller keeps it alive while the view is used.
  static Tensor View(float* data, const Shape& shape, Device device = Device::kCpu);
  // Wraps storage whose lifetime is shared (e.g. a device allocation with its own deleter).
  static Tensor Wrap(std::shared_ptr<float> storage, const Shape& shape, Device device);

  const Shape& shape() const { return shape_; }
  int64_t num_elements() const { return shape_.num_elements(); }
  size_t bytes() const { return static_cast<size_t>(num_elements()) * sizeof(float); }
  Device device() const { return device_; }
  bool empty() const { return data_ == nullptr; }
  // True when this handle shares ownership of its storage (not a plain view).
  bool owns_memory() const { return static_cast<bool>(storage_); }

  float* data() { return data_; }
  const float* data() const { return data_; }
  // Element access for CPU tensors.
  std::span<float> flat() { return {data_, static_cast<size_t>(num_elements())}; }
  std::span<const float> flat() const { return {data_, static_cast<size_t>(num_elements())}; }

  // Rows [begin, end) of the outermost dimension, sharing storage with this tensor.
  Tensor Rows(int64_t begin, int64_t end) const;
  // The same storage seen with another shape of the same element count.
  absl::StatusOr<Tensor> Reshaped(const Shape& shape) const;
  // A deep copy into a new owned CPU tensor (CPU tensors only).
  Tensor Clone() const;

  // Number of rows (outermost dimension) and the product of the rest: the 2-D view that the
  // matrix kernels use. A rank-1 tensor is one row.
  int64_t rows() const;
  int64_t cols() const;

 private:
  Tensor(std::shared_ptr<float> storage, float* data, Shape shape, Device device)
      : storage_(std::move(storage)), data_(data), shape_(std::move(shape)), device_(device) {}

  std::shared_ptr<float> storage_;  // null for views
  float* data_ = nullptr;
  Shape shape_;
  Device device_ = Device::kCpu;
};

}  // namespace fulcrum::ops
