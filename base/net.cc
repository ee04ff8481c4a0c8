#include "base/net.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "base/mutex.h"

namespace fulcrum {
namespace {

constexpr int kFirstPort = 20000;
constexpr int kLastPort = 32000;

// True when `port` on 127.0.0.1 can be bound now.
bool CanBind(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return free;
}

// The picker's state: one per process, so that two callers never get the same port.
class PortPicker {
 public:
  absl::StatusOr<int> Pick() {
    MutexLock lock(&mu_);
    std::uniform_int_distribution<int> pick(kFirstPort, kLastPort - 1);
    for (int attempt = 0; attempt < 1000; ++attempt) {
      const int port = pick(rng_);
      if (!handed_out_.insert(port).second) continue;
      if (CanBind(port)) return port;
    }
    return absl::UnavailableError("no free TCP port on 127.0.0.1 in 20000-32000");
  }

 private:
  Mutex mu_;
  // Seeded by pid and time, so that processes starting together rarely collide.
  std::mt19937 rng_ ABSL_GUARDED_BY(mu_){
      static_cast<unsigned>(::getpid()) ^
      static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count())};
  std::set<int> handed_out_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<int> PickFreePort() {
  static PortPicker* const picker = new PortPicker();  // never destroyed: no exit-time races
  return picker->Pick();
}

namespace {

bool IsLoopbackAddress(const sockaddr* a) {
  if (a->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(a);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (a->sa_family == AF_INET6) {
    const in6_addr& in6 = reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&in6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&in6) && in6.s6_addr[12] == 127;
  }
  return false;
}

std::string Unbracketed(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

}  // namespace

bool IsLoopbackLiteral(const std::string& host_in) {
  const std::string host = Unbracketed(host_in);
  sockaddr_in in{};
  if (inet_pton(AF_INET, host.c_str(), &in.sin_addr) == 1) {
    in.sin_family = AF_INET;
    return IsLoopbackAddress(reinterpret_cast<const sockaddr*>(&in));
  }
  sockaddr_in6 in6{};
  if (inet_pton(AF_INET6, host.c_str(), &in6.sin6_addr) == 1) {
    in6.sin6_family = AF_INET6;
    return IsLoopbackAddress(reinterpret_cast<const sockaddr*>(&in6));
  }
  return false;
}

bool IsLoopbackHost(const std::string& host_in) {
  const std::string host = Unbracketed(host_in);
  if (host.empty()) return false;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) return false;
  bool all = true;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next)
    all &= IsLoopbackAddress(a->ai_addr);
  freeaddrinfo(found);
  return all;
}

std::string HostOf(const std::string& address) {
  std::string host = address;
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    return close == std::string::npos ? host.substr(1) : host.substr(1, close - 1);
  }
  const size_t colon = host.rfind(':');
  if (colon != std::string::npos && host.find(':') == colon) host.resize(colon);
  return host;
}

std::string JoinHostPort(const std::string& host, int port) {
  return host.find(':') != std::string::npos ? absl::StrCat("[", host, "]:", port)
                                             : absl::StrCat(host, ":", port);
}

}  // namespace fulcrum
