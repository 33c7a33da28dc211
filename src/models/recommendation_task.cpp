// Implicit-feedback recommendation, as MLPerf's NCF: training samples are
// (user, item, clicked) with kNegativesPerPositive sampled negatives after
// each positive, the loss is binary cross-entropy on the model's logit, and
// quality is the hit rate at 10: the share of users whose held-out positive
// ranks among the 10 highest scores of 1 + 999 candidates.
//
// The synthetic task plants a taste: user u likes exactly the items of its
// group (u mod kTasteGroups; item i's group is i mod kTasteGroups). Sample i
// draws its user from (seed, i); every (1 + kNegativesPerPositive)-th sample
// is a positive (an item of the user's group), the others an item drawn
// uniformly, labelled by the same rule (so some "negatives" are liked,
// as sampled negatives are in real data).
#include <ATen/CPUGeneratorImpl.h>

#include "core/error.h"
#include "data/sampler.h"
#include "models/model.h"
#include "models/recommendation.h"

namespace dlscale::models {

namespace {

class Recommendation : public Task {
 public:
  Recommendation(int64_t users, int64_t items) : users_(users), items_(items) {}

  std::string name() const override { return "recommendation"; }

  std::vector<TensorSpec> inputs(const ModelSpec&, const ModelOptions&) const override {
    return {{kUser, torch::kInt64, {}, 0, users_}, {kItem, torch::kInt64, {}, 0, items_}};
  }

  std::vector<TensorSpec> targets(const ModelSpec&, const ModelOptions&) const override {
    return {{kClicked, torch::kFloat32, {}, 0, 2}};
  }

  torch::Tensor loss(const Output& out, const TensorMap& targets, const LossOptions&) const override {
    return torch::binary_cross_entropy_with_logits(out.main, targets.at(kClicked).to(out.main.scalar_type()));
  }

  std::vector<MetricSpec> metrics() const override { return {{"hr10", "HR@10", true, true}}; }

  /// Evaluation batches give each user candidates ([batch, 1 + 999] items,
  /// the positive first): a hit is fewer than 10 candidates scored above it.
  std::vector<double> evaluate(const Output& out, const TensorMap&) const override {
    const torch::Tensor scores = out.main.cpu();
    DLSCALE_CHECK(scores.dim() == 2 && scores.size(1) > 1,
                  "HR@10 needs candidate lists ([batch, candidates] items, the positive first)");
    const torch::Tensor above = scores.narrow(1, 1, scores.size(1) - 1).gt(scores.narrow(1, 0, 1)).sum(1);
    return {static_cast<double>(above.lt(kHitRank).sum().item<int64_t>())};
  }

  ThroughputUnit unit(const ModelSpec&, const ModelOptions&) const override { return {"samples", 1}; }

  data::SampleFn synthetic(const ModelSpec&, const ModelOptions&, uint64_t seed) const override {
    return [seed, users = users_, items = items_](uint64_t index) {
      const uint64_t h = data::mix_seed(seed, index);
      const int64_t user = static_cast<int64_t>(h % static_cast<uint64_t>(users));
      const uint64_t h2 = data::mix_seed(h, 1);
      const int64_t group = user % kTasteGroups;
      int64_t item = 0;
      if (index % (kNegativesPerPositive + 1) == 0) {  // a positive: an item of the user's group
        const int64_t in_group = (items - group + kTasteGroups - 1) / kTasteGroups;
        item = group + kTasteGroups * static_cast<int64_t>(h2 % static_cast<uint64_t>(in_group));
      } else {
        item = static_cast<int64_t>(h2 % static_cast<uint64_t>(items));
      }
      data::Sample s;
      s.inputs[kUser] = torch::tensor(user, torch::kInt64);
      s.inputs[kItem] = torch::tensor(item, torch::kInt64);
      s.targets[kClicked] = torch::tensor(item % kTasteGroups == group ? 1.0F : 0.0F, torch::kFloat32);
      return s;
    };
  }

 private:
  int64_t users_;
  int64_t items_;
};

}  // namespace

std::shared_ptr<const Task> recommendation(int64_t users, int64_t items) {
  DLSCALE_ASSERT(users >= kTasteGroups && items >= kTasteGroups);
  return std::make_shared<const Recommendation>(users, items);
}

}  // namespace dlscale::models
