// transport: the server end of the tcp data plane (transport/tcp_wire.h). It listens on the ps's
// own host at a port the kernel picks; a worker learns the port, and a one-use ticket bound to its
// task name, from the OpenDataPlane RPC on the ps's gRPC service, which checks the caller as every
// data RPC is checked (token; with mTLS its certificate's name). A connection that does not present
// a live ticket within kHelloTimeout is answered "refused" and closed; every request on an accepted
// connection is served as the ticket's task.
//
// A connection's hello is read on a thread of its own (at most kMaxHelloReaders at once; more
// connections are closed at once, and the threads that ended are joined as new ones start, so
// a flood of connections holds bounded memory); then the thread that read a request
// hands the reading of the next to a pool and serves the request itself. The pool grows
// while all its threads are busy (a sync-mode pull blocks until its step completes, as a gRPC
// sync server's handler does), so replies go back in the order they finish. A malformed header, a
// body over the message limit or a peer that stalls mid-frame closes that connection (logged with
// the peer's address); a request the handler refuses gets its status back and changes nothing.
// Thread-safety: IssueTicket and port may be called from any thread; Shutdown once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "transport/data_channel.h"
#include "transport/slice.h"
#include "transport/tcp_wire.h"

namespace fulcrum::transport {

class TcpDataServer {
 public:
  static constexpr absl::Duration kHelloTimeout = absl::Seconds(5);
  static constexpr absl::Duration kTicketLifetime = absl::Seconds(60);
  // Connections whose hello is still being read at once; more are closed at once (a worker
  // opens one per ps, so only a flood reaches this).
  static constexpr int kMaxHelloReaders = 256;
  static constexpr int kRefusalLinesPerSecond = 10;

  // Listens on `host` (port picked by the kernel). `name` ("ps:0") labels logs and errors.
  // Every request goes to `handler`, which may block until the request's deadline; its
  // `authorize` admits only the task of the connection's ticket.
  static absl::StatusOr<std::unique_ptr<TcpDataServer>> Start(std::string name,
                                                              const std::string& host,
                                                              DataHandler handler);
  ~TcpDataServer();
  TcpDataServer(const TcpDataServer&) = delete;
  TcpDataServer& operator=(const TcpDataServer&) = delete;

  int port() const { return port_; }
  // A fresh ticket: the next connection presenting it within kTicketLifetime serves `task`.
  std::string IssueTicket(const std::string& task);
  // Stops accepting, closes every connection and waits for the threads (a handler still
  // blocked must be woken by its owner first: the ps stops its shard).
  void Shutdown();

  // Connections closed for a bad hello, a bad ticket, a malformed frame or too many hellos at
  // once (for tests).
  int64_t connections_refused() const;

 private:
  struct Connection;
  class Pool;

  TcpDataServer(std::string name, int listen_fd, int port, DataHandler handler);
  void AcceptLoop();
  // Joins the hello readers that ended; returns whether another may start (fewer than
  // kMaxHelloReaders still running).
  bool ReapReaders() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts a refused connection and logs it, at most kRefusalLinesPerSecond lines a second
  // (each naming how many went unlogged before it): a flood must not flood the log.
  void CountRefused(const std::string& peer, const std::string& why) ABSL_LOCKS_EXCLUDED(mu_);
  // The hello, then ReadNext.
  void Serve(std::shared_ptr<Connection> conn);
  // Reads one request, hands the reading of the next to the pool and serves this one; closes
  // the connection on a malformed frame or when the peer goes.
  void ReadNext(std::shared_ptr<Connection> conn);
  void Handle(const std::shared_ptr<Connection>& conn, const RequestHeader& h,
              std::span<char> body);
  // The task of a live ticket, which is used up; nullopt when none matches.
  std::optional<std::string> RedeemTicket(const std::string& ticket);
  void Respond(const std::shared_ptr<Connection>& conn, uint64_t id, const absl::Status& status,
               std::vector<Slice> body);

  const std::string name_;
  const int listen_fd_;
  const int port_;
  const DataHandler handler_;
  std::unique_ptr<Pool> pool_;
  mutable Mutex mu_;
  struct Ticket {
    std::string secret;
    std::string task;
    absl::Time expires;
  };
  std::vector<Ticket> tickets_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);
  // The threads reading a hello; each sets its flag when it ends, and the accept loop joins
  // the ended ones before it starts another, so a flood of connections never piles up
  // finished threads (each holding its stack) up to the kernel's limit.
  struct Reader {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Reader> readers_ ABSL_GUARDED_BY(mu_);
  // CountRefused's log budget: lines in the current one-second window, refusals not logged.
  absl::Time log_window_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int logged_in_window_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t not_logged_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
  int wake_fd_ = -1;  // an eventfd that wakes the accept loop on Shutdown
  std::thread acceptor_;
};

}  // namespace fulcrum::transport
