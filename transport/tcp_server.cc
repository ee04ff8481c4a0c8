#include "transport/tcp_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/constant_time.h"
#include "base/thread_name.h"
#include "spdlog/spdlog.h"
#include "transport/limits.h"

namespace fulcrum::transport {
namespace {

// How long the rest of a request may take once its first byte arrived, and how long a reply
// may wait for a peer that does not read.
constexpr absl::Duration kFrameTime = absl::Seconds(30);
// The most threads the pool grows to (each a running request).
constexpr int kMaxPoolThreads = 1024;

// The address accept4 gave (still known when the peer has already reset the connection).
std::string PeerAddress(const sockaddr_storage& peer) {
  char host[INET6_ADDRSTRLEN] = {};
  int port = 0;
  if (peer.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&peer);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
    return absl::StrCat("[", host, "]:", port);
  }
  const auto* a = reinterpret_cast<const sockaddr_in*>(&peer);
  inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
  port = ntohs(a->sin_port);
  return absl::StrCat(host, ":", port);
}

}  // namespace

struct TcpDataServer::Connection {
  Connection(int fd, std::string peer) : fd(fd), peer(std::move(peer)) {}
  ~Connection() { close(fd); }
  const int fd;
  const std::string peer;
  std::string task;  // the ticket's, once the hello passed
  Mutex write_mu;    // one reply at a time
};

// Runs requests on threads that are added while all are busy.
class TcpDataServer::Pool {
 public:
  ~Pool() { Stop(); }
  void Run(std::function<void()> task) {
    MutexLock lock(&mu_);
    if (stop_) return;  // shutting down: the connection's next read is not wanted
    queue_.push_back(std::move(task));
    // A thread for every queued or running request: one that blocks (a sync pull waiting for
    // the other workers) never holds up the request that would release it.
    ++work_;
    if (work_ > static_cast<int>(threads_.size()) &&
        static_cast<int>(threads_.size()) < kMaxPoolThreads) {
      threads_.emplace_back([this] { Work(); });
    } else {
      cv_.Signal();
    }
  }
  void Stop() {
    std::vector<std::thread> threads;
    {
      MutexLock lock(&mu_);
      stop_ = true;
      threads.swap(threads_);
      cv_.SignalAll();
    }
    for (std::thread& t : threads) t.join();
  }

 private:
  void Work() {
    SetCurrentThreadName("tcp-data-serve");
    for (;;) {
      std::function<void()> task;
      {
        MutexLock lock(&mu_);
        while (queue_.empty() && !stop_) cv_.WaitUntil(&mu_, absl::Now() + absl::Seconds(1));
        if (queue_.empty()) return;  // stopping, nothing left
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
      MutexLock lock(&mu_);
      --work_;
    }
  }
  Mutex mu_;
  CondVar cv_;  // signalled when a task is queued or the pool stops
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  int work_ ABSL_GUARDED_BY(mu_) = 0;  // requests queued or running
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

absl::StatusOr<std::unique_ptr<TcpDataServer>> TcpDataServer::Start(std::string name,
                                                                    const std::string& host,
                                                                    DataHandler handler) {
  int port = 0;
  absl::StatusOr<int> fd = ListenTcp(host, &port);
  if (!fd.ok()) {
    return absl::UnavailableError(absl::StrCat(name, " data plane: ", fd.status().message()));
  }
  return std::unique_ptr<TcpDataServer>(
      new TcpDataServer(std::move(name), *fd, port, std::move(handler)));
}

TcpDataServer::TcpDataServer(std::string name, int listen_fd, int port, DataHandler handler)
    : name_(std::move(name)),
      listen_fd_(listen_fd),
      port_(port),
      handler_(std::move(handler)),
      pool_(std::make_unique<Pool>()) {
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  acceptor_ = std::thread([this] {
    SetCurrentThreadName("tcp-data-accept");
    AcceptLoop();
  });
}

TcpDataServer::~TcpDataServer() { Shutdown(); }

void TcpDataServer::Shutdown() {
  std::vector<Reader> readers;
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (const auto& c : connections_) shutdown(c->fd, SHUT_RDWR);
  }
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) < 0) {
    // the accept loop also wakes on its poll interval
  }
  acceptor_.join();
  {
    MutexLock lock(&mu_);
    for (const auto& c : connections_) shutdown(c->fd, SHUT_RDWR);  // accepted meanwhile
    readers.swap(readers_);
  }
  for (Reader& r : readers) r.thread.join();
  pool_->Stop();
  {
    MutexLock lock(&mu_);
    connections_.clear();
  }
  close(listen_fd_);
  close(wake_fd_);
}

