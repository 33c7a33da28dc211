#include "core/text_table.h"

#include <gtest/gtest.h>

#include <sstream>

namespace dlscale {
namespace {

TEST(TextTable, GoldenLayout) {
  TextTable t({"model", "params"}, {Align::kLeft, Align::kRight});
  t.add_row({"lenet", "3,274,634"});
  t.add_row({"resnet152", "60"});
  std::ostringstream out;
  t.print(out);
  EXPECT_EQ(out.str(),
            "model         params\n"
            "--------------------\n"
            "lenet      3,274,634\n"
            "resnet152         60\n");
}

TEST(TextTable, Thousands) {
  EXPECT_EQ(with_thousands(25557032), "25,557,032");
  EXPECT_EQ(with_thousands(999), "999");
  EXPECT_EQ(with_thousands(1000), "1,000");
  EXPECT_EQ(with_thousands(-1234567), "-1,234,567");
  EXPECT_EQ(with_thousands(0), "0");
}

}  // namespace
}  // namespace dlscale
