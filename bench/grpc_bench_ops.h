// bench/grpc_bench: the operations every benchmark is made of, for each transport.
//   EchoStep  a set of messages, each some consecutive buffers of a payload sent to one
//             server and echoed back, all in flight at once: one message of every buffer to
//             one server is a latency ping-pong (or the PS comparison's raw round trip); one
//             message per buffer, buffer b to server b % M, is a client's push+pull of a
//             parameter set split over M servers (TF-gRPC-Bench's PS throughput).
//   Stream    bandwidth: the payload as one message, sent again and again to one server for a
//             while with `window` messages in flight; only a tiny ack comes back.
// Thread-safety: a Peer, an EchoStep belong to one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/grpc_bench_grpc.h"
#include "bench/grpc_bench_options.h"
#include "bench/grpc_bench_payload.h"
#include "bench/grpc_bench_tcp.h"

namespace fulcrum::bench {

// Where one server process listens ("HOST:TCP_PORT:GRPC_PORT" on the command line).
struct ServerAddress {
  std::string host;
  int tcp_port = 0, grpc_port = 0, ps_port = 0;
  std::string ToFlag() const;              // "host:tcp:grpc"
  std::string GrpcTarget(int port) const;  // "host:port", IPv6 in brackets
};
absl::StatusOr<ServerAddress> ParseServerAddress(const std::string& text);

// Both connections of one client to one server: a raw TCP connection and a gRPC channel.
struct Peer {
  ServerAddress address;
  std::unique_ptr<TcpConnection> tcp;
  std::unique_ptr<GrpcPeer> grpc;
};
// Connects both and waits for the gRPC channel, within `timeout`.
absl::StatusOr<std::unique_ptr<Peer>> ConnectPeer(const ServerAddress& address,
                                                  absl::Duration timeout);

struct MessageSpec {
  int peer = 0;
  int first = 0;  // the message's buffers: [first, first + count) of the payload
  int count = 0;
};
// Every buffer in one message to peer 0.
std::vector<MessageSpec> OneMessage(const PayloadData& data);
// One message per buffer, buffer b to peer b % num_peers.
std::vector<MessageSpec> MessagePerBuffer(const PayloadData& data, int num_peers);

class EchoStep {
 public:
  // `peers` and `data` must outlive the step.
  EchoStep(Mode mode, std::vector<Peer*> peers, const PayloadData* data,
           std::vector<MessageSpec> messages, absl::Duration timeout);
  // Sends every message and waits for every echo; with `verify`, compares each echo with
  // what was sent (DataLoss on a difference).
  absl::Status Run(bool verify);
  int calls() const { return static_cast<int>(messages_.size()); }
  int64_t bytes_sent() const { return sent_; }          // payload bytes of the last Run
  int64_t bytes_received() const { return received_; }  // payload bytes echoed in it

 private:
  absl::Status RunTcp(bool verify);
  absl::Status RunGrpc(bool verify);
  absl::Status Verify(size_t m) const;

  const Mode mode_;
  std::vector<Peer*> peers_;
  const PayloadData* data_;
  std::vector<MessageSpec> messages_;
  const absl::Duration timeout_;
  std::vector<std::unique_ptr<TcpExchange>> exchanges_;  // tcp: one per peer
  std::vector<std::pair<int, int>> frame_of_;            // tcp: message -> (peer, frame)
  std::vector<std::unique_ptr<GrpcCall>> calls_;         // grpc: one per message
  int64_t sent_ = 0, received_ = 0;
};

struct Transfer {
  int64_t messages = 0;
  int64_t bytes = 0;  // payload bytes the server acknowledged
  double seconds = 0;
};

// Bandwidth of `mode` to `peer`: the whole payload as one message, repeated for `duration`
// (at least once) with `window` in flight, until the last one is acknowledged.
absl::StatusOr<Transfer> Stream(Mode mode, Peer* peer, const PayloadData& data, int window,
                                absl::Duration duration, absl::Duration timeout);

}  // namespace fulcrum::bench
