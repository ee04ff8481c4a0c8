// base: small statistics over measured values (step times, rates).
// Thread-safety: pure functions.
#pragma once

#include <vector>

namespace fulcrum {

// Nearest-rank percentile of `values`, q in [0, 1]; 0 for no values.
double Percentile(std::vector<double> values, double q);

// Arithmetic mean; 0 for no values.
double Mean(const std::vector<double>& values);

}  // namespace fulcrum
