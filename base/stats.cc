#include "base/stats.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>

namespace fulcrum {

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  const auto k = static_cast<size_t>(std::llround(q * static_cast<double>(values.size() - 1)));
  std::nth_element(values.begin(), values.begin() + static_cast<ptrdiff_t>(k), values.end());
  return values[k];
}

double Mean(const std::vector<double>& values) {
  if (values.empty()) return 0.0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

}  // namespace fulcrum
