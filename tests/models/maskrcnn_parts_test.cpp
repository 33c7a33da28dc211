// Mask R-CNN's parts against torchvision's on the same inputs
// (tests/models/maskrcnn_reference.py, Debian's python3-torchvision, one
// call for the whole file): the region ops (libtorch/models/roi_ops.h: RoIAlign's
// values and gradients over one map or a pyramid, NMS for one category and
// per category, box IoU, clipping, the size filter and the box coding, over
// random boxes that include empty, inverted, sub-pixel and out-of-image
// ones), the anchors and the matcher (libtorch/models/anchors.h), the network's
// parameters (libtorch/models/maskrcnn_net.h), and the RPN's proposals and the box
// and mask losses (libtorch/models/rcnn_losses.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "libtorch/models/anchors.h"
#include "libtorch/models/maskrcnn_net.h"
#include "libtorch/models/rcnn_losses.h"
#include "libtorch/models/roi_ops.h"
#include "process_util.h"

namespace dlscale::models {
namespace {

using nlohmann::json;

torch::ScalarType dtype_of(const json& c) {
  return c.value("dtype", "float") == "double" ? torch::kFloat64 : torch::kFloat32;
}

void put(json& c, const std::string& key, const torch::Tensor& t) {
  const torch::Tensor d = t.to(torch::kFloat64).contiguous();
  c[key] = std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
  c[key + "_shape"] = t.sizes().vec();
}

/// The tensor `key` of a case, in the case's dtype.
torch::Tensor get(const json& c, const std::string& key) {
  const auto v = c.at(key).get<std::vector<double>>();
  return torch::tensor(v, torch::kFloat64)
      .reshape({static_cast<int64_t>(v.size())})
      .reshape(c.at(key + "_shape").get<std::vector<int64_t>>())
      .to(dtype_of(c));
}

/// `n` boxes within about `width` x `height` pixels; the first 7 are the odd
/// ones: empty, inverted, smaller than a pixel, wholly beyond the image on
/// either side, partly beyond it, larger than it.
torch::Tensor random_boxes(int64_t n, double width, double height) {
  const torch::Tensor scale = torch::tensor({width, height}, torch::kFloat64);
  const torch::Tensor xy = (torch::rand({n, 2}, torch::kFloat64) * 1.2 - 0.1) * scale;
  const torch::Tensor wh = torch::rand({n, 2}, torch::kFloat64) * 0.5 * scale;
  torch::Tensor b = torch::cat({xy, xy + wh}, 1);
  const double w = width, h = height;
  const std::vector<std::vector<double>> odd = {
      {3, 4, 3, 9},                    // empty: no width
      {9, 8, 2, 1},                    // inverted
      {5.2, 6.1, 5.5, 6.3},            // smaller than a pixel
      {w + 5, h + 5, w + 20, h + 30},  // beyond the bottom right
      {-30, -20, -5, -2},              // beyond the top left
      {-5, -5, 0.4 * w, 0.3 * h},      // partly beyond
      {-w, -h, 2 * w, 2 * h}};         // larger than the image
  for (size_t i = 0; i < odd.size() && static_cast<int64_t>(i) < n; ++i) {
    b[static_cast<int64_t>(i)] = torch::tensor(odd[i], torch::kFloat64);
  }
  return b;
}

json roi_align_case(const std::string& dtype, std::vector<int64_t> feature_sizes, int64_t regions,
                    const RoiAlignOptions& o) {
  json c{{"op", "roi_align"},
         {"dtype", dtype},
         {"pooled_height", o.pooled_height},
         {"pooled_width", o.pooled_width},
         {"spatial_scale", o.spatial_scale},
         {"sampling_ratio", o.sampling_ratio},
         {"aligned", o.aligned}};
  const torch::Tensor features = torch::randn(feature_sizes, torch::kFloat64);
  const double width = static_cast<double>(feature_sizes[3]) / o.spatial_scale;
  const double height = static_cast<double>(feature_sizes[2]) / o.spatial_scale;
  const torch::Tensor batch = torch::randint(0, feature_sizes[0], {regions, 1}, torch::kFloat64);
  put(c, "features", features);
  put(c, "rois", torch::cat({batch, random_boxes(regions, width, height)}, 1));
  put(c, "grad",
      torch::randn({regions, feature_sizes[1], o.pooled_height, o.pooled_width}, torch::kFloat64));
  return c;
}

/// A pyramid of 4 maps (scales 1/4 to 1/32 of two 512 x 512 images) and
/// regions of 8 to 600 pixels a side, so that they pool from every level.
json multiscale_case() {
  json c{{"op", "multiscale"}, {"dtype", "float"},         {"levels", 4},
         {"images", 2},        {"image_size", {512, 512}}, {"pooled_height", 7},
         {"pooled_width", 7},  {"sampling_ratio", 2}};
  for (int64_t i = 0; i < 4; ++i) {
    put(c, "map" + std::to_string(i), torch::randn({2, 2, 128 >> i, 128 >> i}, torch::kFloat64));
  }
  const torch::Tensor xy = torch::rand({30, 2}, torch::kFloat64) * 400;
  // Sides (the square root of the area) from 8 to 600 pixels, log-spaced.
  const torch::Tensor side =
      8 * torch::pow(75.0, torch::arange(30, torch::kFloat64) / 29).unsqueeze(1);
  const torch::Tensor aspect = torch::rand({30, 1}, torch::kFloat64) * 0.4 + 0.8;
  const torch::Tensor wh = torch::cat({side * aspect, side / aspect}, 1);
  const torch::Tensor image =
      torch::cat({torch::zeros({15, 1}), torch::ones({15, 1})}).to(torch::kFloat64);
  put(c, "rois", torch::cat({image, xy, xy + wh}, 1));
  put(c, "grad", torch::randn({30, 2, 7, 7}, torch::kFloat64));
  return c;
}

/// Boxes in clusters of 10 around 30 centres (so that many overlap), scores in [0, 1).
json clustered_case(const std::string& op, double threshold) {
  json c{{"op", op}, {"threshold", threshold}};
  const torch::Tensor centres =
      (torch::rand({30, 1, 2}, torch::kFloat64) * 200).expand({30, 10, 2}).reshape({300, 2});
  const torch::Tensor half = torch::rand({300, 2}, torch::kFloat64) * 20 + 5;
  const torch::Tensor jitter = torch::randn({300, 2}, torch::kFloat64) * 4;
  torch::Tensor boxes = torch::cat({centres + jitter - half, centres + jitter + half}, 1);
  boxes.slice(0, 0, 7).copy_(random_boxes(7, 200, 200));
  put(c, "boxes", boxes);
  put(c, "scores", torch::rand({300}, torch::kFloat64));
  const torch::Tensor categories = torch::randint(0, 5, {300}, torch::kLong);
  c["categories"] =
      std::vector<int64_t>(categories.data_ptr<int64_t>(), categories.data_ptr<int64_t>() + 300);
  return c;
}

json box_case(const std::string& op) {
  json c{{"op", op}};
  put(c, "boxes", random_boxes(50, 120, 90));
  put(c, "others", random_boxes(40, 120, 90));
  return c;
}

/// Boxes of 1 to 31 pixels a side: what the coding's references are.
torch::Tensor positive_boxes(int64_t n) {
  const torch::Tensor xy = torch::rand({n, 2}, torch::kFloat64) * 100;
  return torch::cat({xy, xy + torch::rand({n, 2}, torch::kFloat64) * 30 + 1}, 1);
}

std::vector<int64_t> indices(const torch::Tensor& t) {
  const torch::Tensor l = t.to(torch::kLong).contiguous();
  return std::vector<int64_t>(l.data_ptr<int64_t>(), l.data_ptr<int64_t>() + l.numel());
}

/// Two images' decoded anchor boxes on three levels (60, 30 and 12 anchors;
/// odd ones among them) and their objectness: the top 25 a level, NMS, 60 kept.
json proposals_case() {
  json c{{"op", "proposals"},
         {"image_size", {100, 132}},
         {"per_level", {60, 30, 12}},
         {"pre_nms_top_n", 25},
         {"post_nms_top_n", 60}};
  put(c, "boxes", torch::stack({random_boxes(102, 132, 100), random_boxes(102, 132, 100)}));
  put(c, "objectness", torch::randn({2, 102}, torch::kFloat64));
  return c;
}

/// The box head's loss over 20 sampled RoIs of 5 classes, the first 6 positive.
json fastrcnn_case() {
  json c{{"op", "fastrcnn_loss"}};
  put(c, "logits", torch::randn({20, 5}, torch::kFloat64));
  put(c, "codes", torch::randn({20, 20}, torch::kFloat64));
  put(c, "targets", torch::randn({20, 4}, torch::kFloat64));
  torch::Tensor labels = torch::zeros({20}, torch::kLong);
  labels.slice(0, 0, 6).copy_(torch::randint(1, 5, {6}, torch::kLong));
  c["labels"] = indices(labels);
  return c;
}

/// The mask loss of 5 positives of 3 objects (40 x 50 masks; some boxes
/// reach beyond them).
json mask_loss_case() {
  json c{{"op", "maskrcnn_loss"}, {"gt_labels", {2, 4, 1}}};
  put(c, "masks", torch::rand({3, 40, 50}, torch::kFloat64).gt(0.5).to(torch::kFloat64));
  put(c, "proposals", positive_boxes(5) * 0.5);
  put(c, "logits", torch::randn({5, 5, 28, 28}, torch::kFloat64));
  c["objects"] = indices(torch::randint(0, 3, {5}, torch::kLong));
  return c;
}

/// Every case of the suite and torchvision's results, computed once.
struct Reference {
  json cases = json::array();
  json results;
};

const Reference& reference() {
  static const Reference r = [] {
    torch::manual_seed(46);
    Reference x;
    RoiAlignOptions box;  // the box head's: 7x7, 2 samples, not aligned, P2's scale
    box.spatial_scale = 0.25;
    x.cases.push_back(roi_align_case("float", {2, 3, 9, 11}, 40, box));
    RoiAlignOptions adaptive{5, 4, 0.5, 0, true};
    x.cases.push_back(roi_align_case("float", {2, 3, 9, 11}, 40, adaptive));
    RoiAlignOptions mask{14, 14, 0.125, 2, false};  // the mask head's
    x.cases.push_back(roi_align_case("float", {1, 4, 16, 16}, 12, mask));
    x.cases.push_back(
        roi_align_case("double", {1, 2, 6, 5}, 15, RoiAlignOptions{3, 3, 1.0, 1, false}));
    x.cases.push_back(roi_align_case("float", {1, 2, 6, 5}, 0, box));
    x.cases.push_back(multiscale_case());
    for (const double t : {0.3, 0.5, 0.7}) x.cases.push_back(clustered_case("nms", t));
    for (const double t : {0.3, 0.7}) x.cases.push_back(clustered_case("batched_nms", t));
    json ties{{"op", "nms"}, {"threshold", 0.5}};  // equal boxes and scores: the first is kept
    put(ties, "boxes", torch::tensor({0.0, 0.0, 10.0, 10.0}).repeat({6, 1}));
    put(ties, "scores", torch::ones({6}));
    x.cases.push_back(ties);
    x.cases.push_back(box_case("box_iou"));
    json clip = box_case("clip");
    clip["height"] = 90;
    clip["width"] = 120;
    x.cases.push_back(clip);
    json small = box_case("at_least");
    small["min_size"] = 12.5;
    x.cases.push_back(small);
    for (const auto& weights :
         {std::vector<double>{1, 1, 1, 1}, std::vector<double>{10, 10, 5, 5}}) {
      json encode = box_case("encode");
      put(encode, "boxes", positive_boxes(40));
      put(encode, "others", positive_boxes(40));
      encode["weights"] = weights;
      x.cases.push_back(encode);
      json decode = box_case("decode");
      put(decode, "codes",
          torch::randn({40, 12}, torch::kFloat64) * 3);  // 3 boxes a reference, some clipped
      put(decode, "others", positive_boxes(40));
      decode["weights"] = weights;
      x.cases.push_back(decode);
    }
    json anchors{{"op", "anchors"},
                 {"image_size", {100, 132}},
                 {"sizes", {32, 64, 128, 256, 512}},
                 {"aspect_ratios", {0.5, 1.0, 2.0}},
                 {"grids", {{25, 33}, {13, 17}, {7, 9}, {4, 5}, {2, 3}}}};
    x.cases.push_back(anchors);
    for (const bool low_quality : {true, false}) {
      json match{{"op", "match"},
                 {"high", low_quality ? 0.7 : 0.5},
                 {"low", low_quality ? 0.3 : 0.5},
                 {"allow_low_quality", low_quality}};
      // Some boxes are the ground truth itself or nearly: each case matches.
      const torch::Tensor truth = positive_boxes(6);
      const torch::Tensor boxes = torch::cat(
          {truth, truth + torch::rand({6, 4}, torch::kFloat64) * 0.5, positive_boxes(188)});
      torch::Tensor quality = box_iou(truth, boxes);
      quality[2][17] = quality[2].max();  // a tie for ground truth 2's best box
      put(match, "quality", quality);
      x.cases.push_back(match);
    }
    for (const int64_t classes : {81, 5})
      x.cases.push_back(json{{"op", "counts"}, {"classes", classes}});
    x.cases.push_back(proposals_case());
    x.cases.push_back(fastrcnn_case());
    x.cases.push_back(mask_loss_case());
    const std::string in = testing::temp_path("roi-cases.json");
    const std::string out = testing::temp_path("roi-results.json");
    std::ofstream(in) << x.cases.dump();
    const auto o =
        testing::run_shell(std::string("/usr/bin/python3 ") + DLSCALE_SOURCE_DIR +
                           "/tests/models/maskrcnn_reference.py " + in + " " + out + " 2>&1");
    EXPECT_EQ(o.code, 0) << o.out << o.err;
    try {
      std::ifstream results(out);
      x.results = o.code == 0 ? json::parse(results) : json::array();
    } catch (const json::exception& e) {
      ADD_FAILURE() << out << ": " << e.what();
    }
    return x;
  }();
  return r;
}

/// The largest |a - b| / (atol + rtol |b|): 1 or less is within tolerance.
double closeness(const torch::Tensor& a, const torch::Tensor& b, double rtol, double atol) {
  EXPECT_EQ(a.sizes(), b.sizes());
  if (a.sizes() != b.sizes() || a.numel() == 0) return a.sizes() == b.sizes() ? 0.0 : INFINITY;
  const torch::Tensor x = a.to(torch::kFloat64), y = b.to(torch::kFloat64);
  const torch::Tensor diff = (x - y).abs(), bound = atol + rtol * y.abs();
  // Within the bound: 0 (so that a bound of 0 asks equality); NaN stays NaN.
  return torch::where(diff <= bound, torch::zeros_like(diff), diff / bound).max().item<double>();
}

/// Calls `check(case, torchvision's result)` for every case of `op`; returns how many.
template <typename Check>
int for_each_case(const std::string& op, Check check) {
  const Reference& r = reference();
  EXPECT_EQ(r.results.size(), r.cases.size());
  int n = 0;
  for (size_t i = 0; i < r.cases.size() && i < r.results.size(); ++i) {
    if (r.cases[i].at("op") != op) continue;
    SCOPED_TRACE("case " + std::to_string(i) + " (" + op + ")");
    check(r.cases[i], r.results[i]);
    ++n;
  }
  return n;
}

/// Torchvision's values `key` shaped as `like`, null as NaN.
torch::Tensor as(const json& result, const std::string& key, const torch::Tensor& like) {
  std::vector<double> v;
  for (const json& x : result.at(key)) v.push_back(x.is_null() ? NAN : x.get<double>());
  return torch::tensor(v, torch::kFloat64)
      .reshape({static_cast<int64_t>(v.size())})
      .reshape(like.sizes());
}

TEST(RoiOps, RoiAlignValuesAndGradientsAreTorchvisions) {
  const int n = for_each_case("roi_align", [](const json& c, const json& r) {
    const bool exact = dtype_of(c) == torch::kFloat64;
    const double tol = exact ? 1e-12 : 1e-5;
    const torch::Tensor features = get(c, "features").requires_grad_();
    const RoiAlignOptions o{c.at("pooled_height").get<int64_t>(),
                            c.at("pooled_width").get<int64_t>(),
                            c.at("spatial_scale").get<double>(),
                            c.at("sampling_ratio").get<int64_t>(), c.at("aligned").get<bool>()};
    const torch::Tensor out = roi_align(features, get(c, "rois"), o);
    EXPECT_EQ(out.scalar_type(), features.scalar_type());
    EXPECT_LE(closeness(out, as(r, "out", out), tol, tol), 1.0);
    out.backward(get(c, "grad").reshape(out.sizes()));
    EXPECT_LE(closeness(features.grad(), as(r, "grad", features), tol, tol), 1.0);
  });
  EXPECT_EQ(n, 5);
}

TEST(RoiOps, PyramidPoolingIsTorchvisionsMultiScaleRoIAlign) {
  EXPECT_EQ(1, for_each_case("multiscale", [](const json& c, const json& r) {
              std::vector<torch::Tensor> maps;
              for (int i = 0; i < 4; ++i)
                maps.push_back(get(c, "map" + std::to_string(i)).requires_grad_());
              const torch::Tensor rois = get(c, "rois");
              const std::vector<int64_t> levels = indices(fpn_levels(rois.slice(1, 1, 5), 2, 5));
              EXPECT_EQ(levels, r.at("levels").get<std::vector<int64_t>>());
              EXPECT_EQ(std::set<int64_t>(levels.begin(), levels.end()).size(), 4u)
                  << "every level pooled from";
              const torch::Tensor out = multiscale_roi_align(maps, {0.25, 0.125, 0.0625, 0.03125},
                                                             rois, RoiAlignOptions{});
              EXPECT_LE(closeness(out, as(r, "out", out), 1e-5, 1e-5), 1.0);
              out.backward(get(c, "grad").reshape(out.sizes()));
              for (size_t i = 0; i < maps.size(); ++i) {
                SCOPED_TRACE("map " + std::to_string(i));
                ASSERT_TRUE(maps[i].grad().defined());
                EXPECT_LE(closeness(maps[i].grad(), as(r, "grad" + std::to_string(i), maps[i]),
                                    1e-5, 1e-5),
                          1.0);
              }
            }));
}

TEST(RoiOps, RoiAlignOfALinearMapIsItsValueAtTheBinCentres) {
  // Bilinear sampling is exact on a linear map, and a bin's samples sit
  // symmetrically about its centre: each bin is the map at the bin's centre.
  const torch::Tensor ys = torch::arange(12, torch::kFloat64).view({12, 1});
  const torch::Tensor xs = torch::arange(16, torch::kFloat64).view({1, 16});
  const torch::Tensor map = (2 * ys + 3 * xs + 1).view({1, 1, 12, 16});
  const torch::Tensor rois = torch::tensor({{0.0, 2.0, 1.0, 10.0, 9.0}}, torch::kFloat64);
  const torch::Tensor out = roi_align(map, rois, RoiAlignOptions{2, 4, 1.0, 2, false});
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 4; ++j) {
      const double y = 1.0 + 4.0 * (static_cast<double>(i) + 0.5),
                   x = 2.0 + 2.0 * (static_cast<double>(j) + 0.5);
      EXPECT_NEAR(out[0][0][i][j].item<double>(), 2 * y + 3 * x + 1, 1e-12) << i << "," << j;
    }
  }
}

