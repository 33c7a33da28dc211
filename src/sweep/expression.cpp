#include "sweep/expression.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace dlscale::sweep {

// ---------------------------------------------------------------- values

std::string Value::type_name() const {
  if (is_number()) return "number";
  if (is_string()) return "string";
  if (is_bool()) return "boolean";
  return "list";
}

std::string Value::to_string() const {
  if (is_number()) {
    const double d = number();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e15) {
      return fmt::format("{}", static_cast<long long>(d));
    }
    return fmt::format("{}", d);
  }
  if (is_string()) return string();
  if (is_bool()) return boolean() ? "true" : "false";
  std::string s = "[";
  for (size_t i = 0; i < list().size(); ++i) s += (i ? ", " : "") + list()[i].to_string();
  return s + "]";
}

bool Value::truthy() const {
  if (is_number()) return number() != 0;
  if (is_string()) return !string().empty();
  if (is_bool()) return boolean();
  return !list().empty();
}

// ---------------------------------------------------------------- syntax tree

struct Expression::Node {
  enum class Kind { kLiteral, kRef, kList, kNeg, kNot, kBinary, kAnd, kOr, kIf, kCall };
  Kind kind;
  Value literal;                                    // kLiteral
  std::string name;                                 // kRef, kCall; the operator for kBinary
  std::vector<std::shared_ptr<const Node>> kids;    // operands, list items, arguments
};

namespace {

using Node = Expression::Node;
using NodePtr = std::shared_ptr<const Node>;

NodePtr make(Node::Kind kind, std::vector<NodePtr> kids = {}, std::string name = {},
             Value literal = {}) {
  auto n = std::make_shared<Node>();
  n->kind = kind;
  n->kids = std::move(kids);
  n->name = std::move(name);
  n->literal = std::move(literal);
  return n;
}

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {
    if (s_.size() > kMaxLength) {
      throw Error(fmt::format("expression of {} characters; at most {}", s_.size(), kMaxLength));
    }
  }

  NodePtr parse_all() {
    NodePtr n = conditional();
    skip_space();
    if (pos_ < s_.size()) fail(fmt::format("unexpected '{}'", s_.substr(pos_, 1)));
    return n;
  }

 private:
  // Bounds that keep parsing and evaluation (both recursive) far from the
  // stack's end, whatever a sweep file or --where holds.
  static constexpr size_t kMaxLength = 65536;
  static constexpr int kMaxDepth = 64;
  static constexpr int kMaxNodes = 4096;

  /// Counts one level of nesting for as long as it lives.
  class Nested {
   public:
    explicit Nested(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxDepth) p_.fail(fmt::format("nested deeper than {} levels", kMaxDepth));
    }
    ~Nested() { --p_.depth_; }
    Nested(const Nested&) = delete;
    Nested& operator=(const Nested&) = delete;

