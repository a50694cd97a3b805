// Python string formatting (see python_format.h).
#include "text/chat/jinja/python_format.h"

#include <cctype>

#include "fmt/format.h"
#include "text/chat/jinja/error.h"
#include "text/chat/jinja/string_ops.h"

namespace sparkserve::text::jinja {

std::string PercentFormat(const std::string& format, const Value& args) {
  ValueList positional;
  const DictData* mapping = nullptr;
  if (args.is_tuple()) {
    positional = args.items();
  } else if (args.is_dict()) {
    mapping = &args.dict();
    positional.push_back(args);
  } else {
    positional.push_back(args);
  }
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) ThrowRuntime("incomplete format");
    const Value* arg = nullptr;
    if (format[i] == '(') {
      size_t close = format.find(')', i);
      if (close == std::string::npos || !mapping) ThrowRuntime("format requires a mapping");
      arg = mapping->Find(format.substr(i + 1, close - i - 1));
      if (!arg) ThrowRuntime(fmt::format("KeyError: '{}'", format.substr(i + 1, close - i - 1)));
      i = close + 1;
    }
    std::string flags;
    while (i < format.size() && std::string_view("-+ #0").find(format[i]) != std::string_view::npos) flags += format[i++];
    std::string width, precision;
    while (i < format.size() && std::isdigit(static_cast<unsigned char>(format[i]))) width += format[i++];
    if (i < format.size() && format[i] == '.') {
      ++i;
      precision = ".";
      while (i < format.size() && std::isdigit(static_cast<unsigned char>(format[i]))) precision += format[i++];
    }
    if (i >= format.size()) ThrowRuntime("incomplete format");
    const char type = format[i];
    if (type == '%') {
      out += '%';
      continue;
    }
    if (!arg) {
      if (next >= positional.size()) ThrowRuntime("not enough arguments for format string");
      arg = &positional[next++];
    }
    std::string spec = "{:";
    if (flags.find('-') != std::string::npos) spec += '<';
    else if (type == 's' || type == 'r') spec += '>';
    if (flags.find('+') != std::string::npos) spec += '+';
    else if (flags.find(' ') != std::string::npos) spec += ' ';
    if (flags.find('0') != std::string::npos && flags.find('-') == std::string::npos && type != 's' && type != 'r') spec += '0';
    spec += width;
    switch (type) {
      case 's':
      case 'r': {
        std::string s = type == 's' ? arg->Str() : arg->Repr();
        if (precision.size() > 1) s = EncodeUtf8(DecodeUtf8(s).substr(0, std::stoul(precision.substr(1))));
        out += fmt::format(fmt::runtime(spec + "}"), s);
        break;
      }
      case 'd':
      case 'i':
      case 'x':
      case 'X':
      case 'o': {
        if (!arg->is_number()) ThrowRuntime(fmt::format("%{} format: a real number is required, not {}", type, arg->TypeName()));
        int64_t v = arg->is_float() ? static_cast<int64_t>(arg->as_double()) : arg->as_int();
        std::string t = type == 'i' ? "d" : std::string(1, type);
        out += fmt::format(fmt::runtime(spec + t + "}"), v);
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        if (!arg->is_number()) ThrowRuntime(fmt::format("must be real number, not {}", arg->TypeName()));
        std::string p = precision.empty() ? ".6" : (precision == "." ? ".0" : precision);
        out += fmt::format(fmt::runtime(spec + p + std::string(1, type) + "}"), arg->as_double());
        break;
      }
      default:
        ThrowRuntime(fmt::format("unsupported format character '{}'", type));
    }
  }
  if (!mapping && next < positional.size()) ThrowRuntime("not all arguments converted during string formatting");
  return out;
}

std::string BraceFormat(const std::string& format, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') ++i;
      else ThrowRuntime("Single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = format.find('}', i);
    if (close == std::string::npos) ThrowRuntime("Single '{' encountered in format string");
    std::string field = format.substr(i + 1, close - i - 1);
    i = close;
    std::string spec, conv;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      conv = field.substr(bang + 1);
      field = field.substr(0, bang);
    }
    const Value* arg = nullptr;
    if (field.empty()) {
      if (auto_index >= args.positional.size()) ThrowRuntime("Replacement index out of range for positional args tuple");
      arg = &args.positional[auto_index++];
    } else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
      size_t k = std::stoul(field);
      if (k >= args.positional.size()) ThrowRuntime("Replacement index out of range for positional args tuple");
      arg = &args.positional[k];
    } else {
      for (const auto& [name, v] : args.keyword) {
        if (name == field) arg = &v;
      }
      if (!arg) ThrowRuntime(fmt::format("KeyError: '{}'", field));
    }
    if (conv == "r") {
      out += fmt::format(fmt::runtime("{:" + spec + "}"), arg->Repr());
    } else if (arg->is_integral() && !arg->is_bool()) {
      out += fmt::format(fmt::runtime("{:" + spec + "}"), arg->as_int());
    } else if (arg->is_float() && !spec.empty()) {
      out += fmt::format(fmt::runtime("{:" + spec + "}"), arg->as_double());
    } else {
      out += fmt::format(fmt::runtime("{:" + spec + "}"), arg->Str());
    }
  }
  return out;
}

}  // namespace sparkserve::text::jinja
