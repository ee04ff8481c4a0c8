#include "base/signals.h"

#include <atomic>
#include <csignal>

#include "absl/strings/str_cat.h"

namespace fulcrum {
namespace {

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free int");

extern "C" void OnStopSignal(int signal) {
  int expected = 0;
  if (!g_stop_signal.compare_exchange_strong(expected, signal)) {
    // A second request: stop now, with the default action of the signal.
    std::signal(signal, SIG_DFL);
    std::raise(signal);
  }
}

}  // namespace

void InstallStopSignalHandlers() {
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int StopSignal() { return g_stop_signal.load(std::memory_order_relaxed); }

std::string SignalName(int signal) {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    default:
      return absl::StrCat("signal ", signal);
  }
}

int ExitCodeAfterStopSignal(int exit_code) {
  const int signal = StopSignal();
  return exit_code == 0 && signal != 0 ? 128 + signal : exit_code;
}

}  // namespace fulcrum
