// profiler: the TCP layer of a process's traffic, between the application's bytes (traffic.h)
// and the interfaces' (net/dev): the kernel's own counters of every TCP connection the process
// holds (getsockopt TCP_INFO on each socket in /proc/self/fd: bytes sent, including
// retransmitted data, bytes received, segments each way, retransmitted segments), followed from
// the sampler's baseline and split by path: loopback (the peer is this host: 127/8, ::1 or the
// socket's own address) or external. A connection closed between two samples keeps what was
// last read of it; its bytes after that reading are lost (at most one sampling interval).
// Thread-safety: ReadOwnTcpSockets is thread-safe; a SocketTrack is used by one thread.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace fulcrum::profiler {

// One connection's counters as the kernel keeps them (since the connection began).
struct SocketReading {
  uint64_t inode = 0;  // the socket's identity (a reused fd number is a new inode)
  std::string local;   // "ip:port" ("[ip6]:port")
  std::string remote;
  bool loopback = false;
  bool ipv6 = false;
  uint64_t bytes_sent = 0;      // tcpi_bytes_sent: data octets out, retransmissions included
  uint64_t bytes_received = 0;  // tcpi_bytes_received: data octets in, in order
  uint64_t segs_out = 0;        // every segment sent, pure ACKs included
  uint64_t segs_in = 0;
  uint64_t retransmits = 0;  // tcpi_total_retrans: segments sent again
  uint64_t bytes_retransmitted = 0;  // tcpi_bytes_retrans: their data octets (in bytes_sent)
};

// Every connected TCP socket the calling process holds (listening ones left out).
// Unavailable when /proc/self/fd cannot be listed.
absl::StatusOr<std::vector<SocketReading>> ReadOwnTcpSockets();

// One path's totals since the baseline.
struct SocketTotals {
  int sockets = 0;  // connections seen since the baseline (closed ones included)
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t segs_out = 0;
  uint64_t segs_in = 0;
  uint64_t segs_out_ipv6 = 0;  // the part of segs_out over IPv6 (its headers are 20 B longer)
  uint64_t segs_in_ipv6 = 0;
  uint64_t retransmits = 0;
  uint64_t bytes_retransmitted = 0;  // part of bytes_sent
};

// One connection's figures since the baseline (or its beginning), by its two endpoints: the
// other end, when it is a task of the run, lists the same pair the other way round.
struct ConnectionTotals {
  std::string local;
  std::string remote;
  bool loopback = false;
  bool open = true;  // false: closed since, figures as last read
  SocketTotals figures;
};

// Successive readings into totals. A connection open at the first reading (the baseline)
// counts from its figures then; one that appears later counts from its beginning.
class SocketTrack {
 public:
  // The closed connections listed one by one; older ones count only in the totals.
  static constexpr size_t kMaxClosedListed = 256;

  void Add(const std::vector<SocketReading>& readings);
  const SocketTotals& loopback() const { return loopback_; }
  const SocketTotals& external() const { return external_; }
  // Every connection open at the last reading, and the last kMaxClosedListed closed ones.
  std::vector<ConnectionTotals> Connections() const;

 private:
  struct Seen {
    SocketReading start;  // what counted as its zero
    SocketReading last;
  };

  bool has_baseline_ = false;
  std::map<uint64_t, Seen> seen_;        // open at the last reading, by inode
  std::deque<ConnectionTotals> closed_;  // the latest closed ones, oldest first
  // Connections closed since the baseline (and the count of every connection seen).
  SocketTotals closed_loopback_, closed_external_;
  SocketTotals loopback_, external_;  // closed + open
};

}  // namespace fulcrum::profiler
