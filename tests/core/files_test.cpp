#include "core/files.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>

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
  void TearDown() override { dlscale::remove_tree(dir_); }
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

// remove_tree takes a nested tree, files and an empty directory included,
// removes a link to a directory outside without following it, and takes a
// path that is not there as already removed.
TEST_F(FilesTest, RemoveTreeRemovesEverythingBelowAndFollowsNoLink) {
  const fs::path outside = dir_ / "outside";
  fs::create_directories(outside);
  write_file_atomic((outside / "kept").string(), "k");
  const fs::path tree = dir_ / "tree";
  fs::create_directories(tree / "a" / "b" / "empty");
  write_file_atomic((tree / "top").string(), "1");
  write_file_atomic((tree / "a" / "b" / "deep").string(), "2");
  fs::create_directory_symlink(outside, tree / "a" / "link");
  EXPECT_TRUE(remove_tree(tree.string()));
  EXPECT_FALSE(fs::exists(fs::symlink_status(tree)));
  EXPECT_EQ(read_file((outside / "kept").string()), "k");
  EXPECT_TRUE(remove_tree(tree.string()));                // nothing there
  EXPECT_TRUE(remove_tree((outside / "kept").string()));  // a plain file
  EXPECT_FALSE(fs::exists(outside / "kept"));
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

TEST_F(FilesTest, TwoOutputsNamingOneFileAreRefused) {
  const std::string a = (dir_ / "a.json").string();
  const fs::path link = dir_ / "link.json";
  fs::create_symlink(a, link);  // dangling: writing it creates a.json
  const std::string same_by_other_name = (dir_ / "." / "a.json").string();
  for (const std::string& other : {a, same_by_other_name, link.string()}) {
    try {
      check_output_paths({{"--json", a}, {"--trace", ""}, {"--mllog", other}});
      FAIL() << other;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                "--json and --mllog both name '" + other + "': give each output its own file");
    }
  }
  // Different files, and a device shared by several outputs, are fine.
  EXPECT_NO_THROW(check_output_paths({{"--json", a}, {"--mllog", (dir_ / "b.log").string()}}));
  EXPECT_NO_THROW(check_output_paths({{"--json", "/dev/null"}, {"--mllog", "/dev/null"}}));
  EXPECT_FALSE(fs::exists(a));  // checked, not written
}

// A {step} pattern is every file it expands to: the step-10 checkpoint of
// 'r{step}.json' every 5 steps over 10 steps is r10.json, which --json must
// not also name (the record overwrote the checkpoint, exit 0).
TEST_F(FilesTest, APatternCollidesWithEveryFileItExpandsTo) {
  const std::string pattern = (dir_ / "r{step}.json").string();
  auto every5 = [](int64_t n) { return n >= 1 && n <= 10 && n % 5 == 0; };
  for (const std::string json : {"r10.json", "r5.json", "./r10.json"}) {
    try {
      check_output_paths({{"--checkpoint", pattern, every5}, {"--json", (dir_ / json).string()}});
      FAIL() << json;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "--checkpoint and --json both name '" + (dir_ / json).string() +
                                           "' (with {step} expanded): give each output its own file");
    }
    // Either order, named by the file.
    try {
      check_output_paths({{"--json", (dir_ / json).string()}, {"--checkpoint", pattern, every5}});
      FAIL() << json;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "--json and --checkpoint both name '" + (dir_ / json).string() +
                                           "' (with {step} expanded): give each output its own file");
    }
  }
  // Steps it is not written at, leading zeros, other text: no collision.
  for (const std::string json : {"r7.json", "r15.json", "r010.json", "r.json", "r10.json.bak", "rx.json"}) {
    EXPECT_NO_THROW(check_output_paths({{"--checkpoint", pattern, every5}, {"--json", (dir_ / json).string()}}))
        << json;
  }
  // Every {step} is the same number.
  const std::string twice = (dir_ / "c{step}-{step}.bin").string();
  EXPECT_THROW(check_output_paths({{"--checkpoint", twice, every5}, {"--json", (dir_ / "c5-5.bin").string()}}),
               Error);
  EXPECT_NO_THROW(check_output_paths({{"--checkpoint", twice, every5}, {"--json", (dir_ / "c5-10.bin").string()}}));
}

