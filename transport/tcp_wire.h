// transport: the wire of the tcp data plane (--data_plane=tcp): Pull, Push and PushPull as
// length-prefixed frames on one plain TCP connection per worker and ps, beside the task's
// gRPC channel, which keeps every control RPC and hands out the connection's ticket
// (ParameterServer.OpenDataPlane). The bodies are exactly the protobuf bytes the gRPC methods
// carry (runtime/frames/wire_frame.h), so both sides parse and build them with the same code; what
// the plane removes is HTTP/2 (its framing, flow control and per-frame bookkeeping, the limit
// of the gRPC path on one connection: docs/transport.md).
//
// A connection opens with the client's hello (kHelloMagic, version, the ticket) and the
// server's answer (kHelloMagic, 0 = accepted, else refused and closed). Then any number of
// requests and replies, each a fixed header and a body, all integers little-endian:
//   request:  magic "FDRQ" u32 | method u32 | id u64 | body length u64 | timeout µs i64
//   reply:    magic "FDRS" u32 | status code u32 | id u64 | body length u64 |
//             message length u32 | 0 u32, then the status message, then the body
// Replies may come in any order; the id pairs them with their request.
//
// Every read and write here has a deadline. Thread-safety: the functions are thread-safe;
// one socket is read by one thread and written by one thread at a time.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "transport/data_channel.h"

namespace fulcrum::transport {

inline constexpr uint32_t kTcpRequestMagic = 0x51524446;  // "FDRQ"
inline constexpr uint32_t kTcpReplyMagic = 0x53524446;    // "FDRS"
inline constexpr char kHelloMagic[8] = {'F', 'U', 'L', 'C', 'R', 'U', 'M', 'D'};
inline constexpr uint32_t kTcpWireVersion = 1;
// The ticket OpenDataPlane hands out (random bytes).
inline constexpr size_t kTicketBytes = 32;
inline constexpr size_t kHelloBytes = 8 + 4 + 4 + kTicketBytes;
inline constexpr size_t kHelloAnswerBytes = 8 + 4 + 4;
inline constexpr size_t kRequestHeaderBytes = 32;
inline constexpr size_t kReplyHeaderBytes = 32;
// The longest status message a reply may carry.
inline constexpr uint32_t kMaxStatusMessageBytes = 64 << 10;

struct RequestHeader {
  uint32_t method = 0;
  uint64_t id = 0;
  uint64_t length = 0;
  int64_t timeout_us = 0;
};
struct ReplyHeader {
  uint32_t code = 0;  // an absl::StatusCode
  uint64_t id = 0;
  uint64_t length = 0;
  uint32_t message_length = 0;
};

void EncodeRequestHeader(const RequestHeader& h, char out[kRequestHeaderBytes]);
void EncodeReplyHeader(const ReplyHeader& h, char out[kReplyHeaderBytes]);
// InvalidArgument naming what is wrong (the magic, a length over `max_body`).
absl::StatusOr<RequestHeader> DecodeRequestHeader(const char in[kRequestHeaderBytes],
                                                  uint64_t max_body);
absl::StatusOr<ReplyHeader> DecodeReplyHeader(const char in[kReplyHeaderBytes], uint64_t max_body);

void EncodeHello(const std::string& ticket, char out[kHelloBytes]);
// The ticket of a hello; InvalidArgument when the magic, version or ticket length is wrong.
absl::StatusOr<std::string> DecodeHello(const char in[kHelloBytes]);

// Puts `fd` in non-blocking mode, TCP_NODELAY on.
absl::Status PrepareSocket(int fd);
// Connects to host:port (a name or an address; brackets of "[v6]" are taken off) before
// `deadline`; the connected socket, prepared. Unavailable naming the address and the reason.
absl::StatusOr<int> ConnectTcp(const std::string& host, int port, absl::Time deadline);
// A listening socket on host:0 (the kernel picks the port, returned in *port).
absl::StatusOr<int> ListenTcp(const std::string& host, int* port);

// Reads exactly out.size() bytes before `deadline`. DeadlineExceeded when it passes first;
// Unavailable when the peer closed ("closed by peer") or the socket failed.
absl::Status ReadFull(int fd, std::span<char> out, absl::Time deadline);
// Writes all of `iov` (modified as it goes) before `deadline`; same errors as ReadFull.
absl::Status WriteFull(int fd, std::span<iovec> iov, absl::Time deadline);
// Writes what the socket takes now without waiting; the bytes written (`iov` advanced past
// them). Unavailable as ReadFull.
absl::StatusOr<size_t> WriteNow(int fd, std::span<iovec> iov);
// Advances `iov` past its first `n` bytes.
void SkipBytes(std::span<iovec> iov, size_t n);
// Waits until `fd` is readable or `deadline` passes (false then, or on a poll error). With a
// `wake_fd` (an eventfd), also returns false as soon as it is signalled, draining it.
bool WaitReadable(int fd, absl::Time deadline, int wake_fd = -1);

}  // namespace fulcrum::transport
