#include "profiler/histogram.h"

#include <cmath>

namespace fulcrum::profiler {

int Log2Bucket(double value, double first_upper, int buckets) {
  if (!(value >= first_upper)) return 0;  // also NaN: the first bucket
  const int i = 1 + static_cast<int>(std::floor(std::log2(value / first_upper)));
  return i < buckets ? i : buckets - 1;
}

nlohmann::json HistogramJson(std::span<const int64_t> counts, double first_upper) {
  nlohmann::json upper = nlohmann::json::array();
  double bound = first_upper;
  for (size_t i = 0; i < counts.size(); ++i, bound *= 2) {
    upper.push_back(i + 1 < counts.size() ? nlohmann::json(bound) : nlohmann::json(nullptr));
  }
  return {{"upper", upper}, {"counts", counts}};
}

}  // namespace fulcrum::profiler
