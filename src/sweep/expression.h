#pragma once
// The small, safe expression language of sweep files (docs/sweep-files.md):
// computed parameter values written as `$( expression )`. Parsed and
// evaluated by this code only; nothing is handed to a shell or interpreter.
//
//   literals     42  2.5  'text'  "text"  true  false  [1, 2, 'a']
//   references   ${name}  (another parameter of the same run)
//   arithmetic   + - * / %   (+ also joins strings and lists)
//   comparison   == != < <= > >=
//   logic        and or not
//   conditional  a if condition else b
//   functions    len(x)  min(a, b, ...)  max(a, b, ...)  split(text, sep)
//                int(x)  float(x)  str(x)
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace dlscale::sweep {

/// A value: number (double; integral values print without a decimal point),
/// string, boolean or list.
class Value {
 public:
  using List = std::vector<Value>;
  Value() : v_(0.0) {}
  Value(double d) : v_(d) {}                        // NOLINT: implicit by design
  Value(int i) : v_(static_cast<double>(i)) {}      // NOLINT
  Value(long long i) : v_(static_cast<double>(i)) {}  // NOLINT
  Value(bool b) : v_(b) {}                          // NOLINT
  Value(std::string s) : v_(std::move(s)) {}        // NOLINT
  Value(const char* s) : v_(std::string(s)) {}      // NOLINT
  Value(List l) : v_(std::move(l)) {}               // NOLINT

  bool is_number() const { return std::holds_alternative<double>(v_); }
  bool is_string() const { return std::holds_alternative<std::string>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_list() const { return std::holds_alternative<List>(v_); }
  double number() const { return std::get<double>(v_); }
  const std::string& string() const { return std::get<std::string>(v_); }
  bool boolean() const { return std::get<bool>(v_); }
  const List& list() const { return std::get<List>(v_); }

  /// "number", "string", "boolean", "list" (for error messages).
  std::string type_name() const;
  /// Text form: 64, 2.5, text, true, [1, 2].
  std::string to_string() const;
  /// Truth value: false, 0, "" and [] are false.
  bool truthy() const;

  friend bool operator==(const Value& a, const Value& b) { return a.v_ == b.v_; }
  friend bool operator!=(const Value& a, const Value& b) { return !(a == b); }

 private:
  std::variant<double, std::string, bool, List> v_;
};

/// Resolves `${name}`; throws dlscale::Error for an unknown name.
using Lookup = std::function<Value(const std::string& name)>;

/// A parsed expression, evaluated against any lookup.
class Expression {
 public:
  /// Parses `text`; throws dlscale::Error naming the position and what was
  /// expected.
  static Expression parse(const std::string& text);
  Value evaluate(const Lookup& lookup) const;
  /// The `${name}` references, in order of appearance (for dependency order
  /// and cycle detection).
  std::vector<std::string> references() const;
  const std::string& text() const { return text_; }

  struct Node;

 private:
  std::string text_;
  std::shared_ptr<const Node> root_;
};

}  // namespace dlscale::sweep
