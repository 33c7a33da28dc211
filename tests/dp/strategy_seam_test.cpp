// A strategy written here in the test tree only, as docs/architecture.md's
// recipe says ("Strategies": a Strategy and its GradientSync): "toy-flat"
// averages every gradient in one flat allreduce after backward, with no
// buckets and no overlap. Registered (register_strategy: the row the recipe
// adds to strategy.cpp's table, at run time), it is a --strategy word like
// the shipped ones, and `--strategy toy-flat` trains over two workers as
// over one, with no file of src/ naming it.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "commbench/commbench_options.h"
#include "core/error.h"
#include "libtorch/commbench/commbench.h"
#include "libtorch/dp/bucket_collective.h"
#include "libtorch/dp/independent_sync.h"
#include "libtorch/dp/strategy.h"
#include "libtorch/models/layers.h"
#include "libtorch/models/model.h"
#include "libtorch/train/train_result.h"
#include "libtorch/train/trainer.h"
#include "train/inproc_training.h"

namespace dlscale::dp {
namespace {

class FlatSync : public GradientSync {
 public:
  FlatSync(std::vector<torch::Tensor> params, comm::Communicator& comm)
      : params_(std::move(params)), comm_(comm) {
    info_.strategy = "toy-flat";
    info_.layout = "flat";
    info_.formula = "2(p-1)/p * S";
  }
  const SyncInfo& info() const override { return info_; }
  void begin_backward() override {}
  SyncStepStats end_backward() override {
    std::vector<torch::Tensor> grads;
    for (const auto& p : params_) grads.push_back(p.grad().flatten());
    torch::Tensor flat = torch::cat(grads);
    comm_.allreduce(flat, comm::ReduceOp::kAverage);
    int64_t at = 0;
    for (const auto& p : params_) {
      p.mutable_grad().copy_(flat.narrow(0, at, p.numel()).view_as(p));
      at += p.numel();
    }
    ++exchanges;
    return {};
  }
  static inline std::atomic<int> exchanges{0};

 private:
  std::vector<torch::Tensor> params_;
  comm::Communicator& comm_;
  SyncInfo info_;
};

class FlatStrategy : public Strategy {
 public:
  std::unique_ptr<GradientSync> make_sync(std::vector<torch::Tensor> params,
                                          const SyncContext& c) override {
    if (c.comm == nullptr) return make_independent_sync();  // one worker: nothing to exchange
    return std::make_unique<FlatSync>(std::move(params), *c.comm);
  }
};

void register_flat() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_strategy({{"toy-flat", "one flat allreduce after backward", false},
                       [](const SyncOptions&) { return std::make_unique<FlatStrategy>(); },
                       ""});
  });
}

/// A bucket collective of the test tree: each rank gathers every rank's
/// bucket and sums them itself.
class GatherSumCollective : public BucketCollective {
 public:
  explicit GatherSumCollective(comm::Communicator& comm) : comm_(comm) {}
  std::string name() const override { return "toy-gather"; }
  void sum(torch::Tensor& data, uint32_t /*tag*/) override {
    data.copy_(comm_.allgather(data).sum(0));
    ++sums;
  }
  double bytes_sent(double bytes) const override { return (comm_.size() - 1) * bytes; }
  std::string formula() const override { return "(p-1) x S"; }
  static inline std::atomic<int> sums{0};

 private:
  comm::Communicator& comm_;
};

/// The bucket-collective recipe: the collective, and the bucketed strategy
/// of its word.
void register_gather() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_bucket_collective("toy-gather", [](comm::Communicator& comm, int, const std::string&) {
      return std::make_unique<GatherSumCollective>(comm);
    });
    register_strategy({{"toy-gather", "each rank sums every rank's gathered bucket", true},
                       bucketed_strategy(),
                       ""});
  });
}

/// Two layers whose weights come from a formula, not a generator: ranks
/// that are threads share one, so random weights would differ between the
/// one- and two-worker runs. No batch norm: it would see each rank's batch.
class TwoLayer : public models::ImageModel {
 public:
  explicit TwoLayer(const models::ModelOptions& o) {
    fc1_ = register_module("fc1", models::Fc(o.image_size * o.image_size, 16));
    fc2_ = register_module("fc2", models::Fc(16, o.num_classes));
    torch::NoGradGuard no_grad;
    double phase = 0;
    for (auto& p : parameters()) {
      const torch::Tensor i = torch::arange(p.numel(), torch::kFloat32);
      p.copy_((0.1 * torch::sin(0.37 * i + phase)).view_as(p));
      phase += 1;
    }
  }
  models::Output forward_image(const torch::Tensor& x) override {
    return {fc2_(torch::relu(fc1_(x.flatten(1)))), {}};
  }

 private:
  models::Fc fc1_{nullptr}, fc2_{nullptr};
};

void register_two_layer() {
  static std::once_flag once;
  std::call_once(once, [] {
    models::ModelSpec s = models::image_classifier_spec("toy-two-layer", "test model");
    s.channels = 1;
    s.default_image_size = 8;
    s.default_classes = 4;
    s.make = [](const models::ModelOptions& o) { return std::make_shared<TwoLayer>(o); };
    models::register_model(s);
  });
}

