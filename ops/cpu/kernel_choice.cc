#include "ops/cpu/kernel_choice.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "base/enum_flag.h"
#include "base/mutex.h"
#include "base/status_macros.h"

namespace fulcrum::ops {
namespace {

struct Measured {
  bool use_dnn = false;
  double own_ms = -1, onednn_ms = -1;
};

class ChoiceTable {
 public:
  bool Find(const std::string& key, Measured* out) {
    MutexLock lock(&mu_);
    auto it = table_.find(key);
    if (it == table_.end()) return false;
    *out = it->second;
    return true;
  }
  // Keeps the first choice published for `key` (two replicas may measure at once); returns
  // the one in force.
  Measured Publish(const std::string& key, const Measured& m) {
    MutexLock lock(&mu_);
    return table_.emplace(key, m).first->second;
  }

 private:
  Mutex mu_;
  std::map<std::string, Measured> table_ ABSL_GUARDED_BY(mu_);
};

ChoiceTable& Choices() {
  static ChoiceTable* table = new ChoiceTable();
  return *table;
}

// The time of one call of fn in ms, into *best when it is faster.
absl::Status TimeOnce(absl::FunctionRef<absl::Status()> fn, double* best) {
  const auto start = std::chrono::steady_clock::now();
  if (auto s = fn(); !s.ok()) return s;
  *best = std::min(
      *best,
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  return absl::OkStatus();
}

// The fastest of three timed runs of each kernel after a warm-up of each, the two interleaved
// (own, oneDNN, own, oneDNN, ...) so that a burst of load on a shared machine falls on both
// rather than on whichever ran during it; oneDNN's run is the last. The first error stops it.
absl::Status TimeBoth(absl::FunctionRef<absl::Status()> own,
                      absl::FunctionRef<absl::Status()> onednn, absl::FunctionRef<void()> bind,
                      double* own_ms, double* onednn_ms) {
  double warm = 0;
  *own_ms = *onednn_ms = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 4; ++i) {
    FULCRUM_RETURN_IF_ERROR(TimeOnce(own, i == 0 ? &warm : own_ms));
    bind();
    FULCRUM_RETURN_IF_ERROR(TimeOnce(onednn, i == 0 ? &warm : onednn_ms));
  }
  return absl::OkStatus();
}

constexpr EnumName<ConvAlgo> kConvAlgoNames[] = {
    {ConvAlgo::kAuto, "auto"}, {ConvAlgo::kIm2col, "im2col"}, {ConvAlgo::kOneDnn, "onednn"}};

}  // namespace

const char* ConvAlgoName(ConvAlgo algo) { return EnumNameOf(algo, kConvAlgoNames); }

bool AbslParseFlag(absl::string_view text, ConvAlgo* algo, std::string* error) {
  return ParseEnum(text, kConvAlgoNames, algo, error);
}

std::string AbslUnparseFlag(ConvAlgo algo) { return UnparseEnum(algo, kConvAlgoNames); }

absl::Status RunChosen(ConvAlgo mode, bool dnn_available, const std::string& key,
                       const char* own_name, ChoiceState* state, KernelChoice::Direction* rec,
                       absl::FunctionRef<absl::Status()> own,
                       absl::FunctionRef<absl::Status()> onednn, absl::FunctionRef<void()> bind) {
  if (state->chosen) {
    if (!state->use_dnn) return own();
    bind();
    return onednn();
  }
  bool use_dnn = dnn_available && mode != ConvAlgo::kIm2col;
  bool measured_now = false;
  if (use_dnn && mode == ConvAlgo::kAuto) {
    Measured m;
    if (!Choices().Find(key, &m)) {
      double own_ms = 0, onednn_ms = 0;
      FULCRUM_RETURN_IF_ERROR(TimeBoth(own, onednn, bind, &own_ms, &onednn_ms));
      m = Choices().Publish(key, {onednn_ms < own_ms, own_ms, onednn_ms});
      measured_now = true;
    }
    rec->own_ms = m.own_ms;
    rec->onednn_ms = m.onednn_ms;
    use_dnn = m.use_dnn;
  }
  state->chosen = true;
  state->use_dnn = use_dnn;
  rec->algo = use_dnn ? "onednn" : own_name;
  // oneDNN's run was the last: its output stands. Otherwise the own kernel runs (again), so
  // that this call's result is the chosen algorithm's.
  if (measured_now && use_dnn) return absl::OkStatus();
  if (!use_dnn) return own();
  bind();
  return onednn();
}

}  // namespace fulcrum::ops
