// Python string formatting on template values: `"%s" % args` (printf-style, also the `format`
// filter) and str.format ("{} {name:>5}").
#pragma once
#include <string>

#include "text/chat/jinja/value.h"

namespace sparkserve::text::jinja {

// Python `%` formatting with a tuple, dict (for %(name)s) or single value.
std::string PercentFormat(const std::string& format, const Value& args);
// Python str.format with positional and keyword arguments.
std::string BraceFormat(const std::string& format, const CallArgs& args);

}  // namespace sparkserve::text::jinja
