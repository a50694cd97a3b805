// Token files and constant-time comparison (see auth_token.h).
#include "proto/auth_token.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace sparkserve::proto {

absl::StatusOr<std::string> ReadTokenFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("token file {}: cannot open (missing or unreadable)", path.string()));
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  const char* ws = " \t\r\n";
  const size_t begin = s.find_first_not_of(ws);
  if (begin == std::string::npos)
    return absl::InvalidArgumentError(fmt::format("token file {}: is empty (holds only whitespace)", path.string()));
  const size_t end = s.find_last_not_of(ws);
  std::error_code ec;
  const auto perms = std::filesystem::status(path, ec).permissions();
  if (!ec && (perms & (std::filesystem::perms::group_read | std::filesystem::perms::others_read)) !=
                 std::filesystem::perms::none)
    spdlog::warn("token file {} is readable by other users (chmod 600 it)", path.string());
  return s.substr(begin, end - begin + 1);
}

bool TokensEqual(std::string_view a, std::string_view b) {
  const size_t n = std::max(a.size(), b.size());
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = diff | static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

}  // namespace sparkserve::proto
