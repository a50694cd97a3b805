// String formats as regexes (parsed once).
#include "text/constraint/string_formats.h"

#include <map>
#include <string>

#include "text/constraint/regex_parser.h"

namespace sparkserve::text::constraint {
namespace {

const std::map<std::string, std::string, std::less<>>& FormatPatterns() {
  static const std::string date =
      "[1-9][0-9]{3}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))";
  static const std::string time =
      "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
  // Host labels of up to 20 characters (63 are valid; a bounded subset keeps outputs short).
  static const std::string label = "[a-zA-Z0-9]([a-zA-Z0-9-]{0,18}[a-zA-Z0-9])?";
  static const std::map<std::string, std::string, std::less<>> patterns{
      {"date", date},
      {"time", time},
      {"date-time", date + "T" + time},
      {"duration",
       "P(([0-9]{1,4}Y)?([0-9]{1,4}M)?[0-9]{1,4}D|[0-9]{1,4}W)(T[0-9]{1,2}H([0-9]{1,2}M)?([0-9]{1,2}S)?)?"
       "|PT[0-9]{1,2}H([0-9]{1,2}M)?([0-9]{1,2}S)?"},
      {"email", "[a-zA-Z0-9_%+-]{1,16}(\\.[a-zA-Z0-9_%+-]{1,16}){0,2}@" + label + "(\\." + label + "){0,2}\\.[a-zA-Z]{2,8}"},
      {"hostname", label + "(\\." + label + "){0,4}"},
      {"ipv4", "((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"},
      {"ipv6", "[0-9a-f]{1,4}(:[0-9a-f]{1,4}){7}"},
      {"uuid", "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"},
  };
  return patterns;
}

}  // namespace

ExprPtr StringFormat(std::string_view format) {
  auto it = FormatPatterns().find(format);
  if (it == FormatPatterns().end()) return nullptr;
  absl::StatusOr<ExprPtr> e = ParseRegex(it->second);
  return e.ok() ? *e : nullptr;
}

}  // namespace sparkserve::text::constraint
