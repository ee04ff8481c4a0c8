// profiler: application-level traffic counted in the runtime's own send and receive paths:
// RPCs and payload bytes per peer task ("ps-0") and per RPC method ("PushPull"), in each
// direction. Bytes are the serialized protobuf message sizes (what gRPC frames; HTTP/2 and
// TCP/IP headers come on top, see docs/profiler.md).
// Thread-safety: all methods are thread-safe; Add() is cheap (one short lock per RPC).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "profiler/metrics_exporter.h"

namespace fulcrum::profiler {

class TrafficCounters {
 public:
  // One RPC with `peer` (the other task, "ps-0") of `method`: `sent` bytes went out from this
  // process, `received` came in (either side of the RPC may call it).
  void Add(const std::string& peer, const char* method, uint64_t sent, uint64_t received);

  // Totals so far per (peer, method), sorted by peer then method.
  std::vector<RpcTrafficPoint> Snapshot() const;

 private:
  mutable Mutex mu_;
  std::map<std::pair<std::string, std::string>, RpcTrafficPoint> points_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fulcrum::profiler
