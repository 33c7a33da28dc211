// End to end through the real binary: local worker processes over Gloo,
// mpirun with MPI, equivalence with one worker, and failing workers.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "comm/tcp_store.h"
#include "core/clock.h"
#include "core/files.h"
#include "core/subprocess.h"
#include "process_util.h"
#include "weights_util.h"

namespace dlscale {
namespace {

using testing::forked_runs;
using testing::load_weights;
using testing::run_dlscale;
using testing::run_shell;
using testing::temp_path;

const std::string kCommon =
    "train --model lenet --dropout 0 --threads 1 --steps 4 --warmup 1 --optimizer momentum "
    "--lr 0.05 --synthetic-batches 2 --display-every 0";

void expect_same_weights(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::allclose(a[i], b[i], /*rtol=*/1e-5, /*atol=*/1e-7))
        << "parameter " << i << " max diff " << (a[i] - b[i]).abs().max().item<double>();
  }
}

class Processes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    reference_ = new std::vector<torch::Tensor>();
    const std::string w = temp_path("w1.pt");
    const auto o = run_dlscale(kCommon + " --batch 16 --save-weights " + w);
    ASSERT_EQ(o.code, 0) << o.err;
    *reference_ = load_weights(w);
  }
  static void TearDownTestSuite() { delete reference_; }
  static std::vector<torch::Tensor>* reference_;  // one worker, batch 16
};
std::vector<torch::Tensor>* Processes::reference_ = nullptr;

// N worker processes on shards of the global batch reach the weights of one
// worker on the whole batch: SGD with momentum, bucketed (several buckets,
// overlapping backward) and flat.
TEST_F(Processes, GlooWorkersMatchOneWorkerAndReport) {
  for (const std::string workers : {"2", "4"}) {
    for (const char* bucket : {"0.2", "0"}) {
      SCOPED_TRACE(workers + " workers, --bucket-mb " + bucket);
      const std::string w = temp_path("w.pt");
      const std::string j = temp_path("r.json");
      const auto o = run_dlscale(kCommon + " --workers " + workers +
                                 " --global-batch 16 --first-bucket-mb 0.01 --bucket-mb " + bucket +
                                 " --save-weights " + w + " --json " + j);
      ASSERT_EQ(o.code, 0) << o.err;
      expect_same_weights(load_weights(w), *reference_);
      const auto r = nlohmann::json::parse(read_file(j));
      std::filesystem::remove(j);
      const int n = std::stoi(workers);
      EXPECT_EQ(r["inputs"]["world_size"], n);
      EXPECT_EQ(r["inputs"]["batch"], 16 / n);
      EXPECT_EQ(r["inputs"]["scaling"], "strong");
      EXPECT_EQ(r["results"]["comm"]["backend"], "gloo");
      EXPECT_EQ(r["results"]["comm"]["strategy"], "allreduce");
      EXPECT_EQ(r["results"]["comm"]["layout"], std::string(bucket) == "0" ? "flat" : "bucketed");
      EXPECT_EQ(r["results"]["comm"]["replicas_identical"], true);
      EXPECT_EQ(r["results"]["comm"]["buckets"].get<int>() > 1, std::string(bucket) != "0");
      EXPECT_EQ(r["results"]["comm"]["bytes_per_step"], 3274634 * 4);
      EXPECT_EQ(r["results"]["breakdown_ms_per_rank"].size(), static_cast<size_t>(n));
      EXPECT_GT(r["results"]["samples_per_sec"].get<double>(), 0);
      // Only rank 0 reports.
      EXPECT_EQ(o.out.find("dlscale train:"), o.out.rfind("dlscale train:"));
    }
  }
}

// Workers are forks of the launcher (LibTorch is loaded once), unless
// DLSCALE_WORKER_EXEC=1 asks for executed ones: both reach the same weights.
TEST_F(Processes, ExecutedWorkersMatchForkedOnes) {
  for (const auto& [env, started] :
       {std::pair{"env -u DLSCALE_WORKER_EXEC ", "forks of this process"},
        std::pair{"env DLSCALE_WORKER_EXEC=1 ", "executed"}}) {
    SCOPED_TRACE(env);
    const std::string w = temp_path("w.pt");
    const auto o = run_shell(std::string(env) + DLSCALE_BINARY + " " + kCommon +
                             " --workers 2 --global-batch 16 --bucket-mb 0.2 --save-weights " + w);
    ASSERT_EQ(o.code, 0) << o.err;
    expect_same_weights(load_weights(w), *reference_);
    EXPECT_NE(o.err.find(started), std::string::npos) << o.err;
  }
}

