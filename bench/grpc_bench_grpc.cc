#include "bench/grpc_bench_grpc.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/grpc/grpc_util.h"

namespace fulcrum::bench {
namespace {

int64_t PayloadBytes(const grpcbench::Payload& p) {
  int64_t n = 0;
  for (const auto& b : p.buffers()) n += static_cast<int64_t>(b.size());
  return n;
}

// One generic call: read the request, answer it (the same ByteBuffer, or a count), finish.
class RawReactor final : public grpc::ServerGenericBidiReactor {
 public:
  explicit RawReactor(bool echo) : echo_(echo) { StartRead(&request_); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request message"));
      return;
    }
    if (echo_) {
      response_ = request_;  // the received slices, refcounted: no copy
    } else {
      const auto n = static_cast<int64_t>(request_.Length());
      grpc::Slice count(&n, sizeof(n));
      response_ = grpc::ByteBuffer(&count, 1);
    }
    StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
  }
  void OnDone() override { delete this; }

 private:
  const bool echo_;
  grpc::ByteBuffer request_, response_;
};

class UnknownMethodReactor final : public grpc::ServerGenericBidiReactor {
 public:
  UnknownMethodReactor() {
    Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no such method"));
  }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerUnaryReactor* SerializedBenchService::Echo(grpc::CallbackServerContext* context,
                                                       const grpcbench::Payload* request,
                                                       grpcbench::Payload* response) {
  *response->mutable_buffers() = request->buffers();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* SerializedBenchService::Sink(grpc::CallbackServerContext* context,
                                                       const grpcbench::Payload* request,
                                                       grpcbench::Ack* response) {
  response->set_bytes(PayloadBytes(*request));
  response->set_buffers(request->buffers_size());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerGenericBidiReactor* ByteBufferBenchService::CreateReactor(
    grpc::GenericCallbackServerContext* context) {
  if (context->method() == kRawEchoMethod) return new RawReactor(true);
  if (context->method() == kRawSinkMethod) return new RawReactor(false);
  return new UnknownMethodReactor;
}

absl::StatusOr<std::unique_ptr<grpc::Server>> StartBenchServer(const std::string& host,
                                                               SerializedBenchService* serialized,
                                                               ByteBufferBenchService* bytebuffer,
                                                               int* port) {
  grpc::ServerBuilder builder;
  runtime::ConfigureServerBuilder(&builder);
  const std::string address = absl::StrCat(host.find(':') != std::string::npos ? "[" : "", host,
                                           host.find(':') != std::string::npos ? "]" : "", ":0");
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), port);
  builder.RegisterService(serialized);
  builder.RegisterCallbackGenericService(bytebuffer);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *port == 0) {
    return absl::UnavailableError(absl::StrCat("the bench gRPC server cannot listen on ", address));
  }
  return server;
}

GrpcPeer::GrpcPeer(const std::string& address)
    : channel_(runtime::MakeChannel(address)),
      stub_(grpcbench::Bench::NewStub(channel_)),
      generic_(channel_) {}

bool GrpcPeer::WaitUntilReady(absl::Duration timeout) {
  return channel_->WaitForConnected(runtime::DeadlineIn(timeout));
}

void GrpcPeer::Start(Mode mode, bool echo, GrpcCall* call, absl::Duration timeout,
                     std::function<void(absl::Status)> done) {
  call->context = std::make_unique<grpc::ClientContext>();
  call->context->set_deadline(runtime::DeadlineIn(timeout));
  call->sent = 0;
  for (const auto& b : call->out) call->sent += static_cast<int64_t>(b.size());
  auto finish = [this, mode, echo, call, done = std::move(done)](grpc::Status status) {
    Finish(mode, echo, call, status, done);
  };
  if (mode == Mode::kSerialized) {
    // The copy a serializing client makes: its buffers into the request's bytes fields.
    grpcbench::Payload& r = call->request;
    while (r.buffers_size() > static_cast<int>(call->out.size())) r.mutable_buffers()->RemoveLast();
    for (size_t i = 0; i < call->out.size(); ++i) {
      std::string* b = i < static_cast<size_t>(r.buffers_size())
                           ? r.mutable_buffers(static_cast<int>(i))
                           : r.add_buffers();
      b->assign(call->out[i].data(), call->out[i].size());
    }
    call->reply.Clear();
    if (echo) {
      stub_->async()->Echo(call->context.get(), &call->request, &call->reply, std::move(finish));
    } else {
      stub_->async()->Sink(call->context.get(), &call->request, &call->ack, std::move(finish));
    }
    return;
  }
  std::vector<grpc::Slice> slices;
  slices.reserve(call->out.size());
  for (const auto& b : call->out)
    slices.emplace_back(b.data(), b.size(), grpc::Slice::STATIC_SLICE);
  call->bb_request = grpc::ByteBuffer(slices.data(), slices.size());
  call->bb_reply.Clear();
  generic_.UnaryCall(call->context.get(), echo ? kRawEchoMethod : kRawSinkMethod,
                     grpc::StubOptions(), &call->bb_request, &call->bb_reply, std::move(finish));
}

void GrpcPeer::Finish(Mode mode, bool echo, GrpcCall* call, const grpc::Status& status,
                      const std::function<void(absl::Status)>& done) {
  absl::Status s = runtime::FromGrpc(status, echo ? "Echo" : "Sink");
  call->received = 0;
  if (s.ok() && mode == Mode::kSerialized) {
    call->received = echo ? PayloadBytes(call->reply) : call->ack.bytes();
  } else if (s.ok() && !echo) {
    int64_t n = -1;
    std::vector<grpc::Slice> slices;
    if (call->bb_reply.Dump(&slices).ok() && call->bb_reply.Length() == sizeof(n)) {
      char* p = reinterpret_cast<char*>(&n);
      for (const auto& sl : slices)
        p = static_cast<char*>(std::memcpy(p, sl.begin(), sl.size())) + sl.size();
    }
    call->received = n;
  } else if (s.ok()) {
    // The one copy a ByteBuffer client makes: the echoed slices into its destination.
    std::vector<grpc::Slice> slices;
    const size_t length = call->bb_reply.Length();
    if (!call->bb_reply.Dump(&slices).ok() || length > call->in.size()) {
      s = absl::DataLossError(absl::StrCat("Echo: a reply of ", length, " bytes"));
    } else {
      char* p = call->in.data();
      for (const auto& sl : slices)
        p = static_cast<char*>(std::memcpy(p, sl.begin(), sl.size())) + sl.size();
      call->received = static_cast<int64_t>(length);
    }
  }
  done(std::move(s));
}

}  // namespace fulcrum::bench
