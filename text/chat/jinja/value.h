// Template values: Python-like (undefined, None, bool, int64, float, str, list, tuple, dict with
// insertion order, namespace/loop objects, callables), with Python's truthiness, str(), repr(),
// equality and ordering, as jinja2 sees them.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace sparkserve::text::jinja {

class Evaluator;
class Value;
using ValueList = std::vector<Value>;
struct DictData;
struct ObjectData;
struct CallableData;

enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict, kObject, kCallable };

// Arguments of a call: positional, then keyword (in call order).
struct CallArgs {
  ValueList positional;
  std::vector<std::pair<std::string, Value>> keyword;
};
using NativeFn = std::function<Value(Evaluator&, CallArgs&)>;

class Value {
 public:
  Value() : kind_(Kind::kUndefined) {}  // undefined without a hint
  Value(bool b) : kind_(Kind::kBool), data_(b) {}
  Value(int v) : kind_(Kind::kInt), data_(static_cast<int64_t>(v)) {}
  Value(int64_t v) : kind_(Kind::kInt), data_(v) {}
  Value(double v) : kind_(Kind::kFloat), data_(v) {}
  Value(std::string s) : kind_(Kind::kString), data_(std::move(s)) {}
  Value(const char* s) : kind_(Kind::kString), data_(std::string(s)) {}

  // An undefined value; `hint` is the message an operation that cannot take undefined reports,
  // e.g. "'x' is undefined" or "'dict object' has no attribute 'y'".
  static Value Undefined(std::string hint);
  static Value None();
  static Value List(ValueList items);
  static Value Tuple(ValueList items);
  static Value Dict(std::shared_ptr<DictData> dict);
  static Value Dict();  // empty
  static Value Object(std::shared_ptr<ObjectData> object);
  static Value Function(std::string name, NativeFn fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // Python numbers: bool is an int.
  bool is_number() const { return kind_ == Kind::kBool || kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_integral() const { return kind_ == Kind::kBool || kind_ == Kind::kInt; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kTuple; }
  bool is_sequence() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const;     // bool or int
  double as_double() const;   // bool, int or float
  const std::string& str() const { return std::get<std::string>(data_); }
  const ValueList& items() const;  // list or tuple
  const DictData& dict() const;
  ObjectData& object() const;
  const CallableData& callable() const;
  const std::string& undefined_hint() const;

  bool Truthy() const;
  std::string Str() const;       // Python str(): what {{ value }} prints
  std::string Repr() const;      // Python repr()
  std::string TypeName() const;  // Python type name: 'str', 'dict', 'NoneType', ...
  // Raises the undefined's error when this value is undefined.
  void RequireDefined() const;

 private:
  Value(Kind kind, std::shared_ptr<const ValueList> items) : kind_(kind), data_(std::move(items)) {}
  Kind kind_;
  std::variant<std::monostate, bool, int64_t, double, std::string, std::shared_ptr<const ValueList>,
               std::shared_ptr<const DictData>, std::shared_ptr<ObjectData>,
               std::shared_ptr<const CallableData>, std::shared_ptr<const std::string>>
      data_;
};

// A dict: insertion-ordered (key, value) pairs with Python key equality (1 == 1.0 == True).
struct DictData {
  std::vector<std::pair<Value, Value>> entries;
  const Value* Find(const Value& key) const;
  const Value* Find(const std::string& key) const;
  void Set(Value key, Value value);  // replaces in place or appends
};

// An attribute-only object: a namespace() (assignable with {% set ns.attr %}) or a loop context.
struct ObjectData {
  std::string type_name;  // "Namespace", "LoopContext"
  bool assignable = false;
  std::vector<std::pair<std::string, Value>> attrs;
  const Value* Find(const std::string& name) const;
  void Set(const std::string& name, Value value);
};

struct CallableData {
  std::string name;
  NativeFn fn;
};

bool PyEquals(const Value& a, const Value& b);
// Python `a < b`; throws a runtime error for unorderable types.
bool PyLess(const Value& a, const Value& b);
// Python repr of a float ('1.0', '1e+16', 'inf').
std::string FormatFloat(double v);
// Python repr of a str (quotes and escapes as Python picks them).
std::string ReprString(const std::string& s);

}  // namespace sparkserve::text::jinja