// run_dlscale runs a command in a fork of this test process (tests/launch/
// forked_runs.cpp), unless DLSCALE_TEST_EXEC=1 has it execute the binary:
// both ways reach the one-worker weights exactly.
TEST_F(Processes, TestRunsForkedMatchExecutedOnes) {
  const char* before = std::getenv("DLSCALE_TEST_EXEC");
  const std::string saved = before == nullptr ? "" : before;
  for (const bool exec : {false, true}) {
    SCOPED_TRACE(exec ? "executed" : "forked");
    ::setenv("DLSCALE_TEST_EXEC", exec ? "1" : "0", 1);
    const int forked = forked_runs();
    const std::string w = temp_path("w.pt");
    const auto o = run_dlscale(kCommon + " --workers 2 --global-batch 16 --save-weights " + w);
    ASSERT_EQ(o.code, 0) << o.err;
    expect_same_weights(load_weights(w), *reference_);
    EXPECT_EQ(forked_runs() - forked, exec ? 0 : 1);
  }
  if (before == nullptr) {
    ::unsetenv("DLSCALE_TEST_EXEC");
  } else {
    ::setenv("DLSCALE_TEST_EXEC", saved.c_str(), 1);
  }
}

TEST_F(Processes, MpirunWorkersMatchOneWorker) {
  DLSCALE_SKIP_WITHOUT_MPI();
  for (const std::string np : {"2", "4"}) {
    for (const char* bucket : {"0.2", "0"}) {
      SCOPED_TRACE("mpirun -np " + np + ", --bucket-mb " + bucket);
      const std::string w = temp_path("wm.pt");
      const auto o = run_shell("mpirun --oversubscribe --allow-run-as-root -np " + np + " " +
                               std::string(DLSCALE_BINARY) + " " + kCommon +
                               " --global-batch 16 --first-bucket-mb 0.01 --bucket-mb " + bucket +
                               " --save-weights " + w);
      ASSERT_EQ(o.code, 0) << o.err;
      EXPECT_NE(o.out.find("communication: mpi"), std::string::npos) << o.out;
      expect_same_weights(load_weights(w), *reference_);
    }
  }
}

// Two "nodes" (two launchers) on this machine: node 0 hosts the rendezvous
// store, ranks span both launchers, Gloo listens on --host-addr. One worker
// per node with allreduce; two per node with hierarchical, whose nodes are
// the launchers (the host is the same): reduce in each pair, allreduce
// between the two leaders.
TEST_F(Processes, TwoNodesMatchOneWorker) {
  for (const std::string strategy : {"allreduce", "hierarchical"}) {
    SCOPED_TRACE(strategy);
    uint16_t port = 0;
    {
      comm::TcpStoreServer probe("127.0.0.1", 0);  // a free port, released for the job
      port = probe.port();
    }
    const std::string w = temp_path("wn.pt");
    const std::string per_node = strategy == "hierarchical" ? "2" : "1";
    const std::string node =
        std::string(DLSCALE_BINARY) + " " + kCommon +
        " --global-batch 16 --bucket-mb 0.2 --first-bucket-mb 0.01 --workers " + per_node +
        " --strategy " + strategy +
        " --nnodes 2 --master-addr 127.0.0.1 --host-addr 127.0.0.1"
        " --master-port " +
        std::to_string(port);
    const auto o =
        run_shell(node + " --node-rank 1 >/dev/null & other=$!; " + node +
                  " --node-rank 0 --save-weights " + w + "; rc=$?; wait $other; exit $((rc | $?))");
    ASSERT_EQ(o.code, 0) << o.err;
    EXPECT_NE(
        o.out.find(strategy == "hierarchical" ? "over 4 workers in 2 node(s)" : "over 2 workers"),
        std::string::npos)
        << o.out;
    expect_same_weights(load_weights(w), *reference_);
  }
}

