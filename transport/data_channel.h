// transport: the data plane's one seam. A worker's data calls (Pull, Push, PushPull) reach a
// ps through a DataChannel: a request body as slices, a deadline, a parser for the reply's body
// and a callback for the call's end. The ps serves them with one DataHandler whatever carried
// them. Two implementations hold both ends of a transport each:
//   gRPC (transport/grpc_channel.h): unary calls on the task's gRPC channel, the bodies as
//     gRPC byte buffers made of the same slices;
//   tcp (transport/tcp_channel.h, transport/tcp_server.h): length-prefixed frames on a plain
//     TCP connection opened with a ticket (--data_plane=tcp).
// The bodies are the frames of runtime/frames/wire_frame.h; the transports never look inside them.
// A third transport (shared memory, RDMA) is a third pair of these, nothing else.
// Thread-safety: a DataChannel's Call may be made from many threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "transport/slice.h"

namespace fulcrum::transport {

// The data methods. The values are the tcp wire's method numbers.
enum class DataMethod : uint32_t { kPull = 1, kPush = 2, kPushPull = 3 };
// "Pull", "Push", "PushPull" (a static string).
const char* DataMethodName(DataMethod method);
// The same for a method number off the wire; "method <n>" for an unknown one.
std::string DataMethodName(uint32_t method);

// The client end of a data connection to one server.
class DataChannel {
 public:
  // Runs exactly once when a call ends, on a thread of the channel's.
  using Done = std::function<void(absl::Status)>;
  // Reads the reply's body (its pieces are valid only during the call); runs before `done`,
  // only when the server answered OK. Its error becomes the call's.
  using ParseReply = std::function<absl::Status(const Pieces& body)>;

  virtual ~DataChannel() = default;

  // Sends `body` (borrowed slices must stay alive and unchanged until `done` runs) as a
  // request of `method`. The call ends with the server's status, with DeadlineExceeded once
  // `timeout` passed, or Unavailable naming the channel when the connection failed.
  virtual void Call(DataMethod method, std::vector<Slice> body, absl::Duration timeout,
                    ParseReply parse, Done done) = 0;
  // False once the channel cannot carry calls any more (its owner opens a new one).
  virtual bool healthy() const = 0;
  // Names the channel in errors ("ps:0 data plane (127.0.0.1:40123)").
  virtual const std::string& label() const = 0;
};

// One request as the server end hands it to the handler.
struct DataRequest {
  DataMethod method = DataMethod::kPull;
  const Pieces* body = nullptr;  // valid during the handler's call
  absl::Time deadline = absl::InfiniteFuture();
  // Whether the caller may act as `task` (the task the request names): on gRPC its
  // credentials (token; with mTLS its certificate's name), on tcp the task its connection's
  // ticket was issued to. PermissionDenied or Unauthenticated naming why when not.
  std::function<absl::Status(const std::string& task)> authorize;
};

// Serves one request: leaves the reply's body in *reply and returns the call's status. The
// reply's slices must be shared ones (Slice::Own, Slice::Allocate): a transport may send them
// after the handler returned. May block until the request's deadline.
using DataHandler =
    std::function<absl::Status(const DataRequest& request, std::vector<Slice>* reply)>;

}  // namespace fulcrum::transport
