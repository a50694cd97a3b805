// Python operator semantics on template values.
#include "text/chat/jinja/operators.h"

#include <cmath>
#include <limits>

#include "fmt/format.h"
#include "text/chat/jinja/error.h"
#include "text/chat/jinja/python_format.h"
#include "text/chat/jinja/string_ops.h"

namespace sparkserve::text::jinja {
namespace {

[[noreturn]] void Unsupported(const std::string& op, const Value& a, const Value& b) {
  a.RequireDefined();
  b.RequireDefined();
  ThrowRuntime(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, a.TypeName(), b.TypeName()));
}

int64_t CheckedInt(bool overflow, int64_t v) {
  if (overflow) ThrowRuntime("integer overflow");
  return v;
}

// The largest string (bytes) or list (items) `*` may build: the default output limit of a render.
constexpr int64_t kMaxRepeatBytes = int64_t{64} << 20;
constexpr int64_t kMaxRepeatItems = 1000000;

Value Repeat(const Value& seq, int64_t n) {
  if (seq.is_string()) {
    if (n > 0 && static_cast<int64_t>(seq.str().size()) > kMaxRepeatBytes / n) {
      ThrowRuntime(fmt::format("repeating a string of {} bytes {} times exceeds {} bytes", seq.str().size(), n,
                               kMaxRepeatBytes));
    }
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value(std::move(out));
  }
  if (n > 0 && static_cast<int64_t>(seq.items().size()) > kMaxRepeatItems / n) {
    ThrowRuntime(fmt::format("repeating a sequence of {} items {} times exceeds {} items", seq.items().size(), n,
                             kMaxRepeatItems));
  }
  ValueList out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return seq.is_list() ? Value::List(std::move(out)) : Value::Tuple(std::move(out));
}

double FloorMod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

}  // namespace

Value BinaryOp(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value(a.Str() + b.Str());
  const bool nums = a.is_number() && b.is_number();
  const bool ints = a.is_integral() && b.is_integral();
  if (op == "+") {
    if (ints) {
      int64_t r = 0;
      const bool overflow = __builtin_add_overflow(a.as_int(), b.as_int(), &r);
      return Value(CheckedInt(overflow, r));
    }
    if (nums) return Value(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) return Value(a.str() + b.str());
    if (a.is_sequence() && a.kind() == b.kind()) {
      ValueList out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return a.is_list() ? Value::List(std::move(out)) : Value::Tuple(std::move(out));
    }
    if ((a.is_string() || a.is_sequence()) && !b.is_undefined() && !a.is_undefined()) {
      ThrowRuntime(fmt::format("can only concatenate {} (not \"{}\") to {}", a.TypeName(), b.TypeName(), a.TypeName()));
    }
    Unsupported(op, a, b);
  }
  if (op == "-") {
    if (ints) {
      int64_t r = 0;
      const bool overflow = __builtin_sub_overflow(a.as_int(), b.as_int(), &r);
      return Value(CheckedInt(overflow, r));
    }
    if (nums) return Value(a.as_double() - b.as_double());
    Unsupported(op, a, b);
  }
  if (op == "*") {
    if (ints) {
      int64_t r = 0;
      const bool overflow = __builtin_mul_overflow(a.as_int(), b.as_int(), &r);
      return Value(CheckedInt(overflow, r));
    }
    if (nums) return Value(a.as_double() * b.as_double());
    if ((a.is_string() || a.is_sequence()) && b.is_integral()) return Repeat(a, b.as_int());
    if ((b.is_string() || b.is_sequence()) && a.is_integral()) return Repeat(b, a.as_int());
    Unsupported(op, a, b);
  }
  if (op == "/") {
    if (!nums) Unsupported(op, a, b);
    if (b.as_double() == 0) ThrowRuntime("division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (op == "//") {
    if (!nums) Unsupported(op, a, b);
    if (ints) {
      if (b.as_int() == 0) ThrowRuntime("integer division or modulo by zero");
      int64_t q = a.as_int() / b.as_int();
      if ((a.as_int() % b.as_int() != 0) && ((a.as_int() < 0) != (b.as_int() < 0))) --q;
      return Value(q);
    }
    if (b.as_double() == 0) ThrowRuntime("float floor division by zero");
    return Value(std::floor(a.as_double() / b.as_double()));
  }
  if (op == "%") {
    if (a.is_string()) return Value(PercentFormat(a.str(), b));
    if (!nums) Unsupported(op, a, b);
    if (ints) {
      if (b.as_int() == 0) ThrowRuntime("integer division or modulo by zero");
      int64_t m = a.as_int() % b.as_int();
      if (m != 0 && ((m < 0) != (b.as_int() < 0))) m += b.as_int();
      return Value(m);
    }
    if (b.as_double() == 0) ThrowRuntime("float modulo");
    return Value(FloorMod(a.as_double(), b.as_double()));
  }
  if (op == "**") {
    if (!nums) Unsupported(op, a, b);
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), e = b.as_int(), r = 1;
      while (e-- > 0) {
        if (__builtin_mul_overflow(r, base, &r)) ThrowRuntime("integer overflow");
      }
      return Value(r);
    }
    return Value(std::pow(a.as_double(), b.as_double()));
  }
  ThrowRuntime(fmt::format("unknown operator '{}'", op));
}