/// A small lenet job of 2 nodes on loopback at a free port; append
/// --node-rank (and --workers) per node.
std::string two_node_lenet(int timeout_s) {
  uint16_t port = 0;
  {
    comm::TcpStoreServer probe("127.0.0.1", 0);  // a free port, released for the job
    port = probe.port();
  }
  return std::string(DLSCALE_BINARY) +
         " train --model lenet --batch 4 --steps 3 --warmup 1 --threads 1 --display-every 0 --timeout " +
         std::to_string(timeout_s) +
         " --nnodes 2 --master-addr 127.0.0.1 --host-addr 127.0.0.1 --master-port " + std::to_string(port);
}

// Multi-node jobs share DLSCALE_JOB_SECRET: with the same secret on both
// nodes the job runs; a node with another secret is refused by the store,
// naming the secret, and the job fails instead of mixing with a stranger.
TEST(LaunchErrors, NodesWithAnotherJobSecretAreRefused) {
  const std::string node = two_node_lenet(5);
  auto o = run_shell("DLSCALE_JOB_SECRET=abc " + node + " --node-rank 1 >/dev/null & other=$!; " +
                     "DLSCALE_JOB_SECRET=abc " + node +
                     " --node-rank 0; rc=$?; wait $other; exit $((rc | $?))");
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.err.find("admits any client"), std::string::npos) << o.err;  // authenticated
  o = run_shell("DLSCALE_JOB_SECRET=xyz " + node + " --node-rank 1 2>&1 >/dev/null & other=$!; " +
                "DLSCALE_JOB_SECRET=abc " + node +
                " --node-rank 0 >/dev/null 2>&1; wait $other; exit $?");
  EXPECT_NE(o.code, 0);
  EXPECT_NE(o.out.find("refused this process: wrong job secret"), std::string::npos) << o.out;
}

// Nodes started with different --workers disagree on the world size: the
// rendezvous names it on both sides, well before the timeout, exit 2.
TEST(LaunchErrors, NodesThatDisagreeOnTheWorldSizeAreNamed) {
  const std::string node = two_node_lenet(30);
  const auto start = std::chrono::steady_clock::now();
  const auto o = run_shell(node + " --workers 1 --node-rank 0 2>&1 & other=$!; sleep 0.3; " + node +
                           " --workers 2 --node-rank 1 2>&1; rc=$?; wait $other; rc0=$?; "
                           "echo codes $rc $rc0");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(o.out.find("codes 2 2"), std::string::npos) << o.out;
  // Whichever node's rank joins first sets the size the other is held to:
  // under load the 4-rank node's may come first, although started later.
  const std::string tail = ": every node must be given the same --nnodes and --workers";
  const bool two_first =
      o.out.find("was started for a job of 4 ranks, but the first rank to join for 2" + tail) !=
      std::string::npos;
  const bool four_first =
      o.out.find("was started for a job of 2 ranks, but the first rank to join for 4" + tail) !=
      std::string::npos;
  EXPECT_TRUE(two_first || four_first) << o.out;
  EXPECT_LT(seconds, 20) << "waited for the timeout instead of naming the mismatch";
}