TEST(RoiOps, NmsKeepsTorchvisionsBoxes) {
  const int n = for_each_case("nms", [](const json& c, const json& r) {
    EXPECT_EQ(indices(nms(get(c, "boxes"), get(c, "scores"), c.at("threshold").get<double>())),
              r.at("keep").get<std::vector<int64_t>>());
  });
  EXPECT_EQ(n, 4);
  const int batched = for_each_case("batched_nms", [](const json& c, const json& r) {
    const auto categories = c.at("categories").get<std::vector<int64_t>>();
    const torch::Tensor kept =
        batched_nms(get(c, "boxes"), get(c, "scores"), torch::tensor(categories, torch::kLong),
                    c.at("threshold").get<double>());
    EXPECT_EQ(indices(kept), r.at("keep").get<std::vector<int64_t>>());
    EXPECT_GT(kept.size(0),
              nms(get(c, "boxes"), get(c, "scores"), c.at("threshold").get<double>()).size(0))
        << "categories should keep boxes that one category would suppress";
  });
  EXPECT_EQ(batched, 2);
}

TEST(RoiOps, BoxIouClippingAndSizeFilterAreTorchvisions) {
  EXPECT_EQ(1, for_each_case("box_iou", [](const json& c, const json& r) {
              const torch::Tensor iou = box_iou(get(c, "boxes"), get(c, "others"));
              // Two empty boxes have no IoU in either (NaN): compared as NaN.
              const torch::Tensor theirs = as(r, "out", iou);
              EXPECT_TRUE(torch::equal(iou.isnan(), theirs.isnan()));
              EXPECT_LE(closeness(iou.nan_to_num(0), theirs.nan_to_num(0), 1e-6, 1e-7), 1.0);
            }));
  EXPECT_EQ(1, for_each_case("clip", [](const json& c, const json& r) {
              const torch::Tensor clipped = clip_boxes(
                  get(c, "boxes"), c.at("height").get<int64_t>(), c.at("width").get<int64_t>());
              EXPECT_LE(closeness(clipped, as(r, "out", clipped), 0, 0), 1.0);
            }));
  EXPECT_EQ(1, for_each_case("at_least", [](const json& c, const json& r) {
              EXPECT_EQ(indices(boxes_at_least(get(c, "boxes"), c.at("min_size").get<double>())),
                        r.at("keep").get<std::vector<int64_t>>());
            }));
}

