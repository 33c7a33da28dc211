// FileList (data/file_list.h): paths back exactly as pushed, each directory
// stored once, about the names' bytes plus 8 a file.
#include "data/file_list.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

namespace dlscale::data {
namespace {

TEST(FileList, GivesBackEveryPathAsPushed) {
  const std::vector<std::string> paths = {"/data/a/1.jpg", "/data/a/2.jpg", "/data/b/1.jpg", "shard.tar",
                                          "/root.png",     "rel/x.png",     "/data/a/3.jpg", "dir/"};
  FileList list;
  for (const auto& p : paths) list.push_back(p);
  ASSERT_EQ(list.size(), paths.size());
  EXPECT_EQ(list.paths(), paths);
  std::vector<std::string> iterated;
  for (const std::string p : list) iterated.push_back(p);
  EXPECT_EQ(iterated, paths);
  // Consecutive paths in one directory share it; a directory seen again later is a new one.
  EXPECT_EQ(list.directory_of(0), list.directory_of(1));
  EXPECT_NE(list.directory_of(1), list.directory_of(2));
  EXPECT_NE(list.directory_of(0), list.directory_of(6));
  EXPECT_EQ(FileList({"x", "y/z"}).paths(), (std::vector<std::string>{"x", "y/z"}));
}

TEST(FileList, NamesUnderAddedDirectoriesKeepTheirIndex) {
  FileList list;
  const uint32_t ant = list.add_directory("/f/ant");
  const uint32_t bee = list.add_directory("/f/bee");  // empty directories count too
  const uint32_t cat = list.add_directory("/f/cat");
  list.push_back(ant, "0.png");
  list.push_back(cat, "0.png");
  list.push_back(cat, "1.png");
  EXPECT_EQ(list.paths(), (std::vector<std::string>{"/f/ant/0.png", "/f/cat/0.png", "/f/cat/1.png"}));
  EXPECT_EQ(list.directory_of(0), ant);
  EXPECT_EQ(list.directory_of(2), cat);
  EXPECT_EQ(bee, 1u);
}

// A folder's listing at ImageNet's shape: 1,000 classes of long names. The
// list holds at most twice (vector growth) the names' bytes plus 8 a file
// and the directories once, against ~100 bytes a file as std::strings.
TEST(FileList, HoldsAboutTheNamesBytesPlusEightAFile) {
  FileList list;
  size_t name_bytes = 0, dir_bytes = 0;
  constexpr int kClasses = 1000, kPerClass = 50;
  for (int c = 0; c < kClasses; ++c) {
    const std::string dir = fmt::format("/datasets/imagenet/train/n{:08d}", c);
    dir_bytes += dir.size() + sizeof(std::string);
    const uint32_t d = list.add_directory(dir);
    for (int i = 0; i < kPerClass; ++i) {
      const std::string name = fmt::format("n{:08d}_{}.JPEG", c, 10000 + i);
      name_bytes += name.size();
      list.push_back(d, name);
    }
  }
  const size_t files = list.size();
  EXPECT_EQ(files, static_cast<size_t>(kClasses * kPerClass));
  EXPECT_LE(list.memory_bytes(), 2 * (name_bytes + 8 * files + dir_bytes)) << list.memory_bytes();
  EXPECT_EQ(list[files - 1], "/datasets/imagenet/train/n00000999/n00000999_10049.JPEG");
}

}  // namespace
}  // namespace dlscale::data
