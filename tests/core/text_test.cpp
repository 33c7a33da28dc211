#include "core/text.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace dlscale {
namespace {

TEST(Text, Utf8SequencesAndTheirLimits) {
  EXPECT_TRUE(is_utf8(""));
  EXPECT_TRUE(is_utf8("plain ascii"));
  EXPECT_TRUE(is_utf8("caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x98\x80"));  // é, em dash, an emoji
  EXPECT_TRUE(is_utf8("\xf4\x8f\xbf\xbf"));                          // U+10FFFF, the last code point
  EXPECT_FALSE(is_utf8("\xff"));
  EXPECT_FALSE(is_utf8("\x80"));                  // a continuation byte alone
  EXPECT_FALSE(is_utf8("\xc3"));                  // cut off
  EXPECT_FALSE(is_utf8("\xc0\xaf"));              // overlong '/'
  EXPECT_FALSE(is_utf8("\xe0\x80\xaf"));          // overlong, 3 bytes
  EXPECT_FALSE(is_utf8("\xed\xa0\x80"));          // a surrogate
  EXPECT_FALSE(is_utf8("\xf4\x90\x80\x80"));      // past U+10FFFF
  EXPECT_FALSE(is_utf8("\xf5\x80\x80\x80"));
  EXPECT_EQ(utf8_sequence_length("a\xc3\xa9", 1), 2u);
  EXPECT_EQ(utf8_sequence_length("a\xc3\xa9", 2), 0u);
}

TEST(Text, PrintableKeepsEverythingOnOneLine) {
  EXPECT_EQ(printable("ok caf\xc3\xa9"), "ok caf\xc3\xa9");
  EXPECT_EQ(printable("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(printable(std::string("\x00\x1b[2J\x7f", 6)), "\\x00\\x1b[2J\\x7f");
  EXPECT_EQ(printable("\xff\xc3"), "\\xff\\xc3");
  EXPECT_EQ(printable("back\\slash"), "back\\\\slash");  // an escape stays told apart from a byte
  EXPECT_FALSE(has_control("caf\xc3\xa9"));
  EXPECT_TRUE(has_control("a\tb"));
  EXPECT_TRUE(has_control(std::string(1, '\0')));
}

TEST(Text, TextValuesAreCheckedNamingTheFlag) {
  EXPECT_NO_THROW(check_text_value("ACME Labs \xe2\x80\x94 Z\xc3\xbcrich", "--mllog-org"));
  try {
    check_text_value("\xff", "--mllog-org");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--mllog-org must be UTF-8 text without control characters (got '\\xff')");
  }
  EXPECT_THROW(check_text_value("a\nb", "--mllog-platform"), Error);
}

// Strict dump() threw after a whole run (issue 42) and the record was lost.
TEST(Text, JsonOfAnyBytesIsWritten) {
  const nlohmann::json j = {{"org", "\xff"}, {"path", "/data/caf\xc3\xa9"}};
  EXPECT_THROW((void)j.dump(), nlohmann::json::exception);
  const std::string text = dump_json(j);
  EXPECT_EQ(text, "{\"org\":\"\xef\xbf\xbd\",\"path\":\"/data/caf\xc3\xa9\"}");
  EXPECT_EQ(nlohmann::json::parse(text)["org"], "\xef\xbf\xbd");
  EXPECT_EQ(dump_json(nlohmann::json{{"a", 1}}, 2), "{\n  \"a\": 1\n}");
  // A document that keeps its keys' order keeps it (reports, MLPerf lines).
  nlohmann::ordered_json ordered;
  ordered["b"] = 1;
  ordered["a"] = "\xff";
  EXPECT_EQ(dump_json(ordered), "{\"b\":1,\"a\":\"\xef\xbf\xbd\"}");
}

}  // namespace
}  // namespace dlscale
