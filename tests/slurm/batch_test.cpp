#include "slurm/batch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "core/files.h"
#include "core/subprocess.h"
#include "process_util.h"

namespace dlscale::slurm {
namespace {

TEST(SlurmBatch, ScontrolLineAndDurations) {
  const JobState s = parse_scontrol_job(
      "JobId=12 JobName=dls-x-1 UserId=root(0) JobState=TIMEOUT Reason=TimeLimit Dependency=(null) "
      "Requeue=1 Restarts=0 BatchFlag=1 ExitCode=0:15 RunTime=00:01:04 TimeLimit=00:01:00 NodeList=lab-h[0-1]\n");
  EXPECT_TRUE(s.known);
  EXPECT_EQ(s.state, "TIMEOUT");
  EXPECT_EQ(s.reason, "TimeLimit");
  EXPECT_EQ(s.exit_code, 0);
  EXPECT_EQ(s.signal, 15);
  EXPECT_EQ(s.run_time_s, 64);
  EXPECT_FALSE(s.active());
  EXPECT_TRUE(parse_scontrol_job("JobId=3 JobState=PENDING Reason=Resources ExitCode=0:0").active());
  EXPECT_TRUE(parse_scontrol_job("JobId=3 JobState=COMPLETING ExitCode=0:0").active());
  EXPECT_FALSE(parse_scontrol_job("slurm_load_jobs error: Invalid job id specified").known);
  EXPECT_EQ(parse_slurm_duration("1-02:03:04"), 93784);
  EXPECT_EQ(parse_slurm_duration("02:03:04"), 7384);
  EXPECT_EQ(parse_slurm_duration("03:04"), 184);
  EXPECT_EQ(parse_slurm_duration("2-01:00"), 2 * 86400 + 3600);
  EXPECT_EQ(parse_slurm_duration("x"), 0);
  EXPECT_EQ(parse_slurm_duration("UNLIMITED"), 0);
}

TEST(SlurmBatch, SbatchLineAndAScriptTheShellRunsWordForWord) {
  BatchJob j;
  j.name = "dls-s-1";
  j.script_path = "/o/1.sbatch";
  j.log_path = "/o/1.log";
  j.nodes = 2;
  j.tasks_per_node = 2;
  j.tasks = 4;
  j.time_limit_s = 61;
  EXPECT_EQ(sbatch_command(j),
            (std::vector<std::string>{"sbatch", "--parsable", "--job-name", "dls-s-1", "--output", "/o/1.log",
                                      "--ntasks", "4", "--nodes", "2", "--ntasks-per-node", "2", "--time", "2",
                                      "/o/1.sbatch"}));
  const std::string script = testing::temp_path("job.sbatch");
  write_batch_script(script, {"printf", "%s|", "it's", "$HOME", "a b", "`x`"}, "a test");
  std::string out;
  ASSERT_EQ(run_captured({script}, &out), 0) << out;
  EXPECT_EQ(out, "it's|$HOME|a b|`x`|");
  std::filesystem::remove(script);
}

// The comment line carries the sweep's name and the run's tag: no byte of
// them may end the line and run as a command (issue 42).
TEST(SlurmBatch, NothingInTheCommentEndsItsLine) {
  const std::string script = testing::temp_path("inject.sbatch");
  const std::string marker = testing::temp_path("PWNED");
  std::filesystem::remove(marker);
  write_batch_script(script, {"true"}, "sweep 'x\ntouch " + marker + "\r\n#SBATCH --uid=0\x1b[2J', tag\\");
  const std::string text = read_file(script);
  EXPECT_EQ(text, "#!/bin/sh\n# sweep 'x\\ntouch " + marker + "\\r\\n#SBATCH --uid=0\\x1b[2J', tag\\\\\nexec 'true'\n");
  std::string out;
  ASSERT_EQ(run_captured({script}, &out), 0) << out;
  EXPECT_FALSE(std::filesystem::exists(marker));
  std::filesystem::remove(script);
}

/// Fake Slurm commands first on PATH while it lives.
struct FakeClients {
  std::string dir = testing::temp_path("fake-slurm");
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  FakeClients() {
    std::filesystem::create_directories(dir);
    ::setenv("PATH", (dir + ":" + path).c_str(), 1);
  }
  ~FakeClients() {
    ::setenv("PATH", path.c_str(), 1);
    dlscale::remove_tree(dir);
  }
  void add(const std::string& name, const std::string& body) const {
    write_file_atomic(dir + "/" + name, "#!/bin/sh\n" + body + "\n");
    std::filesystem::permissions(dir + "/" + name, std::filesystem::perms::owner_all);
  }
};

// An scontrol ended by a signal (a Ctrl-C that reached it) said nothing: the
// job is not "unknown". A sweep once read it so, stopped following the job
// and left it running in Slurm when interrupted.
TEST(SlurmBatch, AQueryEndedByASignalIsNotAnUnknownJob) {
  const FakeClients fake;
  fake.add("sacct", "exit 1");  // no accounting, as on the emulated cluster
  fake.add("scontrol", "echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1");
  EXPECT_FALSE(query_job("7").known);
  fake.add("scontrol", "exit 143");  // an exit code, however high, is not a signal
  EXPECT_FALSE(query_job("7").known);
  // SIGKILL: what a Ctrl-C or SIGTERM does, with no disposition or mask
  // inherited from the test's runner in the way.
  fake.add("scontrol", "kill -KILL $$");
  try {
    query_job("7");
    ADD_FAILURE() << "a killed scontrol was read as an answer";
  } catch (const PeerFailure& e) {
    EXPECT_STREQ(
        e.what(),
        "scontrol show job for Slurm job 7 was ended by signal 9: nothing is known of the job");
  }
  fake.add("scontrol", "exit 1");
  fake.add("sacct", "kill -KILL $$");
  EXPECT_THROW(query_job("7"), PeerFailure);
}

// Slurm's commands run in their own process group: a Ctrl-C or a signal to
// the sweep's group cannot end them mid-request.
TEST(SlurmBatch, ClientsRunInTheirOwnProcessGroup) {
  const FakeClients fake;
  // Field 5 of /proc/PID/stat is the process group.
  fake.add("scontrol",
           "set -- $(cat /proc/$$/stat); echo \"JobId=7 JobState=RUNNING Reason=$5 ExitCode=0:0\"");
  const JobState st = query_job("7");
  ASSERT_EQ(st.state, "RUNNING");
  EXPECT_NE(st.reason, std::to_string(::getpgrp()));
  EXPECT_GT(std::stol(st.reason), 0);
}

}  // namespace
}  // namespace dlscale::slurm
