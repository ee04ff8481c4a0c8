// bench/ps_throughput: the benchmark's own options (flags before Google Benchmark's, see
// ps_throughput.cc) and their parsing on Abseil's flag parser.
// Thread-safety: ParsePsBenchOptions runs once from main() before any thread.
#pragma once

#include <cstdint>
#include <string>

namespace fulcrum::bench {

struct PsBenchOptions {
  int round_ms = 250;
  int pairs = 3;
  int placement_workers = 4;
  int64_t chunk_bytes = 0;  // runtime::kDefaultChunkBytes unless set
  bool verbose = false;    // env PS_THROUGHPUT_VERBOSE=1: every round's figures on stderr
  bool pinned_ps = false;  // register the pinned/ family (the ps processes one core each)
  std::string ps_binary;
  std::string pinned_optimizer = "adam";
  // > 0: each pinned ps process may use only this fraction of its core (a cgroup-v1 CFS
  // quota over a 10 ms period), emulating PS hosts slower than the worker side.
  double ps_cpu_quota = 0;
};

// Parses this program's flags from argv after Google Benchmark took its own (call
// benchmark::Initialize first). Env PS_THROUGHPUT_ROUND_MS / PS_THROUGHPUT_PAIRS change the
// defaults, PS_THROUGHPUT_VERBOSE=1 turns on per-round lines. An unknown flag or a stray
// argument prints the reason and exits 1, as before the move to Abseil's parser.
PsBenchOptions ParsePsBenchOptions(int argc, char** argv);

}  // namespace fulcrum::bench