// Nodes started with different recipes (here the learning-rate schedule)
// are named at start; each would have trained on its own rates unchecked.
TEST(LaunchErrors, NodesThatDisagreeOnTheRecipeAreNamed) {
  const std::string node = two_node_lenet(30) + " --workers 1";
  const auto o = run_shell(node + " --node-rank 0 --lr-schedule cosine 2>&1 & other=$!; " + node +
                           " --node-rank 1 2>&1; rc=$?; wait $other; rc0=$?; echo codes $rc $rc0");
  EXPECT_NE(o.out.find("codes 2 2"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("workers disagree on the run config: rank 1 has recipe.lr_schedule=\"constant\", rank 0 "
                       "has recipe.lr_schedule=\"cosine\""),
            std::string::npos)
      << o.out;
}

// Garbage, strangers, requests that once killed the store (a GET whose wait
// is not a number) and 300 idle connections on the store of a running job:
// each costs only its own connection; the job finishes with a right result.
TEST(LaunchErrors, HostileStoreClientsDoNotBreakTheJob) {
  const std::string out = temp_path("hostile.out");
  const std::string script = temp_path("hostile.sh");
  write_file_atomic(script, std::string(DLSCALE_BINARY) +
                                " train --model lenet --batch 8 --steps 40 --warmup 1 --threads 1"
                                " --workers 2 --strategy ps --ps-shards 2 --display-every 0"
                                " --timeout 30 >" + out + " 2>" + out + ".err & job=$!\n" + R"sh(
port=
for i in $(seq 300); do
  port=$(sed -n 's/.*rendezvous 127.0.0.1:\([0-9]*\).*/\1/p' )sh" + out + R"sh(.err)
  [ -n "$port" ] && break
  sleep 0.05
done
[ -n "$port" ] || { kill $job; echo "no port"; exit 1; }
for i in $(seq 20); do  # garbage, and a stranger's hello
  exec 3<>/dev/tcp/127.0.0.1/$port && head -c 2048 /dev/urandom >&3; exec 3>&-
  exec 3<>/dev/tcp/127.0.0.1/$port && printf '\004\017\000\000\000dlscale-store/1\005\000\000\000guess' >&3; exec 3>&-
  # A GET whose wait is not a number (once fatal to the store), without a hello
  exec 3<>/dev/tcp/127.0.0.1/$port && printf '\002\001\000\000\000k\002\000\000\000zz' >&3; exec 3>&-
done
fds=
for i in $(seq 300); do exec {fd}<>/dev/tcp/127.0.0.1/$port && fds="$fds $fd"; done
wait $job; rc=$?
for fd in $fds; do exec {fd}>&-; done
exit $rc
)sh");
  const auto o = run_shell("bash " + script);
  EXPECT_EQ(o.code, 0) << o.out << read_file(out + ".err");
  const std::string text = read_file(out);
  EXPECT_NE(text.find("replicas: identical"), std::string::npos) << text;
  std::filesystem::remove(out);
  std::filesystem::remove(out + ".err");
  std::filesystem::remove(script);
}

TEST(LaunchErrors, IndivisibleGlobalBatchIsRefusedOnce) {
  const auto o = run_dlscale("train --model lenet --workers 3 --global-batch 16");
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(o.err,
            "dlscale: error: --global-batch 16 is not divisible by 3 workers (strong scaling needs "
            "global batch = workers x per-worker batch)\n");
}

/// The pids of the processes whose parent is `parent`.
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::optional<ProcState> p = proc_state(std::stol(name));
    if (p && p->ppid == parent && p->state != 'Z') out.push_back(std::stoi(name));
  }
  return out;
}

struct Launched {
  pid_t pid = -1;
  std::string out_path;
  std::string err_path;
};