TEST(RoiOps, BoxCodingIsTorchvisions) {
  const auto coder_of = [](const json& c) {
    BoxCoder coder;
    const auto w = c.at("weights").get<std::vector<double>>();
    std::copy(w.begin(), w.end(), coder.weights.begin());
    return coder;
  };
  EXPECT_EQ(2, for_each_case("encode", [&](const json& c, const json& r) {
              const torch::Tensor codes = coder_of(c).encode(get(c, "boxes"), get(c, "others"));
              EXPECT_LE(closeness(codes, as(r, "out", codes), 1e-5, 1e-6), 1.0);
              // Decoding the codes gives the boxes back.
              const torch::Tensor back = coder_of(c).decode(codes, get(c, "others"));
              EXPECT_LE(closeness(back, get(c, "boxes"), 1e-4, 1e-4), 1.0);
            }));
  EXPECT_EQ(2, for_each_case("decode", [&](const json& c, const json& r) {
              const torch::Tensor boxes = coder_of(c).decode(get(c, "codes"), get(c, "others"));
              EXPECT_EQ(boxes.sizes(), (std::vector<int64_t>{40, 12}));
              EXPECT_LE(closeness(boxes, as(r, "out", boxes), 1e-5, 1e-4), 1.0);
            }));
}

TEST(RoiOps, PyramidAnchorsAreTorchvisions) {
  EXPECT_EQ(1, for_each_case("anchors", [](const json& c, const json& r) {
              const auto image = c.at("image_size").get<std::vector<int64_t>>();
              const auto ratios = c.at("aspect_ratios").get<std::vector<double>>();
              const auto sizes = c.at("sizes").get<std::vector<double>>();
              const auto grids = c.at("grids").get<std::vector<std::vector<int64_t>>>();
              std::vector<torch::Tensor> levels;
              for (size_t l = 0; l < sizes.size(); ++l) {
                levels.push_back(grid_anchors(cell_anchors({sizes[l]}, ratios), grids[l][0],
                                              grids[l][1], image[0], image[1]));
              }
              const torch::Tensor anchors = torch::cat(levels);
              EXPECT_EQ(anchors.size(0), 3 * (25 * 33 + 13 * 17 + 7 * 9 + 4 * 5 + 2 * 3));
              EXPECT_LE(closeness(anchors, as(r, "out", anchors), 0, 0), 1.0);
            }));
  // The first cell of the 32-pixel level: ratios 0.5, 1, 2 (height / width).
  EXPECT_TRUE(torch::equal(
      cell_anchors({32}, {0.5, 1.0, 2.0}),
      torch::tensor(
          {{-23.f, -11.f, 23.f, 11.f}, {-16.f, -16.f, 16.f, 16.f}, {-11.f, -23.f, 11.f, 23.f}})));
}

