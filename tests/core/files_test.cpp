#include "core/files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/error.h"

namespace dlscale {
namespace {
namespace fs = std::filesystem;

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dlscale_files_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(FilesTest, AtomicWriteReplacesWholeFileAndLeavesNoTemporary) {
  const std::string path = (dir_ / "r.json").string();
  write_file_atomic(path, "first");
  write_file_atomic(path, "second, longer");
  EXPECT_EQ(read_file(path), "second, longer");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST_F(FilesTest, MissingDirectoryIsNamed) {
  const std::string path = (dir_ / "nope" / "r.json").string();
  try {
    check_output_path(path);
    FAIL() << "expected dlscale::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos) << e.what();
  }
  EXPECT_THROW(write_file_atomic(path, "x"), Error);
}

TEST_F(FilesTest, DirectoryIsNotAFile) {
  EXPECT_THROW(check_output_path(dir_.string()), Error);
}

TEST_F(FilesTest, ReadMissingFileThrows) {
  EXPECT_THROW(read_file((dir_ / "absent").string()), Error);
}

}  // namespace
}  // namespace dlscale