Launched launch_long_job(const std::string& extra) {
  Launched l;
  l.out_path = temp_path("launcher.out");
  l.err_path = temp_path("launcher.err");
  // lenet unless `extra` names the model.
  const std::string model = extra.find("--model ") == std::string::npos ? "--model lenet " : "";
  const std::string cmd = std::string(DLSCALE_BINARY) + " train " + model +
                          "--batch 8 --steps 1000000 --warmup 1 --threads 1 --workers 2 --display-every 1 " +
                          extra + " >" + l.out_path + " 2>" + l.err_path;
  l.pid = ::fork();
  if (l.pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return l;
}

/// Waits for `pid` up to `seconds`; returns its exit code, or -1 on timeout.
int wait_exit(pid_t pid, double seconds) {
  const double deadline = now_seconds() + seconds;
  while (now_seconds() < deadline) {
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1;
}

/// Waits until the launcher's `count` processes are training: the first
/// worker printed its first step line.
std::vector<pid_t> wait_for_workers(const Launched& l, size_t count = 2) {
  const double deadline = now_seconds() + 60;
  while (now_seconds() < deadline) {
    const std::vector<pid_t> workers = children_of(l.pid);
    std::ifstream out(l.out_path);
    const std::string text((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
    if (workers.size() == count && text.find("step     1/") != std::string::npos) return workers;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return {};
}

/// What became of a training job after one of its workers got a signal.
struct Aftermath {
  std::vector<pid_t> workers;
  int code = -1;    // launcher's exit code; -1 if it did not stop in time
  double took = 0;  // seconds from the signal to the launcher's exit
  std::string err;  // launcher's stderr
};

/// Starts a long 2-worker job (`count` processes in all), waits until it
/// trains and `delay` seconds more, sends `sig` to `rank` and waits up to
/// `limit` seconds for the launcher. Never leaves a job behind: if the
/// workers never start training, the launcher is killed (its workers die
/// with it).
Aftermath signal_rank(const std::string& flags, int rank, size_t count, double delay, int sig,
                      double limit) {
  const Launched l = launch_long_job(flags);
  Aftermath a;
  a.workers = wait_for_workers(l, count);
  if (a.workers.size() != count) {
    ::kill(l.pid, SIGKILL);
    ::waitpid(l.pid, nullptr, 0);
  } else {
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    const double start = now_seconds();
    ::kill(a.workers[rank], sig);  // processes are spawned in rank order
    a.code = wait_exit(l.pid, limit);
    a.took = now_seconds() - start;
  }
  a.err = read_file(l.err_path);
  std::filesystem::remove(l.err_path);
  std::filesystem::remove(l.out_path);
  return a;
}

Aftermath signal_rank1(const std::string& timeout_flag, int sig, double limit) {
  return signal_rank(timeout_flag, 1, 2, 0, sig, limit);
}

/// "dlscale: error:" lines in `err`: a failed job prints exactly one.
int count_errors(const std::string& err) {
  int n = 0;
  for (size_t at = err.find("dlscale: error:"); at != std::string::npos;
       at = err.find("dlscale: error:", at + 1)) {
    ++n;
  }
  return n;
}

void expect_no_worker_left(const Aftermath& a) {
  for (pid_t w : a.workers) EXPECT_NE(::kill(w, 0), 0) << "worker " << w << " still exists";
}

TEST(LaunchErrors, KilledWorkerFailsTheJobNamingTheRankAndLeavesNoProcess) {
  const Aftermath a = signal_rank1("--timeout 10", SIGKILL, 20);
  ASSERT_EQ(a.workers.size(), 2u) << a.err;
  EXPECT_NE(a.code, -1) << "the launcher did not stop within 20 s";
  EXPECT_EQ(a.code, 5);  // a peer failure, not bad input
  EXPECT_LT(a.took, 12.0);
  EXPECT_NE(a.err.find("rank 1 was killed by signal 9 (SIGKILL) while at 'step"), std::string::npos)
      << a.err;
  expect_no_worker_left(a);
}

TEST(LaunchErrors, StalledWorkerFailsTheJobWithinTheTimeout) {
  const Aftermath a = signal_rank1("--timeout 3", SIGSTOP, 30);  // alive, no progress
  ASSERT_EQ(a.workers.size(), 2u) << a.err;
  EXPECT_NE(a.code, -1) << "the launcher did not stop within 30 s";
  EXPECT_EQ(a.code, 5);  // a peer failure, not bad input
  EXPECT_LT(a.took, 15.0);
  // Rank 0 may notice first (its collective times out), but the launcher
  // names the stalled rank either way.
  EXPECT_TRUE(a.err.find("rank 1 is stopped (SIGSTOP or a debugger): no progress") !=
                  std::string::npos ||
              a.err.find("rank 1 made no progress") != std::string::npos)
      << a.err;
  expect_no_worker_left(a);
  EXPECT_EQ(count_errors(a.err), 1) << a.err;
}

// A stopped process hosting a parameter-server shard: its peers' links time
// out, and each of them printed its own error ("ps shard 0: link to worker 1
// failed", then "rank 2: gloo recv failed") before the launcher's. One line
// now, the launcher's, naming the stopped rank.
TEST(LaunchErrors, StoppedPsShardIsTheOneErrorNamed) {
  const Aftermath a = signal_rank("--timeout 4 --strategy ps --ps-shards 2", 1, 2, 0.5, SIGSTOP, 30);
  ASSERT_EQ(a.workers.size(), 2u) << a.err;
  EXPECT_EQ(a.code, 5) << a.err;
  EXPECT_EQ(count_errors(a.err), 1) << a.err;
  EXPECT_NE(
      a.err.find("dlscale: error: rank 1 is stopped (SIGSTOP or a debugger): no progress for "),
      std::string::npos)
      << a.err;
  EXPECT_EQ(a.err.find("worker 0"), std::string::npos) << a.err;
  expect_no_worker_left(a);
}

// Dedicated servers are not workers: the count says which is which.
TEST(LaunchErrors, KilledJobCountsServersApart) {
  const Aftermath a = signal_rank(
      "--timeout 10 --strategy ps --ps-placement dedicated --ps-shards 1", 2, 3, 0.2, SIGKILL, 20);
  ASSERT_EQ(a.workers.size(), 3u) << a.err;
  EXPECT_EQ(a.code, 5);
  EXPECT_NE(a.err.find("; stopped all 2 worker(s) and 1 server(s)"), std::string::npos) << a.err;
  EXPECT_EQ(count_errors(a.err), 1) << a.err;
}

// Parameter server: a dedicated server (rank 0, shard 0) killed at a random
// step ends the job within the bound, naming the rank and that it was
// "ps shard 0"; no process is left.
TEST(LaunchErrors, KilledPsServerFailsTheJobNamingTheShard) {
  std::mt19937 rng(std::random_device{}());
  const double delay = std::uniform_real_distribution<double>(0, 1.5)(rng);
  const Aftermath a = signal_rank(
      "--timeout 10 --strategy ps --ps-placement dedicated --ps-shards 1", 0, 3, delay, SIGKILL, 20);
  ASSERT_EQ(a.workers.size(), 3u) << a.err;
  EXPECT_NE(a.code, -1) << "the launcher did not stop within 20 s";
  EXPECT_EQ(a.code, 5);
  EXPECT_LT(a.took, 12.0);
  EXPECT_NE(a.err.find("rank 0 was killed by signal 9 (SIGKILL) while at 'ps shard 0"),
            std::string::npos)
      << a.err;
  expect_no_worker_left(a);
}

// Sharded data parallelism: a worker killed at a random moment (in its
// reduce-scatters, its update or the parameters' all-gather, which take
// most of a zero step on lenet) ends the job within the bound, naming the
// rank; no process is left.
/// Kills rank 1 of a 2-worker job with `flags` at a random moment in its
/// first second of training: the job ends within the bound, naming the
/// rank, with one error line and no process left.
void expect_killed_worker_fails_the_job(const std::string& flags) {
  std::mt19937 rng(std::random_device{}());
  const double delay = std::uniform_real_distribution<double>(0, 1.0)(rng);
  const Aftermath a = signal_rank("--timeout 10 " + flags, 1, 2, delay, SIGKILL, 20);
  ASSERT_EQ(a.workers.size(), 2u) << a.err;
  EXPECT_NE(a.code, -1) << "the launcher did not stop within 20 s";
  EXPECT_EQ(a.code, 5);
  EXPECT_LT(a.took, 12.0);
  EXPECT_NE(a.err.find("rank 1 was killed by signal 9 (SIGKILL)"), std::string::npos) << a.err;
  EXPECT_EQ(count_errors(a.err), 1) << a.err;
  expect_no_worker_left(a);
}

TEST(LaunchErrors, KilledZeroWorkerFailsTheJobNamingTheRank) {
  expect_killed_worker_fails_the_job("--strategy zero --zero-stage 2 --optimizer adam --lr 0.001");
}

// Stage 3 unit by unit: a worker killed at a random moment, while the
// others may be waiting for a unit's gather on the gatherer's own thread and
// communicator (in forward, or in a hook inside backward), ends the job
// within the bound, naming the rank; no process is left.
TEST(LaunchErrors, KilledWorkerMidUnitGatherFailsTheJobNamingTheRank) {
  expect_killed_worker_fails_the_job(
      "--model resnet18 --image-size 16 --strategy zero --zero-stage 3 --zero-unit block");
}

// Sparse embedding rows: a worker killed while the others gather its rows
// (or wait in the dense buckets) ends the job the same way.
TEST(LaunchErrors, KilledWorkerMidSparseGatherFailsTheJobNamingTheRank) {
  expect_killed_worker_fails_the_job("--model ncf --sparse-embeddings");
}

// Async parameter server: a dead worker ends the job too, never a silent
// continuation of the others.
TEST(LaunchErrors, KilledAsyncPsWorkerFailsTheJob) {
  const Aftermath a =
      signal_rank("--timeout 10 --strategy ps --ps-mode async --ps-shards 1", 1, 2, 0.5, SIGKILL, 20);
  ASSERT_EQ(a.workers.size(), 2u) << a.err;
  EXPECT_NE(a.code, -1) << "the launcher did not stop within 20 s";
  EXPECT_EQ(a.code, 5);
  EXPECT_LT(a.took, 12.0);
  EXPECT_NE(a.err.find("rank 1 was killed by signal 9 (SIGKILL)"), std::string::npos) << a.err;
  expect_no_worker_left(a);
}

// Under mpirun too, a stalled rank ends the job within --timeout plus a few
// seconds: rank 0's collective times out (a watchdog aborts the blocking
// call, or the polled non-blocking call gives up), it exits 5, and mpirun
// stops the rest.
TEST(LaunchErrors, MpirunStalledRankFailsWithinTheTimeout) {
  DLSCALE_SKIP_WITHOUT_MPI();
  for (const std::string mode : {"blocking", "polled"}) {
    SCOPED_TRACE(mode);
    const std::string err = temp_path("mpi.err");
    const std::string out = temp_path("mpi.out");
    const std::string script = temp_path("stall.sh");
    // Rank 1 is stopped once rank 0 has printed 3 steps: stopped before its
    // steps (a loaded machine took longer than the 3 s this waited before),
    // it hung in MPI's start-up, which no --timeout covers.
    write_file_atomic(
        script, "mpirun --oversubscribe --allow-run-as-root -np 2 " + std::string(DLSCALE_BINARY) +
                    " train --model lenet --batch 8 --steps 1000000 --warmup 1 --threads 1"
                    " --display-every 1 --timeout 3 --mpi-collectives " +
                    mode + " >" + out + " 2>" + err + " & job=$!\nout=" + out + R"sh(
r1=
for i in $(seq 300); do  # up to 30 s for rank 1 to start
  for p in $(pgrep -f 'lenet --batch 8 --steps 1000000'); do
    tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && r1=$p
  done
  [ -n "$r1" ] && break
  sleep 0.1
done
for i in $(seq 1200); do  # up to 120 s for rank 0's third step
  [ "$(grep -c '^step' "$out")" -ge 3 ] && break
  sleep 0.1
done
kill -STOP $r1
start=$(date +%s%N); wait $job; rc=$?; end=$(date +%s%N)
kill -CONT $r1 2>/dev/null
echo "$rc $(( (end - start) / 1000000 ))"
)sh");
    const auto o = run_shell("bash " + script);
    const std::string log = read_file(err);
    std::filesystem::remove(err);
    std::filesystem::remove(out);
    std::filesystem::remove(script);
    int rc = -1;
    long ms = 0;
    std::istringstream(o.out) >> rc >> ms;
    EXPECT_EQ(rc, 5) << o.out << log;
    EXPECT_LT(ms, 15000) << log;
    EXPECT_NE(log.find("rank 0: mpi allreduce timed out after 3000 ms"), std::string::npos) << log;
  }
}

}  // namespace
}  // namespace dlscale

namespace dlscale {
namespace {

// The Chrome trace has one process per rank with compute phases and bucket
// allreduces; batch-norm statistics can be synchronized every step.
TEST(Trace, HasEveryRanksPhasesAndBuckets) {
  const std::string t = testing::temp_path("trace.json");
  const auto o = testing::run_dlscale(
      "train --model resnet18 --image-size 16 --batch 4 --steps 3 --warmup 1 --threads 1 "
      "--workers 2 --bucket-mb 5 --sync-buffers step --display-every 0 --trace " +
      t);
  ASSERT_EQ(o.code, 0) << o.err;
  const auto trace = nlohmann::json::parse(read_file(t));
  std::filesystem::remove(t);
  std::set<int> ranks;
  int forwards = 0, buckets = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ranks.insert(e["pid"].get<int>());
    if (e["name"] == "forward") ++forwards;
    if (e["name"].get<std::string>().rfind("allreduce bucket", 0) == 0) ++buckets;
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1}));
  EXPECT_EQ(forwards, 2 * 3);
  EXPECT_GE(buckets, 2 * 3 * 2);  // resnet18's 44.7 MB in 5 MiB buckets: several per step
}

}  // namespace
}  // namespace dlscale
