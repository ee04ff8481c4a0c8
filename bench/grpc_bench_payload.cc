#include "bench/grpc_bench_payload.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"

namespace fulcrum::bench {
namespace {

// A uniform double in [0, 1) from the engine's bits (the same on every standard library,
// unlike std::uniform_real_distribution).
double Unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

int64_t LogUniform(std::mt19937_64& rng, const SizeClass& c) {
  const double lo = std::log(static_cast<double>(c.min));
  const double hi = std::log(static_cast<double>(c.max));
  const auto v = static_cast<int64_t>(std::llround(std::exp(lo + Unit(rng) * (hi - lo))));
  return std::clamp(v, c.min, c.max);
}

int PickClass(std::mt19937_64& rng, const std::array<double, 3>& weights) {
  const double u = Unit(rng);
  double acc = 0;
  for (int i = 0; i < 3; ++i) {
    acc += weights[static_cast<size_t>(i)];
    if (u < acc) return i;
  }
  return 2;
}

// Class of each of n buffers in proportion to `weights` (largest remainders), in class order.
std::vector<int> Apportion(const std::array<double, 3>& weights, size_t n) {
  std::array<size_t, 3> count{};
  std::array<double, 3> rest{};
  size_t given = 0;
  for (size_t c = 0; c < 3; ++c) {
    const double exact = weights[c] * static_cast<double>(n);
    count[c] = static_cast<size_t>(exact);
    rest[c] = exact - static_cast<double>(count[c]);
    given += count[c];
  }
  while (given < n) {
    const auto c = static_cast<size_t>(std::max_element(rest.begin(), rest.end()) - rest.begin());
    ++count[c];
    rest[c] = -1;
    ++given;
  }
  std::vector<int> out;
  for (size_t c = 0; c < 3; ++c) out.insert(out.end(), count[c], static_cast<int>(c));
  return out;
}

}  // namespace

int64_t PayloadSpec::bytes() const {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
}

PayloadSpec SizePayload(int64_t total, int k) {
  k = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(k, total)));
  PayloadSpec spec;
  spec.scheme = "size";
  spec.name = k == 1 ? FormatBytes(total) : absl::StrCat(FormatBytes(total), " x", k);
  const int64_t each = total / k;
  spec.sizes.assign(static_cast<size_t>(k), each);
  spec.sizes.back() += total - each * k;
  return spec;
}

absl::StatusOr<PayloadSpec> SchemePayload(const std::string& scheme,
                                          const PayloadOptions& options) {
  PayloadSpec spec;
  spec.scheme = scheme;
  spec.name = scheme;
  const auto n = static_cast<size_t>(options.scheme_buffers);
  const std::array<const char*, 3> names = {"uniform-small", "uniform-medium", "uniform-large"};
  for (size_t c = 0; c < 3; ++c) {
    if (scheme == names[c]) {
      spec.sizes.assign(n, options.classes[c].uniform);
      return spec;
    }
  }
  if (scheme != "random" && scheme != "skew") {
    return absl::InvalidArgumentError(absl::StrCat("unknown payload scheme '", scheme, "'"));
  }
  std::mt19937_64 rng(options.seed);
  std::vector<int> classes;
  if (scheme == "random") {
    for (size_t i = 0; i < n; ++i) classes.push_back(PickClass(rng, {1.0 / 3, 1.0 / 3, 1.0 / 3}));
  } else {
    classes = Apportion(options.skew_weights, n);
    // Shuffle (Fisher-Yates on the engine's bits, the same everywhere).
    for (size_t i = classes.size(); i > 1; --i) std::swap(classes[i - 1], classes[rng() % i]);
  }
  for (int c : classes)
    spec.sizes.push_back(LogUniform(rng, options.classes[static_cast<size_t>(c)]));
  return spec;
}

PayloadData::PayloadData(PayloadSpec spec) : spec_(std::move(spec)) {
  data_.resize(static_cast<size_t>(spec_.bytes()));
  for (size_t i = 0; i < data_.size(); ++i) {
    data_[i] = static_cast<char>((i * 2654435761u) >> 13);
  }
  int64_t offset = 0;
  for (int64_t size : spec_.sizes) {
    offsets_.push_back(offset);
    buffers_.emplace_back(data_.data() + offset, static_cast<size_t>(size));
    offset += size;
  }
  offsets_.push_back(offset);
}

std::span<const char> PayloadData::buffer(int i) const { return buffers_[static_cast<size_t>(i)]; }

bool PayloadData::Matches(std::span<const char> echo, int first, int n) const {
  const int64_t begin = offsets_[static_cast<size_t>(first)];
  const int64_t end = offsets_[static_cast<size_t>(first + n)];
  return static_cast<int64_t>(echo.size()) == end - begin &&
         std::memcmp(echo.data(), data_.data() + begin, echo.size()) == 0;
}

}  // namespace fulcrum::bench
