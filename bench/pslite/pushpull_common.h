// bench/pslite: what the two push+pull drivers share, so that ps-lite (pslite_bench.cc, built
// by bench/pslite/build.sh against ps-lite) and Fulcrum (bench/ps_pushpull.cc, built with
// Fulcrum) are timed and reported the same way: a file barrier that lines the workers'
// measurement windows up, the timed loop, and the one result line bench/compare_pslite.sh reads.
// Standard C++ only (ps-lite's build knows nothing of Abseil).
// Thread-safety: free functions; call them from one thread of a worker process.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

namespace pushpull {

using Clock = std::chrono::steady_clock;

// Announces `rank` at barrier `name` (a file <dir>/<name>.<rank>) and waits until all `count`
// workers have, polling every 200 µs. False after `timeout_s` seconds.
inline bool FileBarrier(const std::string& dir, const std::string& name, int rank, int count,
                        double timeout_s) {
  namespace fs = std::filesystem;
  const fs::path mine = fs::path(dir) / (name + "." + std::to_string(rank));
  { std::ofstream touch(mine.string() + ".tmp"); }
  std::error_code ec;
  fs::rename(mine.string() + ".tmp", mine, ec);  // appears whole to the others
  if (ec) return false;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    int present = 0;
    for (int r = 0; r < count; ++r) {
      if (fs::exists(fs::path(dir) / (name + "." + std::to_string(r)), ec)) ++present;
    }
    if (present == count) return true;
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

struct Timed {
  int64_t rounds = 0;
  double seconds = 0;
};

// Runs `round` (one push+pull of the whole parameter set; false = failed) back to back until
// `seconds` have passed (at least once); the time ends with the last round.
inline Timed RunFor(double seconds, const std::function<bool()>& round) {
  Timed t;
  const auto begin = Clock::now();
  const auto end = begin + std::chrono::duration<double>(seconds);
  auto now = begin;
  do {
    if (!round()) {
      t.rounds = -1;
      return t;
    }
    ++t.rounds;
    now = Clock::now();
  } while (now < end);
  t.seconds = std::chrono::duration<double>(now - begin).count();
  return t;
}

// The line bench/compare_pslite.sh sums over workers. bytes = payload pushed + pulled (the
// values only, no keys or headers), MB = 10^6 bytes.
inline void PrintResult(const char* side, int rank, int workers, int servers, int64_t model_bytes,
                        int chunks, const Timed& t) {
  const double bytes = 2.0 * static_cast<double>(model_bytes) * static_cast<double>(t.rounds);
  std::printf(
      "RESULT side=%s rank=%d workers=%d servers=%d model_bytes=%lld chunks=%d rounds=%lld "
      "seconds=%.4f rounds_per_s=%.2f mb_per_s=%.1f\n",
      side, rank, workers, servers, static_cast<long long>(model_bytes), chunks,
      static_cast<long long>(t.rounds), t.seconds, static_cast<double>(t.rounds) / t.seconds,
      bytes / t.seconds / 1e6);
  std::fflush(stdout);
}

}  // namespace pushpull
