#include "bench/grpc_bench_ops.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/blocking_counter.h"
#include "base/mutex.h"
#include "base/net.h"

namespace fulcrum::bench {
namespace {

// How long past its own deadline a call may take to report (it always does by then).
constexpr absl::Duration kReportSlack = absl::Seconds(10);

std::vector<std::span<const char>> Buffers(const PayloadData& data, const MessageSpec& m) {
  const auto& all = data.buffers();
  return {all.begin() + m.first, all.begin() + m.first + m.count};
}

}  // namespace

std::string ServerAddress::ToFlag() const {
  return absl::StrCat(host, ":", tcp_port, ":", grpc_port);
}

std::string ServerAddress::GrpcTarget(int port) const { return JoinHostPort(host, port); }

absl::StatusOr<ServerAddress> ParseServerAddress(const std::string& text) {
  const size_t b = text.rfind(':');
  const size_t a = b == std::string::npos || b == 0 ? std::string::npos : text.rfind(':', b - 1);
  ServerAddress s;
  if (a == std::string::npos || a == 0 ||
      !absl::SimpleAtoi(text.substr(a + 1, b - a - 1), &s.tcp_port) ||
      !absl::SimpleAtoi(text.substr(b + 1), &s.grpc_port)) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not HOST:TCP_PORT:GRPC_PORT"));
  }
  s.host = text.substr(0, a);
  return s;
}

absl::StatusOr<std::unique_ptr<Peer>> ConnectPeer(const ServerAddress& address,
                                                  absl::Duration timeout) {
  auto peer = std::make_unique<Peer>();
  peer->address = address;
  auto tcp = TcpConnection::Connect(address.host, address.tcp_port, timeout);
  if (!tcp.ok()) return tcp.status();
  peer->tcp = std::move(*tcp);
  peer->grpc = std::make_unique<GrpcPeer>(address.GrpcTarget(address.grpc_port));
  if (!peer->grpc->WaitUntilReady(timeout)) {
    return absl::UnavailableError(
        absl::StrCat("gRPC server ", address.GrpcTarget(address.grpc_port), " not ready"));
  }
  return peer;
}

std::vector<MessageSpec> OneMessage(const PayloadData& data) {
  return {{0, 0, data.spec().buffers()}};
}

std::vector<MessageSpec> MessagePerBuffer(const PayloadData& data, int num_peers) {
  std::vector<MessageSpec> out;
  for (int b = 0; b < data.spec().buffers(); ++b) out.push_back({b % num_peers, b, 1});
  return out;
}

EchoStep::EchoStep(Mode mode, std::vector<Peer*> peers, const PayloadData* data,
                   std::vector<MessageSpec> messages, absl::Duration timeout)
    : mode_(mode),
      peers_(std::move(peers)),
      data_(data),
      messages_(std::move(messages)),
      timeout_(timeout) {
  if (mode_ == Mode::kTcp) {
    std::vector<int> frames(peers_.size(), 0);
    for (Peer* p : peers_) exchanges_.push_back(std::make_unique<TcpExchange>(p->tcp.get()));
    for (const MessageSpec& m : messages_) {
      exchanges_[static_cast<size_t>(m.peer)]->AddFrame(kOpEcho, Buffers(*data_, m));
      frame_of_.emplace_back(m.peer, frames[static_cast<size_t>(m.peer)]++);
    }
    return;
  }
  for (const MessageSpec& m : messages_) {
    auto call = std::make_unique<GrpcCall>();
    call->out = Buffers(*data_, m);
    if (mode_ == Mode::kByteBuffer) {
      int64_t bytes = 0;
      for (const auto& b : call->out) bytes += static_cast<int64_t>(b.size());
      call->in.resize(static_cast<size_t>(bytes));
    }
    calls_.push_back(std::move(call));
  }
}

absl::Status EchoStep::Run(bool verify) {
  sent_ = received_ = 0;
  absl::Status s = mode_ == Mode::kTcp ? RunTcp(verify) : RunGrpc(verify);
  if (s.ok() && sent_ != received_) {
    s = absl::DataLossError(absl::StrCat(ModeName(mode_), ": sent ", sent_, " payload bytes, ",
                                         received_, " came back"));
  }
  return s;
}