// No output may overwrite an input: --json over the --resume checkpoint
// once replaced it with the record. The checkpoint may continue its own file.
TEST_F(FilesTest, AnOutputNamingAnInputIsRefused) {
  const std::string ckpt = (dir_ / "g3.bin").string();
  write_file_atomic(ckpt, "checkpoint");
  try {
    check_output_paths({{"--json", ckpt}}, {{"--resume", ckpt, "--checkpoint"}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "--json would overwrite the --resume file '" + ckpt + "': give it another file");
  }
  const fs::path link = dir_ / "alias.bin";
  fs::create_symlink(ckpt, link);
  EXPECT_THROW(check_output_paths({{"--trace", link.string()}}, {{"--resume", ckpt, "--checkpoint"}}), Error);
  auto any = [](int64_t n) { return n >= 1; };
  const std::string three = (dir_ / "g3.bin").string();
  EXPECT_THROW(check_output_paths({{"--mllog", (dir_ / "g{step}.bin").string(), any}},
                                  {{"--resume", three, "--checkpoint"}}),
               Error);
  EXPECT_NO_THROW(check_output_paths({{"--checkpoint", ckpt}}, {{"--resume", ckpt, "--checkpoint"}}));
  EXPECT_NO_THROW(check_output_paths({{"--json", (dir_ / "r.json").string()}}, {{"--resume", ckpt, "--checkpoint"}}));
  EXPECT_EQ(read_file(ckpt), "checkpoint");
}

// kill -9 during a write leaves PATH.tmp.PID; the next write of PATH removes
// those whose process is gone, and leaves a live writer's alone.
TEST_F(FilesTest, StaleTemporariesOfDeadWritersAreRemoved) {
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  const std::string path = (dir_ / "c.bin").string();
  const std::string stale = path + ".tmp." + std::to_string(dead);
  const std::string probe = path + ".probe." + std::to_string(dead);
  const std::string live = path + ".tmp." + std::to_string(::getppid());  // our parent lives
  const std::string other = (dir_ / "d.bin.tmp.").string() + std::to_string(dead);  // another file's
  for (const std::string& f : {stale, probe, live, other}) write_file_atomic(f, "partial");
  write_file_atomic(path, "whole");
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(probe));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other));
  EXPECT_EQ(read_file(path), "whole");
  EXPECT_EQ(remove_stale_temporaries(path), 0);
}

TEST_F(FilesTest, DirectoryIsNotAFile) { EXPECT_THROW(check_output_path(dir_.string()), Error); }

// A symbolic link is followed on purpose: the file it names is replaced and
// the link stays a link; a dangling link creates the file it names.
TEST_F(FilesTest, SymlinksAreFollowedNotReplaced) {
  const fs::path target = dir_ / "real.json";
  const fs::path link = dir_ / "link.json";
  write_file_atomic(target.string(), "old");
  fs::create_symlink(target, link);
  write_file_atomic(link.string(), "new");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read_file(target.string()), "new");
  const fs::path dangling = dir_ / "dangling.json";
  fs::create_symlink("made-by-link.json", dangling);
  check_output_path(dangling.string());
  write_file_atomic(dangling.string(), "via link");
  EXPECT_TRUE(fs::is_symlink(dangling));
  EXPECT_EQ(read_file((dir_ / "made-by-link.json").string()), "via link");
}

// Character devices and pipes are written through, never replaced; a pipe
// nobody reads is refused instead of blocking; sockets are refused.
TEST_F(FilesTest, DevicesAndPipesAreWrittenThrough) {
  write_file_atomic("/dev/null", "discarded");
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));  // still the device, also when run as root
  EXPECT_TRUE(resolve_output_path("/dev/null").stream);

  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  check_output_path(fifo);
  std::string got;
  std::thread reader([&] { got = read_file(fifo); });
  write_file_atomic(fifo, "through the pipe");
  reader.join();
  EXPECT_EQ(got, "through the pipe");
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));

  const std::string lonely = (dir_ / "lonely").string();
  ASSERT_EQ(::mkfifo(lonely.c_str(), 0600), 0);
  try {
    write_file_atomic(lonely, "x");
    FAIL() << "expected dlscale::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no process is reading it"), std::string::npos)
        << e.what();
  }

  const std::string sock = (dir_ / "sock").string();
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, sock.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  try {
    check_output_path(sock);
    FAIL() << "expected dlscale::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a socket"), std::string::npos) << e.what();
  }
  ::close(fd);
}

// A directory where no file can be created fails the check (before any
// work), even for root, for whom access() says yes.
TEST_F(FilesTest, UnwritableDirectoriesFailTheCheck) {
  try {
    check_output_path("/proc/dlscale-result.json");
    FAIL() << "expected dlscale::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write '/proc/dlscale-result.json'"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(FilesTest, ReadMissingFileThrows) {
  EXPECT_THROW(read_file((dir_ / "absent").string()), Error);
}

// A directory opens and reads as nothing; it is named instead, so a record
// given as a directory is not reported as empty JSON.
TEST_F(FilesTest, ReadingADirectoryNamesIt) {
  try {
    read_file(dir_.string());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot read '" + dir_.string() + "': it is a directory");
  }
}

}  // namespace
}  // namespace dlscale
