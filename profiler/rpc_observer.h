// profiler: the one interface the runtime's RPC paths (runtime::GrpcPsClient, the
// coordinator client, ps::PsService, ...) report their calls to, so that runtime/ and ps/ need
// not know the rest of the profiler.
// Thread-safety: OnRpc is called from many threads at once; implementations must allow it.
#pragma once

#include <cstdint>
#include <string>

#include "google/protobuf/message.h"

namespace fulcrum::profiler {

// One RPC as the runtime saw it (client side: whole call; server side: the handler).
struct RpcEvent {
  const std::string* peer = nullptr;  // "ps-0", "worker-1"
  const char* method = "";
  int64_t begin_unix_us = 0;
  int64_t duration_us = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
};

// What the runtime's RPC paths report to (runtime::GrpcPsClient, ps::PsService, ...).
class RpcObserver {
 public:
  virtual ~RpcObserver() = default;
  virtual void OnRpc(const RpcEvent& event) = 0;
};

// Reports a finished RPC of `method` with `peer` that began at `begin_unix_us` to `observer`
// (nothing when it is null): `sent` is the message this process sent (a client's request, a
// server's response), `received` the one it got; the bytes are their serialized sizes.
void ReportRpc(RpcObserver* observer, const std::string& peer, const char* method,
               int64_t begin_unix_us, const google::protobuf::Message& sent,
               const google::protobuf::Message& received);
// The same for messages whose serialized sizes are known (the zero-copy frames).
void ReportRpcBytes(RpcObserver* observer, const std::string& peer, const char* method,
                    int64_t begin_unix_us, uint64_t bytes_sent, uint64_t bytes_received);
// Microseconds since the epoch (the clock of every record and trace event).
int64_t NowUnixMicros();

// The peer name the reports use for a request's task label: "worker:1" -> "worker-1" (the
// task's folder name in the run directory).
std::string PeerName(const std::string& task_label);

}  // namespace fulcrum::profiler
