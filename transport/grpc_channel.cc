#include "transport/grpc_channel.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/impl/rpc_service_method.h"
#include "grpcpp/support/client_callback.h"
#include "grpcpp/support/method_handler.h"
#include "transport/grpc_slices.h"

namespace fulcrum::transport {
namespace {

constexpr DataMethod kMethods[] = {DataMethod::kPull, DataMethod::kPush, DataMethod::kPushPull};

// One call in flight: its context and buffers, until gRPC completes it.
struct GrpcCall {
  grpc::ClientContext context;
  grpc::ByteBuffer request;
  grpc::ByteBuffer reply;
  DataChannel::ParseReply parse;
  DataChannel::Done done;
};

}  // namespace

GrpcDataChannel::GrpcDataChannel(std::shared_ptr<grpc::Channel> channel, const std::string& service,
                                 std::string label)
    : channel_(std::move(channel)), label_(std::move(label)) {
  for (DataMethod m : kMethods) {
    names_.push_back(std::make_unique<std::string>(absl::StrCat(service, "/", DataMethodName(m))));
    methods_.emplace_back(names_.back()->c_str(), grpc::internal::RpcMethod::NORMAL_RPC, channel_);
  }
}

void GrpcDataChannel::Call(DataMethod method, std::vector<Slice> body, absl::Duration timeout,
                           ParseReply parse, Done done) {
  auto* call = new GrpcCall{{}, ToByteBuffer(body), {}, std::move(parse), std::move(done)};
  call->context.set_deadline(std::chrono::system_clock::now() +
                             absl::ToChronoMicroseconds(std::max(timeout, absl::ZeroDuration())));
  grpc::internal::CallbackUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      channel_.get(), methods_[static_cast<size_t>(method) - 1], &call->context, &call->request,
      &call->reply, [call](grpc::Status status) {
        absl::Status result = FromGrpcStatus(status);
        if (result.ok()) {
          std::vector<grpc::Slice> keep;
          result = call->parse(PiecesOf(call->reply, &keep));
        }
        Done done = std::move(call->done);
        delete call;
        done(std::move(result));
      });
}

GrpcDataService::GrpcDataService(const std::string& service, DataHandler handler,
                                 Authorizer authorizer)
    : handler_(std::move(handler)), authorizer_(std::move(authorizer)) {
  for (DataMethod m : kMethods) {
    AddMethod(new grpc::internal::RpcServiceMethod(
        MethodName(absl::StrCat(service, "/", DataMethodName(m))),
        grpc::internal::RpcMethod::NORMAL_RPC,
        new grpc::internal::RpcMethodHandler<GrpcDataService, grpc::ByteBuffer, grpc::ByteBuffer>(
            [m](GrpcDataService* self, grpc::ServerContext* context,
                const grpc::ByteBuffer* request,
                grpc::ByteBuffer* reply) { return self->Serve(m, context, request, reply); },
            this)));
  }
}

const char* GrpcDataService::MethodName(const std::string& full_name) {
  names_.push_back(std::make_unique<std::string>(full_name));
  return names_.back()->c_str();
}

grpc::Status GrpcDataService::Serve(DataMethod method, grpc::ServerContext* context,
                                    const grpc::ByteBuffer* request, grpc::ByteBuffer* reply) {
  std::vector<grpc::Slice> keep;  // holds the request's bytes while the handler reads them
  const Pieces body = PiecesOf(*request, &keep);
  DataRequest call{method, &body, CallDeadline(*context),
                   [this, context, method](const std::string& task) {
                     return authorizer_(*context, method, task);
                   }};
  std::vector<Slice> out;
  const absl::Status status = handler_(call, &out);
  if (!status.ok()) return ToGrpc(status);
  *reply = ToByteBuffer(out);
  return grpc::Status::OK;
}

}  // namespace fulcrum::transport
