// Error plumbing: absl::Status/StatusOr across module boundaries, with propagation macros.
#pragma once
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fmt/format.h"

#define SPARKSERVE_CONCAT_INNER(a, b) a##b
#define SPARKSERVE_CONCAT(a, b) SPARKSERVE_CONCAT_INNER(a, b)

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    ::absl::Status _sparkserve_status = (expr);      \
    if (!_sparkserve_status.ok()) return _sparkserve_status; \
  } while (0)

// `lhs = value of rexpr` (an absl::StatusOr), or returns its error.
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  ASSIGN_OR_RETURN_IMPL(SPARKSERVE_CONCAT(_sparkserve_or_, __LINE__), lhs, rexpr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                          \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(tmp).value()

namespace sparkserve::core {

// Note: Debian's Abseil is built with its own absl::string_view (not std::string_view). Build
// messages with fmt::format and pass std::string to absl; read messages with std::string(s.message()).

// Prefixes a status message with context ("reading model.safetensors: ...").
inline absl::Status Annotate(const absl::Status& s, std::string_view context) {
  if (s.ok()) return s;
  return absl::Status(s.code(), fmt::format("{}: {}", context, std::string(s.message())));
}

}  // namespace sparkserve::core