std::string TcpDataServer::IssueTicket(const std::string& task) {
  std::string secret(kTicketBytes, '\0');
  size_t got = 0;
  while (got < secret.size()) {
    const ssize_t n = getrandom(secret.data() + got, secret.size() - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  std::erase_if(tickets_, [&](const Ticket& t) { return t.expires <= now; });
  tickets_.push_back(Ticket{secret, task, now + kTicketLifetime});
  return secret;
}

std::optional<std::string> TcpDataServer::RedeemTicket(const std::string& ticket) {
  MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  std::optional<std::string> task;
  // Every live ticket is compared, in constant time each, whichever matches.
  auto match = tickets_.end();
  for (auto it = tickets_.begin(); it != tickets_.end(); ++it) {
    if (ConstantTimeEquals(it->secret, ticket) && it->expires > now) match = it;
  }
  if (match != tickets_.end()) {
    task = match->task;
    tickets_.erase(match);
  }
  return task;
}

int64_t TcpDataServer::connections_refused() const {
  MutexLock lock(&mu_);
  return refused_;
}

void TcpDataServer::AcceptLoop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const int rc = poll(fds, 2, 1000);
    {
      MutexLock lock(&mu_);
      if (stopping_) return;
    }
    if (rc <= 0 || (fds[0].revents & POLLIN) == 0) continue;
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof(peer);
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_CLOEXEC);
    if (fd < 0) continue;
    if (!PrepareSocket(fd).ok()) {
      close(fd);
      continue;
    }
    auto conn = std::make_shared<Connection>(fd, PeerAddress(peer));
    {
      MutexLock lock(&mu_);
      if (stopping_) return;  // conn closes the socket
      if (ReapReaders()) {
        connections_.push_back(conn);
        auto done = std::make_shared<std::atomic<bool>>(false);
        readers_.push_back(Reader{std::thread([this, conn, done] {
                                    SetCurrentThreadName("tcp-data-conn");
                                    Serve(conn);
                                    done->store(true, std::memory_order_release);
                                  }),
                                  done});
        continue;
      }
    }
    CountRefused(conn->peer, absl::StrCat(kMaxHelloReaders,
                                          " other connections are still presenting their hello"));
  }  // a refused conn's socket closes with it
}

bool TcpDataServer::ReapReaders() {
  std::erase_if(readers_, [](Reader& r) {
    if (!r.done->load(std::memory_order_acquire)) return false;
    r.thread.join();  // it has ended or is ending: it takes no lock after setting its flag
    return true;
  });
  return static_cast<int>(readers_.size()) < kMaxHelloReaders;
}

void TcpDataServer::CountRefused(const std::string& peer, const std::string& why) {
  int64_t not_logged = 0;
  {
    MutexLock lock(&mu_);
    ++refused_;
    const absl::Time now = absl::Now();
    if (now - log_window_start_ >= absl::Seconds(1)) {
      log_window_start_ = now;
      logged_in_window_ = 0;
    }
    if (logged_in_window_ >= kRefusalLinesPerSecond) {
      ++not_logged_;
      return;
    }
    ++logged_in_window_;
    not_logged = std::exchange(not_logged_, 0);
  }
  spdlog::warn("{} data plane: closed the connection from {}: {}{}", name_, peer, why,
               not_logged > 0
                   ? absl::StrCat(" (and ", not_logged, " more refused since the last such line)")
                   : "");
}

void TcpDataServer::Serve(std::shared_ptr<Connection> conn) {
  const auto refuse = [&](const std::string& why) { CountRefused(conn->peer, why); };
  // The hello: a live ticket within kHelloTimeout, or the connection is closed.
  char hello[kHelloBytes];
  absl::Status s = ReadFull(conn->fd, hello, absl::Now() + kHelloTimeout);
  absl::StatusOr<std::string> ticket = s.ok() ? DecodeHello(hello) : absl::StatusOr<std::string>(s);
  std::optional<std::string> task;
  if (ticket.ok()) task = RedeemTicket(*ticket);
  if (task) conn->task = *task;
  // Counted (and logged) before the answer goes out: whoever reads the answer sees the count.
  if (!task) {
    refuse(ticket.ok() ? "no live ticket matches its hello"
                       : absl::StrCat("hello: ", ticket.status().message()));
  }
  {
    char answer[kHelloAnswerBytes] = {};
    std::memcpy(answer, kHelloMagic, 8);
    answer[8] = task ? 0 : 1;
    iovec iov{answer, sizeof(answer)};
    if (ticket.ok()) {
      (void)WriteFull(conn->fd, std::span<iovec>(&iov, 1), absl::Now() + kHelloTimeout);
    }
  }
  if (!task) {
    shutdown(conn->fd, SHUT_RDWR);
    MutexLock lock(&mu_);
    std::erase(connections_, conn);
    return;
  }
  ReadNext(std::move(conn));
}

