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

#include <algorithm>

#include "core/error.h"
#include "data/sampler.h"
#include "libtorch/models/model.h"
#include "models/recommendation.h"

namespace dlscale::models {

namespace {

/// An item of taste group `group`, drawn from `h`.
int64_t liked_item(int64_t group, uint64_t h, int64_t items) {
  const int64_t in_group = (items - group + kTasteGroups - 1) / kTasteGroups;
  return group + kTasteGroups * static_cast<int64_t>(h % static_cast<uint64_t>(in_group));
}

class Recommendation : public Task {
 public:
  Recommendation(int64_t users, int64_t items)
      : users_(users), items_(items), active_users_(std::min(users, kSyntheticUsers)),
        active_items_(std::min(items, kSyntheticItems)) {}

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

  /// Held-out sample j, as MLPerf evaluates: user u (drawn from seed and
  /// kSyntheticTestIndex + j) and a candidate list of 1 + 999 items, an item
  /// of u's group (liked) first, then 999 drawn from the other groups.
  data::SampleFn synthetic_test(const ModelSpec&, const ModelOptions&, uint64_t seed) const override {
    return [seed, users = active_users_, items = active_items_](uint64_t j) {
      const uint64_t h = data::mix_seed(seed, kSyntheticTestIndex + j);
      const int64_t user = static_cast<int64_t>(h % static_cast<uint64_t>(users));
      const int64_t group = user % kTasteGroups;
      torch::Tensor candidates = torch::empty({kEvalCandidates}, torch::kInt64);
      auto* c = candidates.data_ptr<int64_t>();
      c[0] = liked_item(group, data::mix_seed(h, 1), items);
      for (int64_t k = 1; k < kEvalCandidates; ++k) {  // a group other than u's, then an item of it
        const uint64_t hk = data::mix_seed(h, static_cast<uint64_t>(k) + 1);
        const int64_t other = (group + 1 + static_cast<int64_t>(hk % (kTasteGroups - 1))) % kTasteGroups;
        c[k] = liked_item(other, data::mix_seed(hk, 2), items);
      }
      data::Sample s;
      s.inputs[kUser] = torch::tensor(user, torch::kInt64);
      s.inputs[kItem] = candidates;
      s.targets[kClicked] = torch::zeros({kEvalCandidates}, torch::kFloat32).index_fill_(0, torch::tensor({0}), 1.0);
      return s;
    };
  }

  data::SampleFn synthetic(const ModelSpec&, const ModelOptions&, uint64_t seed) const override {
    return [seed, users = active_users_, items = active_items_](uint64_t index) {
      const uint64_t h = data::mix_seed(seed, index);
      const int64_t user = static_cast<int64_t>(h % static_cast<uint64_t>(users));
      const uint64_t h2 = data::mix_seed(h, 1);
      const int64_t group = user % kTasteGroups;
      const int64_t item = index % (kNegativesPerPositive + 1) == 0  // a positive: an item of the user's group
                               ? liked_item(group, h2, items)
                               : static_cast<int64_t>(h2 % static_cast<uint64_t>(items));
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
  int64_t active_users_;  ///< the synthetic stream's: kSyntheticUsers of them
  int64_t active_items_;
};

}  // namespace

std::shared_ptr<const Task> recommendation(int64_t users, int64_t items) {
  DLSCALE_ASSERT(users >= kTasteGroups && items >= kTasteGroups);
  return std::make_shared<const Recommendation>(users, items);
}

}  // namespace dlscale::models
