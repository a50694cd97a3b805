// Shared pieces of the model-running subcommands (score, run): parsing `--ids 1,2,3`, the model's
// tokenizer, and the message for text input without a tokenizer.
#pragma once
#include <charconv>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "fmt/format.h"
#include "text/tokenizer/tokenizer.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace sparkserve::head {

// "1,2,3" -> {1, 2, 3}; spaces around items allowed; empty items or non-integers are errors.
inline absl::StatusOr<std::vector<int32_t>> ParseIdList(const std::string& text) {
  std::vector<int32_t> ids;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    size_t a = begin, b = end;
    while (a < b && text[a] == ' ') ++a;
    while (b > a && text[b - 1] == ' ') --b;
    int32_t v = 0;
    const auto [p, ec] = std::from_chars(text.data() + a, text.data() + b, v);
    if (a == b || ec != std::errc() || p != text.data() + b || v < 0) {
      return absl::InvalidArgumentError(
          fmt::format("--ids: '{}' is not a non-negative integer (expected a list like 1,2,3)", text.substr(a, b - a)));
    }
    ids.push_back(v);
    begin = end + 1;
  }
  return ids;
}

// Subcommand callbacks run inside CLI11's parse, before main() installs the stderr logger; this
// sends our logs to stderr at the --log-level (or $SPARKSERVE_LOG_LEVEL) level meanwhile.
inline void UseStderrLogging(CLI::App* cmd) {
  std::string level;
  if (const CLI::Option* o = cmd->get_parent()->get_option_no_throw("--log-level"); o && o->count() > 0) {
    level = o->as<std::string>();
  } else if (const char* env = std::getenv("SPARKSERVE_LOG_LEVEL")) {
    level = env;
  }
  auto logger = spdlog::get(std::string("sparkserve-") + cmd->get_name());
  if (!logger) logger = spdlog::stderr_color_mt(std::string("sparkserve-") + cmd->get_name());
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v");
  logger->set_level(level.empty() ? spdlog::level::info : spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

// The tokenizer of a model directory (its tokenizer.json), or null when it has none and
// `required` is false. Errors name the directory.
inline absl::StatusOr<std::unique_ptr<text::Tokenizer>> LoadModelTokenizer(const std::string& dir,
                                                                                 bool required) {
  if (!std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json")) {
    if (!required) return std::unique_ptr<text::Tokenizer>();
    return absl::NotFoundError(
        fmt::format("{} has no tokenizer.json: text input needs one (pass token ids with --ids)", dir));
  }
  auto t = text::Tokenizer::Load(dir);
  if (!t.ok()) return absl::Status(t.status().code(), fmt::format("{}/tokenizer.json: {}", dir, std::string(t.status().message())));
  return t;
}

// Token ids from --ids, or --text encoded with the model directory's tokenizer.
inline absl::StatusOr<std::vector<int32_t>> InputIds(const std::string& dir, const std::string& ids,
                                                     const std::string& text) {
  if (text.empty()) return ParseIdList(ids);
  auto tok = LoadModelTokenizer(dir, /*required=*/true);
  if (!tok.ok()) return tok.status();
  auto encoded = (*tok)->Encode(text);
  if (!encoded.ok()) return encoded.status();
  if (encoded->empty()) return absl::InvalidArgumentError("the text encodes to no tokens");
  return std::vector<int32_t>(encoded->begin(), encoded->end());
}

}  // namespace sparkserve::head
