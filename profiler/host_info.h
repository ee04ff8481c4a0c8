// profiler: facts about the machine a task runs on, for its summary.json: the host's name
// (an emulated host's network namespace, else gethostname) and Touchstone's "System
// Information" (uname(2) and the CPU's model name).
// Thread-safety: functions without shared state; safe from any thread.
#pragma once

#include <string>

#include "nlohmann/json.hpp"

namespace fulcrum::profiler {

// The host this process runs on: the name of its network namespace when that is a named one
// (an emulated host, scripts/netns_hosts.sh), else gethostname(); "unknown" when neither is
// known.
std::string HostName();

// uname(2)'s `System`, `Node Name`, `Release`, `Version`, `Machine` and /proc/cpuinfo's model
// name as `Processor` (uname -p is "unknown" on Linux), as Touchstone's "System Information".
nlohmann::json SystemInformation();

}  // namespace fulcrum::profiler
