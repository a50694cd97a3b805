// Logging set-up: one stderr sink, shared by every module through spdlog's default logger.
#include "core/logging.h"

#include <cstdlib>
#include <string>

#include "spdlog/sinks/stdout_color_sinks.h"

namespace sparkserve::core {

void InitLogging(std::string_view level) {
  std::string lvl(level);
  if (lvl.empty()) {
    const char* env = std::getenv("SPARKSERVE_LOG_LEVEL");
    lvl = env ? env : "info";
  }
  // Idempotent: a second call (e.g. after the command line set --log-level) only changes the level.
  auto logger = spdlog::get("sparkserve");
  if (!logger) {
    logger = spdlog::stderr_color_mt("sparkserve");
    logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v");
    spdlog::set_default_logger(logger);
  }
  logger->set_level(spdlog::level::from_str(lvl));
}

}  // namespace sparkserve::core
