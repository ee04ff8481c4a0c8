// base: a small deterministic PRNG. The same seed gives the same stream on every platform
// and standard library (std::uniform_*_distribution and std::shuffle do not promise that),
// so shuffles and initial values are reproducible across machines and runs.
// Thread-safety: a Rng instance is not thread-safe; give each thread its own.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

namespace fulcrum {

// 128-bit product for Lemire's bounded draw; __extension__ keeps -Wpedantic quiet.
__extension__ using Uint128 = unsigned __int128;

// SplitMix64 mixing function: a bijection with good avalanche; used to derive seeds.
constexpr uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Derives an independent seed from a base seed and a stream id (e.g. epoch, variable index).
constexpr uint64_t DeriveSeed(uint64_t seed, uint64_t stream) {
  return Mix64(seed ^ Mix64(stream + 0x632be59bd9b4e019ULL));
}

// FNV-1a of a name (e.g. a variable's): a stable stream id for DeriveSeed.
constexpr uint64_t NameHash(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return h;
}

// The initialisation seed of a model variable: depends on (run seed, variable name) only, so
// the same variable gets the same bits whichever process or PS shard initialises it.
constexpr uint64_t VariableSeed(uint64_t seed, std::string_view name) {
  return DeriveSeed(seed, NameHash(name));
}

// xoshiro256** generator seeded through SplitMix64.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t x = seed;
    for (auto& s : s_) {
      x += 0x9e3779b97f4a7c15ULL;
      s = Mix64(x);
    }
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform integer in [0, n), n > 0, without modulo bias (Lemire's method).
  uint64_t Below(uint64_t n) {
    Uint128 m = static_cast<Uint128>(Next()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<Uint128>(Next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

  // Uniform double in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // Standard normal by Box-Muller (one value per call; simple and deterministic).
  double Normal() {
    double u1 = Uniform();
    while (u1 <= 0.0) u1 = Uniform();
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace fulcrum
