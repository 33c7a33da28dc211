// RoIAlign, non-maximum suppression and box coding (roi_ops.h). RoIAlign's
// forward and backward are explicit loops behind a custom autograd function:
// each bin's samples read 4 neighbours, and the backward adds each sample's
// share of the bin's gradient back to the same 4, region after region in
// the forward's order, so that the sums are torchvision's.
#include "libtorch/models/roi_ops.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "libtorch/models/task.h"

namespace dlscale::models {
namespace {

using torch::indexing::None;
using torch::indexing::Slice;

/// One bilinear sample of a map: its 4 neighbours' offsets in the map
/// (top-left, top-right, bottom-left, bottom-right) and their weights; none
/// (`valid` false) for a point beyond the map by more than a pixel.
template <typename T>
struct Bilinear {
  int64_t index[4] = {0, 0, 0, 0};
  T weight[4] = {0, 0, 0, 0};
  bool valid = false;
};

template <typename T>
Bilinear<T> bilinear_sample(T y, T x, int64_t height, int64_t width) {
  Bilinear<T> s;
  if (y < -1 || y > height || x < -1 || x > width) return s;
  y = std::max<T>(y, 0);
  x = std::max<T>(x, 0);
  int64_t y0 = static_cast<int64_t>(y);
  int64_t x0 = static_cast<int64_t>(x);
  int64_t y1 = y0 + 1;
  int64_t x1 = x0 + 1;
  if (y0 >= height - 1) {  // on the last row: no row below to blend with
    y0 = y1 = height - 1;
    y = static_cast<T>(y0);
  }
  if (x0 >= width - 1) {
    x0 = x1 = width - 1;
    x = static_cast<T>(x0);
  }
  const T ly = y - static_cast<T>(y0);
  const T lx = x - static_cast<T>(x0);
  const T hy = 1 - ly;
  const T hx = 1 - lx;
  s.index[0] = y0 * width + x0;
  s.index[1] = y0 * width + x1;
  s.index[2] = y1 * width + x0;
  s.index[3] = y1 * width + x1;
  s.weight[0] = hy * hx;
  s.weight[1] = hy * lx;
  s.weight[2] = ly * hx;
  s.weight[3] = ly * lx;
  s.valid = true;
  return s;
}

/// A region's samples, bin by bin (row-major), each bin's grid row-major,
/// and what a bin's mean divides by.
template <typename T>
struct RegionGrid {
  int64_t batch = 0;
  int64_t per_bin = 0;
  T count = 1;
  std::vector<Bilinear<T>> samples;
};

template <typename T>
RegionGrid<T> region_samples(const T* roi, const RoiAlignOptions& o, int64_t height,
                             int64_t width) {
  const T offset = o.aligned ? T(0.5) : T(0);
  const T x1 = static_cast<T>(roi[1] * o.spatial_scale - offset);
  const T y1 = static_cast<T>(roi[2] * o.spatial_scale - offset);
  const T x2 = static_cast<T>(roi[3] * o.spatial_scale - offset);
  const T y2 = static_cast<T>(roi[4] * o.spatial_scale - offset);
  T region_w = x2 - x1;
  T region_h = y2 - y1;
  if (!o.aligned) {  // the reference's regions are at least a pixel
    region_w = std::max<T>(region_w, 1);
    region_h = std::max<T>(region_h, 1);
  }
  const T bin_h = region_h / static_cast<T>(o.pooled_height);
  const T bin_w = region_w / static_cast<T>(o.pooled_width);
  // Adaptive grids: ceil(side / bins) samples a bin side, none for an
  // inverted region (aligned regions may be), whose bins are then 0.
  const auto samples_per_side = [&](T side, int64_t bins) {
    if (o.sampling_ratio > 0) return o.sampling_ratio;
    return std::max<int64_t>(0, static_cast<int64_t>(std::ceil(side / static_cast<T>(bins))));
  };
  const int64_t grid_h = samples_per_side(region_h, o.pooled_height);
  const int64_t grid_w = samples_per_side(region_w, o.pooled_width);
  RegionGrid<T> r;
  r.batch = static_cast<int64_t>(roi[0]);
  r.per_bin = grid_h * grid_w;
  r.count = static_cast<T>(std::max<int64_t>(r.per_bin, 1));
  r.samples.reserve(static_cast<size_t>(o.pooled_height * o.pooled_width * r.per_bin));
  for (int64_t ph = 0; ph < o.pooled_height; ++ph) {
    for (int64_t pw = 0; pw < o.pooled_width; ++pw) {
      for (int64_t iy = 0; iy < grid_h; ++iy) {
        const T y = y1 + static_cast<T>(ph) * bin_h +
                    static_cast<T>(iy + .5f) * bin_h / static_cast<T>(grid_h);
        for (int64_t ix = 0; ix < grid_w; ++ix) {
          const T x = x1 + static_cast<T>(pw) * bin_w +
                      static_cast<T>(ix + .5f) * bin_w / static_cast<T>(grid_w);
          r.samples.push_back(bilinear_sample(y, x, height, width));
        }
      }
    }
  }
  return r;
}

template <typename T>
void pool_regions(const torch::Tensor& features, const torch::Tensor& rois,
                  const RoiAlignOptions& o, torch::Tensor& out) {
  const int64_t channels = features.size(1), height = features.size(2), width = features.size(3);
  const int64_t bins = o.pooled_height * o.pooled_width;
  const T* in = features.data_ptr<T>();
  const T* regions = rois.data_ptr<T>();
  T* pooled = out.data_ptr<T>();
  at::parallel_for(0, rois.size(0), 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const RegionGrid<T> region = region_samples(regions + r * 5, o, height, width);
      for (int64_t c = 0; c < channels; ++c) {
        const T* map = in + (region.batch * channels + c) * height * width;
        T* bin_out = pooled + (r * channels + c) * bins;
        for (int64_t b = 0; b < bins; ++b) {
          T sum = 0;
          for (int64_t k = 0; k < region.per_bin; ++k) {
            const Bilinear<T>& s = region.samples[static_cast<size_t>(b * region.per_bin + k)];
            if (!s.valid) continue;
            sum += s.weight[0] * map[s.index[0]] + s.weight[1] * map[s.index[1]] +
                   s.weight[2] * map[s.index[2]] + s.weight[3] * map[s.index[3]];
          }
          bin_out[b] = sum / region.count;
        }
      }
    }
  });
}