void TcpDataServer::ReadNext(std::shared_ptr<Connection> conn) {
  const auto refuse = [&](const std::string& why) { CountRefused(conn->peer, why); };
  for (;;) {
    {
      MutexLock lock(&mu_);
      if (stopping_) break;
    }
    if (!WaitReadable(conn->fd, absl::Now() + absl::Seconds(1))) continue;
    char header[kRequestHeaderBytes];
    const absl::Time deadline = absl::Now() + kFrameTime;
    if (absl::Status s = ReadFull(conn->fd, header, deadline); !s.ok()) {
      // The worker closed its end (it finished, or died): not an error of the peer.
      if (!absl::IsUnavailable(s)) refuse(absl::StrCat("reading a request: ", s.message()));
      break;
    }
    absl::StatusOr<RequestHeader> h = DecodeRequestHeader(header, kMaxMessageBytes);
    if (!h.ok()) {
      refuse(std::string(h.status().message()));
      break;
    }
    // Not zero-filled: every byte is read into it.
    std::unique_ptr<char[]> storage(new char[std::max<uint64_t>(h->length, 1)]);
    const std::span<char> body(storage.get(), h->length);
    if (absl::Status s = ReadFull(conn->fd, body, deadline + absl::Seconds(h->length >> 20));
        !s.ok()) {
      refuse(absl::StrCat("request ", h->id, ": ", s.message()));
      break;
    }
    // Another thread reads the next request while this one serves the one just read (which
    // may block: a sync pull), so the hand-over's wake-up overlaps the work.
    pool_->Run([this, conn] { ReadNext(conn); });
    Handle(conn, *h, body);
    return;
  }
  shutdown(conn->fd, SHUT_RDWR);
  MutexLock lock(&mu_);
  std::erase(connections_, conn);
}

void TcpDataServer::Handle(const std::shared_ptr<Connection>& conn, const RequestHeader& h,
                           std::span<char> body) {
  absl::Status status;
  std::vector<Slice> reply;
  const auto method = static_cast<DataMethod>(h.method);
  if (method != DataMethod::kPull && method != DataMethod::kPush &&
      method != DataMethod::kPushPull) {
    status = absl::InvalidArgumentError(absl::StrCat("unknown data-plane method ", h.method));
  } else if (h.timeout_us <= 0) {
    status = absl::DeadlineExceededError(absl::StrCat(DataMethodName(h.method), ": no time left"));
  } else {
    Pieces pieces;
    if (!body.empty()) pieces.emplace_back(body.data(), body.size());
    DataRequest request{method, &pieces, absl::Now() + absl::Microseconds(h.timeout_us),
                        [&](const std::string& claimed) {
                          if (claimed == conn->task) return absl::OkStatus();
                          return absl::PermissionDeniedError(
                              absl::StrCat(DataMethodName(method), " as \"", claimed,
                                           "\" on a data connection opened for ", conn->task));
                        }};
    status = handler_(request, &reply);
  }
  if (!status.ok()) reply.clear();
  Respond(conn, h.id, status, std::move(reply));
}

void TcpDataServer::Respond(const std::shared_ptr<Connection>& conn, uint64_t id,
                            const absl::Status& status, std::vector<Slice> body) {
  ReplyHeader h;
  h.code = static_cast<uint32_t>(status.code());
  h.id = id;
  for (const Slice& s : body) h.length += s.size();
  const std::string message(status.message().substr(
      0, std::min<size_t>(status.message().size(), kMaxStatusMessageBytes)));
  h.message_length = static_cast<uint32_t>(message.size());
  char header[kReplyHeaderBytes];
  EncodeReplyHeader(h, header);
  std::vector<iovec> iov;
  iov.reserve(body.size() + 2);
  iov.push_back({header, sizeof(header)});
  iov.push_back({const_cast<char*>(message.data()), message.size()});
  for (const Slice& s : body) iov.push_back({const_cast<char*>(s.data()), s.size()});
  MutexLock lock(&conn->write_mu);
  if (absl::Status s = WriteFull(conn->fd, iov, absl::Now() + kFrameTime); !s.ok()) {
    spdlog::warn("{} data plane: reply to {} failed: {}; closing the connection", name_, conn->peer,
                 std::string(s.message()));
    shutdown(conn->fd, SHUT_RDWR);
  }
}

}  // namespace fulcrum::transport
