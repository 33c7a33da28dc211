// tests/process_util.h's shell_words: run_dlscale runs a command line in a
// fork of the test process only when it splits the line into the words the
// shell would pass; a line using anything else of the shell goes to the
// shell.
#include "process_util.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dlscale::testing {
namespace {

using Words = std::vector<std::string>;

/// The words /bin/sh passes for `args` (printf prints each, NUL-ended).
Words shell_says(const std::string& args) {
  const Outcome o = run_shell("printf '%s\\0' " + args);
  EXPECT_EQ(o.code, 0) << args << "\n" << o.err;
  Words words;
  size_t start = 0;
  for (size_t end = o.out.find('\0'); end != std::string::npos; end = o.out.find('\0', start)) {
    words.push_back(o.out.substr(start, end - start));
    start = end + 1;
  }
  return words;
}

TEST(ShellWords, PlainWordsAndQuotesSplitAsTheShellSplitsThem) {
  for (const std::string args :
       {"train --model lenet  --lr 0.1", "--sweep 'a b' \"c d\" e\\ f --x=1 ''",
        "--where 'x > 1 | y' \"it's\" 'say \"hi\"'", "a\tb", " lead trail ", "--name=a'b c'd"}) {
    const auto words = shell_words(args);
    ASSERT_TRUE(words.has_value()) << args;
    EXPECT_EQ(*words, shell_says(args)) << args;
  }
  EXPECT_EQ(shell_words(""), Words{});
}

TEST(ShellWords, AnythingElseOfTheShellIsLeftToIt) {
  for (const std::string args :
       {"train > out", "a | b",      "a; b",   "a && b", "a 2>&1", "< in",      "$HOME",
        "\"$HOME\"",   "\"a\\\"b\"", "`date`", "*.pt",   "a?",     "[ab]",      "~/x",
        "'unclosed",   "\"unclosed", "a\nb",   "(a)",    "{a,b}",  "# comment", "a\\"}) {
    EXPECT_FALSE(shell_words(args).has_value()) << args;
  }
}

}  // namespace
}  // namespace dlscale::testing