/// The gradient of pool_regions: channels in parallel (each writes its own
/// maps), regions in order within a channel.
template <typename T>
void unpool_gradient(const torch::Tensor& grad_out, const torch::Tensor& rois,
                     const RoiAlignOptions& o, torch::Tensor& grad_in) {
  const int64_t channels = grad_in.size(1), height = grad_in.size(2), width = grad_in.size(3);
  const int64_t bins = o.pooled_height * o.pooled_width;
  std::vector<RegionGrid<T>> regions;
  regions.reserve(static_cast<size_t>(rois.size(0)));
  for (int64_t r = 0; r < rois.size(0); ++r) {
    regions.push_back(region_samples(rois.data_ptr<T>() + r * 5, o, height, width));
  }
  const T* grad = grad_out.data_ptr<T>();
  T* into = grad_in.data_ptr<T>();
  at::parallel_for(0, channels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      for (size_t r = 0; r < regions.size(); ++r) {
        const RegionGrid<T>& region = regions[r];
        T* map = into + (region.batch * channels + c) * height * width;
        const T* bin_grad = grad + (static_cast<int64_t>(r) * channels + c) * bins;
        for (int64_t b = 0; b < bins; ++b) {
          for (int64_t k = 0; k < region.per_bin; ++k) {
            const Bilinear<T>& s = region.samples[static_cast<size_t>(b * region.per_bin + k)];
            if (!s.valid) continue;
            for (int q = 0; q < 4; ++q) map[s.index[q]] += bin_grad[b] * s.weight[q] / region.count;
          }
        }
      }
    }
  });
}

