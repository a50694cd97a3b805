// Logging set-up: spdlog to stderr (stdout carries command results only).
#pragma once
#include <string_view>

#include "spdlog/spdlog.h"

namespace sparkserve::core {
// Installs a stderr logger as spdlog's default. `level`: trace|debug|info|warn|error|off.
// Also honours SPARKSERVE_LOG_LEVEL when `level` is empty. Safe to call again (updates the level).
void InitLogging(std::string_view level = {});
}  // namespace sparkserve::core
