#include "profiler/traffic.h"

namespace fulcrum::profiler {

void TrafficCounters::Add(const std::string& peer, const char* method, uint64_t sent,
                          uint64_t received) {
  MutexLock lock(&mu_);
  RpcTrafficPoint& p = points_[{peer, method}];
  if (p.peer.empty()) {
    p.peer = peer;
    p.method = method;
  }
  ++p.rpcs;
  p.bytes_sent += sent;
  p.bytes_received += received;
  ++p.sent_sizes[static_cast<size_t>(
      Log2Bucket(static_cast<double>(sent), kPayloadFirstUpper, kPayloadBuckets))];
  ++p.received_sizes[static_cast<size_t>(
      Log2Bucket(static_cast<double>(received), kPayloadFirstUpper, kPayloadBuckets))];
}

std::vector<RpcTrafficPoint> TrafficCounters::Snapshot() const {
  MutexLock lock(&mu_);
  std::vector<RpcTrafficPoint> out;
  out.reserve(points_.size());
  for (const auto& [key, point] : points_) out.push_back(point);
  return out;
}

}  // namespace fulcrum::profiler
