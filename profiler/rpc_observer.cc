#include "profiler/rpc_observer.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace fulcrum::profiler {

int64_t NowUnixMicros() { return absl::GetCurrentTimeNanos() / 1000; }

void ReportRpc(RpcObserver* observer, const std::string& peer, const char* method,
               int64_t begin_unix_us, const google::protobuf::Message& sent,
               const google::protobuf::Message& received) {
  if (observer == nullptr) return;
  ReportRpcBytes(observer, peer, method, begin_unix_us, sent.ByteSizeLong(),
                 received.ByteSizeLong());
}

void ReportRpcBytes(RpcObserver* observer, const std::string& peer, const char* method,
                    int64_t begin_unix_us, uint64_t bytes_sent, uint64_t bytes_received) {
  if (observer == nullptr) return;
  RpcEvent e;
  e.peer = &peer;
  e.method = method;
  e.begin_unix_us = begin_unix_us;
  e.duration_us = NowUnixMicros() - begin_unix_us;
  e.bytes_sent = bytes_sent;
  e.bytes_received = bytes_received;
  observer->OnRpc(e);
}

std::string PeerName(const std::string& task_label) {
  std::string name = task_label;
  std::replace(name.begin(), name.end(), ':', '-');
  return name;
}

}  // namespace fulcrum::profiler
