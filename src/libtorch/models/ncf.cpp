// NeuMF (He et al. 2017) as MLPerf's NCF reference builds it for
// MovieLens-20M: a GMF branch (user and item embeddings of 64, multiplied)
// and an MLP branch (embeddings of 128, concatenated, then 256-256-128-64
// with ReLU), concatenated into one logit. Nearly all of its parameters are
// the four embedding tables.
#include "libtorch/models/layers.h"
#include "libtorch/models/model.h"
#include "models/recommendation.h"
#include "libtorch/models/zoo.h"

namespace dlscale::models {

namespace {

constexpr int64_t kUsers = 138493;  // MovieLens-20M
constexpr int64_t kItems = 26744;
constexpr int64_t kGmfDim = 64;
constexpr int64_t kMlpLayers[] = {256, 256, 128, 64};  // the first is the two embeddings concatenated

class NeuMF : public Model {
 public:
  NeuMF(int64_t users, int64_t items, bool sparse) {
    // Each table is filled once, N(0, 0.01) below: given its weight, an
    // Embedding skips its own N(0, 1) fill, a second pass of the random
    // generator over 32 M values (about 0.2 s of CPU a worker).
    const auto table = [&](const std::string& name, int64_t rows, int64_t dim) {
      return register_module(
          name, torch::nn::Embedding(torch::nn::EmbeddingOptions(rows, dim).sparse(sparse)._weight(
                    torch::empty({rows, dim}))));
    };
    gmf_user_ = table("gmf_user", users, kGmfDim);
    gmf_item_ = table("gmf_item", items, kGmfDim);
    mlp_user_ = table("mlp_user", users, kMlpLayers[0] / 2);
    mlp_item_ = table("mlp_item", items, kMlpLayers[0] / 2);
    for (size_t i = 1; i < std::size(kMlpLayers); ++i) {
      mlp_.push_back(register_module("mlp" + std::to_string(i), Fc(kMlpLayers[i - 1], kMlpLayers[i])));
    }
    final_ = register_module("final", Fc(kGmfDim + kMlpLayers[std::size(kMlpLayers) - 1], 1));
    torch::NoGradGuard no_grad;
    for (auto* e : {&gmf_user_, &gmf_item_, &mlp_user_, &mlp_item_}) (*e)->weight.normal_(0.0, 0.01);
    for (auto& fc : mlp_) {
      torch::nn::init::xavier_uniform_(fc->weight);
      fc->bias.zero_();
    }
    torch::nn::init::kaiming_uniform_(final_->weight, 1.0, torch::kFanIn, torch::kSigmoid);  // LeCun uniform
    final_->bias.zero_();
  }

  /// user: [batch]; item: [batch] or [batch, candidates]. A logit per item.
  Output forward(const TensorMap& inputs) override {
    const torch::Tensor& item = inputs.at(kItem);
    torch::Tensor user = inputs.at(kUser);
    if (item.dim() == 2) user = user.unsqueeze(1).expand_as(item);
    const torch::Tensor gmf = gmf_user_(user) * gmf_item_(item);
    torch::Tensor mlp = torch::cat({mlp_user_(user), mlp_item_(item)}, -1);
    for (auto& fc : mlp_) mlp = fc(mlp).relu();
    return {final_(torch::cat({gmf, mlp}, -1)).squeeze(-1), {}};
  }

 private:
  torch::nn::Embedding gmf_user_{nullptr}, gmf_item_{nullptr}, mlp_user_{nullptr}, mlp_item_{nullptr};
  std::vector<Fc> mlp_;
  Fc final_{nullptr};
};

}  // namespace

ModelSpec ncf_spec() {
  ModelSpec s = non_image_spec("ncf", "NeuMF (MLPerf NCF): MovieLens-20M users and items, GMF 64, MLP 256-256-128-64",
                               recommendation(kUsers, kItems), "recommendation", {"--sparse-embeddings"});
  s.make = [](const ModelOptions& o) { return std::make_shared<NeuMF>(kUsers, kItems, o.sparse_embeddings); };
  return s;
}

}  // namespace dlscale::models