bool CompareOp(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return PyEquals(a, b);
  if (op == "!=") return !PyEquals(a, b);
  if (op == "<") return PyLess(a, b);
  if (op == ">") return PyLess(b, a);
  if (op == "<=") return PyLess(a, b) || PyEquals(a, b);
  if (op == ">=") return PyLess(b, a) || PyEquals(a, b);
  if (op == "in") return Contains(b, a);
  if (op == "notin") return !Contains(b, a);
  ThrowRuntime(fmt::format("unknown comparison '{}'", op));
}

Value Negate(const Value& v) {
  if (v.is_integral()) return Value(-v.as_int());
  if (v.is_float()) return Value(-v.as_double());
  v.RequireDefined();
  ThrowRuntime(fmt::format("bad operand type for unary -: '{}'", v.TypeName()));
}

Value UnaryPlus(const Value& v) {
  if (v.is_integral()) return Value(v.as_int());
  if (v.is_float()) return v;
  v.RequireDefined();
  ThrowRuntime(fmt::format("bad operand type for unary +: '{}'", v.TypeName()));
}

bool Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kString:
      if (!item.is_string()) {
        item.RequireDefined();
        ThrowRuntime(fmt::format("'in <string>' requires string as left operand, not {}", item.TypeName()));
      }
      return container.str().find(item.str()) != std::string::npos;
    case Kind::kList:
    case Kind::kTuple:
      for (const Value& x : container.items()) {
        if (PyEquals(x, item)) return true;
      }
      return false;
    case Kind::kDict:
      return container.dict().Find(item) != nullptr;
    case Kind::kUndefined:
      return false;
    default:
      ThrowRuntime(fmt::format("argument of type '{}' is not iterable", container.TypeName()));
  }
}

ValueList Iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kList:
    case Kind::kTuple:
      return v.items();
    case Kind::kDict: {
      ValueList keys;
      for (const auto& e : v.dict().entries) keys.push_back(e.first);
      return keys;
    }
    case Kind::kString: {
      ValueList chars;
      for (char32_t c : DecodeUtf8(v.str())) {
        std::string s;
        AppendUtf8(s, c);
        chars.emplace_back(std::move(s));
      }
      return chars;
    }
    case Kind::kUndefined:
      return {};
    default:
      ThrowRuntime(fmt::format("'{}' object is not iterable", v.TypeName()));
  }
}

int64_t Length(const Value& v) {
  switch (v.kind()) {
    case Kind::kString:
      return static_cast<int64_t>(CodepointCount(v.str()));
    case Kind::kList:
    case Kind::kTuple:
      return static_cast<int64_t>(v.items().size());
    case Kind::kDict:
      return static_cast<int64_t>(v.dict().entries.size());
    case Kind::kUndefined:
      return 0;
    default:
      ThrowRuntime(fmt::format("object of type '{}' has no len()", v.TypeName()));
  }
}

std::optional<Value> IndexSequence(const Value& obj, int64_t index) {
  if (obj.is_sequence()) {
    const auto& xs = obj.items();
    int64_t n = static_cast<int64_t>(xs.size());
    if (index < 0) index += n;
    if (index < 0 || index >= n) return std::nullopt;
    return xs[static_cast<size_t>(index)];
  }
  if (obj.is_string()) {
    std::u32string u = DecodeUtf8(obj.str());
    int64_t n = static_cast<int64_t>(u.size());
    if (index < 0) index += n;
    if (index < 0 || index >= n) return std::nullopt;
    std::string s;
    AppendUtf8(s, u[static_cast<size_t>(index)]);
    return Value(std::move(s));
  }
  return std::nullopt;
}

Value SliceValue(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  auto as_index = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    if (!v.is_integral()) ThrowRuntime(fmt::format("slice {} must be an integer or None", what));
    return v.as_int();
  };
  std::optional<int64_t> start = as_index(start_v, "indices"), stop = as_index(stop_v, "indices");
  int64_t step = as_index(step_v, "indices").value_or(1);
  if (step == 0) ThrowRuntime("slice step cannot be zero");
  std::u32string chars;
  int64_t n;
  if (obj.is_string()) {
    chars = DecodeUtf8(obj.str());
    n = static_cast<int64_t>(chars.size());
  } else if (obj.is_sequence()) {
    n = static_cast<int64_t>(obj.items().size());
  } else {
    obj.RequireDefined();
    ThrowRuntime(fmt::format("'{}' object is not subscriptable", obj.TypeName()));
  }
  // Python's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= n) {
      x = step < 0 ? n - 1 : n;
    }
    return x;
  };
  int64_t b = adjust(start, step < 0 ? n - 1 : 0);
  int64_t e = adjust(stop, step < 0 ? -1 : n);
  std::vector<int64_t> idx;
  if (step > 0) {
    for (int64_t i = b; i < e; i += step) idx.push_back(i);
  } else {
    for (int64_t i = b; i > e; i += step) idx.push_back(i);
  }
  if (obj.is_string()) {
    std::u32string out;
    for (int64_t i : idx) out.push_back(chars[static_cast<size_t>(i)]);
    return Value(EncodeUtf8(out));
  }
  ValueList out;
  for (int64_t i : idx) out.push_back(obj.items()[static_cast<size_t>(i)]);
  return obj.is_list() ? Value::List(std::move(out)) : Value::Tuple(std::move(out));
}

}  // namespace sparkserve::text::jinja
