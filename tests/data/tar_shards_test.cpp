#include "data/tar_shards.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "data/data_test_util.h"

namespace dlscale::data {
namespace {

using dlscale::testing::contains;
using dlscale::testing::error_message;
using dlscale::testing::read_bytes;
using dlscale::testing::shell_output;
using dlscale::testing::TempDir;
using dlscale::testing::write_bytes;

std::string binary_data(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>((i * 131 + 7) % 256));
  return s;
}

const std::string kLongName = "d/" + std::string(94, 'n') + ".bin";  // exactly 100 bytes

struct Written {
  std::string name, data;
};

std::vector<Written> sample_members() {
  return {{"a/0001.jpg", binary_data(700)},
          {"a/0001.cls", "3"},
          {"empty.txt", ""},
          {kLongName, binary_data(512)}};
}

std::string write_sample(const TempDir& dir) {
  const std::string path = dir.file("shard-000000.tar");
  TarWriter w(path);
  for (const auto& m : sample_members()) w.add(m.name, m.data);
  w.finish();
  return path;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

TEST(TarShards, RoundTripThroughSystemTar) {
  TempDir dir;
  const std::string path = write_sample(dir);
  // Only the tar itself is left: the temporary was renamed.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
  // Headers 512 each, data padded to 512, two zero blocks.
  EXPECT_EQ(read_bytes(path).size(), 512u * (4 + 2 + 1 + 0 + 1 + 2));
  int status = -1;
  EXPECT_EQ(shell_output("tar tf " + quoted(path), status),
            "a/0001.jpg\na/0001.cls\nempty.txt\n" + kLongName + "\n");
  EXPECT_EQ(status, 0);
  for (const auto& m : sample_members()) {
    EXPECT_EQ(shell_output("tar xOf " + quoted(path) + " " + quoted(m.name), status), m.data);
    EXPECT_EQ(status, 0) << m.name;
  }
  EXPECT_EQ(shell_output("tar tvf " + quoted(path) + " a/0001.cls", status).substr(0, 10),
            "-rw-r--r--");
}

TEST(TarShards, ListsWhatWasWritten) {
  TempDir dir;
  const std::string path = write_sample(dir);
  const std::string bytes = read_bytes(path);
  const auto members = list_tar(path);
  const auto expected = sample_members();
  ASSERT_EQ(members.size(), expected.size());
  const uint64_t offsets[] = {512, 2048, 3072, 3584};
  for (size_t i = 0; i < members.size(); ++i) {
    EXPECT_EQ(members[i].name, expected[i].name);
    EXPECT_EQ(members[i].offset, offsets[i]);
    EXPECT_EQ(members[i].size, expected[i].data.size());
    EXPECT_EQ(bytes.substr(members[i].offset, members[i].size), expected[i].data);
  }
  const auto in_memory = list_tar_bytes(bytes, "mem");
  ASSERT_EQ(in_memory.size(), members.size());
  EXPECT_EQ(in_memory[3].offset, members[3].offset);
}

// Archives written by GNU tar: long names as GNU 'L' headers, pax 'x'
// headers and the ustar prefix field, plus directories to skip.
TEST(TarShards, ReadsArchivesFromSystemTar) {
  TempDir dir;
  // 209 bytes: over ustar's 100-byte name field, within its 155-byte prefix.
  const std::string deep = "dir/" + std::string(120, 'p') + "/" + std::string(80, 'q') + ".txt";
  std::filesystem::create_directories(dir.file(std::filesystem::path(deep).parent_path()));
  write_bytes(dir.file(deep), "deep data");
  write_bytes(dir.file("dir/short.cls"), "7\n");
  for (const std::string format : {"gnu", "pax", "ustar"}) {
    const std::string tar = dir.file("out-" + format + ".tar");
    int status = -1;
    shell_output("cd " + quoted(dir.path()) + " && tar --format=" + format + " -cf " + quoted(tar) +
                     " dir/short.cls " + quoted(deep) + " 2>/dev/null",
                 status);
    ASSERT_EQ(status, 0) << format;
    const std::string bytes = read_bytes(tar);
    const auto members = list_tar(tar);
    ASSERT_EQ(members.size(), 2u) << format;
    EXPECT_EQ(members[0].name, "dir/short.cls");
    EXPECT_EQ(bytes.substr(members[0].offset, members[0].size), "7\n");
    EXPECT_EQ(members[1].name, deep) << format;
    EXPECT_EQ(bytes.substr(members[1].offset, members[1].size), "deep data") << format;
  }
  // A directory entry is listed by tar but skipped here.
  const std::string with_dir = dir.file("with-dir.tar");
  int status = -1;
  shell_output("cd " + quoted(dir.path()) + " && tar -cf " + quoted(with_dir) +
                   " --no-recursion dir dir/short.cls",
               status);
  ASSERT_EQ(status, 0);
  const auto members = list_tar(with_dir);
  ASSERT_EQ(members.size(), 1u);
  EXPECT_EQ(members[0].name, "dir/short.cls");
}

TEST(TarShards, UnfinishedWriterLeavesNothing) {
  TempDir dir;
  {
    TarWriter w(dir.file("x.tar"));
    w.add("a.txt", "data");
  }
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 0);
}

TEST(TarShards, RejectsBadNames) {
  TempDir dir;
  TarWriter w(dir.file("x.tar"));
  EXPECT_EQ(error_message([&] { w.add(kLongName + "x", "d"); }),
            "tar member name '" + kLongName + "x' is 101 bytes; allowed: 1 to 100");
  EXPECT_TRUE(contains(error_message([&] { w.add("", "d"); }), "is 0 bytes"));
  EXPECT_TRUE(contains(error_message([&] { w.add(std::string("a\0b", 3), "d"); }),
                       "tar member name has a NUL byte"));
  EXPECT_TRUE(contains(error_message([&] { TarWriter(dir.file("missing/x.tar")); }),
                       "cannot write '" + dir.file("missing/x.tar") + "'"));
}

TEST(TarShards, CorruptHeadersAreReported) {
  TempDir dir;
  const std::string path = write_sample(dir);
  const std::string good = read_bytes(path);
  std::string bad = good;
  bad[1536 + 3] ^= 0x01;  // member 1's name
  EXPECT_EQ(
      error_message([&] { list_tar_bytes(bad, "f.tar"); }),
      "f.tar: tar member 1 at byte 1536: header checksum mismatch (stored 4415, computed 4416)");
  bad = good;
  bad[1536 + 124] = 'x';  // member 1's size; checksum made to match
  std::string header = bad.substr(1536, 512);
  std::fill(header.begin() + 148, header.begin() + 156, ' ');
  unsigned sum = 0;
  for (const char c : header) sum += static_cast<unsigned char>(c);
  const std::string field = fmt::format("{:06o}", sum) + std::string("\0 ", 2);
  bad.replace(1536 + 148, 8, field);
  EXPECT_EQ(error_message([&] { list_tar_bytes(bad, "f.tar"); }),
            "f.tar: tar member 1 at byte 1536: size field is not octal");
  EXPECT_EQ(error_message([&] { list_tar_bytes(good.substr(0, 1000), "f.tar"); }),
            "f.tar: tar member 0 at byte 0: truncated: 700 bytes of data declared, 488 left in the "
            "file");
  EXPECT_EQ(error_message([&] { list_tar_bytes(good.substr(0, 1536 + 100), "f.tar"); }),
            "f.tar: tar member 1 at byte 1536: truncated header (100 of 512 bytes)");
  // Missing end blocks (or a missing last padding) are tolerated, as tar does.
  EXPECT_EQ(list_tar_bytes(good.substr(0, 3584 + 512), "f.tar").size(), 4u);
  EXPECT_TRUE(contains(error_message([&] { list_tar(dir.file("none.tar")); }),
                       "cannot open '" + dir.file("none.tar") + "'"));
}

TarMember member(const std::string& name) { return TarMember{name, 0, 0}; }

TEST(TarShards, GroupsWebDatasetSamples) {
  const auto samples = group_wds({member("a/0001.jpg"), member("a/0001.cls"), member("a/0002.jpg"),
                                  member("v1.0/0003.seg.png"), member("v1.0/0003.cls"),
                                  member("README"), member("a/.hidden"), member("a/0001.txt")});
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples[0].key, "a/0001");
  ASSERT_EQ(samples[0].parts.size(), 2u);
  EXPECT_EQ(samples[0].parts.at("jpg").name, "a/0001.jpg");
  EXPECT_EQ(samples[0].parts.at("cls").name, "a/0001.cls");
  EXPECT_EQ(samples[1].key, "a/0002");
  EXPECT_EQ(samples[1].parts.size(), 1u);
  EXPECT_EQ(samples[2].key, "v1.0/0003");
  EXPECT_EQ(samples[2].parts.at("seg.png").name, "v1.0/0003.seg.png");
  EXPECT_EQ(samples[2].parts.count("cls"), 1u);
  // Not consecutive with the first a/0001: a new sample, as WebDataset reads it.
  EXPECT_EQ(samples[3].key, "a/0001");
  EXPECT_EQ(samples[3].parts.count("txt"), 1u);
  EXPECT_EQ(error_message([] {
              group_wds({member("k.jpg"), member("k.jpg")});
            }),
            "tar member 'k.jpg' repeats extension 'jpg' of sample 'k'");
}

}  // namespace
}  // namespace dlscale::data
