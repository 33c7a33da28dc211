// The environment the front sets for dlscale-torch's load, and takes back.
#include "core/sysinfo.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "data/data_test_util.h"

namespace dlscale {
namespace {

const std::string kSaved = std::string(kEnvSavedPrefix) + "LD_LIBRARY_PATH";

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::nullopt : std::optional<std::string>(v);
}

/// Sets LD_LIBRARY_PATH to `value` (none: unset), runs skip_unused_libraries
/// on a folder with the stand-ins' folder, checks it comes first, and that
/// restore_library_path gives `value` back.
void expect_skipped_and_restored(const std::optional<std::string>& value) {
  SCOPED_TRACE(value ? "LD_LIBRARY_PATH='" + *value + "'" : "no LD_LIBRARY_PATH");
  const testing::TempDir dir;
  std::filesystem::create_directories(dir.file(kUnusedLibsDir));
  if (value) {
    ::setenv("LD_LIBRARY_PATH", value->c_str(), 1);
  } else {
    ::unsetenv("LD_LIBRARY_PATH");
  }
  ASSERT_TRUE(skip_unused_libraries(dir.path()));
  const std::string first = dir.file(kUnusedLibsDir);
  EXPECT_EQ(env("LD_LIBRARY_PATH"), value && !value->empty() ? first + ":" + *value : first);
  EXPECT_FALSE(skip_unused_libraries(dir.path())) << "a second front adds it once";
  EXPECT_TRUE(restore_library_path());
  EXPECT_EQ(env("LD_LIBRARY_PATH"), value);
  EXPECT_EQ(env(kSaved.c_str()), std::nullopt);
  EXPECT_FALSE(restore_library_path()) << "nothing left to take back";
}

TEST(Sysinfo, UnusedLibrariesComeFirstOnTheLibraryPathAndTheUsersPathComesBack) {
  const std::optional<std::string> before = env("LD_LIBRARY_PATH");
  expect_skipped_and_restored(std::nullopt);
  expect_skipped_and_restored(std::string());
  expect_skipped_and_restored(std::string("/opt/a:/opt/b"));
  // Without the folder (a LibTorch that needs none of them) nothing changes.
  const testing::TempDir empty;
  ::setenv("LD_LIBRARY_PATH", "/opt/a", 1);
  EXPECT_FALSE(skip_unused_libraries(empty.path()));
  EXPECT_EQ(env("LD_LIBRARY_PATH"), "/opt/a");
  EXPECT_EQ(env(kSaved.c_str()), std::nullopt);
  if (before) {
    ::setenv("LD_LIBRARY_PATH", before->c_str(), 1);
  } else {
    ::unsetenv("LD_LIBRARY_PATH");
  }
}

}  // namespace
}  // namespace dlscale
