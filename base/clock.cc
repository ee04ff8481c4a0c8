#include "base/clock.h"

namespace fulcrum {
namespace {

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace

const Clock* Clock::Real() {
  static const RealClock* const clock = new RealClock();
  return clock;
}

}  // namespace fulcrum
