// The option recipe of docs/architecture.md ("Options": one table row and
// its use), followed by a test: an options struct written here lists its
// fields once, and the command line (flags, help, defaults, parsing and its
// errors), the record and the ranks' agreement all follow from that table.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli/option_binding.h"
#include "core/enum_names.h"
#include "core/error.h"
#include "core/option_table.h"

namespace dlscale::toy {

enum class Shape { kRound, kSquare };
constexpr EnumNames<Shape, 2> kShapes{"--shape",
                                      {{{Shape::kRound, "round"}, {Shape::kSquare, "square"}}}};
const EnumNames<Shape, 2>& enum_names(Shape) { return kShapes; }

void check_colour(const std::string& word) {
  DLSCALE_CHECK(word == "red" || word == "blue", "unknown --colour '{}'; allowed: red, blue", word);
}

struct ToyOptions {
  int count = 3;
  double rate = 0.5;
  bool loud = false;
  Shape shape = Shape::kRound;
  std::string colour = "red";
  std::string note;

  template <typename Self, typename Visitor>
  static void table(Self& s, Visitor&& v) {
    v(Option{"--count,-c", "How many", "count"}.agreed(), s.count);
    v(Option{"--rate", "How fast", "rate"}, s.rate);
    v(Option{"--loud", "Say it loudly", "loud"}, s.loud);
    v(Option{"--shape", "round | square", "shape"}.agreed(), s.shape);
    v(Option{"--colour", "red | blue", "colour"}.agreed().words(check_colour), s.colour);
    v(Option{"--note", "Not recorded", nullptr}.no_default(), s.note);
  }
};

namespace {

/// Parses `args` (without the program's name) into a fresh ToyOptions.
ToyOptions parse(std::vector<std::string> args) {
  ToyOptions o;
  CLI::App app;
  cli::add_options(&app, o, "Toy");
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  app.parse(args);
  return o;
}

TEST(OptionSeam, OneTableGivesTheFlagsTheRecordAndTheAgreement) {
  ToyOptions o;
  CLI::App app;
  cli::add_options(&app, o, "Toy");
  const std::string help = app.help();
  EXPECT_NE(help.find("Toy:"), std::string::npos) << help;
  EXPECT_NE(help.find("-c,--count INT=3"), std::string::npos) << help;
  EXPECT_NE(help.find("--shape TEXT=round"), std::string::npos) << help;
  EXPECT_NE(help.find("--colour TEXT=red"), std::string::npos) << help;
  EXPECT_NE(help.find("How fast"), std::string::npos) << help;

  o = parse({"-c", "7", "--rate", "0.25", "--loud", "--shape", "square", "--colour", "blue",
             "--note", "x"});
  EXPECT_EQ(o.count, 7);
  EXPECT_EQ(o.rate, 0.25);
  EXPECT_TRUE(o.loud);
  EXPECT_EQ(o.shape, Shape::kSquare);
  EXPECT_EQ(o.colour, "blue");
  EXPECT_EQ(o.note, "x");

  nlohmann::json recorded = nlohmann::json::object();
  record_inputs(o, recorded);
  EXPECT_EQ(
      recorded,
      nlohmann::json::parse(
          R"({"count": 7, "rate": 0.25, "loud": true, "shape": "square", "colour": "blue"})"));
  nlohmann::json agreed = nlohmann::json::object();
  agreed_inputs(o, agreed);
  EXPECT_EQ(agreed, nlohmann::json::parse(R"({"count": 7, "shape": "square", "colour": "blue"})"));
}

TEST(OptionSeam, AValueTheTableRefusesIsNamedAsItIsParsed) {
  EXPECT_EQ(parse({}).colour, "red");
  try {
    parse({"--shape", "oval"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown --shape 'oval'; allowed: round, square");
  }
  try {
    parse({"--colour", "green"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown --colour 'green'; allowed: red, blue");
  }
  EXPECT_THROW(parse({"--count", "many"}), CLI::ParseError);
}

}  // namespace
}  // namespace dlscale::toy
