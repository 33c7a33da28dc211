#include "core/batch_model.h"

#include <cmath>
#include <set>

#include "core/error.h"

namespace dlscale {

BatchModel model_from_run(double epochs0, double batch0, double b_noise, double samples_per_epoch) {
  const auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  DLSCALE_CHECK(positive(epochs0), "epochs to target must be finite and > 0, not {}", epochs0);
  DLSCALE_CHECK(positive(batch0), "the global batch must be finite and > 0, not {}", batch0);
  DLSCALE_CHECK(positive(b_noise), "the gradient noise scale must be finite and > 0, not {}",
                b_noise);
  DLSCALE_CHECK(positive(samples_per_epoch), "samples per epoch must be finite and > 0, not {}",
                samples_per_epoch);
  BatchModel m;
  m.b_noise = b_noise;
  m.samples_per_epoch = samples_per_epoch;
  const double e_min = epochs0 / (1 + batch0 / b_noise);
  m.s_min = e_min * samples_per_epoch / b_noise;
  return m;
}

BatchFit fit_steps(const std::vector<StepsPoint>& points, double samples_per_epoch) {
  BatchFit fit;
  std::set<double> batches;
  for (const StepsPoint& p : points) {
    DLSCALE_CHECK(std::isfinite(p.batch) && p.batch > 0 && std::isfinite(p.steps) && p.steps > 0,
                  "a point of the steps-to-target curve is not positive: batch {}, steps {}",
                  p.batch, p.steps);
    batches.insert(p.batch);
  }
  if (batches.size() < 2) {
    fit.why = "fewer than two global batches reached the target";
    return fit;
  }
  // Weighted least squares of S = a + c·x, x = 1/B, weights 1/S².
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const StepsPoint& p : points) {
    const double w = 1 / (p.steps * p.steps), x = 1 / p.batch;
    sw += w;
    sx += w * x;
    sy += w * p.steps;
    sxx += w * x * x;
    sxy += w * x * p.steps;
  }
  const double det = sw * sxx - sx * sx;
  const double a = (sxx * sy - sx * sxy) / det;
  const double c = (sw * sxy - sx * sy) / det;
  if (!(a > 0)) {
    fit.why =
        "steps fall as 1/B or faster (fitted S_min not positive): no bend yet, B_crit lies past "
        "the batches measured";
    return fit;
  }
  if (!(c > 0)) {
    fit.why = "steps do not fall as the batch grows (fitted B_noise not positive)";
    return fit;
  }
  fit.ok = true;
  fit.model = BatchModel{a, c / a, samples_per_epoch};
  double sq = 0;
  for (const StepsPoint& p : points) {
    const double r = fit.model.steps(p.batch) / p.steps - 1;
    sq += r * r;
  }
  fit.rms_relative_error = std::sqrt(sq / static_cast<double>(points.size()));
  return fit;
}

}  // namespace dlscale
