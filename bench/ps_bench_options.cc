#include "bench/ps_bench_options.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "runtime/cluster/chunk_plan.h"

#ifndef FULCRUM_PS_BINARY
#define FULCRUM_PS_BINARY "bin/ps"
#endif

ABSL_FLAG(int, round_ms, 250,
          "milliseconds each worker runs per round (env PS_THROUGHPUT_ROUND_MS sets the default)");
ABSL_FLAG(int, pairs, 3, "reported cycles of rounds (env PS_THROUGHPUT_PAIRS sets the default)");
ABSL_FLAG(int, placement_workers, 4, "worker threads of the placement/ and pinned/ families");
ABSL_FLAG(int64_t, chunk_bytes, fulcrum::runtime::kDefaultChunkBytes,
          "largest piece of a variable in one RPC, bytes");
ABSL_FLAG(bool, pinned_ps, false,
          "register the pinned/ family: real ps processes, each pinned to one core");
ABSL_FLAG(std::string, ps_binary, FULCRUM_PS_BINARY, "the ps binary the clusters run");
ABSL_FLAG(std::string, pinned_optimizer, "adam", "optimizer of the pinned/ family");
ABSL_FLAG(double, ps_cpu_quota, 0,
          "> 0: each pinned ps may use only this fraction of its core (cgroup-v1; needs root)");

namespace fulcrum::bench {
namespace {

// An environment variable as an int, or `fallback` when unset.
int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoi(value) : fallback;
}

}  // namespace

PsBenchOptions ParsePsBenchOptions(int argc, char** argv) {
  absl::SetFlag(&FLAGS_round_ms, EnvInt("PS_THROUGHPUT_ROUND_MS", 250));
  absl::SetFlag(&FLAGS_pairs, EnvInt("PS_THROUGHPUT_PAIRS", 3));
  absl::SetProgramUsageMessage(
      "ps_throughput [own flags] [--benchmark_filter=...]: PS vs plain gRPC throughput");
  const std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    std::fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], rest[1]);
    std::exit(1);
  }
  PsBenchOptions o;
  o.round_ms = std::max(1, absl::GetFlag(FLAGS_round_ms));
  o.pairs = std::max(1, absl::GetFlag(FLAGS_pairs));
  o.placement_workers = std::max(1, absl::GetFlag(FLAGS_placement_workers));
  o.chunk_bytes = std::max<int64_t>(4, absl::GetFlag(FLAGS_chunk_bytes));
  o.verbose = EnvInt("PS_THROUGHPUT_VERBOSE", 0) != 0;
  o.pinned_ps = absl::GetFlag(FLAGS_pinned_ps);
  o.ps_binary = absl::GetFlag(FLAGS_ps_binary);
  o.pinned_optimizer = absl::GetFlag(FLAGS_pinned_optimizer);
  o.ps_cpu_quota = absl::GetFlag(FLAGS_ps_cpu_quota);
  return o;
}

}  // namespace fulcrum::bench
