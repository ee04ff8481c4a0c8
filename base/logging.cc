#include "base/logging.h"

#include <memory>
#include <string>

#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace fulcrum {

void InitLogging(std::string_view task) {
  // stderr keeps stdout free for machine-readable output; colour only on a terminal.
  auto logger = spdlog::stderr_color_mt(std::string("fulcrum-") + std::string(task));
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [" + std::string(task) + "] [%l] %v");
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace fulcrum
