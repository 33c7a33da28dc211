// libFuzzer harness: the expression language as sweep files and --where use
// it. Any input must parse or throw dlscale::Error, and evaluate (against a
// run's parameters, as --where does) or throw dlscale::Error: never crash,
// hang or leak.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "sweep/expression.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using dlscale::sweep::Value;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto expr = dlscale::sweep::Expression::parse(text);
    const dlscale::sweep::Lookup lookup = [](const std::string& name) -> Value {
      if (name == "workers") return Value(4);
      if (name == "batch") return Value(32);
      if (name == "lr") return Value(0.1);
      if (name == "model") return Value(std::string("resnet18"));
      if (name == "status") return Value(std::string("completed"));
      if (name == "list") return Value(std::vector<Value>{Value(1), Value(std::string("a"))});
      throw dlscale::Error("no parameter '" + name + "'");
    };
    (void)expr.evaluate(lookup).truthy();
    (void)expr.text();
  } catch (const dlscale::Error&) {
  }
  return 0;
}