   private:
    Parser& p_;
  };

  NodePtr node(Node::Kind kind, std::vector<NodePtr> kids, std::string name = {}, Value literal = {}) {
    if (++nodes_ > kMaxNodes) fail(fmt::format("more than {} terms", kMaxNodes));
    return make(kind, std::move(kids), std::move(name), std::move(literal));
  }

  [[noreturn]] void fail(const std::string& what) const { fail_at(pos_, what); }
  [[noreturn]] void fail_at(size_t pos, const std::string& what) const {
    // A long expression is shown by its start: the position locates the rest.
    const std::string shown = s_.size() > 80 ? s_.substr(0, 80) + "..." : s_;
    throw Error(fmt::format("expression '{}' at position {}: {}", shown, pos + 1, what));
  }

  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }

  bool peek(const std::string& token) {
    skip_space();
    return s_.compare(pos_, token.size(), token) == 0;
  }

  /// A keyword (and, or, not, if, else) not followed by an identifier character.
  bool peek_word(const std::string& word) {
    if (!peek(word)) return false;
    const size_t end = pos_ + word.size();
    return end >= s_.size() || !(std::isalnum(static_cast<unsigned char>(s_[end])) || s_[end] == '_');
  }

  bool accept(const std::string& token) {
    if (!peek(token)) return false;
    pos_ += token.size();
    return true;
  }

  bool accept_word(const std::string& word) {
    if (!peek_word(word)) return false;
    pos_ += word.size();
    return true;
  }

  void expect(const std::string& token) {
    if (!accept(token)) fail(fmt::format("expected '{}'", token));
  }

  NodePtr conditional() {
    const Nested nested(*this);
    NodePtr value = logical_or();
    if (!accept_word("if")) return value;
    NodePtr cond = logical_or();
    if (!accept_word("else")) fail("expected 'else' after 'a if condition'");
    NodePtr other = conditional();
    return node(Node::Kind::kIf, {cond, value, other});
  }

  NodePtr logical_or() {
    NodePtr left = logical_and();
    while (accept_word("or")) left = node(Node::Kind::kOr, {left, logical_and()});
    return left;
  }

  NodePtr logical_and() {
    NodePtr left = logical_not();
    while (accept_word("and")) left = node(Node::Kind::kAnd, {left, logical_not()});
    return left;
  }

  NodePtr logical_not() {
    if (accept_word("not")) {
      const Nested nested(*this);
      return node(Node::Kind::kNot, {logical_not()});
    }
    return comparison();
  }

  NodePtr comparison() {
    NodePtr left = additive();
    for (const char* op : {"==", "!=", "<=", ">=", "<", ">"}) {
      if (accept(op)) return node(Node::Kind::kBinary, {left, additive()}, op);
    }
    return left;
  }

  NodePtr additive() {
    NodePtr left = multiplicative();
    while (true) {
      if (accept("+")) {
        left = node(Node::Kind::kBinary, {left, multiplicative()}, "+");
      } else if (accept("-")) {
        left = node(Node::Kind::kBinary, {left, multiplicative()}, "-");
      } else {
        return left;
      }
    }
  }

  NodePtr multiplicative() {
    NodePtr left = unary();
    while (true) {
      std::string op;
      for (const char* o : {"*", "/", "%"}) {
        if (accept(o)) {
          op = o;
          break;
        }
      }
      if (op.empty()) return left;
      left = node(Node::Kind::kBinary, {left, unary()}, op);
    }
  }

  NodePtr unary() {
    if (accept("-")) {
      const Nested nested(*this);
      return node(Node::Kind::kNeg, {unary()});
    }
    return primary();
  }

  NodePtr primary() {
    skip_space();
    if (pos_ >= s_.size()) fail("unexpected end of expression");
    const char c = s_[pos_];
    if (accept("(")) {
      NodePtr n = conditional();
      expect(")");
      return n;
    }
    if (accept("[")) {
      std::vector<NodePtr> items;
      if (!accept("]")) {
        do items.push_back(conditional());
        while (accept(","));
        expect("]");
      }
      return node(Node::Kind::kList, std::move(items));
    }
    if (accept("${")) {
      const std::string name = identifier("a parameter name after '${'");
      expect("}");
      return node(Node::Kind::kRef, {}, name);
    }
    if (c == '\'' || c == '"') return string_literal(c);
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') return number_literal();
    if (accept_word("true")) return node(Node::Kind::kLiteral, {}, {}, Value(true));
    if (accept_word("false")) return node(Node::Kind::kLiteral, {}, {}, Value(false));
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const size_t start = pos_;
      const std::string name = identifier("a name");
      if (!accept("(")) {
        fail_at(start, fmt::format("unknown name '{}' (parameters are written ${{{}}})", name, name));
      }
      std::vector<NodePtr> args;
      if (!accept(")")) {
        do args.push_back(conditional());
        while (accept(","));
        expect(")");
      }
      return node(Node::Kind::kCall, std::move(args), name);
    }
    fail(fmt::format("unexpected '{}'", std::string(1, c)));
  }

  std::string identifier(const char* what) {
    skip_space();
    const size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) ||
                                s_[pos_] == '_' || s_[pos_] == '-' || s_[pos_] == '.')) {
      ++pos_;
    }
    if (pos_ == start) fail(fmt::format("expected {}", what));
    return s_.substr(start, pos_ - start);
  }

  NodePtr string_literal(char quote) {
    ++pos_;
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) ++pos_;
      out += s_[pos_++];
    }
    if (pos_ >= s_.size()) fail("unterminated string");
    ++pos_;
    return node(Node::Kind::kLiteral, {}, {}, Value(out));
  }

  NodePtr number_literal() {
    const char* begin = s_.c_str() + pos_;
    char* end = nullptr;
    const double d = std::strtod(begin, &end);
    if (end == begin) fail("malformed number");
    pos_ += static_cast<size_t>(end - begin);
    return node(Node::Kind::kLiteral, {}, {}, Value(d));
  }

  const std::string& s_;
  size_t pos_ = 0;
  int depth_ = 0;
  int nodes_ = 0;
};

