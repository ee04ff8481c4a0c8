#include "transport/tcp_channel.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/thread_name.h"
#include "transport/limits.h"

namespace fulcrum::transport {
namespace {

// How long the rest of a reply may take once its first byte arrived.
constexpr absl::Duration kFrameTime = absl::Seconds(30);
// How often an idle reader or writer looks at the channel's state.
constexpr absl::Duration kIdlePoll = absl::Seconds(1);

}  // namespace

absl::StatusOr<std::unique_ptr<TcpDataChannel>> TcpDataChannel::Connect(const std::string& host,
                                                                        int port,
                                                                        const std::string& ticket,
                                                                        absl::Time deadline,
                                                                        std::string label) {
  absl::StatusOr<int> fd = ConnectTcp(host, port, deadline);
  if (!fd.ok()) return absl::UnavailableError(absl::StrCat(label, ": ", fd.status().message()));
  char hello[kHelloBytes];
  EncodeHello(ticket, hello);
  iovec iov{hello, sizeof(hello)};
  absl::Status s = WriteFull(*fd, std::span<iovec>(&iov, 1), deadline);
  char answer[kHelloAnswerBytes];
  if (s.ok()) s = ReadFull(*fd, answer, deadline);
  if (s.ok() && (std::string_view(answer, 8) != std::string_view(kHelloMagic, 8) ||
                 answer[8] != 0 || answer[9] != 0 || answer[10] != 0 || answer[11] != 0)) {
    s = absl::UnavailableError("the server refused the ticket");
  }
  if (!s.ok()) {
    close(*fd);
    return absl::Status(s.code(), absl::StrCat(label, ": hello: ", s.message()));
  }
  return std::unique_ptr<TcpDataChannel>(new TcpDataChannel(*fd, std::move(label)));
}

TcpDataChannel::TcpDataChannel(int fd, std::string label)
    : fd_(fd), wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)), label_(std::move(label)) {
  reader_ = std::thread([this] {
    SetCurrentThreadName("tcp-data-read");
    ReadLoop();
  });
  writer_ = std::thread([this] {
    SetCurrentThreadName("tcp-data-write");
    WriteLoop();
  });
}