absl::Status EchoStep::RunTcp(bool verify) {
  std::vector<TcpExchange*> xs;
  for (auto& x : exchanges_) {
    x->Rewind();
    xs.push_back(x.get());
  }
  if (absl::Status s = RunExchanges(xs, absl::Now() + timeout_); !s.ok()) return s;
  for (auto* x : xs) {
    auto payload = x->CheckReplies();
    if (!payload.ok()) return payload.status();
    received_ += *payload;
    sent_ += x->send_payload_bytes();
  }
  for (size_t m = 0; verify && m < messages_.size(); ++m) {
    if (absl::Status s = Verify(m); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status EchoStep::RunGrpc(bool verify) {
  BlockingCounter pending(static_cast<int>(calls_.size()));
  std::vector<absl::Status> status(calls_.size());
  for (size_t m = 0; m < calls_.size(); ++m) {
    peers_[static_cast<size_t>(messages_[m].peer)]->grpc->Start(
        mode_, true, calls_[m].get(), timeout_, [&status, &pending, m](absl::Status s) {
          status[m] = std::move(s);
          pending.DecrementCount();
        });
  }
  // Every call carries a deadline, so every one reports before this bound.
  if (!pending.WaitFor(timeout_ + kReportSlack)) {
    return absl::InternalError("a gRPC call never reported");
  }
  for (size_t m = 0; m < calls_.size(); ++m) {
    if (!status[m].ok()) return status[m];
    sent_ += calls_[m]->sent;
    received_ += calls_[m]->received;
    if (verify) {
      if (absl::Status s = Verify(m); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status EchoStep::Verify(size_t m) const {
  const MessageSpec& spec = messages_[m];
  bool same = true;
  if (mode_ == Mode::kTcp) {
    const auto& [peer, frame] = frame_of_[m];
    same = data_->Matches(exchanges_[static_cast<size_t>(peer)]->ReplyPayload(frame), spec.first,
                          spec.count);
  } else if (mode_ == Mode::kByteBuffer) {
    same = data_->Matches(calls_[m]->in, spec.first, spec.count);
  } else {
    const grpcbench::Payload& reply = calls_[m]->reply;
    same = reply.buffers_size() == spec.count;
    for (int i = 0; same && i < spec.count; ++i) {
      const std::string& b = reply.buffers(i);
      same = data_->Matches({b.data(), b.size()}, spec.first + i, 1);
    }
  }
  if (same) return absl::OkStatus();
  return absl::DataLossError(
      absl::StrCat(ModeName(mode_), ": the echo of message ", m, " differs from what was sent"));
}

namespace {

absl::StatusOr<Transfer> StreamGrpc(Mode mode, Peer* peer, const PayloadData& data, int window,
                                    absl::Duration duration, absl::Duration timeout) {
  std::vector<GrpcCall> calls(static_cast<size_t>(window));
  Mutex mu;
  CondVar cv;
  std::vector<size_t> idle;
  for (size_t i = 0; i < calls.size(); ++i) {
    calls[i].out = data.buffers();
    idle.push_back(i);
  }
  Transfer t;
  absl::Status error;
  int64_t started = 0;
  const absl::Time begin = absl::Now();
  const absl::Time end = begin + duration;
  for (;;) {
    size_t slot = 0;
    {
      MutexLock lock(&mu);
      while (idle.empty() && error.ok()) {
        if (!cv.WaitFor(&mu, timeout + kReportSlack))
          return absl::InternalError("a Sink never reported");
      }
      if (!error.ok() || (absl::Now() >= end && started > 0)) break;  // at least one a round
      slot = idle.back();
      idle.pop_back();
      ++started;
    }
    GrpcCall* call = &calls[slot];
    peer->grpc->Start(mode, false, call, timeout, [&, call, slot](absl::Status s) {
      MutexLock lock(&mu);
      if (s.ok() && call->received != call->sent) {
        s = absl::DataLossError(
            absl::StrCat("Sink: sent ", call->sent, " bytes, the server got ", call->received));
      }
      if (!s.ok() && error.ok()) error = s;
      if (s.ok()) {
        ++t.messages;
        t.bytes += call->received;
      }
      idle.push_back(slot);
      cv.SignalAll();
    });
  }
  MutexLock lock(&mu);
  while (idle.size() < calls.size()) {
    if (!cv.WaitFor(&mu, timeout + kReportSlack))
      return absl::InternalError("a Sink never reported");
  }
  t.seconds = absl::ToDoubleSeconds(absl::Now() - begin);
  if (!error.ok()) return error;
  return t;
}

}  // namespace

absl::StatusOr<Transfer> Stream(Mode mode, Peer* peer, const PayloadData& data, int window,
                                absl::Duration duration, absl::Duration timeout) {
  if (mode != Mode::kTcp) return StreamGrpc(mode, peer, data, window, duration, timeout);
  const absl::Time begin = absl::Now();
  auto acked =
      StreamFrames(peer->tcp.get(), data.buffers(), window, duration, begin + duration + timeout);
  if (!acked.ok()) return acked.status();
  Transfer t;
  t.messages = *acked;
  t.bytes = *acked * data.bytes();
  t.seconds = absl::ToDoubleSeconds(absl::Now() - begin);
  return t;
}

}  // namespace fulcrum::bench
