#include "transport/tcp_wire.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/net.h"

namespace fulcrum::transport {
namespace {

void Put32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void Put64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint32_t Get32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
uint64_t Get64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

// Milliseconds until `deadline` for poll(), at least 0, at most a day.
int PollMillis(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return 24 * 3600 * 1000;
  const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now() + absl::Microseconds(999));
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 24 * 3600 * 1000));
}

// Waits for `events` on fd; OK, DeadlineExceeded, or Unavailable on a poll error.
absl::Status WaitFor(int fd, short events, absl::Time deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = poll(&p, 1, PollMillis(deadline));
    if (rc > 0) return absl::OkStatus();  // ready, or an error the next call reports
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return absl::UnavailableError(absl::StrCat("poll: ", std::strerror(errno)));
    if (absl::Now() >= deadline) return absl::DeadlineExceededError("deadline passed");
  }
}

}  // namespace

void EncodeRequestHeader(const RequestHeader& h, char out[kRequestHeaderBytes]) {
  Put32(out, kTcpRequestMagic);
  Put32(out + 4, h.method);
  Put64(out + 8, h.id);
  Put64(out + 16, h.length);
  Put64(out + 24, static_cast<uint64_t>(h.timeout_us));
}

void EncodeReplyHeader(const ReplyHeader& h, char out[kReplyHeaderBytes]) {
  Put32(out, kTcpReplyMagic);
  Put32(out + 4, h.code);
  Put64(out + 8, h.id);
  Put64(out + 16, h.length);
  Put32(out + 24, h.message_length);
  Put32(out + 28, 0);
}

absl::StatusOr<RequestHeader> DecodeRequestHeader(const char in[kRequestHeaderBytes],
                                                  uint64_t max_body) {
  if (Get32(in) != kTcpRequestMagic) {
    return absl::InvalidArgumentError("not a data-plane request (wrong magic)");
  }
  RequestHeader h;
  h.method = Get32(in + 4);
  h.id = Get64(in + 8);
  h.length = Get64(in + 16);
  h.timeout_us = static_cast<int64_t>(Get64(in + 24));
  if (h.length > max_body) {
    return absl::InvalidArgumentError(
        absl::StrCat("request ", h.id, " of ", h.length, " bytes is over the limit of ", max_body));
  }
  return h;
}

absl::StatusOr<ReplyHeader> DecodeReplyHeader(const char in[kReplyHeaderBytes], uint64_t max_body) {
  if (Get32(in) != kTcpReplyMagic) {
    return absl::InvalidArgumentError("not a data-plane reply (wrong magic)");
  }
  ReplyHeader h;
  h.code = Get32(in + 4);
  h.id = Get64(in + 8);
  h.length = Get64(in + 16);
  h.message_length = Get32(in + 24);
  if (h.length > max_body || h.message_length > kMaxStatusMessageBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("reply ", h.id, " of ", h.length, " bytes is over the limit of ", max_body));
  }
  return h;
}

void EncodeHello(const std::string& ticket, char out[kHelloBytes]) {
  std::memcpy(out, kHelloMagic, 8);
  Put32(out + 8, kTcpWireVersion);
  Put32(out + 12, static_cast<uint32_t>(ticket.size()));
  std::memset(out + 16, 0, kTicketBytes);
  std::memcpy(out + 16, ticket.data(), std::min(ticket.size(), kTicketBytes));
}

absl::StatusOr<std::string> DecodeHello(const char in[kHelloBytes]) {
  if (std::memcmp(in, kHelloMagic, 8) != 0) {
    return absl::InvalidArgumentError("not a data-plane hello (wrong magic)");
  }
  if (const uint32_t v = Get32(in + 8); v != kTcpWireVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("data-plane version ", v, "; this build speaks ", kTcpWireVersion));
  }
  if (Get32(in + 12) != kTicketBytes) {
    return absl::InvalidArgumentError("data-plane hello: wrong ticket length");
  }
  return std::string(in + 16, kTicketBytes);
}

absl::Status PrepareSocket(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat("fcntl(O_NONBLOCK): ", std::strerror(errno)));
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // not a TCP socket: harmless
  return absl::OkStatus();
}