// ---------------------------------------------------------------- evaluation

class Evaluator {
 public:
  Evaluator(const std::string& text, const Lookup& lookup) : text_(text), lookup_(lookup) {}

  Value eval(const Node& n) {
    switch (n.kind) {
      case Node::Kind::kLiteral: return n.literal;
      case Node::Kind::kRef: return lookup_(n.name);
      case Node::Kind::kList: {
        Value::List items;
        for (const auto& k : n.kids) items.push_back(eval(*k));
        return Value(std::move(items));
      }
      case Node::Kind::kNeg: {
        const Value v = eval(*n.kids[0]);
        require_number(v, "-");
        return Value(-v.number());
      }
      case Node::Kind::kNot: return Value(!eval(*n.kids[0]).truthy());
      case Node::Kind::kAnd: {
        const Value a = eval(*n.kids[0]);
        return a.truthy() ? eval(*n.kids[1]) : a;
      }
      case Node::Kind::kOr: {
        const Value a = eval(*n.kids[0]);
        return a.truthy() ? a : eval(*n.kids[1]);
      }
      case Node::Kind::kIf:
        return eval(*n.kids[0]).truthy() ? eval(*n.kids[1]) : eval(*n.kids[2]);
      case Node::Kind::kBinary: return binary(n.name, eval(*n.kids[0]), eval(*n.kids[1]));
      case Node::Kind::kCall: return call(n);
    }
    throw InternalError("unknown expression node");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(fmt::format("expression '{}': {}", text_, what));
  }

  void require_number(const Value& v, const std::string& op) const {
    if (!v.is_number()) fail(fmt::format("'{}' needs a number, got {} '{}'", op, v.type_name(), v.to_string()));
  }

  Value binary(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return Value(a == b);
    if (op == "!=") return Value(a != b);
    if (op == "<" || op == "<=" || op == ">" || op == ">=") {
      int cmp = 0;
      if (a.is_number() && b.is_number()) {
        cmp = a.number() < b.number() ? -1 : (a.number() > b.number() ? 1 : 0);
      } else if (a.is_string() && b.is_string()) {
        cmp = a.string().compare(b.string());
      } else {
        fail(fmt::format("cannot compare {} '{}' with {} '{}'", a.type_name(), a.to_string(),
                         b.type_name(), b.to_string()));
      }
      if (op == "<") return Value(cmp < 0);
      if (op == "<=") return Value(cmp <= 0);
      if (op == ">") return Value(cmp > 0);
      return Value(cmp >= 0);
    }
    if (op == "+") {
      if (a.is_string() && b.is_string()) return Value(a.string() + b.string());
      if (a.is_list() && b.is_list()) {
        Value::List l = a.list();
        l.insert(l.end(), b.list().begin(), b.list().end());
        return Value(std::move(l));
      }
      if (!a.is_number() || !b.is_number()) {
        fail(fmt::format("cannot add {} '{}' and {} '{}' (use str() to join text)", a.type_name(),
                         a.to_string(), b.type_name(), b.to_string()));
      }
      return Value(a.number() + b.number());
    }
    require_number(a, op);
    require_number(b, op);
    const double x = a.number(), y = b.number();
    if (op == "-") return Value(x - y);
    if (op == "*") return Value(x * y);
    if (y == 0) fail(fmt::format("division by zero in '{} {} {}'", a.to_string(), op, b.to_string()));
    if (op == "/") return Value(x / y);
    double r = std::fmod(x, y);  // sign of the divisor, as in Python
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return Value(r);
  }

