// transport: the data plane on gRPC. Both ends of it:
//   GrpcDataChannel, a DataChannel making unary calls "<service>/Pull", "/Push", "/PushPull"
//     on a gRPC channel (the task's own connection, shared with its control RPCs), the body
//     and the reply as byte buffers of the same slices (transport/grpc_slices.h);
//   GrpcDataService, a gRPC service registering those three methods on a server; each call
//     goes to a DataHandler with the request's pieces read in place. A service with control
//     RPCs of its own (ps::PsService) derives from it and adds them.
// Thread-safety: Call may be made from many threads at once; the service's handler is called
// from gRPC's threads.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "grpcpp/channel.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/impl/service_type.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "transport/data_channel.h"

namespace fulcrum::transport {

class GrpcDataChannel final : public DataChannel {
 public:
  // Calls the methods of `service` ("/fulcrum.pb.ParameterServer") on `channel`; `label`
  // names the channel.
  GrpcDataChannel(std::shared_ptr<grpc::Channel> channel, const std::string& service,
                  std::string label);

  // The server's status as it sent it; DeadlineExceeded or Unavailable as gRPC reports them.
  void Call(DataMethod method, std::vector<Slice> body, absl::Duration timeout, ParseReply parse,
            Done done) override;
  // gRPC reconnects by itself: a gRPC channel never needs replacing.
  bool healthy() const override { return true; }
  const std::string& label() const override { return label_; }

 private:
  const std::shared_ptr<grpc::Channel> channel_;
  const std::string label_;
  std::vector<std::unique_ptr<std::string>> names_;  // the methods' names' storage
  std::vector<grpc::internal::RpcMethod> methods_;   // indexed by DataMethod - 1
};

class GrpcDataService : public grpc::Service {
 public:
  // Checks the caller of `method` may act as `task`, from the call's credentials.
  using Authorizer = std::function<absl::Status(const grpc::ServerContext& context,
                                                DataMethod method, const std::string& task)>;

  // Registers "<service>/Pull", "/Push" and "/PushPull" ("/fulcrum.pb.ParameterServer"),
  // each served by `handler`, whose request's `authorize` runs `authorizer`.
  GrpcDataService(const std::string& service, DataHandler handler, Authorizer authorizer);

 protected:
  // The registered names' storage ("/fulcrum.pb.ParameterServer/Pull"); a derived service
  // registering its own methods keeps their names here too.
  const char* MethodName(const std::string& full_name);

 private:
  grpc::Status Serve(DataMethod method, grpc::ServerContext* context,
                     const grpc::ByteBuffer* request, grpc::ByteBuffer* reply);

  const DataHandler handler_;
  const Authorizer authorizer_;
  std::vector<std::unique_ptr<std::string>> names_;
};

}  // namespace fulcrum::transport
