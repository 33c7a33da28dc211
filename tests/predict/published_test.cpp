// The scaling model against published results (the tables are the shipped
// system files, examples/systems/*.yaml), calibrated only on one device's
// published rate and the system's documented network, and the seeds'
// qualitative findings. docs/predict.md lists the same numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "predict/predict_output.h"
#include "predict/system_file.h"
#include "libtorch/predict/zoo_profile.h"

namespace dlscale::predict {
namespace {

const std::string kSystems = DLSCALE_SOURCE_DIR "/examples/systems";

/// The FLOP-proportional profile of each zoo model, built once.
const BackwardProfile& profile(const std::string& model) {
  static std::map<std::string, BackwardProfile> cache;
  auto it = cache.find(model);
  if (it == cache.end()) {
    double flops = 0;
    it = cache.emplace(model, flops_backward_profile(model, {}, flops)).first;
  }
  return it->second;
}

std::vector<ValidationRow> validate(const std::string& name) {
  const SystemSpec s = load_system(name, kSystems);
  return validate_system(s, [&](const std::string& model) {
    return calibrate_from_rate(model, s.batch, s.rate(model), profile(model));
  });
}

TEST(PredictPublished, EveryPublishedEfficiencyWithinTenPointsSaveTheThreeStructuralMisses) {
  // docs/predict.md, "Accuracy": where the model over-predicts by more
  // than 10 points the missing term is named there (collectives slowing
  // the compute they overlap; NCCL's staging through host memory).
  const std::set<std::pair<std::string, long long>> structural = {
      {"dgx1-p100/vgg16", 8}, {"ec2-p2-8xlarge/resnet152", 64}, {"horovod-roce/vgg16", 512}};
  int points = 0;
  for (const std::string system : {"dgx1-p100", "ec2-p2-8xlarge", "horovod-roce", "goyal-bigbasin"}) {
    for (const ValidationRow& r : validate(system)) {
      ++points;
      const double diff = r.predicted_eff_pct - r.published_eff_pct;
      const std::string key = system + "/" + r.model;
      if (structural.count({key, r.workers}) != 0) {
        // Over-predicted (a cost is missing), but not by more than 15 points.
        EXPECT_GT(diff, 10) << key << " N=" << r.workers << " is no longer a miss: update docs/predict.md";
        EXPECT_LT(diff, 15) << key << " N=" << r.workers;
      } else {
        EXPECT_LE(std::fabs(diff), 10) << key << " N=" << r.workers << ": published " << r.published_eff_pct
                                       << "%, predicted " << r.predicted_eff_pct << "%";
      }
    }
  }
  EXPECT_EQ(points, 32);
}

/// One efficiency from a system's network for a zoo model at its rate.
double efficiency(const std::string& system, const std::string& model, double rate, const std::string& strategy,
                  long long workers, Network* network = nullptr, const std::string& scaling = "weak") {
  SystemSpec s = load_system(system, kSystems);
  if (network != nullptr) s.network = *network;
  const Workload w = calibrate_from_rate(model, 64, rate, profile(model));
  PredictOptions o;
  o.workers = {workers};
  o.scaling = scaling;
  o.batch = scaling == "weak" ? 64 : 512;  // strong: 512 in all, 8 per worker at 64
  return predict(w, s.network, {parse_strategy(strategy)}, o).strategies[0].points[0].efficiency_pct;
}

TEST(PredictPublished, TheSeedsQualitativeFindingsComeOutOfTheModel) {
  // Weak scaling beats strong (ResNet-50 on 64 GPUs of 25 Gbit/s servers).
  EXPECT_GT(efficiency("horovod-roce", "resnet50", 219, "allreduce", 64),
            efficiency("horovod-roce", "resnet50", 219, "allreduce", 64, nullptr, "strong"));
  // A parameter server needs enough shards: one shard for 32 workers
  // starves, eight do much better.
  const double one = efficiency("horovod-roce", "resnet50", 219, "ps:1", 32);
  const double eight = efficiency("horovod-roce", "resnet50", 219, "ps:8", 32);
  EXPECT_LT(one, 25);
  EXPECT_GT(eight, 2 * one);
  // Hierarchical aggregation rescues slow links between nodes: at 1 Gbit/s
  // with 8 workers a node, 512 workers, summing inside nodes first beats a
  // tree or a flat ring (its 2(N-1) latencies) over all of them.
  Network slow = load_system("goyal-bigbasin", kSystems).network;
  slow.inter = {50e-6, 1e9 / 8};
  const double hier = efficiency("goyal-bigbasin", "resnet50", 219, "hierarchical", 512, &slow);
  EXPECT_GT(hier, efficiency("goyal-bigbasin", "resnet50", 219, "tree", 512, &slow));
  EXPECT_GT(hier, efficiency("goyal-bigbasin", "resnet50", 219, "allreduce", 512, &slow));
  // Models with many parameters per FLOP scale worst: VGG-16 and AlexNet
  // below ResNet-50 and Inception-v3 on the same network.
  const double vgg = efficiency("horovod-roce", "vgg16", 154, "allreduce", 256);
  const double alexnet = efficiency("horovod-roce", "alexnet", 1500, "allreduce", 256);  // a P100-like rate
  const double resnet = efficiency("horovod-roce", "resnet50", 219, "allreduce", 256);
  const double inception = efficiency("horovod-roce", "inception3", 142, "allreduce", 256);
  EXPECT_LT(vgg, resnet);
  EXPECT_LT(vgg, inception);
  EXPECT_LT(alexnet, resnet);
}

TEST(PredictPublished, TheFlopsProfileReadiesTheLastLayersFirst) {
  // VGG-16's classifier (most of its bytes) is last in the forward, so its
  // gradients are ready within the first few percent of backward.
  const BackwardProfile& p = profile("vgg16");
  double bytes = 0, early = 0;
  for (size_t i = 0; i < p.bytes.size(); ++i) {
    bytes += static_cast<double>(p.bytes[i]);
    if (p.ready_fraction[i] < 0.05) early += static_cast<double>(p.bytes[i]);
  }
  EXPECT_GT(early / bytes, 0.85);
  EXPECT_DOUBLE_EQ(p.ready_fraction.front(), 1.0);  // the first layer's weight comes last
}

}  // namespace
}  // namespace dlscale::predict
