#include "sweep/expression.h"

#include <gtest/gtest.h>

#include <map>

#include "core/error.h"

namespace dlscale::sweep {
namespace {

Value eval(const std::string& text, std::map<std::string, Value> params = {}) {
  return Expression::parse(text).evaluate([&](const std::string& name) -> Value {
    const auto it = params.find(name);
    if (it == params.end()) throw Error("unknown parameter '" + name + "'");
    return it->second;
  });
}

std::string error_of(const std::string& text, std::map<std::string, Value> params = {}) {
  try {
    eval(text, std::move(params));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Expression, ArithmeticAndPrecedence) {
  EXPECT_EQ(eval("1 + 2 * 3"), Value(7));
  EXPECT_EQ(eval("(1 + 2) * 3"), Value(9));
  EXPECT_EQ(eval("10 - 4 - 3"), Value(3));
  EXPECT_EQ(eval("7 / 2"), Value(3.5));
  EXPECT_EQ(eval("7 % 3"), Value(1));
  EXPECT_EQ(eval("-7 % 3"), Value(2));  // the sign of the divisor, as in Python
  EXPECT_EQ(eval("-(2 + 3) * 2"), Value(-10));
  EXPECT_EQ(eval("2.5e1"), Value(25));
}

TEST(Expression, ReferencesAndTheirOrder) {
  const std::map<std::string, Value> p = {{"workers", Value(4)}, {"batch", Value(32)}};
  EXPECT_EQ(eval("${workers} * ${batch}", p), Value(128));
  EXPECT_EQ(Expression::parse("${a} + ${b} * ${a}").references(),
            (std::vector<std::string>{"a", "b", "a"}));
  EXPECT_EQ(eval("${first-bucket}", {{"first-bucket", Value(1)}}), Value(1));
}

TEST(Expression, StringsListsAndComparisons) {
  EXPECT_EQ(eval("'res' + \"net\""), Value("resnet"));
  EXPECT_EQ(eval("[1, 2] + [3]"), Value(Value::List{1, 2, 3}));
  EXPECT_EQ(eval("'a\\'b'"), Value("a'b"));
  EXPECT_EQ(eval("2 < 3"), Value(true));
  EXPECT_EQ(eval("3 <= 2"), Value(false));
  EXPECT_EQ(eval("'abc' < 'abd'"), Value(true));
  EXPECT_EQ(eval("'x' == 'x'"), Value(true));
  EXPECT_EQ(eval("1 == '1'"), Value(false));  // different types are never equal
  EXPECT_EQ(eval("[1, 'a'] != [1, 'a']"), Value(false));
}

TEST(Expression, LogicShortCircuitsAndConditional) {
  EXPECT_EQ(eval("true and false"), Value(false));
  EXPECT_EQ(eval("false or 5"), Value(5));
  EXPECT_EQ(eval("not 0"), Value(true));
  EXPECT_EQ(eval("false and 1 / 0"), Value(false));  // right side never evaluated
  EXPECT_EQ(eval("1 or 1 / 0"), Value(1));
  EXPECT_EQ(eval("'gloo' if ${n} > 1 else 'none'", {{"n", Value(2)}}), Value("gloo"));
  EXPECT_EQ(eval("'gloo' if ${n} > 1 else 'none'", {{"n", Value(1)}}), Value("none"));
  EXPECT_EQ(eval("1 if false else 2 if true else 3"), Value(2));
  EXPECT_EQ(eval("not ${a} == 1 and ${b}", {{"a", Value(2)}, {"b", Value(true)}}), Value(true));
}

TEST(Expression, Functions) {
  EXPECT_EQ(eval("len('lenet')"), Value(5));
  EXPECT_EQ(eval("len([1, 2, 3])"), Value(3));
  EXPECT_EQ(eval("min(4, 2, 8)"), Value(2));
  EXPECT_EQ(eval("max([4, 2, 8])"), Value(8));
  EXPECT_EQ(eval("split('a,b,,c', ',')"), Value(Value::List{"a", "b", "", "c"}));
  EXPECT_EQ(eval("len(split(${hosts}, ','))", {{"hosts", Value("n1,n2,n3")}}), Value(3));
  EXPECT_EQ(eval("int('42') + int(2.9)"), Value(44));
  EXPECT_EQ(eval("float('2.5') * 2"), Value(5));
  EXPECT_EQ(eval("'bs' + str(64)"), Value("bs64"));
}

TEST(Expression, TextForm) {
  EXPECT_EQ(Value(64).to_string(), "64");
  EXPECT_EQ(Value(2.5).to_string(), "2.5");
  EXPECT_EQ(Value(true).to_string(), "true");
  EXPECT_EQ(Value(Value::List{1, "a"}).to_string(), "[1, a]");
  EXPECT_EQ(eval("1/3").to_string(), "0.3333333333333333");
}

TEST(Expression, SyntaxErrorsNameThePosition) {
  EXPECT_EQ(error_of("1 +"), "expression '1 +' at position 4: unexpected end of expression");
  EXPECT_EQ(error_of("(1 + 2"), "expression '(1 + 2' at position 7: expected ')'");
  EXPECT_EQ(error_of("1 2"), "expression '1 2' at position 3: unexpected '2'");
  EXPECT_EQ(error_of("'open"), "expression ''open' at position 6: unterminated string");
  EXPECT_EQ(error_of("workers * 2"),
            "expression 'workers * 2' at position 1: unknown name 'workers' (parameters are "
            "written ${workers})");
  EXPECT_EQ(error_of("1 if true"),
            "expression '1 if true' at position 10: expected 'else' after 'a if condition'");
  EXPECT_EQ(error_of("${}"), "expression '${}' at position 3: expected a parameter name after '${'");
}

// Deep nesting and huge expressions are errors, not a stack overflow (a
// nesting of about 5,000 once crashed the parser).
TEST(Expression, DepthAndSizeAreBounded) {
  for (const std::string open : {"(", "[", "-", "not ", "f("}) {
    SCOPED_TRACE(open);
    std::string deep;
    for (int i = 0; i < 6000; ++i) deep += open;
    deep += "1";
    EXPECT_NE(error_of(deep).find("nested deeper than 64 levels"), std::string::npos);
  }
  std::string nested = "1";
  for (int i = 0; i < 60; ++i) nested = "(" + nested + ")";
  EXPECT_EQ(eval(nested), Value(1));  // 60 levels are fine
  std::string chain = "1";
  for (int i = 0; i < 5000; ++i) chain += "+1";
  EXPECT_NE(error_of(chain).find("more than 4096 terms"), std::string::npos);
  EXPECT_NE(error_of(std::string(70000, ' ') + "1").find("at most 65536"), std::string::npos);
  const std::string long_error = error_of(std::string(200, '(') + "1");
  EXPECT_LT(long_error.size(), 200u) << long_error;  // the expression is shown by its start
}

TEST(Expression, EvaluationErrorsNameTheValues) {
  EXPECT_EQ(error_of("'a' + 1"),
            "expression ''a' + 1': cannot add string 'a' and number '1' (use str() to join text)");
  EXPECT_EQ(error_of("4 / (2 - 2)"), "expression '4 / (2 - 2)': division by zero in '4 / 0'");
  EXPECT_EQ(error_of("'a' < 1"), "expression ''a' < 1': cannot compare string 'a' with number '1'");
  EXPECT_EQ(error_of("sqrt(4)"),
            "expression 'sqrt(4)': unknown function 'sqrt'; known: len, min, max, split, int, "
            "float, str");
  EXPECT_EQ(error_of("len(1, 2)"), "expression 'len(1, 2)': len() takes 1 argument(s), got 2");
  EXPECT_EQ(error_of("int('x1')"), "expression 'int('x1')': int() cannot read 'x1' as a number");
  EXPECT_EQ(error_of("${nope} + 1"), "unknown parameter 'nope'");
  EXPECT_EQ(error_of("max([])"), "expression 'max([])': max() of an empty list");
}

}  // namespace
}  // namespace dlscale::sweep
