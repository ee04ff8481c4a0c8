// ops/cpu: the argument check the NHWC kernels (pool, LRN) share. Internal to ops/cpu.
// Thread-safety: a pure function.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "ops/tensor.h"

namespace fulcrum::ops {

// OK iff t is a non-empty CPU tensor of shape `*want`, or, with no `want`, of rank 4
// [N, H, W, C]. Errors are InvalidArgument reading "<name>: <what> ...".
inline absl::Status CheckNhwcTensor(const Tensor* t, const Shape* want, absl::string_view name,
                                    const char* what) {
  if (t == nullptr) return absl::InvalidArgumentError(absl::StrCat(name, ": ", what, " is null"));
  if (t->empty()) return absl::InvalidArgumentError(absl::StrCat(name, ": ", what, " is empty"));
  if (t->device() != Device::kCpu) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", what, " is on ", DeviceName(t->device()), ", expected cpu"));
  }
  if (want != nullptr) {
    if (t->shape() == *want) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": ", what, " has shape ", t->shape().ToString(), ", expected ", want->ToString()));
  }
  if (t->shape().rank() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", what, " ", t->shape().ToString(), " must be rank 4 [N, H, W, C]"));
  }
  return absl::OkStatus();
}

}  // namespace fulcrum::ops
