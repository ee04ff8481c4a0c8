#include "worker/replicas.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "ops/arena_backend.h"
#include "ops/cuda_plugin.h"
#include "worker/setup.h"

namespace fulcrum::worker {
namespace {

constexpr int kMaxDevices = 64;

// [begin, end) of slice r when `batch` rows are cut into `n` contiguous near-equal slices.
std::pair<int64_t, int64_t> Slice(int64_t batch, int n, int r) {
  const int64_t base = batch / n, extra = batch % n;
  const int64_t begin = r * base + std::min<int64_t>(r, extra);
  return {begin, begin + base + (r < extra ? 1 : 0)};
}

// "35.27 GiB (37873215184 bytes)".
std::string GiB(int64_t bytes) {
  return absl::StrCat(absl::StrFormat("%.2f", static_cast<double>(bytes) / (1 << 30)), " GiB (",
                      bytes, " bytes)");
}

// A model whose variables and workspace do not fit the device's free memory is refused
// before anything is allocated there, naming the flag, the device and both sizes.
absl::Status CheckFitsOnDevice(const runtime::TrainingOptions& t, const models::Model& model,
                               const ops::Backend& backend, int64_t batch, bool resident,
                               int64_t eval_batch) {
  const int64_t free = backend.free_bytes();
  if (free < 0) return absl::OkStatus();
  const size_t slots = resident ? ops::SlotCount(t.optimizer.kind) : 0;
  std::vector<int64_t> batches = {batch};
  if (eval_batch > 0 && eval_batch != batch) batches.push_back(eval_batch);
  const int64_t need = model.DeviceBytes(batches, slots);
  if (need <= free) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      t.devices.empty() ? "--device" : "--devices", ": ", t.model, " at batch ", batch, " needs ",
      GiB(need), " on ", backend.name(), " (its values and gradients",
      slots > 0 ? absl::StrCat(", ", slots, " optimizer slot(s) each") : "",
      ", the activations of a batch of ", batch,
      eval_batch > 0 ? absl::StrCat(" and of an evaluation batch of ", eval_batch) : "", "); ",
      GiB(free), " are free there"));
}

}  // namespace

absl::StatusOr<std::vector<ops::DeviceId>> ComputeDevices(const runtime::TrainingOptions& t) {
  const bool from_list = !t.devices.empty();
  const std::vector<ops::DeviceId> devices = from_list ? t.devices : std::vector{t.device};
  const char* flag = from_list ? "--devices" : "--device";
  for (const ops::DeviceId& d : devices) {
    if (d.type != ops::Device::kCuda) continue;
    const absl::StatusOr<const ops::CudaPlugin*> plugin = ops::LoadCudaPlugin();
    if (!plugin.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, ": ", ops::DeviceIdName(d), ": ", plugin.status().message(), "; use cpu or cpu:N"));
    }
    const absl::StatusOr<int> count = (*plugin)->device_count();
    if (!count.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": ", ops::DeviceIdName(d),
                                                     ": no usable GPU on this machine (",
                                                     count.status().message(), ")"));
    }
    if (d.index >= *count) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": ", ops::DeviceIdName(d),
                                                     " does not exist: this machine has ", *count,
                                                     " GPU(s), gpu:0 to gpu:", *count - 1));
    }
  }
  if (devices.size() > kMaxDevices) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", devices.size(), " devices, at most ", kMaxDevices));
  }
  if (t.batch_size < static_cast<int64_t>(devices.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("--batch_size=", t.batch_size, " is smaller than the ", devices.size(),
                     " devices of ", flag, ": every device needs an example"));
  }
  return devices;
}

std::vector<std::string> DeviceNames(const runtime::TrainingOptions& t) {
  std::vector<std::string> names;
  for (const ops::DeviceId& d : t.devices.empty() ? std::vector{t.device} : t.devices) {
    names.push_back(ops::DeviceIdName(d));
  }
  return names;
}