train::TrainOptions flat_options(int64_t batch_per_worker) {
  register_two_layer();
  register_flat();
  train::TrainOptions o;
  o.model.name = "toy-two-layer";
  o.sync.strategy = "toy-flat";
  o.run.batch = batch_per_worker;
  o.run.steps = 4;
  o.run.warmup = 1;
  o.run.display_every = 0;
  o.compute.threads = 1;
  return o;
}

/// Trains with --strategy toy-flat over `world` in-process ranks on a
/// global batch of 16.
testing::RankZeroRun train_flat(int world) {
  return testing::train_in_process(world, flat_options(16 / world));
}

void expect_same(const std::vector<torch::Tensor>& one, const std::vector<torch::Tensor>& two) {
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_TRUE(torch::allclose(one[i], two[i], 1e-5, 1e-6)) << "parameter " << i;
  }
}

TEST(StrategySeam, AStrategyOfTheTestTreeTrainsOverTwoWorkersAsOverOne) {
  const std::vector<torch::Tensor> one = train_flat(1).parameters;
  const testing::RankZeroRun two_run = train_flat(2);
  const std::vector<torch::Tensor>& two = two_run.parameters;
  const nlohmann::json two_record = train::to_json(two_run.result);
  expect_same(one, two);
  models::ModelOptions shape;
  shape.image_size = 8;
  shape.num_classes = 4;
  TwoLayer initial(shape);
  EXPECT_FALSE(torch::allclose(initial.parameters()[0], two[0]));  // it trained
  EXPECT_EQ(FlatSync::exchanges.load(), 2 * 4);                    // each rank, each step
  EXPECT_EQ(two_record["results"]["comm"]["strategy"], "toy-flat") << two_record["results"]["comm"];
  EXPECT_EQ(two_record["inputs"]["strategy"], "toy-flat");
}

// The bucket-collective recipe: --strategy toy-gather trains in buckets
// through the collective of the test tree, over two workers as over one, and
// commbench times the collective by its word.
TEST(StrategySeam, ABucketCollectiveOfTheTestTreeTrainsAndIsTimedByCommbench) {
  register_gather();
  train::TrainOptions o = flat_options(16);
  o.sync.strategy = "toy-gather";
  o.sync.first_bucket_mb = 0.0001;  // several buckets a step
  o.sync.bucket_mb = 0.001;
  const std::vector<torch::Tensor> one = testing::train_in_process(1, o).parameters;
  o.run.batch = 8;
  const testing::RankZeroRun two = testing::train_in_process(2, o);
  expect_same(one, two.parameters);
  const nlohmann::json record = train::to_json(two.result);
  EXPECT_EQ(record["results"]["comm"]["strategy"], "toy-gather");
  EXPECT_GE(GatherSumCollective::sums.load(),
            2 * 4 * 2);  // each rank, each step, two buckets or more

  const std::vector<std::string> ops = commbench::commbench_operations();
  EXPECT_NE(std::find(ops.begin(), ops.end(), "toy-gather"), ops.end());
  commbench::CommbenchOptions bench;
  bench.ops = {"toy-gather"};
  bench.min_bytes = 1024;
  bench.max_bytes = 4096;
  bench.warmup = 1;
  bench.iters = 2;
  bench = commbench::resolve_commbench_options(bench);
  comm::testing::run_ranks("inproc", 2, [&](comm::Communicator& comm) {
    const commbench::CommbenchResult r =
        commbench::run_commbench(bench, comm, "", nullptr, nullptr);
    EXPECT_EQ(r.rows.size(), 3u);  // 1K, 2K and 4K
    EXPECT_EQ(r.wrong, 0);
  });
}

TEST(StrategySeam, ARegisteredStrategyIsAStrategyWordLikeTheShippedOnes) {
  register_flat();
  EXPECT_NE(strategy_help().find(" | toy-flat (one flat allreduce after backward)"),
            std::string::npos)
      << strategy_help();
  EXPECT_NO_THROW(check_strategy_name("toy-flat"));
  try {
    check_strategy_name("toy");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();  // the registered ones after the shipped ones
    EXPECT_EQ(what.rfind("unknown --strategy 'toy'; allowed: allreduce, tree, hierarchical, "
                         "independent, ps, zero, ",
                         0),
              0u)
        << what;
    EXPECT_NE(what.find("toy-flat"), std::string::npos) << what;
  }
  try {
    register_strategy({{"toy-flat", "", false},
                       [](const SyncOptions&) { return std::make_unique<FlatStrategy>(); },
                       ""});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "strategy 'toy-flat' is taken");
  }
  EXPECT_THROW(register_strategy({{"toy-none", "", false}, nullptr, ""}), Error);
  EXPECT_THROW(check_strategy_name("toy-none"), Error);  // refused whole, not half-registered
}

}  // namespace
}  // namespace dlscale::dp
