// Binding call arguments to a builtin's Python-style signature (positional, then by keyword).
#pragma once
#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include "fmt/format.h"
#include "text/chat/jinja/error.h"
#include "text/chat/jinja/value.h"

namespace sparkserve::text::jinja {

class BoundArgs {
 public:
  BoundArgs(std::string_view fn, const CallArgs& args, std::initializer_list<std::string_view> params)
      : values_(params.size()) {
    if (args.positional.size() > params.size()) {
      ThrowRuntime(fmt::format("{}() takes at most {} argument(s) ({} given)", fn, params.size(), args.positional.size()));
    }
    for (size_t i = 0; i < args.positional.size(); ++i) values_[i] = args.positional[i];
    for (const auto& [name, value] : args.keyword) {
      size_t i = 0;
      for (std::string_view p : params) {
        if (p == name) break;
        ++i;
      }
      if (i == params.size()) ThrowRuntime(fmt::format("{}() got an unexpected keyword argument '{}'", fn, name));
      if (values_[i]) ThrowRuntime(fmt::format("{}() got multiple values for argument '{}'", fn, name));
      values_[i] = value;
    }
  }
  bool has(size_t i) const { return values_[i].has_value(); }
  Value get_or(size_t i, Value fallback) const { return values_[i] ? *values_[i] : std::move(fallback); }
  const Value& get(size_t i) const {
    static const Value kMissing;
    return values_[i] ? *values_[i] : kMissing;
  }
  // A required argument.
  const Value& need(size_t i, std::string_view fn, std::string_view name) const {
    if (!values_[i]) ThrowRuntime(fmt::format("{}() missing required argument '{}'", fn, name));
    return *values_[i];
  }

 private:
  std::vector<std::optional<Value>> values_;
};

}  // namespace sparkserve::text::jinja