absl::StatusOr<int> ConnectTcp(const std::string& host_in, int port, absl::Time deadline) {
  const std::string host = HostOf(host_in);
  const std::string where = absl::StrCat(host, ":", port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port_text = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), port_text.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  std::string why = "no address";
  int connected = -1;
  for (addrinfo* a = found; a != nullptr && connected < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    if (absl::Status s = PrepareSocket(fd); !s.ok()) {
      close(fd);
      why = std::string(s.message());
      continue;
    }
    int rc = connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      if (absl::Status s = WaitFor(fd, POLLOUT, deadline); !s.ok()) {
        close(fd);
        why = std::string(s.message());
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      why = std::strerror(errno);
      close(fd);
      continue;
    }
    connected = fd;
  }
  freeaddrinfo(found);
  if (connected < 0) {
    return absl::UnavailableError(absl::StrCat("cannot connect to ", where, ": ", why));
  }
  return connected;
}

absl::StatusOr<int> ListenTcp(const std::string& host_in, int* port) {
  const std::string host = HostOf(host_in);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), "0", &hints, &found); rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  std::string why = "no address";
  int listening = -1;
  for (addrinfo* a = found; a != nullptr && listening < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
      why = std::strerror(errno);
      close(fd);
      continue;
    }
    listening = fd;
  }
  freeaddrinfo(found);
  if (listening < 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ": ", why));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(listening, reinterpret_cast<sockaddr*>(&bound), &len);
  *port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                      : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (absl::Status s = PrepareSocket(listening); !s.ok()) {
    close(listening);
    return s;
  }
  return listening;
}

absl::Status ReadFull(int fd, std::span<char> out, absl::Time deadline) {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = recv(fd, out.data() + done, out.size() - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return absl::UnavailableError("connection closed by peer");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat("recv: ", std::strerror(errno)));
    }
    if (absl::Status s = WaitFor(fd, POLLIN, deadline); !s.ok()) return s;
  }
  return absl::OkStatus();
}

void SkipBytes(std::span<iovec> iov, size_t n) {
  for (iovec& v : iov) {
    if (n == 0) return;
    const size_t take = std::min(n, v.iov_len);
    v.iov_base = static_cast<char*>(v.iov_base) + take;
    v.iov_len -= take;
    n -= take;
  }
}

absl::StatusOr<size_t> WriteNow(int fd, std::span<iovec> iov) {
  size_t total = 0;
  size_t first = 0;
  for (;;) {
    while (first < iov.size() && iov[first].iov_len == 0) ++first;
    if (first == iov.size()) return total;
    msghdr msg{};
    msg.msg_iov = &iov[first];
    msg.msg_iovlen = std::min<size_t>(iov.size() - first, IOV_MAX);
    const ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return total;
      return absl::UnavailableError(absl::StrCat("send: ", std::strerror(errno)));
    }
    SkipBytes(iov.subspan(first), static_cast<size_t>(n));
    total += static_cast<size_t>(n);
  }
}

absl::Status WriteFull(int fd, std::span<iovec> iov, absl::Time deadline) {
  for (;;) {
    absl::StatusOr<size_t> n = WriteNow(fd, iov);
    if (!n.ok()) return n.status();
    if (std::all_of(iov.begin(), iov.end(), [](const iovec& v) { return v.iov_len == 0; })) {
      return absl::OkStatus();
    }
    if (absl::Status s = WaitFor(fd, POLLOUT, deadline); !s.ok()) return s;
  }
}

bool WaitReadable(int fd, absl::Time deadline, int wake_fd) {
  if (wake_fd < 0) return WaitFor(fd, POLLIN, deadline).ok();
  for (;;) {
    pollfd p[2] = {{fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    const int rc = poll(p, 2, PollMillis(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) return false;
    if (p[1].revents != 0) {
      uint64_t count;
      (void)!read(wake_fd, &count, sizeof(count));  // drained: the next wake counts anew
    }
    return p[0].revents != 0;
  }
}

}  // namespace fulcrum::transport
