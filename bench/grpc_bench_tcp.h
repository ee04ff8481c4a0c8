// bench/grpc_bench: raw TCP on the same path as gRPC, the limit column. Plain sockets with
// TCP_NODELAY and length-prefixed frames: a 16-byte header (op, buffers, payload bytes) and
// the payload, written with one writev of the header and the message's buffers (iovec).
//   echo      the server reads the whole frame and writes it back (latency ping-pong, the
//             round trip of the PS comparison, one frame per tensor of a parameter set);
//   sink_ack  the server reads the frame and answers a bare header (bandwidth: frames
//             streamed with a window of unacknowledged ones, as gRPC's calls in flight).
// The server runs one thread per connection (blocking I/O with timeouts); the client runs
// every connection of an exchange at once with non-blocking sockets and poll, so pipelined
// frames never deadlock, and copies each reply into memory once (recv), as a gRPC client
// parses or copies its reply once. Every wait has a deadline.
// Thread-safety: TcpServer is internally synchronized; a TcpConnection and a TcpExchange
// belong to one thread at a time.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace fulcrum::bench {

inline constexpr uint32_t kOpEcho = 0x45434831;     // "ECH1"
inline constexpr uint32_t kOpSinkAck = 0x534e4b31;  // "SNK1"
// The largest frame payload either side accepts.
inline constexpr int64_t kMaxFrameBytes = int64_t{256} << 20;

struct FrameHeader {
  uint32_t op = 0;
  uint32_t buffers = 0;
  uint64_t bytes = 0;
};
static_assert(sizeof(FrameHeader) == 16);

class TcpServer {
 public:
  // Listens on `host`, port chosen by the kernel. A connection waits for its next frame as
  // long as the server lives; once a frame has begun, `io_timeout` without progress drops it.
  static absl::StatusOr<std::unique_ptr<TcpServer>> Start(const std::string& host,
                                                          absl::Duration io_timeout);
  // Stops accepting, shuts every connection down and joins every thread.
  ~TcpServer();
  int port() const { return port_; }

 private:
  TcpServer(int fd, int port, absl::Duration io_timeout);
  void AcceptLoop();
  void Serve(int fd);

  const int listen_fd_;
  const int port_;
  const absl::Duration io_timeout_;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  Mutex mu_;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::vector<int> fds_ ABSL_GUARDED_BY(mu_);
};

class TcpConnection {
 public:
  // Connects (non-blocking socket, TCP_NODELAY) within `timeout`.
  static absl::StatusOr<std::unique_ptr<TcpConnection>> Connect(const std::string& host, int port,
                                                                absl::Duration timeout);
  ~TcpConnection();
  TcpConnection(const TcpConnection&) = delete;
  TcpConnection& operator=(const TcpConnection&) = delete;
  int fd() const { return fd_; }

 private:
  explicit TcpConnection(int fd) : fd_(fd) {}
  const int fd_;
};

// The frames one exchange sends on one connection, and their replies. Build once (AddFrame),
// then Rewind + RunExchanges as often as needed; the buffers must outlive the exchange.
class TcpExchange {
 public:
  explicit TcpExchange(TcpConnection* conn) : conn_(conn) {}
  // A frame of `op` made of `buffers` (one iovec entry each).
  void AddFrame(uint32_t op, const std::vector<std::span<const char>>& buffers);
  // Back to the start; also lays the iovec out after the last AddFrame.
  void Rewind();
  bool done() const { return sent_ == send_bytes_ && received_ == reply_.size(); }
  // The payload bytes frame f's echo brought back (empty for a sink_ack frame).
  std::span<const char> ReplyPayload(int f) const;
  // OK when every reply header matches its frame; the payload bytes of the replies.
  absl::StatusOr<int64_t> CheckReplies() const;
  int64_t send_payload_bytes() const { return send_payload_; }

 private:
  friend absl::Status RunExchanges(std::span<TcpExchange* const> exchanges, absl::Time deadline);
  friend absl::StatusOr<int64_t> StreamFrames(TcpConnection* conn,
                                              const std::vector<std::span<const char>>& buffers,
                                              int window, absl::Duration duration,
                                              absl::Time deadline);
  // One non-blocking step each way; *progress when bytes moved; error on a broken socket.
  absl::Status Send(bool* progress);
  absl::Status Receive(bool* progress);

  TcpConnection* conn_;
  std::vector<FrameHeader> headers_;
  std::vector<std::vector<std::span<const char>>> frames_;
  std::vector<iovec> iov_;
  std::vector<size_t> reply_offsets_;  // where frame f's reply header starts
  std::vector<char> reply_;
  size_t send_bytes_ = 0, sent_ = 0, received_ = 0, iov_index_ = 0, iov_offset_ = 0;
  int64_t send_payload_ = 0;
};

// Runs every exchange until each sent all its frames and read all its replies (poll over
// their connections); DeadlineExceeded at `deadline`, Cancelled on a stop signal.
absl::Status RunExchanges(std::span<TcpExchange* const> exchanges, absl::Time deadline);

// Bandwidth: streams sink_ack frames of `buffers` on `conn` for `duration` (at least one
// frame), keeping at most `window` frames unacknowledged, then waits for the last ack.
// Returns the frames acked.
absl::StatusOr<int64_t> StreamFrames(TcpConnection* conn,
                                     const std::vector<std::span<const char>>& buffers, int window,
                                     absl::Duration duration, absl::Time deadline);

}  // namespace fulcrum::bench
