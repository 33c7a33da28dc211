// The backend recipe of docs/architecture.md ("Communicators"), followed by
// a test: "toy-gloo", a backend written here, is a communicator that names
// itself so and passes every operation to a Gloo communicator it builds on
// the rendezvous store. Registered (register_backend: the rows the recipe
// adds to backend.cpp's and session.cpp's tables, at run time), it is a
// --backend word like the shipped ones, and a two-worker job run with it
// (in forks of this process, which has it) trains as one worker does, with
// no file of src/ naming it.
#include <gtest/gtest.h>

#include <mutex>

#include "comm/backend.h"
#include "launch/weights_util.h"
#include "libtorch/comm/gloo/gloo_communicator.h"
#include "libtorch/comm/session.h"
#include "process_util.h"

namespace dlscale::comm {
namespace {

/// Gloo underneath, "toy-gloo" on the record.
class ToyCommunicator : public Communicator {
 public:
  explicit ToyCommunicator(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string backend() const override { return "toy-gloo"; }
  std::chrono::milliseconds timeout() const override { return inner_->timeout(); }
  void allreduce(torch::Tensor& t, ReduceOp op) override { inner_->allreduce(t, op); }
  void broadcast(torch::Tensor& t, int root) override { inner_->broadcast(t, root); }
  void allgather_into(const torch::Tensor& in, torch::Tensor& out) override {
    inner_->allgather_into(in, out);
  }
  void reduce_scatter(const torch::Tensor& in, torch::Tensor& out, ReduceOp op) override {
    inner_->reduce_scatter(in, out, op);
  }
  void barrier() override { inner_->barrier(); }
  std::unique_ptr<Request> isend(const torch::Tensor& t, int dst, uint32_t tag) override {
    return inner_->isend(t, dst, tag);
  }
  std::unique_ptr<Request> irecv(torch::Tensor& t, int src, uint32_t tag) override {
    return inner_->irecv(t, src, tag);
  }
  std::unique_ptr<Communicator> split(int color, int key) override {
    std::unique_ptr<Communicator> part = inner_->split(color, key);
    return part == nullptr ? nullptr : std::make_unique<ToyCommunicator>(std::move(part));
  }

 private:
  std::unique_ptr<Communicator> inner_;
};

void register_toy() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_backend(
        {{"toy-gloo", "(a test's)", true, ""}, true, [](const SessionOptions& o, TcpStore* store) {
           GlooOptions go;
           go.timeout = o.timeout;
           go.hostname = o.gloo_hostname;
           auto gloo = std::make_unique<GlooCommunicator>(*store, o.rank, o.size, go);
           return BackendWorld{std::make_unique<ToyCommunicator>(std::move(gloo)), nullptr,
                               nullptr};
         }});
  });
}

// Global batch 12 on one worker and on two.
const std::string kLenet =
    "train --model lenet --dropout 0 --threads 1 --steps 3 --warmup 1 --optimizer momentum --lr "
    "0.05 "
    "--synthetic-batches 2 --display-every 0 --global-batch 12";

/// Runs `args` in a fork of this process (the toy backend is registered
/// here only; the binary does not have it); rank 0's weights and record.
testing::TrainRun train_here(const std::string& args) {
  const std::string w = testing::temp_path("w.pt");
  const std::string j = testing::temp_path("r.json");
  auto words = testing::shell_words(args + " --save-weights " + w + " --json " + j);
  words->insert(words->begin(), DLSCALE_BINARY);
  const testing::Outcome o = testing::run_forked(*words);
  EXPECT_EQ(o.code, 0) << args << "\n" << o.err;
  testing::TrainRun r;
  if (o.code != 0) return r;
  r.weights = testing::load_weights(w);
  r.record = nlohmann::json::parse(read_file(j));
  std::filesystem::remove(j);
  return r;
}

TEST(BackendSeam, ARegisteredBackendCarriesATwoWorkerJobAsGlooDoes) {
  register_toy();
  EXPECT_EQ(backend_help(),
            "gloo | mpi (builds with MPI) | nccl (CUDA builds) | toy-gloo (a test's)");
  EXPECT_NE(backend_names().find(", toy-gloo"), std::string::npos) << backend_names();
  ASSERT_NE(testing::forked_entry().run, nullptr);
  ASSERT_TRUE(testing::forked_entry().can_fork())
      << "this process has threads a fork would lack, and only this process has the toy backend";
  const testing::TrainRun one = train_here(kLenet);
  const testing::TrainRun two = train_here(kLenet + " --workers 2 --backend toy-gloo");
  ASSERT_FALSE(one.weights.empty());
  ASSERT_FALSE(two.weights.empty());
  EXPECT_LE(testing::closeness(two.weights, one.weights, 1e-5, 1e-6), 1.0);
  EXPECT_EQ(two.record["inputs"]["backend"], "toy-gloo");
  EXPECT_EQ(two.record["results"]["comm"]["backend"],
            "toy-gloo");  // what the communicator says it is
  EXPECT_EQ(two.record["results"]["comm"]["replicas_identical"], true);
}

TEST(BackendSeam, TheRegistryRefusesWhatItCannotServe) {
  register_toy();
  EXPECT_EQ(testing::error_of([] {
              register_backend({{"toy-gloo", "", true, ""}, true, nullptr});
            }),
            "backend 'toy-gloo' needs a factory");
  EXPECT_EQ(testing::error_of([] {
              register_backend({{"gloo", "", true, ""}, true, [](const SessionOptions&, TcpStore*) {
                                  return BackendWorld{};
                                }});
            }),
            "backend 'gloo' is taken");
  EXPECT_EQ(testing::error_of([] { check_backend("toy"); }),
            "unknown --backend 'toy'; allowed: " + backend_names());
}

}  // namespace
}  // namespace dlscale::comm