class RoiAlignFunction : public torch::autograd::Function<RoiAlignFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& features,
                               const torch::Tensor& rois, int64_t pooled_height,
                               int64_t pooled_width, double spatial_scale, int64_t sampling_ratio,
                               bool aligned) {
    const RoiAlignOptions o{pooled_height, pooled_width, spatial_scale, sampling_ratio, aligned};
    ctx->save_for_backward({rois});
    ctx->saved_data["pooled_height"] = pooled_height;
    ctx->saved_data["pooled_width"] = pooled_width;
    ctx->saved_data["spatial_scale"] = spatial_scale;
    ctx->saved_data["sampling_ratio"] = sampling_ratio;
    ctx->saved_data["aligned"] = aligned;
    ctx->saved_data["sizes"] = features.sizes().vec();
    const torch::Tensor in = features.contiguous();
    torch::Tensor out =
        torch::zeros({rois.size(0), in.size(1), pooled_height, pooled_width}, in.options());
    AT_DISPATCH_FLOATING_TYPES(in.scalar_type(), "roi_align",
                               [&] { pool_regions<scalar_t>(in, rois, o, out); });
    return out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const torch::Tensor rois = ctx->get_saved_variables()[0];
    RoiAlignOptions o;
    o.pooled_height = ctx->saved_data["pooled_height"].toInt();
    o.pooled_width = ctx->saved_data["pooled_width"].toInt();
    o.spatial_scale = ctx->saved_data["spatial_scale"].toDouble();
    o.sampling_ratio = ctx->saved_data["sampling_ratio"].toInt();
    o.aligned = ctx->saved_data["aligned"].toBool();
    const torch::Tensor grad_out = grads[0].contiguous();
    torch::Tensor grad_in =
        torch::zeros(ctx->saved_data["sizes"].toIntVector(), grad_out.options());
    AT_DISPATCH_FLOATING_TYPES(grad_out.scalar_type(), "roi_align_backward",
                               [&] { unpool_gradient<scalar_t>(grad_out, rois, o, grad_in); });
    return {grad_in,         torch::Tensor(), torch::Tensor(), torch::Tensor(),
            torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

bool float_or_double(const torch::Tensor& t) {
  return t.scalar_type() == torch::kFloat32 || t.scalar_type() == torch::kFloat64;
}

std::string sizes_of(const torch::Tensor& t) {
  return "[" + shape_text(t.sizes()) + "] " + std::string(c10::toString(t.scalar_type()));
}

void check_boxes(const char* op, const char* what, const torch::Tensor& boxes) {
  DLSCALE_CHECK(boxes.dim() == 2 && boxes.size(1) == 4 && float_or_double(boxes),
                "{}: {} must be [K, 4] float or double (x1, y1, x2, y2); got {}", op, what,
                sizes_of(boxes));
}

void check_scores(const char* op, const torch::Tensor& boxes, const torch::Tensor& scores) {
  check_boxes(op, "boxes", boxes);
  DLSCALE_CHECK(scores.dim() == 1 && scores.size(0) == boxes.size(0),
                "{}: scores must be [{}], one per box; got {}", op, boxes.size(0),
                sizes_of(scores));
}

void check_roi_align(const torch::Tensor& features, const torch::Tensor& rois,
                     const RoiAlignOptions& o) {
  DLSCALE_CHECK(features.dim() == 4 && float_or_double(features),
                "roi_align: features must be [N, C, H, W] float or double; got {}",
                sizes_of(features));
  DLSCALE_CHECK(features.device().is_cpu(), "roi_align: runs on the CPU only; features are on {}",
                features.device().str());
  DLSCALE_CHECK(
      rois.dim() == 2 && rois.size(1) == 5 && rois.scalar_type() == features.scalar_type(),
      "roi_align: regions must be [R, 5] (batch index, x1, y1, x2, y2) of the features' "
      "dtype {}; got {}",
      c10::toString(features.scalar_type()), sizes_of(rois));
  DLSCALE_CHECK(o.pooled_height >= 1 && o.pooled_width >= 1,
                "roi_align: pooled size must be at least 1x1; got {}x{}", o.pooled_height,
                o.pooled_width);
  DLSCALE_CHECK(std::isfinite(o.spatial_scale) && o.spatial_scale > 0,
                "roi_align: spatial scale must be positive; got {}", o.spatial_scale);
  if (rois.size(0) == 0) return;
  const torch::Tensor batch = rois.select(1, 0);
  const double low = batch.min().item<double>(), high = batch.max().item<double>();
  DLSCALE_CHECK(low >= 0 && high < static_cast<double>(features.size(0)),
                "roi_align: a region's batch index ({}) is outside the {} feature maps",
                low < 0 ? low : high, features.size(0));
  DLSCALE_CHECK(torch::isfinite(rois).all().item<bool>(),
                "roi_align: a region holds a value that is not finite");
}

template <typename T>
std::vector<int64_t> greedy_nms(const T* b, const int64_t* order, int64_t n, double iou_threshold) {
  std::vector<T> area(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    area[i] = (b[4 * i + 2] - b[4 * i]) * (b[4 * i + 3] - b[4 * i + 1]);
  std::vector<char> dropped(static_cast<size_t>(n), 0);
  std::vector<int64_t> kept;
  for (int64_t a = 0; a < n; ++a) {
    const int64_t i = order[a];
    if (dropped[i]) continue;
    kept.push_back(i);
    for (int64_t z = a + 1; z < n; ++z) {
      const int64_t j = order[z];
      if (dropped[j]) continue;
      const T w =
          std::max<T>(0, std::min(b[4 * i + 2], b[4 * j + 2]) - std::max(b[4 * i], b[4 * j]));
      const T h = std::max<T>(
          0, std::min(b[4 * i + 3], b[4 * j + 3]) - std::max(b[4 * i + 1], b[4 * j + 1]));
      const T inter = w * h;
      const T iou = inter / (area[i] + area[j] - inter);  // NaN for two empty boxes: kept
      if (iou > iou_threshold) dropped[j] = 1;
    }
  }
  return kept;
}

torch::Tensor indices_tensor(const std::vector<int64_t>& v) {
  return torch::tensor(v, torch::kLong).reshape({static_cast<int64_t>(v.size())});
}

}  // namespace

torch::Tensor roi_align(const torch::Tensor& features, const torch::Tensor& rois,
                        const RoiAlignOptions& o) {
  check_roi_align(features, rois, o);
  return RoiAlignFunction::apply(features, rois.detach().contiguous(), o.pooled_height,
                                 o.pooled_width, o.spatial_scale, o.sampling_ratio, o.aligned);
}

torch::Tensor fpn_levels(const torch::Tensor& boxes, int64_t finest, int64_t coarsest) {
  check_boxes("fpn_levels", "boxes", boxes);
  DLSCALE_ASSERT(finest <= coarsest);
  const torch::Tensor side = torch::sqrt((boxes.select(1, 2) - boxes.select(1, 0)) *
                                         (boxes.select(1, 3) - boxes.select(1, 1)));
  const torch::Tensor level =
      torch::floor(torch::log2(side / 224) + 4 + torch::scalar_tensor(1e-6, side.options()));
  return level.clamp(static_cast<double>(finest), static_cast<double>(coarsest)).to(torch::kLong) -
         finest;
}

torch::Tensor multiscale_roi_align(const std::vector<torch::Tensor>& maps,
                                   const std::vector<double>& scales, const torch::Tensor& rois,
                                   const RoiAlignOptions& options) {
  DLSCALE_CHECK(!maps.empty() && maps.size() == scales.size(),
                "multiscale_roi_align: {} maps for {} scales", maps.size(), scales.size());
  RoiAlignOptions o = options;
  o.spatial_scale = scales[0];
  if (maps.size() == 1) return roi_align(maps[0], rois, o);
  const auto level_of = [](double scale) {
    return static_cast<int64_t>(std::lround(-std::log2(scale)));
  };
  const int64_t finest = level_of(scales.front());
  for (size_t l = 0; l < scales.size(); ++l) {
    DLSCALE_CHECK(scales[l] > 0 && level_of(scales[l]) == finest + static_cast<int64_t>(l),
                  "multiscale_roi_align: map {}'s scale {} is not half the one before", l,
                  scales[l]);
  }
  check_roi_align(maps[0], rois, o);
  const torch::Tensor levels = fpn_levels(rois.slice(1, 1, 5), finest, level_of(scales.back()));
  torch::Tensor result = torch::zeros(
      {rois.size(0), maps[0].size(1), o.pooled_height, o.pooled_width}, maps[0].options());
  for (size_t l = 0; l < maps.size(); ++l) {
    const torch::Tensor members = torch::nonzero(levels == static_cast<int64_t>(l)).squeeze(1);
    o.spatial_scale = scales[l];
    result.index_put_({members}, roi_align(maps[l], rois.index_select(0, members), o));
  }
  return result;
}

torch::Tensor nms(const torch::Tensor& boxes, const torch::Tensor& scores, double iou_threshold) {
  check_scores("nms", boxes, scores);
  if (boxes.size(0) == 0) return torch::empty({0}, torch::kLong);
  const torch::Tensor b = boxes.detach().cpu().contiguous();
  const torch::Tensor order = std::get<1>(torch::sort(scores.detach().cpu(), /*stable=*/true,
                                                      /*dim=*/0, /*descending=*/true))
                                  .contiguous();
  std::vector<int64_t> kept;
  AT_DISPATCH_FLOATING_TYPES(b.scalar_type(), "nms", [&] {
    kept = greedy_nms<scalar_t>(b.data_ptr<scalar_t>(), order.data_ptr<int64_t>(), b.size(0),
                                iou_threshold);
  });
  return indices_tensor(kept).to(boxes.device());
}

torch::Tensor batched_nms(const torch::Tensor& boxes, const torch::Tensor& scores,
                          const torch::Tensor& categories, double iou_threshold) {
  check_scores("batched_nms", boxes, scores);
  DLSCALE_CHECK(categories.dim() == 1 && categories.size(0) == boxes.size(0) &&
                    !categories.is_floating_point(),
                "batched_nms: categories must be [{}] integers, one per box; got {}", boxes.size(0),
                sizes_of(categories));
  if (boxes.size(0) == 0) return torch::empty({0}, torch::kLong);
  const torch::Tensor cats = categories.detach().cpu().to(torch::kLong).contiguous();
  std::vector<int64_t> names(cats.data_ptr<int64_t>(), cats.data_ptr<int64_t>() + cats.size(0));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  torch::Tensor keep = torch::zeros({boxes.size(0)}, torch::kBool);
  for (const int64_t name : names) {
    const torch::Tensor members = torch::nonzero(cats == name).squeeze(1);
    const torch::Tensor kept =
        nms(boxes.index_select(0, members.to(boxes.device())),
            scores.index_select(0, members.to(scores.device())), iou_threshold);
    keep.index_fill_(0, members.index_select(0, kept.cpu()), true);
  }
  const torch::Tensor kept = torch::nonzero(keep).squeeze(1);
  const torch::Tensor by_score = std::get<1>(torch::sort(
      scores.detach().cpu().index_select(0, kept), /*stable=*/true, 0, /*descending=*/true));
  return kept.index_select(0, by_score).to(boxes.device());
}

torch::Tensor box_iou(const torch::Tensor& a, const torch::Tensor& b) {
  check_boxes("box_iou", "first boxes", a);
  check_boxes("box_iou", "second boxes", b);
  const auto area = [](const torch::Tensor& x) {
    return (x.select(1, 2) - x.select(1, 0)) * (x.select(1, 3) - x.select(1, 1));
  };
  const torch::Tensor top_left =
      torch::max(a.index({Slice(), None, Slice(0, 2)}), b.index({Slice(), Slice(0, 2)}));
  const torch::Tensor bottom_right =
      torch::min(a.index({Slice(), None, Slice(2, 4)}), b.index({Slice(), Slice(2, 4)}));
  const torch::Tensor wh = (bottom_right - top_left).clamp_min(0);
  const torch::Tensor inter = wh.select(2, 0) * wh.select(2, 1);
  return inter / (area(a).unsqueeze(1) + area(b) - inter);
}

torch::Tensor clip_boxes(const torch::Tensor& boxes, int64_t height, int64_t width) {
  check_boxes("clip_boxes", "boxes", boxes);
  const torch::Tensor x =
      boxes.index({Slice(), Slice(0, None, 2)}).clamp(0.0, static_cast<double>(width));
  const torch::Tensor y =
      boxes.index({Slice(), Slice(1, None, 2)}).clamp(0.0, static_cast<double>(height));
  return torch::stack({x, y}, 2).reshape(boxes.sizes());
}

torch::Tensor boxes_at_least(const torch::Tensor& boxes, double min_size) {
  check_boxes("boxes_at_least", "boxes", boxes);
  const torch::Tensor w = boxes.select(1, 2) - boxes.select(1, 0);
  const torch::Tensor h = boxes.select(1, 3) - boxes.select(1, 1);
  return torch::nonzero(w.ge(min_size).logical_and(h.ge(min_size))).squeeze(1);
}

torch::Tensor BoxCoder::encode(const torch::Tensor& boxes, const torch::Tensor& references) const {
  check_boxes("box encoding", "boxes", boxes);
  check_boxes("box encoding", "reference boxes", references);
  DLSCALE_CHECK(boxes.size(0) == references.size(0),
                "box encoding: {} boxes for {} reference boxes", boxes.size(0), references.size(0));
  const auto column = [](const torch::Tensor& t, int64_t i) {
    return t.index({Slice(), Slice(i, i + 1)});
  };
  const torch::Tensor ref_w = column(references, 2) - column(references, 0);
  const torch::Tensor ref_h = column(references, 3) - column(references, 1);
  const torch::Tensor ref_x = column(references, 0) + 0.5 * ref_w;
  const torch::Tensor ref_y = column(references, 1) + 0.5 * ref_h;
  const torch::Tensor w = column(boxes, 2) - column(boxes, 0);
  const torch::Tensor h = column(boxes, 3) - column(boxes, 1);
  const torch::Tensor x = column(boxes, 0) + 0.5 * w;
  const torch::Tensor y = column(boxes, 1) + 0.5 * h;
  return torch::cat({weights[0] * (x - ref_x) / ref_w, weights[1] * (y - ref_y) / ref_h,
                     weights[2] * torch::log(w / ref_w), weights[3] * torch::log(h / ref_h)},
                    1);
}

torch::Tensor BoxCoder::decode(const torch::Tensor& codes, const torch::Tensor& references) const {
  check_boxes("box decoding", "reference boxes", references);
  DLSCALE_CHECK(codes.dim() == 2 && codes.size(0) == references.size(0) && codes.size(1) % 4 == 0 &&
                    codes.size(1) > 0,
                "box decoding: codes must be [{}, 4 M], 4 per box of each reference; got {}",
                references.size(0), sizes_of(codes));
  const torch::Tensor ref = references.to(codes.scalar_type());
  const torch::Tensor w = (ref.select(1, 2) - ref.select(1, 0)).unsqueeze(1);
  const torch::Tensor h = (ref.select(1, 3) - ref.select(1, 1)).unsqueeze(1);
  const torch::Tensor x = ref.select(1, 0).unsqueeze(1) + 0.5 * w;
  const torch::Tensor y = ref.select(1, 1).unsqueeze(1) + 0.5 * h;
  const auto part = [&](int64_t i) {
    return codes.index({Slice(), Slice(i, None, 4)}) / weights[i];
  };
  const torch::Tensor dw = part(2).clamp_max(clip);
  const torch::Tensor dh = part(3).clamp_max(clip);
  const torch::Tensor centre_x = part(0) * w + x;
  const torch::Tensor centre_y = part(1) * h + y;
  const torch::Tensor half_w = 0.5 * (torch::exp(dw) * w);
  const torch::Tensor half_h = 0.5 * (torch::exp(dh) * h);
  return torch::stack({centre_x - half_w, centre_y - half_h, centre_x + half_w, centre_y + half_h},
                      2)
      .flatten(1);
}

}  // namespace dlscale::models
