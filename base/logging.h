// base: process set-up: logging over spdlog. Call InitLogging once from main() before any
// thread starts; afterwards spdlog's default logger is thread-safe.
#pragma once

#include <string_view>

namespace fulcrum {

// Sets spdlog's default logger to stderr with a "[time] [task] [level] msg" pattern.
// `task` names the process in every line (e.g. "worker-1", "single").
void InitLogging(std::string_view task);

}  // namespace fulcrum