TEST(RoiOps, MatchingIsTorchvisionsMatcher) {
  EXPECT_EQ(2, for_each_case("match", [](const json& c, const json& r) {
              const MatchOptions o{c.at("high").get<double>(), c.at("low").get<double>(),
                                   c.at("allow_low_quality").get<bool>()};
              const std::vector<int64_t> matches = indices(match_boxes(get(c, "quality"), o));
              EXPECT_EQ(matches, r.at("matches").get<std::vector<int64_t>>());
              // Both outcomes occur in each case: matched boxes and background.
              EXPECT_GT(
                  std::count_if(matches.begin(), matches.end(), [](int64_t m) { return m >= 0; }),
                  0);
              EXPECT_GT(std::count(matches.begin(), matches.end(), kBelowLowThreshold), 0);
            }));
}

TEST(RoiOps, BalancedSamplingKeepsItsShares) {
  torch::manual_seed(7);
  // 10 positives, 300 negatives, 20 ignored: 256 with a quarter positive
  // takes all 10 positives and 246 negatives.
  torch::Tensor labels = torch::zeros({330}, torch::kLong);
  labels.slice(0, 0, 10).fill_(1);
  labels.slice(0, 310, 330).fill_(-1);
  const auto [pos, neg] = sample_balanced(labels, 256, 0.25);
  EXPECT_EQ(pos.numel(), 10);
  EXPECT_EQ(neg.numel(), 246);
  EXPECT_TRUE(labels.index_select(0, pos).ge(1).all().item<bool>());
  EXPECT_TRUE(labels.index_select(0, neg).eq(0).all().item<bool>());
  EXPECT_EQ(std::get<0>(torch::_unique(neg)).numel(), 246) << "drawn without replacement";
  // Many positives: exactly a quarter of the batch; few negatives: all of them.
  labels.slice(0, 0, 200).fill_(2);
  const auto [pos2, neg2] = sample_balanced(labels, 512, 0.25);
  EXPECT_EQ(pos2.numel(), 128);
  EXPECT_EQ(neg2.numel(), 110);
}

