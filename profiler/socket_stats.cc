#include "profiler/socket_stats.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace fulcrum::profiler {
namespace {

// The IPv4 address inside `a` (plain or v4-mapped IPv6), or nothing.
bool AsIpv4(const sockaddr_storage& a, in_addr* out) {
  if (a.ss_family == AF_INET) {
    *out = reinterpret_cast<const sockaddr_in&>(a).sin_addr;
    return true;
  }
  const in6_addr& v6 = reinterpret_cast<const sockaddr_in6&>(a).sin6_addr;
  if (a.ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&v6)) {
    std::memcpy(&out->s_addr, &v6.s6_addr[12], 4);
    return true;
  }
  return false;
}

// Whether a connection from `local` to `remote` stays on this host: the peer is a loopback
// address or the socket's own address (a task dialling its own host's address).
bool StaysOnHost(const sockaddr_storage& local, const sockaddr_storage& remote) {
  in_addr l{}, r{};
  if (AsIpv4(remote, &r)) {
    if ((ntohl(r.s_addr) >> 24) == 127) return true;
    return AsIpv4(local, &l) && l.s_addr == r.s_addr;
  }
  if (remote.ss_family != AF_INET6 || local.ss_family != AF_INET6) return false;
  const in6_addr& rv6 = reinterpret_cast<const sockaddr_in6&>(remote).sin6_addr;
  const in6_addr& lv6 = reinterpret_cast<const sockaddr_in6&>(local).sin6_addr;
  return IN6_IS_ADDR_LOOPBACK(&rv6) || std::memcmp(&rv6, &lv6, sizeof(rv6)) == 0;
}

std::string Endpoint(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    ::inet_ntop(AF_INET, &v4.sin_addr, text, sizeof(text));
    return absl::StrCat(text, ":", ntohs(v4.sin_port));
  }
  const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
  ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof(text));
  return absl::StrCat("[", text, "]:", ntohs(v6.sin6_port));
}

// The reading of descriptor `fd` when it is a connected TCP socket.
bool ReadSocket(int fd, SocketReading* out) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  tcp_info info{};
  socklen_t len = sizeof(info);
  // Fails with ENOPROTOOPT/EOPNOTSUPP on a socket that is not TCP (unix, UDP, netlink).
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return false;
  // The kernel's TCP states (include/net/tcp_states.h): 7 = CLOSE, 10 = LISTEN.
  constexpr uint8_t kClose = 7, kListen = 10;
  if (info.tcpi_state == kListen || info.tcpi_state == kClose) return false;
  sockaddr_storage local{}, remote{};
  socklen_t local_len = sizeof(local), remote_len = sizeof(remote);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_len) != 0) {
    return false;  // not connected (yet, or any more)
  }
  in_addr unused{};
  out->inode = st.st_ino;
  out->local = Endpoint(local);
  out->remote = Endpoint(remote);
  out->loopback = StaysOnHost(local, remote);
  out->ipv6 = !AsIpv4(remote, &unused);
  out->bytes_sent = info.tcpi_bytes_sent;
  out->bytes_received = info.tcpi_bytes_received;
  out->segs_out = info.tcpi_segs_out;
  out->segs_in = info.tcpi_segs_in;
  out->retransmits = info.tcpi_total_retrans;
  out->bytes_retransmitted = info.tcpi_bytes_retrans;
  return true;
}

uint64_t Since(uint64_t start, uint64_t now) { return now >= start ? now - start : 0; }

// Adds the part of `last` after `start` to `totals`.
void AddSpan(const SocketReading& start, const SocketReading& last, SocketTotals* totals) {
  totals->bytes_sent += Since(start.bytes_sent, last.bytes_sent);
  totals->bytes_received += Since(start.bytes_received, last.bytes_received);
  const uint64_t out = Since(start.segs_out, last.segs_out);
  const uint64_t in = Since(start.segs_in, last.segs_in);
  totals->segs_out += out;
  totals->segs_in += in;
  if (last.ipv6) {
    totals->segs_out_ipv6 += out;
    totals->segs_in_ipv6 += in;
  }
  totals->retransmits += Since(start.retransmits, last.retransmits);
  totals->bytes_retransmitted += Since(start.bytes_retransmitted, last.bytes_retransmitted);
}

}  // namespace

absl::StatusOr<std::vector<SocketReading>> ReadOwnTcpSockets() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot list /proc/self/fd: ", std::strerror(errno)));
  }
  std::vector<SocketReading> out;
  const int own = ::dirfd(dir);
  while (const dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == own) continue;
    SocketReading reading;
    // A descriptor closed (or reused) since the listing reads as whatever it is now: at
    // worst another of this process's sockets, told apart by its inode.
    if (ReadSocket(static_cast<int>(fd), &reading)) out.push_back(reading);
  }
  ::closedir(dir);
  return out;
}

void SocketTrack::Add(const std::vector<SocketReading>& readings) {
  std::map<uint64_t, Seen> now;
  for (const SocketReading& r : readings) {
    auto it = seen_.find(r.inode);
    if (it != seen_.end()) {
      now[r.inode] = {it->second.start, r};
    } else {
      // New since the last reading: at the baseline its past is not ours to count.
      SocketReading start = has_baseline_ ? SocketReading{} : r;
      start.ipv6 = r.ipv6;
      now[r.inode] = {start, r};
      (r.loopback ? closed_loopback_ : closed_external_).sockets += 1;
    }
  }
  // Connections gone since the last reading keep what was last read of them.
  for (const auto& [inode, seen] : seen_) {
    if (now.count(inode) != 0) continue;
    AddSpan(seen.start, seen.last, seen.last.loopback ? &closed_loopback_ : &closed_external_);
    ConnectionTotals gone{seen.last.local, seen.last.remote, seen.last.loopback, false, {}};
    AddSpan(seen.start, seen.last, &gone.figures);
    gone.figures.sockets = 1;
    closed_.push_back(std::move(gone));
    if (closed_.size() > kMaxClosedListed) closed_.pop_front();
  }
  seen_ = std::move(now);
  has_baseline_ = true;
  loopback_ = closed_loopback_;
  external_ = closed_external_;
  for (const auto& [inode, seen] : seen_) {
    AddSpan(seen.start, seen.last, seen.last.loopback ? &loopback_ : &external_);
  }
}

std::vector<ConnectionTotals> SocketTrack::Connections() const {
  std::vector<ConnectionTotals> out(closed_.begin(), closed_.end());
  for (const auto& [inode, seen] : seen_) {
    ConnectionTotals c{seen.last.local, seen.last.remote, seen.last.loopback, true, {}};
    AddSpan(seen.start, seen.last, &c.figures);
    c.figures.sockets = 1;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace fulcrum::profiler
