#include "bench/grpc_bench_tcp.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/signals.h"

namespace fulcrum::bench {
namespace {

constexpr int kPollSliceMs = 200;  // how often a wait looks at the stop signal

absl::Status Errno(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

bool WouldBlock() { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR; }

void SetTimeout(int fd, int option, absl::Duration d) {
  timeval tv = absl::ToTimeval(d);
  setsockopt(fd, SOL_SOCKET, option, &tv, sizeof(tv));
}

void NoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

absl::StatusOr<addrinfo*> Resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &result);
  if (rc != 0) return absl::InvalidArgumentError(absl::StrCat(host, ": ", gai_strerror(rc)));
  return result;
}

// Milliseconds until `deadline`, at most one poll slice; -1 when it has passed.
int PollMs(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return -1;
  return static_cast<int>(std::min<int64_t>(kPollSliceMs, absl::ToInt64Milliseconds(left) + 1));
}

// Waits for `events` on `fds`; DeadlineExceeded / Cancelled when the wait must end.
absl::Status Poll(std::vector<pollfd>& fds, absl::Time deadline, const char* what) {
  if (StopSignal() != 0) return absl::CancelledError("stopped by a signal");
  const int ms = PollMs(deadline);
  if (ms < 0) return absl::DeadlineExceededError(absl::StrCat("raw TCP ", what, " timed out"));
  if (poll(fds.data(), fds.size(), ms) < 0 && errno != EINTR) return Errno("poll");
  return absl::OkStatus();
}

// Blocking server-side I/O with SO_RCVTIMEO/SO_SNDTIMEO slices. Reading waits forever for
// the first byte of a frame (`idle`), at most `timeout` once a frame has begun.
absl::Status ReadFull(int fd, char* p, size_t n, bool idle, absl::Duration timeout,
                      const std::atomic<bool>& stop) {
  size_t got = 0;
  absl::Time last = absl::Now();
  while (got < n) {
    const ssize_t r = recv(fd, p + got, n - got, MSG_WAITALL);
    if (r > 0) {
      got += static_cast<size_t>(r);
      last = absl::Now();
    } else if (r == 0) {
      return absl::UnavailableError("connection closed");
    } else if (!WouldBlock()) {
      return Errno("recv");
    } else if (stop.load() || ((!idle || got > 0) && absl::Now() - last > timeout)) {
      return absl::DeadlineExceededError("frame timed out");
    }
  }
  return absl::OkStatus();
}

absl::Status WriteFull(int fd, iovec* iov, int count, absl::Duration timeout) {
  absl::Time last = absl::Now();
  while (count > 0) {
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<size_t>(count);
    const ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL);
    if (w < 0) {
      if (!WouldBlock()) return Errno("send");
      if (absl::Now() - last > timeout) return absl::DeadlineExceededError("send timed out");
      continue;
    }
    last = absl::Now();
    auto left = static_cast<size_t>(w);
    while (count > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --count;
    }
    if (count > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return absl::OkStatus();
}

}  // namespace

// ---- server ------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<TcpServer>> TcpServer::Start(const std::string& host,
                                                            absl::Duration io_timeout) {
  auto ai = Resolve(host, 0, true);
  if (!ai.ok()) return ai.status();
  const int fd = socket((*ai)->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const bool bound =
      fd >= 0 && bind(fd, (*ai)->ai_addr, (*ai)->ai_addrlen) == 0 && listen(fd, 128) == 0;
  freeaddrinfo(*ai);
  if (!bound) {
    absl::Status s = Errno(absl::StrCat("raw TCP server cannot listen on ", host));
    if (fd >= 0) close(fd);
    return s;
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port =
      ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                       : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  std::unique_ptr<TcpServer> server(new TcpServer(fd, port, io_timeout));
  server->acceptor_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

TcpServer::TcpServer(int fd, int port, absl::Duration io_timeout)
    : listen_fd_(fd), port_(port), io_timeout_(io_timeout) {}

TcpServer::~TcpServer() {
  stop_ = true;
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> threads;
  {
    MutexLock lock(&mu_);
    for (int fd : fds_) {
      if (fd >= 0) shutdown(fd, SHUT_RDWR);
    }
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();
  close(listen_fd_);
}

void TcpServer::AcceptLoop() {
  while (!stop_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, kPollSliceMs) <= 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    NoDelay(fd);
    SetTimeout(fd, SO_RCVTIMEO, absl::Milliseconds(kPollSliceMs));
    SetTimeout(fd, SO_SNDTIMEO, absl::Milliseconds(kPollSliceMs));
    MutexLock lock(&mu_);
    fds_.push_back(fd);
    threads_.emplace_back([this, fd] { Serve(fd); });
  }
}

// One connection: read a frame, answer it (echo: the frame back; sink_ack: a bare header).
void TcpServer::Serve(int fd) {
  std::vector<char> buf;
  for (;;) {
    FrameHeader h;
    if (!ReadFull(fd, reinterpret_cast<char*>(&h), sizeof(h), true, io_timeout_, stop_).ok()) break;
    if ((h.op != kOpEcho && h.op != kOpSinkAck) ||
        h.bytes > static_cast<uint64_t>(kMaxFrameBytes)) {
      break;  // not our protocol: drop the connection
    }
    if (buf.size() < h.bytes) buf.resize(h.bytes);
    if (!ReadFull(fd, buf.data(), h.bytes, false, io_timeout_, stop_).ok()) break;
    FrameHeader ack{kOpSinkAck, 0, 0};
    iovec iov[2] = {{h.op == kOpEcho ? &h : &ack, sizeof(h)}, {buf.data(), h.bytes}};
    if (!WriteFull(fd, iov, h.op == kOpEcho && h.bytes > 0 ? 2 : 1, io_timeout_).ok()) break;
  }
  MutexLock lock(&mu_);
  std::replace(fds_.begin(), fds_.end(), fd, -1);
  close(fd);
}

// ---- client ------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<TcpConnection>> TcpConnection::Connect(const std::string& host,
                                                                      int port,
                                                                      absl::Duration timeout) {
  auto ai = Resolve(host, port, false);
  if (!ai.ok()) return ai.status();
  const int fd = socket((*ai)->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int rc = fd < 0 ? -1 : connect(fd, (*ai)->ai_addr, (*ai)->ai_addrlen);
  freeaddrinfo(*ai);
  if (fd < 0) return Errno("socket");
  std::unique_ptr<TcpConnection> conn(new TcpConnection(fd));
  if (rc != 0 && errno != EINPROGRESS) return Errno(absl::StrCat("connect ", host, ":", port));
  std::vector<pollfd> p = {{fd, POLLOUT, 0}};
  const absl::Time deadline = absl::Now() + timeout;
  while (p[0].revents == 0) {
    if (absl::Status s = Poll(p, deadline, "connect"); !s.ok()) return s;
  }
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    errno = err;
    return Errno(absl::StrCat("connect ", host, ":", port));
  }
  NoDelay(fd);
  return conn;
}

TcpConnection::~TcpConnection() { close(fd_); }

void TcpExchange::AddFrame(uint32_t op, const std::vector<std::span<const char>>& buffers) {
  FrameHeader h{op, static_cast<uint32_t>(buffers.size()), 0};
  for (const auto& b : buffers) h.bytes += b.size();
  headers_.push_back(h);
  frames_.push_back(buffers);
  send_payload_ += static_cast<int64_t>(h.bytes);
  iov_.clear();  // laid out again by Rewind
}

void TcpExchange::Rewind() {
  if (iov_.empty()) {
    send_bytes_ = 0;
    reply_offsets_.clear();
    size_t reply = 0;
    for (size_t f = 0; f < frames_.size(); ++f) {
      iov_.push_back({&headers_[f], sizeof(FrameHeader)});
      for (const auto& b : frames_[f]) {
        if (!b.empty()) iov_.push_back({const_cast<char*>(b.data()), b.size()});
      }
      send_bytes_ += sizeof(FrameHeader) + headers_[f].bytes;
      reply_offsets_.push_back(reply);
      reply += sizeof(FrameHeader) + (headers_[f].op == kOpEcho ? headers_[f].bytes : 0);
    }
    reply_.resize(reply);
  }
  sent_ = received_ = iov_index_ = iov_offset_ = 0;
}

std::span<const char> TcpExchange::ReplyPayload(int f) const {
  const auto& h = headers_[static_cast<size_t>(f)];
  if (h.op != kOpEcho) return {};
  return std::span<const char>(reply_).subspan(reply_offsets_[static_cast<size_t>(f)] + 16,
                                               h.bytes);
}

absl::StatusOr<int64_t> TcpExchange::CheckReplies() const {
  int64_t payload = 0;
  for (size_t f = 0; f < headers_.size(); ++f) {
    FrameHeader h;
    std::memcpy(&h, reply_.data() + reply_offsets_[f], sizeof(h));
    const bool echo = headers_[f].op == kOpEcho;
    if (h.op != headers_[f].op || h.bytes != (echo ? headers_[f].bytes : 0)) {
      return absl::DataLossError(absl::StrCat("raw TCP: reply ", f, " does not match its frame"));
    }
    payload += static_cast<int64_t>(h.bytes);
  }
  return payload;
}

absl::Status TcpExchange::Send(bool* progress) {
  if (sent_ == send_bytes_) return absl::OkStatus();
  iovec local[64];
  int n = 0;
  for (size_t i = iov_index_; i < iov_.size() && n < 64; ++i, ++n) {
    local[n] = iov_[i];
    if (i == iov_index_) {
      local[n].iov_base = static_cast<char*>(local[n].iov_base) + iov_offset_;
      local[n].iov_len -= iov_offset_;
    }
  }
  msghdr m{};
  m.msg_iov = local;
  m.msg_iovlen = static_cast<size_t>(n);
  const ssize_t w = sendmsg(conn_->fd(), &m, MSG_NOSIGNAL);
  if (w < 0) return WouldBlock() ? absl::OkStatus() : Errno("raw TCP send");
  *progress = true;
  sent_ += static_cast<size_t>(w);
  auto left = static_cast<size_t>(w);
  while (left > 0) {
    const size_t rest = iov_[iov_index_].iov_len - iov_offset_;
    if (left < rest) {
      iov_offset_ += left;
      break;
    }
    left -= rest;
    ++iov_index_;
    iov_offset_ = 0;
  }
  return absl::OkStatus();
}

absl::Status TcpExchange::Receive(bool* progress) {
  if (received_ == reply_.size()) return absl::OkStatus();
  const ssize_t r = recv(conn_->fd(), reply_.data() + received_, reply_.size() - received_, 0);
  if (r == 0) return absl::UnavailableError("raw TCP: the server closed the connection");
  if (r < 0) return WouldBlock() ? absl::OkStatus() : Errno("raw TCP recv");
  *progress = true;
  received_ += static_cast<size_t>(r);
  return absl::OkStatus();
}

absl::Status RunExchanges(std::span<TcpExchange* const> exchanges, absl::Time deadline) {
  std::vector<pollfd> fds(exchanges.size());
  for (size_t i = 0; i < fds.size(); ++i) fds[i] = {exchanges[i]->conn_->fd(), 0, POLLOUT};
  for (;;) {
    bool all_done = true;
    for (size_t i = 0; i < fds.size(); ++i) {
      TcpExchange* x = exchanges[i];
      bool progress = false;
      if (fds[i].revents & (POLLOUT | POLLERR | POLLHUP)) {
        if (absl::Status s = x->Send(&progress); !s.ok()) return s;
      }
      if (fds[i].revents & (POLLIN | POLLERR | POLLHUP)) {
        if (absl::Status s = x->Receive(&progress); !s.ok()) return s;
      }
      fds[i].events = static_cast<short>((x->sent_ < x->send_bytes_ ? POLLOUT : 0) |
                                         (x->received_ < x->reply_.size() ? POLLIN : 0));
      fds[i].revents = 0;
      all_done = all_done && x->done();
    }
    if (all_done) return absl::OkStatus();
    if (absl::Status s = Poll(fds, deadline, "exchange"); !s.ok()) return s;
  }
}

absl::StatusOr<int64_t> StreamFrames(TcpConnection* conn,
                                     const std::vector<std::span<const char>>& buffers, int window,
                                     absl::Duration duration, absl::Time deadline) {
  TcpExchange frame(conn);  // one frame's iovec, sent again and again
  frame.AddFrame(kOpSinkAck, buffers);
  frame.Rewind();
  const absl::Time end = absl::Now() + duration;
  int64_t started = 0, acked = 0;
  bool in_frame = false;
  std::vector<char> acks(16 * 256);
  size_t ack_bytes = 0;
  std::vector<pollfd> p = {{conn->fd(), 0, 0}};
  for (;;) {
    const bool time_left = absl::Now() < end || started == 0;  // at least one frame a round
    bool progress = true;
    while (progress && (in_frame || (time_left && started - acked < window))) {
      if (!in_frame) {
        frame.Rewind();
        in_frame = true;
        ++started;
      }
      progress = false;
      if (absl::Status s = frame.Send(&progress); !s.ok()) return s;
      if (frame.sent_ == frame.send_bytes_) in_frame = false;
    }
    const ssize_t r = recv(conn->fd(), acks.data() + ack_bytes, acks.size() - ack_bytes, 0);
    if (r == 0) return absl::UnavailableError("raw TCP: the server closed the connection");
    if (r < 0 && !WouldBlock()) return Errno("raw TCP recv");
    if (r > 0) {
      ack_bytes += static_cast<size_t>(r);
      const size_t whole = ack_bytes / 16;
      for (size_t a = 0; a < whole; ++a) {
        FrameHeader h;
        std::memcpy(&h, acks.data() + 16 * a, 16);
        if (h.op != kOpSinkAck) return absl::DataLossError("raw TCP: not an ack");
      }
      acked += static_cast<int64_t>(whole);
      std::memmove(acks.data(), acks.data() + 16 * whole, ack_bytes - 16 * whole);
      ack_bytes -= 16 * whole;
      continue;  // read again before polling
    }
    if (!time_left && !in_frame && acked == started) return acked;
    p[0].events = static_cast<short>(
        POLLIN | (in_frame || (time_left && started - acked < window) ? POLLOUT : 0));
    if (absl::Status s = Poll(p, deadline, "stream"); !s.ok()) return s;
  }
}

}  // namespace fulcrum::bench
