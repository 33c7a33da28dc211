// commbench: sizes, bus factors and the alpha-beta fit exactly; every
// operation on real ranks (threads over inproc and Gloo) with its results
// checked; and the command end to end with worker processes and mpirun.
#include "libtorch/commbench/commbench.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "../comm/comm_test_util.h"
#include "../process_util.h"
#include "core/error.h"
#include "core/files.h"

namespace dlscale::commbench {
namespace {

TEST(Commbench, SizesParseWithSuffixes) {
  EXPECT_EQ(parse_size("4", "--min-bytes"), 4);
  EXPECT_EQ(parse_size("64K", "--min-bytes"), 65536);
  EXPECT_EQ(parse_size("1.5M", "--min-bytes"), 1572864);
  EXPECT_EQ(parse_size("2G", "--min-bytes"), int64_t{2} << 30);
  for (const char* bad : {"", "x", "4X", "-1", "0", "1e30"}) {
    try {
      parse_size(bad, "--max-bytes");
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(
          std::string(e.what()).rfind("--max-bytes '" + std::string(bad) + "' is not a size", 0),
          0u)
          << e.what();
    }
  }
}

TEST(Commbench, MessageSizesRunFromMinToMaxInWholeElements) {
  CommbenchOptions o;
  o.min_bytes = 4;
  o.max_bytes = 100;
  o.factor = 2;
  EXPECT_EQ(message_sizes(o, 4), (std::vector<int64_t>{4, 8, 16, 32, 64, 100}));
  o.min_bytes = 3;
  o.max_bytes = 9;
  o.factor = 3;
  EXPECT_EQ(message_sizes(o, 2), (std::vector<int64_t>{2, 8}));  // 3 -> 2, 9 -> 8
}

TEST(Commbench, BusFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(bus_factor("allreduce", 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor("tree", 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor("allgather", 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor("reduce_scatter", 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor("broadcast", 4), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor("sendrecv", 2), 1.0);
}

// Points exactly on t = 10 us + bytes / 1 GB/s give back alpha and B.
TEST(Commbench, AlphaBetaFitRecoversAKnownLine) {
  std::vector<double> x, t;
  for (double b = 4; b <= 64e6; b *= 4) {
    x.push_back(b);
    t.push_back(10e-6 + b / 1e9);
  }
  const AlphaBeta f = fit_alpha_beta(x, t);
  EXPECT_NEAR(f.alpha_us, 10.0, 1e-6);
  EXPECT_NEAR(f.bandwidth_gbps, 1.0, 1e-9);
  EXPECT_EQ(f.points, static_cast<int>(x.size()));
  // A noise spike at a small size (a shared machine) moves neither value.
  std::vector<double> spiked = t;
  spiked[1] += 800e-6;
  const AlphaBeta s = fit_alpha_beta(x, spiked);
  EXPECT_NEAR(s.alpha_us, 10.0, 1e-6);
  EXPECT_NEAR(s.bandwidth_gbps, 1.0, 1e-9);
  // Pure bandwidth: alpha is clamped at 0.
  const AlphaBeta g = fit_alpha_beta({1e3, 1e6}, {0.5e-6, 1e-3});
  EXPECT_EQ(g.alpha_us, 0);
  EXPECT_GT(g.bandwidth_gbps, 0);
}

TEST(Commbench, BadOptionsAreNamed) {
  CommbenchOptions o;
  o.ops = {"alltoall"};
  EXPECT_THROW(resolve_commbench_options(o), Error);
  o.ops = {"all"};
  EXPECT_EQ(resolve_commbench_options(o).ops.size(), commbench_operations().size());
  o.dtype = "int8";
  EXPECT_THROW(resolve_commbench_options(o), Error);
  o.dtype = "bf16";
  EXPECT_EQ(resolve_commbench_options(o).dtype, "bfloat16");
  o.min_bytes = 1024;
  o.max_bytes = 4;
  EXPECT_THROW(resolve_commbench_options(o), Error);
  o.min_bytes = 4;
  o.max_bytes = 1 << 30;
  o.factor = 1.001;  // some 20000 sizes: refused rather than running for days
  EXPECT_THROW(resolve_commbench_options(o), Error);
}

// Every operation on 3 ranks (2 for Gloo, to keep it quick), each dtype:
// all results right, one row per operation and size, a fit per operation.
TEST(Commbench, EveryOperationIsCheckedOnRealRanks) {
  for (const auto& [backend, ranks] : {std::pair<std::string, int>{"inproc", 3}, {"gloo", 2}}) {
    for (const std::string dtype : {"float32", "float16", "bfloat16"}) {
      SCOPED_TRACE(backend + " " + dtype);
      CommbenchOptions o;
      o.ops = {"all"};
      o.dtype = dtype;
      o.min_bytes = 4;
      o.max_bytes = 4096;
      o.factor = 8;
      o.warmup = 1;
      o.iters = 2;
      o.ranks_per_node = 2;
      o = resolve_commbench_options(o);
      comm::testing::run_ranks(backend, ranks, [&](comm::Communicator& comm) {
        const CommbenchResult r = run_commbench(o, comm, "host", nullptr);
        EXPECT_EQ(r.wrong, 0);
        EXPECT_EQ(r.rows.size(),
                  commbench_operations().size() * 5);  // 4, 32, 256, 2048, 4096 bytes
        EXPECT_EQ(r.fits.size(), commbench_operations().size());
        for (const auto& row : r.rows) {
          EXPECT_GT(row.time_us, 0) << row.op;
          EXPECT_EQ(row.wrong, 0) << row.op << " " << row.bytes;
        }
      });
    }
  }
}

/// Delegates to a real communicator but corrupts the first element of every
/// allreduce, broadcast and reduce_scatter result: what #wrong must catch.
class CorruptingCommunicator : public comm::Communicator {
 public:
  explicit CorruptingCommunicator(comm::Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string backend() const override { return inner_.backend(); }
  std::chrono::milliseconds timeout() const override { return inner_.timeout(); }
  void allreduce(torch::Tensor& t, comm::ReduceOp op) override {
    inner_.allreduce(t, op);
    t[0] += 1;
  }
  void broadcast(torch::Tensor& t, int root) override {
    inner_.broadcast(t, root);
    t[0] += 1;
  }
  void allgather_into(const torch::Tensor& t, torch::Tensor& out) override {
    inner_.allgather_into(t, out);
  }
  void reduce_scatter(const torch::Tensor& t, torch::Tensor& out, comm::ReduceOp op) override {
    inner_.reduce_scatter(t, out, op);
    out[0] += 1;
  }
  void barrier() override { inner_.barrier(); }
  std::unique_ptr<comm::Request> isend(const torch::Tensor& t, int dst, uint32_t tag) override {
    return inner_.isend(t, dst, tag);
  }
  std::unique_ptr<comm::Request> irecv(torch::Tensor& t, int src, uint32_t tag) override {
    return inner_.irecv(t, src, tag);
  }
  std::unique_ptr<comm::Communicator> split(int color, int key) override {
    return inner_.split(color, key);
  }

 private:
  comm::Communicator& inner_;
};

// The checker is not a formality: one wrong element per rank and size is
// counted (2 ranks x 3 sizes), and correct operations stay at 0.
TEST(Commbench, WrongResultsAreCounted) {
  CommbenchOptions o;
  o.ops = {"allreduce", "broadcast", "allgather", "reduce_scatter"};
  o.min_bytes = 4;
  o.max_bytes = 64;
  o.factor = 4;
  o.warmup = 0;
  o.iters = 1;
  o = resolve_commbench_options(o);
  comm::testing::run_ranks("inproc", 2, [&](comm::Communicator& inner) {
    CorruptingCommunicator comm(inner);
    const CommbenchResult r = run_commbench(o, comm, "host", nullptr);
    std::map<std::string, int64_t> wrong;
    for (const auto& row : r.rows) wrong[row.op] += row.wrong;
    EXPECT_EQ(wrong["allreduce"], 2 * 3);
    EXPECT_EQ(wrong["broadcast"], 2 * 3);
    EXPECT_EQ(wrong["allgather"], 0);
    EXPECT_EQ(wrong["reduce_scatter"], 2 * 3);
    EXPECT_EQ(r.wrong, 18);
  });
}

// The launcher's watchdog hears every stage of a size, so one large
// message is never mistaken for a stall as a whole (256M failed after 64 s
// with "rank 1 stalled" when only each size was reported).
TEST(Commbench, ProgressIsReportedPerStageAndIteration) {
  CommbenchOptions o;
  o.ops = {"allreduce"};
  o.min_bytes = 64;
  o.max_bytes = 64;
  o.warmup = 2;
  o.iters = 3;
  o = resolve_commbench_options(o);
  comm::testing::run_ranks("inproc", 2, [&](comm::Communicator& comm) {
    std::vector<std::string> heard;
    const CommbenchResult r =
        run_commbench(o, comm, "host", nullptr, [&](const std::string& s) { heard.push_back(s); });
    EXPECT_EQ(r.wrong, 0);
    if (comm.rank() != 0) return;
    EXPECT_EQ(heard, (std::vector<std::string>{
                         "commbench allreduce 64 B: set-up", "commbench allreduce 64 B: warm-up 1/2",
                         "commbench allreduce 64 B: warm-up 2/2", "commbench allreduce 64 B: iteration 1/3",
                         "commbench allreduce 64 B: iteration 2/3", "commbench allreduce 64 B: iteration 3/3",
                         "commbench allreduce 64 B: check"}));
  });
}

// Sizes whose buffers would not fit are refused before any rank allocates,
// naming the need and what is available.
TEST(Commbench, MessagesThatCannotFitAreRefusedAtOnce) {
  CommbenchOptions o;
  o.max_bytes = int64_t{2} << 30;
  EXPECT_EQ(bytes_per_rank(o), (int64_t{4} << 30) + (int64_t{64} << 20));
  EXPECT_NO_THROW(check_memory(o, 2, int64_t{9} << 30));
  EXPECT_NO_THROW(check_memory(o, 2, -1));  // unknown: not refused
  try {
    check_memory(o, 2, int64_t{6} << 30);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "--max-bytes 2147483648 needs about 8.1 GiB on this node (2 rank(s) x the message and its "
              "output), more than the 6.0 GiB available: use a smaller --max-bytes or fewer ranks per "
              "node");
  }
}

TEST(CommbenchCommand, WorkersAndJsonRecord) {
  const std::string j = testing::temp_path("cb.json");
  const auto o = testing::run_dlscale(
      "commbench --workers 2 --op allreduce,tree,sendrecv --max-bytes 4M --factor 4 --iters 3 "
      "--warmup 1 --json " +
      j);
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("# dlscale commbench: 2 rank(s), backend gloo"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("out of bounds values: 0 OK"), std::string::npos) << o.out;
  const auto r = nlohmann::json::parse(read_file(j));
  std::filesystem::remove(j);
  EXPECT_EQ(r["schema"], "dlscale.commbench/1");
  EXPECT_EQ(r["status"], "ok");
  EXPECT_EQ(r["inputs"]["world_size"], 2);
  // The flags as given, recorded through their table; the sizes in bytes.
  EXPECT_EQ(r["inputs"]["ops"], nlohmann::json({"allreduce", "tree", "sendrecv"}));
  EXPECT_EQ(r["inputs"]["min_bytes"], 4);
  EXPECT_EQ(r["inputs"]["max_bytes"], 4 << 20);
  EXPECT_EQ(r["inputs"]["factor"], 4.0);
  EXPECT_EQ(r["inputs"]["iters"], 3);
  EXPECT_EQ(r["inputs"]["warmup"], 1);
  EXPECT_EQ(r["inputs"]["dtype"], "float32");
  EXPECT_FALSE(r["inputs"].contains("json")) << "an output path is not an input";
  EXPECT_EQ(r["results"]["rows"].size(), 3u * 11);  // 4 B, 16 B, .. 4 MiB
  for (const char* op : {"allreduce", "tree", "sendrecv"}) {
    EXPECT_GT(r["results"]["fits"][op]["bandwidth_gbps"].get<double>(), 0) << op;
  }
  EXPECT_TRUE(r["environment"].contains("hostname"));
}

TEST(CommbenchCommand, UnderMpirun) {
  DLSCALE_SKIP_WITHOUT_MPI();
  for (const std::string mode : {"blocking", "polled"}) {
    SCOPED_TRACE(mode);
    const auto o = testing::run_shell(
        "mpirun --oversubscribe --allow-run-as-root -np 3 " + std::string(DLSCALE_BINARY) +
        " commbench --op allreduce,hierarchical,allgather,reduce_scatter,broadcast --ranks-per-node 2 "
        "--max-bytes 16K --factor 16 --iters 2 --warmup 1 --dtype bf16 --mpi-collectives " +
        mode);
    ASSERT_EQ(o.code, 0) << o.err;
    EXPECT_NE(o.out.find("3 rank(s), backend mpi, bfloat16"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("out of bounds values: 0 OK"), std::string::npos) << o.out;
  }
}

TEST(CommbenchCommand, BadInputIsOneLine) {
  auto o = testing::run_dlscale("commbench --max-bytes 12Q");
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(o.err.rfind("dlscale: error: --max-bytes '12Q' is not a size", 0), 0u) << o.err;
  o = testing::run_dlscale("commbench --op alltoall");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("unknown --op 'alltoall'"), std::string::npos) << o.err;
  o = testing::run_dlscale("commbench --op sendrecv");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("--op sendrecv needs at least 2 ranks"), std::string::npos) << o.err;
}

}  // namespace
}  // namespace dlscale::commbench
