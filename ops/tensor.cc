#include "ops/tensor.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fulcrum::ops {

const char* DeviceName(Device device) {
  switch (device) {
    case Device::kCpu:
      return "cpu";
    case Device::kCuda:
      return "cuda";
    case Device::kArena:
      return "arena";
  }
  return "unknown";
}

int64_t Shape::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

std::string Shape::ToString() const { return absl::StrCat("[", absl::StrJoin(dims_, ", "), "]"); }

absl::Status ValidateShape(const Shape& shape, const std::string& what) {
  int64_t elements = 1;
  for (int64_t d : shape.dims()) {
    if (d <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", shape.ToString(), " has a non-positive dimension"));
    }
    // Overflow-safe: elements * d <= kMaxTensorElements, checked by division.
    if (d > kMaxTensorElements / elements) {
      return absl::InvalidArgumentError(absl::StrCat(what, " ", shape.ToString(), " has more than ",
                                                     kMaxTensorElements,
                                                     " elements (the most one tensor may hold)"));
    }
    elements *= d;
  }
  return absl::OkStatus();
}

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

std::shared_ptr<float> AllocateAligned(int64_t elements) {
  size_t bytes = static_cast<size_t>(std::max<int64_t>(elements, 1)) * sizeof(float);
  // Big tensors (datasets, large weights) are read at scattered rows: back them with 2 MiB
  // pages where the kernel allows it (THP "madvise" mode) to cut TLB misses.
  const size_t alignment = bytes >= 2 * kHugePage ? kHugePage : kTensorAlignment;
  // aligned_alloc needs the size to be a multiple of the alignment.
  bytes = (bytes + alignment - 1) / alignment * alignment;
  void* p = std::aligned_alloc(alignment, bytes);
  if (p == nullptr) throw std::bad_alloc();
  if (alignment == kHugePage) madvise(p, bytes, MADV_HUGEPAGE);  // advisory; failure is harmless
  return std::shared_ptr<float>(static_cast<float*>(p), [](float* q) { std::free(q); });
}

}  // namespace

Tensor Tensor::Zeros(const Shape& shape) {
  auto storage = AllocateAligned(shape.num_elements());
  std::memset(storage.get(), 0, static_cast<size_t>(shape.num_elements()) * sizeof(float));
  float* data = storage.get();
  return Tensor(std::move(storage), data, shape, Device::kCpu);
}

Tensor Tensor::Filled(const Shape& shape, float value) {
  auto storage = AllocateAligned(shape.num_elements());
  std::fill_n(storage.get(), shape.num_elements(), value);
  float* data = storage.get();
  return Tensor(std::move(storage), data, shape, Device::kCpu);
}

Tensor Tensor::View(float* data, const Shape& shape, Device device) {
  return Tensor(nullptr, data, shape, device);
}

Tensor Tensor::Wrap(std::shared_ptr<float> storage, const Shape& shape, Device device) {
  float* data = storage.get();
  return Tensor(std::move(storage), data, shape, device);
}

int64_t Tensor::rows() const { return shape_.rank() <= 1 ? 1 : shape_.dim(0); }

int64_t Tensor::cols() const {
  if (shape_.rank() == 0) return 1;
  if (shape_.rank() == 1) return shape_.dim(0);
  return num_elements() / shape_.dim(0);
}

Tensor Tensor::Rows(int64_t begin, int64_t end) const {
  Shape::Dims dims = shape_.dims();
  const int64_t row_elements = dims.empty() ? 1 : num_elements() / dims[0];
  if (!dims.empty()) dims[0] = end - begin;
  return Tensor(storage_, data_ + begin * row_elements, Shape(std::move(dims)), device_);
}

absl::StatusOr<Tensor> Tensor::Reshaped(const Shape& shape) const {
  if (shape.num_elements() != num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot reshape ", shape_.ToString(), " to ",
                                                   shape.ToString(), ": element counts differ"));
  }
  return Tensor(storage_, data_, shape, device_);
}

Tensor Tensor::Clone() const {
  Tensor copy = Zeros(shape_);
  if (num_elements() > 0 && data_ != nullptr) std::memcpy(copy.data(), data_, bytes());
  return copy;
}

}  // namespace fulcrum::ops
