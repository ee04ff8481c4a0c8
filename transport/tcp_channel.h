// transport: the client end of one tcp data-plane connection (transport/tcp_wire.h) to a ps:
// a request's slices are written straight from the memory they reference (writev, no copy in
// user space): by the caller as far as the socket takes them at once, the rest by a writer
// thread (so a call never blocks its caller on a slow link); a reader thread parses each
// reply from one receive buffer and completes its call. Many calls may be in flight; replies
// come in any order.
//
// Every call ends exactly once: with its reply, at its deadline (DeadlineExceeded; a reply
// that comes later is read and dropped), or with Unavailable naming the connection when it
// fails (the peer closed it, a write or read failed). A failed channel stays failed: the
// owner opens a new one (runtime::GrpcPsClient does, through OpenDataPlane).
// Thread-safety: Call and healthy may be called from many threads at once.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
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

class TcpDataChannel final : public DataChannel {
 public:
  // Connects to host:port before `deadline` and presents `ticket`. `label` names the peer in
  // errors ("ps:0 data plane (127.0.0.1:40123)"). Unavailable when it cannot connect or the
  // server refuses the ticket; DeadlineExceeded when the server does not answer in time.
  static absl::StatusOr<std::unique_ptr<TcpDataChannel>> Connect(const std::string& host, int port,
                                                                 const std::string& ticket,
                                                                 absl::Time deadline,
                                                                 std::string label);
  // Closes the connection; calls still pending end with Cancelled.
  ~TcpDataChannel() override;
  TcpDataChannel(const TcpDataChannel&) = delete;
  TcpDataChannel& operator=(const TcpDataChannel&) = delete;

  // `parse` and `done` run on the reader thread (or at once on the caller's, when the
  // connection failed before).
  void Call(DataMethod method, std::vector<Slice> body, absl::Duration timeout, ParseReply parse,
            Done done) override;
  // False once the connection failed.
  bool healthy() const override;
  const std::string& label() const override { return label_; }

 private:
  struct Pending {
    ParseReply parse;
    Done done;
    absl::Time deadline;
  };
  struct Outgoing {
    uint64_t id = 0;
    std::array<char, kRequestHeaderBytes> header;
    std::vector<Slice> body;
    absl::Time deadline;
    size_t sent = 0;  // bytes of header and body already written
    // The unsent bytes as iovecs (into *iov).
    void Unsent(std::vector<iovec>* iov);
  };

  TcpDataChannel(int fd, std::string label);
  void ReadLoop();
  void WriteLoop();
  // Writes (the rest of) `out`, waiting up to its deadline; an error fails the connection.
  bool WriteAll(Outgoing& out);
  // Reads one reply and completes its call; an error breaks the connection.
  absl::Status ReadReply();
  // Ends every call past its deadline.
  void ExpireCalls();
  // Marks the connection failed, shuts the socket and ends every pending call with `why`.
  void Fail(const absl::Status& why);

  const int fd_;
  const int
      wake_fd_;  // an eventfd: wakes the reader when a call's deadline is earlier than its wait
  const std::string label_;
  mutable Mutex mu_;
  CondVar write_cv_;  // signalled when a request is queued or the channel closes
  std::deque<Outgoing> queue_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, Pending> pending_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  // When the reader wakes next (at the earliest pending deadline, or an idle poll).
  absl::Time reader_wake_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  // A thread is writing to the socket (the caller of Call, or the writer thread).
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  std::vector<char> buffer_;  // the reader's receive buffer, reused
  std::thread reader_;
  std::thread writer_;
};

}  // namespace fulcrum::transport
