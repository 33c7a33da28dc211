// Anchors, matching and balanced sampling (anchors.h).
#include "libtorch/models/anchors.h"

#include <algorithm>

#include "core/error.h"

namespace dlscale::models {

torch::Tensor cell_anchors(const std::vector<double>& sizes,
                           const std::vector<double>& aspect_ratios) {
  DLSCALE_CHECK(!sizes.empty() && !aspect_ratios.empty(),
                "anchors need at least one size and one aspect ratio");
  for (const double r : aspect_ratios)
    DLSCALE_CHECK(r > 0, "an anchor's aspect ratio must be positive; got {}", r);
  const torch::Tensor scales = torch::tensor(sizes, torch::kFloat64).to(torch::kFloat32);
  const torch::Tensor h_ratios =
      torch::sqrt(torch::tensor(aspect_ratios, torch::kFloat64).to(torch::kFloat32));
  const torch::Tensor w_ratios = torch::reciprocal(h_ratios);
  const torch::Tensor ws = (w_ratios.unsqueeze(1) * scales.unsqueeze(0)).reshape({-1});
  const torch::Tensor hs = (h_ratios.unsqueeze(1) * scales.unsqueeze(0)).reshape({-1});
  return (torch::stack({-ws, -hs, ws, hs}, 1) / 2).round();
}

torch::Tensor grid_anchors(const torch::Tensor& cell, int64_t grid_height, int64_t grid_width,
                           int64_t image_height, int64_t image_width) {
  DLSCALE_CHECK(grid_height >= 1 && grid_width >= 1 && image_height >= grid_height &&
                    image_width >= grid_width,
                "a {}x{} grid of anchors does not fit an image of {}x{} pixels", grid_height,
                grid_width, image_height, image_width);
  const int64_t stride_h = image_height / grid_height, stride_w = image_width / grid_width;
  const torch::Tensor shift_x = torch::arange(grid_width, torch::kLong) * stride_w;
  const torch::Tensor shift_y = torch::arange(grid_height, torch::kLong) * stride_h;
  const std::vector<torch::Tensor> grid = torch::meshgrid({shift_y, shift_x}, "ij");
  const torch::Tensor x = grid[1].reshape({-1}), y = grid[0].reshape({-1});
  const torch::Tensor shifts = torch::stack({x, y, x, y}, 1);
  return (shifts.view({-1, 1, 4}) + cell.view({1, -1, 4})).reshape({-1, 4});
}

torch::Tensor match_boxes(const torch::Tensor& quality, const MatchOptions& o) {
  DLSCALE_CHECK(quality.dim() == 2 && quality.size(0) > 0,
                "matching boxes needs at least one ground-truth box (an IoU row); got {} rows",
                quality.dim() == 2 ? quality.size(0) : 0);
  DLSCALE_CHECK(o.low <= o.high, "matching: the low IoU threshold {} is above the high one {}",
                o.low, o.high);
  const auto [best, matches_of_best] = quality.max(0);
  torch::Tensor matches = matches_of_best.clone();
  matches.masked_fill_(best < o.low, kBelowLowThreshold);
  matches.masked_fill_(best.ge(o.low).logical_and(best < o.high), kBetweenThresholds);
  if (o.allow_low_quality) {
    // Every ground-truth box keeps the boxes it overlaps most, ties included.
    const torch::Tensor best_of_each = std::get<0>(quality.max(1));
    const torch::Tensor boxes = torch::nonzero(quality == best_of_each.unsqueeze(1)).select(1, 1);
    matches.index_put_({boxes}, matches_of_best.index_select(0, boxes));
  }
  return matches;
}

std::pair<torch::Tensor, torch::Tensor> sample_balanced(const torch::Tensor& labels, int64_t batch,
                                                        double positive_fraction,
                                                        c10::optional<at::Generator> generator) {
  DLSCALE_CHECK(batch >= 1 && positive_fraction >= 0 && positive_fraction <= 1,
                "balanced sampling needs a batch of at least 1 and a positive fraction in [0, 1]; "
                "got {} and {}",
                batch, positive_fraction);
  const torch::Tensor positive = torch::nonzero(labels >= 1).squeeze(1);
  const torch::Tensor negative = torch::nonzero(labels == 0).squeeze(1);
  const int64_t n_pos = std::min(
      positive.numel(), static_cast<int64_t>(static_cast<double>(batch) * positive_fraction));
  const int64_t n_neg = std::min(negative.numel(), batch - n_pos);
  const torch::Tensor pick_pos =
      torch::randperm(positive.numel(), generator, torch::kLong).slice(0, 0, n_pos);
  const torch::Tensor pick_neg =
      torch::randperm(negative.numel(), generator, torch::kLong).slice(0, 0, n_neg);
  return {positive.index_select(0, pick_pos), negative.index_select(0, pick_neg)};
}

}  // namespace dlscale::models
