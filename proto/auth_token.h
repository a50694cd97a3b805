// The shared secret between a head and its nodes: read from a token file, compared in constant time.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace sparkserve::proto {

// The file's content with surrounding whitespace (spaces, tabs, CR, LF) removed. Errors: the file
// is missing or unreadable (NotFound), or holds only whitespace (InvalidArgument). Logs a warning
// when the file is readable by group or others.
absl::StatusOr<std::string> ReadTokenFile(const std::filesystem::path& path);

// a == b, taking time that depends only on the lengths, not on where the bytes differ.
bool TokensEqual(std::string_view a, std::string_view b);

}  // namespace sparkserve::proto