/// A module's weights: its parameters (what trains) and its frozen weights.
int64_t all_weights(const torch::nn::Module& m) {
  int64_t n = frozen_weight_count(m);
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

TEST(MaskRcnnNet, ParametersAreTorchvisions) {
  EXPECT_EQ(2, for_each_case("counts", [](const json& c, const json& r) {
              const int64_t classes = c.at("classes").get<int64_t>();
              const MaskRcnnNet net(classes);
              int64_t trainable = 0;
              for (const auto& p : net->parameters()) trainable += p.numel();
              EXPECT_EQ(trainable, r.at("trainable").get<int64_t>());
              EXPECT_EQ(frozen_weight_count(*net), r.at("frozen").get<int64_t>());
              EXPECT_EQ(all_weights(*net->backbone), r.at("backbone").get<int64_t>());
              EXPECT_EQ(all_weights(*net->rpn), r.at("rpn").get<int64_t>());
              EXPECT_EQ(all_weights(*net->box), r.at("box").get<int64_t>());
              EXPECT_EQ(all_weights(*net->mask), r.at("mask").get<int64_t>());
              // maskrcnn_resnet50_fpn(num_classes) trains its batch norm: the same weights.
              EXPECT_EQ(all_weights(*net), r.at("default_total").get<int64_t>());
              if (classes == 81) {
                EXPECT_EQ(all_weights(*net), 44400693);
                EXPECT_EQ(trainable, 44125173);
              }
            }));
}

TEST(MaskRcnnNet, PyramidAndHeadsHaveTheirShapesAndOnlyParametersLearn) {
  torch::manual_seed(3);
  MaskRcnnNet net(5);
  const std::vector<torch::Tensor> maps = net->backbone->forward(torch::randn({1, 3, 64, 96}));
  ASSERT_EQ(maps.size(), 5u);
  const int64_t sides[5][2] = {{16, 24}, {8, 12}, {4, 6}, {2, 3}, {1, 2}};  // strides 4 to 64
  for (size_t l = 0; l < maps.size(); ++l) {
    EXPECT_EQ(maps[l].sizes(), (std::vector<int64_t>{1, kFpnChannels, sides[l][0], sides[l][1]}))
        << "P" << l + 2;
  }
  const auto [objectness, codes] = net->rpn->forward(maps);
  EXPECT_EQ(objectness[0].sizes(), (std::vector<int64_t>{1, 3, 16, 24}));
  EXPECT_EQ(codes[4].sizes(), (std::vector<int64_t>{1, 12, 1, 2}));
  const std::vector<torch::Tensor> pooled_from(maps.begin(), maps.begin() + 4);
  const std::vector<double> scales = {0.25, 0.125, 0.0625, 0.03125};
  const torch::Tensor rois =
      torch::tensor({{0.f, 4.f, 4.f, 40.f, 30.f}, {0.f, 10.f, 2.f, 90.f, 60.f}});
  const auto [scores, box_codes] = net->box->forward(
      multiscale_roi_align(pooled_from, scales, rois, RoiAlignOptions{7, 7, 1.0, 2, false}));
  EXPECT_EQ(scores.sizes(), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(box_codes.sizes(), (std::vector<int64_t>{2, 20}));
  const torch::Tensor masks = net->mask->forward(
      multiscale_roi_align(pooled_from, scales, rois, RoiAlignOptions{14, 14, 1.0, 2, false}));
  EXPECT_EQ(masks.sizes(), (std::vector<int64_t>{2, 5, 28, 28}));
  torch::Tensor loss = scores.sum() + box_codes.sum() + masks.sum();
  for (size_t l = 0; l < objectness.size(); ++l) loss = loss + objectness[l].sum() + codes[l].sum();
  loss.backward();
  for (const auto& p : net->named_parameters()) EXPECT_TRUE(p.value().grad().defined()) << p.key();
  for (const auto& b : net->named_buffers()) EXPECT_FALSE(b.value().requires_grad()) << b.key();
}

TEST(RcnnLosses, ProposalsAreTorchvisionsRpnFilter) {
  EXPECT_EQ(1, for_each_case("proposals", [](const json& c, const json& r) {
              ProposalOptions o;
              o.pre_nms_top_n = c.at("pre_nms_top_n").get<int64_t>();
              o.post_nms_top_n = c.at("post_nms_top_n").get<int64_t>();
              const std::vector<torch::Tensor> out =
                  filter_proposals(get(c, "boxes"), get(c, "objectness"),
                                   c.at("per_level").get<std::vector<int64_t>>(), 100, 132, o);
              ASSERT_EQ(out.size(), 2u);
              for (size_t i = 0; i < out.size(); ++i) {
                SCOPED_TRACE("image " + std::to_string(i));
                const json& theirs = r.at("out" + std::to_string(i));
                ASSERT_EQ(static_cast<int64_t>(theirs.size()), out[i].numel());
                EXPECT_GT(out[i].size(0), 10) << "kept some";
                EXPECT_LT(out[i].size(0), 60) << "NMS dropped some of the 62";
                EXPECT_LE(closeness(out[i], as(r, "out" + std::to_string(i), out[i]), 1e-6, 1e-5),
                          1.0);
              }
            }));
}

TEST(RcnnLosses, BoxAndMaskLossesAreTorchvisions) {
  EXPECT_EQ(1, for_each_case("fastrcnn_loss", [](const json& c, const json& r) {
              RoiSample s;
              s.labels = torch::tensor(c.at("labels").get<std::vector<int64_t>>(), torch::kLong);
              s.positives = 6;
              s.targets = get(c, "targets").slice(0, 0, s.positives);  // the positives' codes
              const LossPair loss = box_head_loss(get(c, "logits"), get(c, "codes"), s);
              EXPECT_NEAR(loss.classification.item<double>(), r.at("classification").get<double>(),
                          1e-5);
              EXPECT_NEAR(loss.box.item<double>(), r.at("box").get<double>(), 1e-5);
            }));
  EXPECT_EQ(1, for_each_case("maskrcnn_loss", [](const json& c, const json& r) {
              const torch::Tensor objects =
                  torch::tensor(c.at("objects").get<std::vector<int64_t>>(), torch::kLong);
              const torch::Tensor classes =
                  torch::tensor(c.at("gt_labels").get<std::vector<int64_t>>(), torch::kLong);
              const torch::Tensor targets =
                  mask_targets(get(c, "masks"), get(c, "proposals"), objects, 28);
              EXPECT_EQ(targets.sizes(), (std::vector<int64_t>{5, 28, 28}));
              const torch::Tensor loss =
                  mask_loss(get(c, "logits"), classes.index_select(0, objects), targets);
              EXPECT_NEAR(loss.item<double>(), r.at("loss").get<double>(), 1e-5);
            }));
}

TEST(RoiOps, RefuseWhatDoesNotFitInOneLine) {
  const auto message = testing::error_of;  // the one-line error, "" when accepted
  const torch::Tensor features = torch::zeros({2, 3, 8, 8});
  const torch::Tensor roi = torch::tensor({{0.0f, 1.0f, 1.0f, 4.0f, 4.0f}});
  EXPECT_EQ(message([&] {
              roi_align(features.view({6, 8, 8}), roi, {});
            }),
            "roi_align: features must be [N, C, H, W] float or double; got [6x8x8] Float");
  EXPECT_EQ(
      message([&] { roi_align(features, roi.slice(1, 1, 5), {}); }),
      "roi_align: regions must be [R, 5] (batch index, x1, y1, x2, y2) of the features' dtype "
      "Float; got [1x4] Float");
  EXPECT_EQ(
      message([&] { roi_align(features, roi.to(torch::kFloat64), {}); }),
      "roi_align: regions must be [R, 5] (batch index, x1, y1, x2, y2) of the features' dtype "
      "Float; got [1x5] Double");
  EXPECT_EQ(message([&] {
              roi_align(features, torch::tensor({{2.0f, 1.0f, 1.0f, 4.0f, 4.0f}}), {});
            }),
            "roi_align: a region's batch index (2) is outside the 2 feature maps");
  EXPECT_EQ(message([&] {
              roi_align(features, roi, RoiAlignOptions{0, 7, 1.0, 2, false});
            }),
            "roi_align: pooled size must be at least 1x1; got 0x7");
  EXPECT_EQ(message([&] {
              roi_align(features, torch::tensor({{0.0f, NAN, 1.0f, 4.0f, 4.0f}}), {});
            }),
            "roi_align: a region holds a value that is not finite");
  EXPECT_EQ(message([&] {
              nms(torch::zeros({3, 4}), torch::zeros({2}), 0.5);
            }),
            "nms: scores must be [3], one per box; got [2] Float");
  EXPECT_EQ(message([&] {
              batched_nms(torch::zeros({3, 4}), torch::zeros({3}), torch::zeros({3}), 0.5);
            }),
            "batched_nms: categories must be [3] integers, one per box; got [3] Float");
  EXPECT_EQ(message([&] {
              BoxCoder{}.decode(torch::zeros({3, 6}), torch::zeros({3, 4}));
            }),
            "box decoding: codes must be [3, 4 M], 4 per box of each reference; got [3x6] Float");
  EXPECT_EQ(message([&] {
              match_boxes(torch::zeros({0, 5}), {});
            }),
            "matching boxes needs at least one ground-truth box (an IoU row); got 0 rows");
  EXPECT_EQ(message([&] { grid_anchors(cell_anchors({32}, {1.0}), 8, 8, 4, 4); }),
            "a 8x8 grid of anchors does not fit an image of 4x4 pixels");
  // No boxes: nothing kept, no error.
  EXPECT_EQ(nms(torch::zeros({0, 4}), torch::zeros({0}), 0.5).numel(), 0);
  EXPECT_EQ(
      batched_nms(torch::zeros({0, 4}), torch::zeros({0}), torch::zeros({0}, torch::kLong), 0.5)
          .numel(),
      0);
}

}  // namespace
}  // namespace dlscale::models