absl::StatusOr<std::unique_ptr<Replicas>> Replicas::Create(const runtime::TrainingOptions& t,
                                                           const data::Dataset& train,
                                                           int worker_index, DeviceUse use) {
  FULCRUM_ASSIGN_OR_RETURN(std::vector<ops::DeviceId> devices, ComputeDevices(t));
  std::unique_ptr<Replicas> set(new Replicas());
  set->devices_ = std::move(devices);
  const int n = static_cast<int>(set->devices_.size());
  for (int r = 0; r < n; ++r) {
    Replica replica;
    // --threads shared out: replica r gets threads / n, the first ones one more if uneven.
    const int threads = std::max(1, t.threads / n + (r < t.threads % n ? 1 : 0));
    const ops::DeviceId& device = set->devices_[static_cast<size_t>(r)];
    replica.pool =
        std::make_unique<ops::ThreadPool>(device.type == ops::Device::kCuda ? 1 : threads);
    FULCRUM_ASSIGN_OR_RETURN(replica.model, BuildModel(t, train, replica.pool.get(), worker_index));
    if (device.type == ops::Device::kArena) {
      replica.backend = std::make_unique<ops::ArenaBackend>(replica.pool.get());
      replica.model->set_backend(replica.backend.get());
    } else if (device.type == ops::Device::kCuda) {
      FULCRUM_ASSIGN_OR_RETURN(const ops::CudaPlugin* plugin, ops::LoadCudaPlugin());
      FULCRUM_ASSIGN_OR_RETURN(replica.backend, plugin->create_backend(device.index, t.tf32));
      replica.model->set_backend(replica.backend.get());
    }
    if (replica.backend != nullptr) {
      const int64_t slice = Slice(t.batch_size, n, r).second - Slice(t.batch_size, n, r).first;
      FULCRUM_RETURN_IF_ERROR(CheckFitsOnDevice(t, *replica.model, *replica.backend, slice,
                                                use.resident && n == 1, use.eval_batch));
    }
    if (r > 0) {
      replica.model->set_seed(
          DeriveSeed(t.seed, NameHash(absl::StrCat("worker/", worker_index, "/replica/", r))));
      for (const auto& spec : replica.model->variables()) {
        replica.grads.push_back(ops::Tensor::Zeros(spec.shape));
      }
    }
    set->replicas_.push_back(std::move(replica));
  }
  if (n > 1) set->runner_ = std::make_unique<ops::ThreadPool>(n);
  return set;
}

ops::TransferCounters Replicas::transfer_counters() const {
  ops::TransferCounters total;
  for (const Replica& replica : replicas_) total += replica.model->backend().transfer_counters();
  return total;
}

absl::StatusOr<float> Replicas::ComputeGradients(const ops::Tensor& inputs,
                                                 std::span<const int32_t> labels,
                                                 std::span<const ops::Tensor> values,
                                                 std::span<ops::Tensor> grads, double* forward_ms,
                                                 const models::LayerHooks* hooks) {
  const int n = static_cast<int>(replicas_.size());
  if (n == 1) {
    return replicas_[0].model->ComputeGradients(inputs, labels, values, grads, forward_ms, hooks);
  }
  const int64_t batch = inputs.rows();
  if (batch < n) {
    return absl::InvalidArgumentError(
        absl::StrCat("a batch of ", batch, " examples cannot be split over ", n, " devices"));
  }
  // The wait for the values is part of the forward time, as in one model's forward.
  const absl::Time wait_start = absl::Now();
  if (hooks != nullptr && hooks->values_needed && !values.empty()) {
    FULCRUM_RETURN_IF_ERROR(hooks->values_needed(0, values.size()));
  }
  const double wait_ms = absl::ToDoubleMilliseconds(absl::Now() - wait_start);
  // The loss is not known before the replicas ran: forward_done sees 0.
  if (hooks != nullptr && hooks->forward_done) FULCRUM_RETURN_IF_ERROR(hooks->forward_done(0.0f));
  const bool labelled = !labels.empty();
  runner_->ParallelFor(n, [&](int r) {
    Replica& replica = replicas_[static_cast<size_t>(r)];
    const auto [begin, end] = Slice(batch, n, r);
    std::span<const int32_t> slice_labels =
        labelled ? labels.subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin))
                 : labels;
    std::span<ops::Tensor> out = r == 0 ? grads : std::span<ops::Tensor>(replica.grads);
    replica.loss = replica.model->ComputeGradients(inputs.Rows(begin, end), slice_labels, values,
                                                   out, &replica.forward_ms);
  });
  double loss = 0.0;
  double slowest_forward = 0.0;
  for (int r = 0; r < n; ++r) {
    const Replica& replica = replicas_[static_cast<size_t>(r)];
    if (!replica.loss.ok()) return replica.loss.status();
    const auto [begin, end] = Slice(batch, n, r);
    const float w = static_cast<float>(end - begin) / static_cast<float>(batch);
    loss += static_cast<double>(w) * static_cast<double>(*replica.loss);
    slowest_forward = std::max(slowest_forward, replica.forward_ms);
    for (size_t i = 0; i < grads.size(); ++i) {
      float* g = grads[i].data();
      const int64_t size = grads[i].num_elements();
      if (r == 0) {
        for (int64_t j = 0; j < size; ++j) g[j] *= w;
      } else {
        const float* h = replica.grads[i].data();
        for (int64_t j = 0; j < size; ++j) g[j] += w * h[j];
      }
    }
  }
  if (forward_ms != nullptr) *forward_ms = wait_ms + slowest_forward;
  return static_cast<float>(loss);
}

}  // namespace fulcrum::worker