TcpDataChannel::~TcpDataChannel() {
  {
    MutexLock lock(&mu_);
    closing_ = true;
    write_cv_.SignalAll();
  }
  Fail(absl::CancelledError("the channel was closed"));
  reader_.join();
  writer_.join();
  close(fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

bool TcpDataChannel::healthy() const {
  MutexLock lock(&mu_);
  return !failed_;
}

void TcpDataChannel::Outgoing::Unsent(std::vector<iovec>* iov) {
  iov->clear();
  iov->push_back({header.data(), header.size()});
  for (const Slice& s : body) iov->push_back({const_cast<char*>(s.data()), s.size()});
  SkipBytes(*iov, sent);
}

void TcpDataChannel::Call(DataMethod method, std::vector<Slice> body, absl::Duration timeout,
                          ParseReply parse, Done done) {
  const absl::Time deadline = absl::Now() + timeout;
  Outgoing out;
  RequestHeader h;
  h.method = static_cast<uint32_t>(method);
  for (const Slice& s : body) h.length += s.size();
  h.timeout_us = absl::ToInt64Microseconds(timeout);
  out.body = std::move(body);
  out.deadline = deadline;
  absl::Status refused;
  {
    MutexLock lock(&mu_);
    if (failed_) {
      refused = failure_;
    } else {
      out.id = h.id = next_id_++;
      EncodeRequestHeader(h, out.header.data());
      pending_.emplace(out.id, Pending{std::move(parse), std::move(done), deadline});
      if (deadline < reader_wake_ && wake_fd_ >= 0) {  // the reader must wake for it earlier
        reader_wake_ = deadline;
        const uint64_t one = 1;
        (void)!write(wake_fd_, &one, sizeof(one));
      }
      if (writing_ || !queue_.empty()) {  // behind others: the writer thread sends it
        queue_.push_back(std::move(out));
        write_cv_.Signal();
        return;
      }
      writing_ = true;
    }
  }
  if (!refused.ok()) {
    done(std::move(refused));
    return;
  }
  // The socket free: write what it takes now, here; the writer thread sends any rest.
  std::vector<iovec> iov;
  out.Unsent(&iov);
  absl::StatusOr<size_t> n = WriteNow(fd_, iov);
  if (!n.ok()) {
    Fail(absl::Status(n.status().code(), absl::StrCat("sending ", DataMethodName(h.method), ": ",
                                                      n.status().message())));
    MutexLock lock(&mu_);
    writing_ = false;
    return;
  }
  out.sent += *n;
  MutexLock lock(&mu_);
  writing_ = false;
  const size_t total = kRequestHeaderBytes + h.length;
  if (out.sent < total) queue_.push_front(std::move(out));
  if (!queue_.empty()) write_cv_.Signal();
}

bool TcpDataChannel::WriteAll(Outgoing& out) {
  std::vector<iovec> iov;
  out.Unsent(&iov);
  // A request half written cannot be taken back: the connection is failed on any error.
  if (absl::Status s = WriteFull(fd_, iov, out.deadline); !s.ok()) {
    Fail(absl::Status(s.code(), absl::StrCat("sending a request: ", s.message())));
    return false;
  }
  return true;
}

void TcpDataChannel::WriteLoop() {
  for (;;) {
    Outgoing out;
    {
      MutexLock lock(&mu_);
      while ((queue_.empty() || writing_) && !closing_ && !failed_) {
        write_cv_.WaitUntil(&mu_, absl::Now() + kIdlePoll);
      }
      if (closing_ || failed_) return;
      out = std::move(queue_.front());
      queue_.pop_front();
      // A request that timed out while queued is dropped, unless a part of it is out already.
      if (out.sent == 0 && !pending_.contains(out.id)) continue;
      writing_ = true;
    }
    const bool ok = WriteAll(out);
    MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) return;
  }
}

void TcpDataChannel::ReadLoop() {
  for (;;) {
    absl::Time wake = absl::Now() + kIdlePoll;
    {
      MutexLock lock(&mu_);
      if (closing_ || failed_) return;
      for (const auto& [id, p] : pending_) wake = std::min(wake, p.deadline);
      reader_wake_ = wake;
    }
    if (!WaitReadable(fd_, wake, wake_fd_)) {
      ExpireCalls();
      continue;
    }
    if (absl::Status s = ReadReply(); !s.ok()) {
      Fail(s);
      return;
    }
    ExpireCalls();
  }
}

void TcpDataChannel::ExpireCalls() {
  std::vector<Done> expired;
  {
    MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.deadline <= now) {
        expired.push_back(std::move(it->second.done));
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (Done& d : expired) {
    d(absl::DeadlineExceededError(absl::StrCat(label_, ": deadline passed before the reply")));
  }
}

absl::Status TcpDataChannel::ReadReply() {
  char header[kReplyHeaderBytes];
  absl::Time deadline = absl::Now() + kFrameTime;
  if (absl::Status s = ReadFull(fd_, header, deadline); !s.ok()) return s;
  absl::StatusOr<ReplyHeader> h = DecodeReplyHeader(header, kMaxMessageBytes);
  if (!h.ok()) return absl::UnavailableError(h.status().message());
  std::string message(h->message_length, '\0');
  if (absl::Status s = ReadFull(fd_, message, deadline); !s.ok()) return s;
  std::optional<Pending> call;
  {
    MutexLock lock(&mu_);
    if (auto it = pending_.find(h->id); it != pending_.end()) {
      call = std::move(it->second);
      pending_.erase(it);
    }
  }
  // A big reply at a slow link: the frame's time, and the call's own deadline, whichever is later.
  if (call) deadline = std::max(deadline, call->deadline);
  if (buffer_.size() < h->length) buffer_.resize(h->length);
  if (absl::Status s = ReadFull(fd_, std::span<char>(buffer_.data(), h->length), deadline);
      !s.ok()) {
    if (call) call->done(absl::Status(s.code(), absl::StrCat(label_, ": reply: ", s.message())));
    return s;
  }
  if (!call) return absl::OkStatus();  // its caller gave up on it (deadline)
  absl::Status result;
  if (absl::Now() > call->deadline) {  // came after the deadline the caller set: dropped
    result =
        absl::DeadlineExceededError(absl::StrCat(label_, ": deadline passed before the reply"));
  } else if (h->code != 0) {
    result = absl::Status(static_cast<absl::StatusCode>(h->code), message);
  } else {
    Pieces body;
    if (h->length > 0) body.emplace_back(buffer_.data(), h->length);
    result = call->parse(body);
  }
  call->done(std::move(result));
  return absl::OkStatus();
}

void TcpDataChannel::Fail(const absl::Status& why) {
  std::vector<Done> pending;
  absl::Status status;
  {
    MutexLock lock(&mu_);
    if (!failed_) {
      failed_ = true;
      failure_ = why.code() == absl::StatusCode::kCancelled
                     ? why
                     : absl::UnavailableError(absl::StrCat(label_, ": ", why.message()));
      shutdown(fd_, SHUT_RDWR);  // wakes the other thread
      write_cv_.SignalAll();
    }
    status = failure_;
    for (auto& [id, p] : pending_) pending.push_back(std::move(p.done));
    pending_.clear();
    queue_.clear();
  }
  for (Done& d : pending) d(status);
}

}  // namespace fulcrum::transport