  void arity(const Node& n, size_t min, size_t max) const {
    if (n.kids.size() < min || n.kids.size() > max) {
      fail(min == max ? fmt::format("{}() takes {} argument(s), got {}", n.name, min, n.kids.size())
                      : fmt::format("{}() takes at least {} argument(s), got {}", n.name, min,
                                    n.kids.size()));
    }
  }

  Value call(const Node& n) {
    std::vector<Value> args;
    for (const auto& k : n.kids) args.push_back(eval(*k));
    const std::string& f = n.name;
    if (f == "len") {
      arity(n, 1, 1);
      if (args[0].is_string()) return Value(static_cast<double>(args[0].string().size()));
      if (args[0].is_list()) return Value(static_cast<double>(args[0].list().size()));
      fail(fmt::format("len() needs a string or list, got {}", args[0].type_name()));
    }
    if (f == "min" || f == "max") {
      arity(n, 1, SIZE_MAX);
      const Value::List items = args.size() == 1 && args[0].is_list() ? args[0].list() : Value::List(args.begin(), args.end());
      if (items.empty()) fail(fmt::format("{}() of an empty list", f));
      double best = 0;
      for (size_t i = 0; i < items.size(); ++i) {
        require_number(items[i], f + "()");
        const double v = items[i].number();
        if (i == 0 || (f == "min" ? v < best : v > best)) best = v;
      }
      return Value(best);
    }
    if (f == "split") {
      arity(n, 2, 2);
      if (!args[0].is_string() || !args[1].is_string() || args[1].string().empty()) {
        fail("split() needs a string and a non-empty separator string");
      }
      Value::List parts;
      const std::string& s = args[0].string();
      const std::string& sep = args[1].string();
      size_t start = 0, at;
      while ((at = s.find(sep, start)) != std::string::npos) {
        parts.emplace_back(s.substr(start, at - start));
        start = at + sep.size();
      }
      parts.emplace_back(s.substr(start));
      return Value(std::move(parts));
    }
    if (f == "int" || f == "float") {
      arity(n, 1, 1);
      double d = 0;
      if (args[0].is_number()) {
        d = args[0].number();
      } else if (args[0].is_bool()) {
        d = args[0].boolean() ? 1 : 0;
      } else if (args[0].is_string()) {
        const char* begin = args[0].string().c_str();
        char* end = nullptr;
        d = std::strtod(begin, &end);
        if (end == begin || *end != '\0') fail(fmt::format("{}() cannot read '{}' as a number", f, args[0].string()));
      } else {
        fail(fmt::format("{}() needs a number or string, got a list", f));
      }
      return Value(f == "int" ? std::trunc(d) : d);
    }
    if (f == "str") {
      arity(n, 1, 1);
      return Value(args[0].to_string());
    }
    fail(fmt::format("unknown function '{}'; known: len, min, max, split, int, float, str", f));
  }

  const std::string& text_;
  const Lookup& lookup_;
};

void collect_refs(const Node& n, std::vector<std::string>& out) {
  if (n.kind == Node::Kind::kRef) out.push_back(n.name);
  for (const auto& k : n.kids) collect_refs(*k, out);
}

}  // namespace

Expression Expression::parse(const std::string& text) {
  Expression e;
  e.text_ = text;
  e.root_ = Parser(e.text_).parse_all();
  return e;
}

Value Expression::evaluate(const Lookup& lookup) const {
  return Evaluator(text_, lookup).eval(*root_);
}

std::vector<std::string> Expression::references() const {
  std::vector<std::string> out;
  collect_refs(*root_, out);
  return out;
}

}  // namespace dlscale::sweep
