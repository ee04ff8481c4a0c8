#include "base/net.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <set>

#include "absl/base/thread_annotations.h"
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

}  // namespace fulcrum
