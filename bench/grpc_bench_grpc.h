// bench/grpc_bench: gRPC moving the benchmark's messages in TF-gRPC-Bench's two modes.
//   serialized   bench/grpc_bench.proto's Bench service through the generated callback stub:
//                a message is a Payload of K `bytes` fields. The client copies its buffers
//                into the request each call (as a PS encodes its tensors), gRPC serializes it;
//                the server parses it, copies the buffers into its reply (Echo) or counts
//                them (Sink), and gRPC serializes the reply; the client parses it.
//   bytebuffer   no protobuf: a message is a grpc::ByteBuffer of K grpc::Slices pointing at
//                the client's buffers (no copy, as TensorFlow sends a tensor's bytes in
//                grpc_tensor_coding.cc), sent with grpc::GenericStub to a
//                grpc::CallbackGenericService; Echo answers with the received ByteBuffer itself
//                (its slices, refcounted, no copy), Sink with an 8-byte count; the client copies
//                the echoed bytes once into its destination buffer.
// Both run on the channel and server settings every Fulcrum task uses (runtime::MakeChannel,
// runtime::ConfigureServerBuilder), so the PS path and these share one configuration.
// Thread-safety: the services and GrpcPeer are thread-safe; a GrpcCall belongs to one call
// in flight at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/grpc_bench.grpc.pb.h"
#include "bench/grpc_bench_options.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace fulcrum::bench {

inline constexpr char kRawEchoMethod[] = "/fulcrum.bench.Raw/Echo";
inline constexpr char kRawSinkMethod[] = "/fulcrum.bench.Raw/Sink";

class SerializedBenchService final : public grpcbench::Bench::CallbackService {
 public:
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context,
                                 const grpcbench::Payload* request,
                                 grpcbench::Payload* response) override;
  grpc::ServerUnaryReactor* Sink(grpc::CallbackServerContext* context,
                                 const grpcbench::Payload* request,
                                 grpcbench::Ack* response) override;
};

class ByteBufferBenchService final : public grpc::CallbackGenericService {
 public:
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override;
};

// Starts a server on `host` (port 0: the kernel picks) with both services; *port gets it.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartBenchServer(const std::string& host,
                                                               SerializedBenchService* serialized,
                                                               ByteBufferBenchService* bytebuffer,
                                                               int* port);

// One call's state, reused call after call.
struct GrpcCall {
  std::vector<std::span<const char>> out;  // the message's buffers
  std::vector<char> in;                    // bytebuffer echo: the reply's bytes land here
  grpcbench::Payload request, reply;
  grpcbench::Ack ack;
  grpc::ByteBuffer bb_request, bb_reply;
  std::unique_ptr<grpc::ClientContext> context;
  int64_t sent = 0;      // payload bytes of the request
  int64_t received = 0;  // payload bytes of the reply (echo), or the count the server acked
};

// The client side of one server: one channel (its own connection) and both stubs.
class GrpcPeer {
 public:
  explicit GrpcPeer(const std::string& address);
  // Waits until the channel is connected; false after `timeout`.
  bool WaitUntilReady(absl::Duration timeout);
  // Starts Echo (echo = true) or Sink of call->out in `mode` (kSerialized or kByteBuffer);
  // `done` runs on a gRPC thread when the call ended, by `timeout` at the latest.
  void Start(Mode mode, bool echo, GrpcCall* call, absl::Duration timeout,
             std::function<void(absl::Status)> done);

 private:
  void Finish(Mode mode, bool echo, GrpcCall* call, const grpc::Status& status,
              const std::function<void(absl::Status)>& done);

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<grpcbench::Bench::Stub> stub_;
  grpc::GenericStub generic_;
};

}  // namespace fulcrum::bench
