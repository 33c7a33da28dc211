#include "train/recipe.h"

#include <algorithm>
#include <cmath>

#include "core/enum_names.h"
#include "core/error.h"
#include "core/text.h"

namespace dlscale::train {

namespace {

constexpr EnumNames<LrScaling, 4> kScalings{"--lr-scaling",
                                            {{{LrScaling::kNone, "none"},
                                              {LrScaling::kLinear, "linear"},
                                              {LrScaling::kSqrt, "sqrt"},
                                              {LrScaling::kNoise, "noise"}}}};
constexpr EnumNames<LrScheduleKind, 5> kSchedules{"--lr-schedule",
                                                  {{{LrScheduleKind::kConstant, "constant"},
                                                    {LrScheduleKind::kStep, "step"},
                                                    {LrScheduleKind::kPoly, "poly"},
                                                    {LrScheduleKind::kCosine, "cosine"},
                                                    {LrScheduleKind::kOneCycle, "onecycle"}}}};
constexpr EnumNames<DecayExclusion, 3> kExclusions{"--wd-exclude",
                                                   {{{DecayExclusion::kAuto, "auto"},
                                                     {DecayExclusion::kNone, "none"},
                                                     {DecayExclusion::kBiasNorm, "bias-norm"}}}};

constexpr EnumNames<MllogDivision, 2> kDivisions{
    "--mllog-division", {{{MllogDivision::kOpen, "open"}, {MllogDivision::kClosed, "closed"}}}};
constexpr EnumNames<MllogStatus, 4> kStatuses{"--mllog-status",
                                              {{{MllogStatus::kResearch, "research"},
                                                {MllogStatus::kOnprem, "onprem"},
                                                {MllogStatus::kCloud, "cloud"},
                                                {MllogStatus::kPreview, "preview"}}}};

constexpr double kMaxEpochs = 1e6;
constexpr int64_t kMaxSteps = 1000000000;
constexpr int64_t kMaxBatch = 1 << 30;

/// PyTorch's cosine annealing from `start` to `end` at `pct` ∈ [0, 1].
double cosine_anneal(double start, double end, double pct) {
  return end + (start - end) / 2.0 * (1.0 + std::cos(M_PI * pct));
}

void check_schedule(const RecipeOptions& r) {
  const LrScheduleKind kind = r.lr_schedule;
  DLSCALE_CHECK(r.lr_gamma > 0 && r.lr_gamma <= 1, "--lr-gamma must be in (0, 1] (got {})",
                r.lr_gamma);
  DLSCALE_CHECK(r.lr_power > 0 && r.lr_power <= 100, "--lr-power must be in (0, 100] (got {})",
                r.lr_power);
  DLSCALE_CHECK(r.lr_end_factor >= 0 && r.lr_end_factor <= 1,
                "--lr-end-factor must be in [0, 1] (got {})", r.lr_end_factor);
  DLSCALE_CHECK(r.onecycle_pct > 0 && r.onecycle_pct < 1,
                "--onecycle-pct must be in (0, 1) (got {})", r.onecycle_pct);
  DLSCALE_CHECK(kind == LrScheduleKind::kStep || r.lr_milestones.empty(),
                "--lr-milestones is for --lr-schedule step (got --lr-schedule {})", to_string(r.lr_schedule));
  DLSCALE_CHECK(kind != LrScheduleKind::kStep || !r.lr_milestones.empty(),
                "--lr-schedule step needs --lr-milestones (epochs, e.g. 30,60,80)");
  double previous = 0;
  for (double m : r.lr_milestones) {
    DLSCALE_CHECK(std::isfinite(m) && m > previous && m <= kMaxEpochs,
                  "--lr-milestones must be increasing epochs > 0 (got {} after {})", m, previous);
    previous = m;
  }
  DLSCALE_CHECK(kind != LrScheduleKind::kOneCycle || r.warmup_epochs == 0,
                "--warmup-epochs does not combine with --lr-schedule onecycle, which warms up "
                "by itself over --onecycle-pct of the run");
}

}  // namespace

const EnumNames<LrScaling, 4>& enum_names(LrScaling) { return kScalings; }
const EnumNames<LrScheduleKind, 5>& enum_names(LrScheduleKind) { return kSchedules; }
const EnumNames<DecayExclusion, 3>& enum_names(DecayExclusion) { return kExclusions; }
std::string to_string(LrScaling scaling) { return kScalings.name(scaling); }
std::string to_string(LrScheduleKind kind) { return kSchedules.name(kind); }
std::string to_string(DecayExclusion exclusion) { return kExclusions.name(exclusion); }
const EnumNames<MllogDivision, 2>& enum_names(MllogDivision) { return kDivisions; }
const EnumNames<MllogStatus, 4>& enum_names(MllogStatus) { return kStatuses; }
std::string to_string(MllogDivision division) { return kDivisions.name(division); }
std::string to_string(MllogStatus status) { return kStatuses.name(status); }

int64_t epochs_to_steps(double epochs, int64_t steps_per_epoch) {
  return static_cast<int64_t>(std::llround(epochs * static_cast<double>(steps_per_epoch)));
}

double target_fraction(double target) { return target > 1 ? target / 100.0 : target; }

void check_recipe(const RecipeOptions& r) {
  DLSCALE_CHECK(r.epochs >= 0 && r.epochs <= kMaxEpochs, "--epochs must be in [0, {:g}] (got {})",
                kMaxEpochs, r.epochs);
  DLSCALE_CHECK(r.eval_every >= 0 && r.eval_every <= kMaxEpochs,
                "--eval-every must be in [0, {:g}] epochs (got {})", kMaxEpochs, r.eval_every);
  DLSCALE_CHECK(r.eval_every_steps >= 0 && r.eval_every_steps <= kMaxSteps,
                "--eval-every-steps must be in [0, {}] (got {})", kMaxSteps, r.eval_every_steps);
  DLSCALE_CHECK(r.eval_every == 0 || r.eval_every_steps == 0,
                "give --eval-every (epochs) or --eval-every-steps, not both");
  DLSCALE_CHECK(r.eval_batch >= 1 && r.eval_batch <= (1 << 20),
                "--eval-batch must be in [1, {}] (got {})", 1 << 20, r.eval_batch);
  DLSCALE_CHECK(r.target_accuracy >= 0 && r.target_accuracy <= 100,
                "--target-accuracy must be a fraction in (0, 1] or a percentage in (1, 100] "
                "(got {})", r.target_accuracy);
  DLSCALE_CHECK(r.base_batch >= 1 && r.base_batch <= kMaxBatch,
                "--base-batch must be in [1, {}] (got {})", kMaxBatch, r.base_batch);
  if (r.lr_scaling == LrScaling::kNoise) {
    DLSCALE_CHECK(
        std::isfinite(r.lr_noise_scale) && r.lr_noise_scale > 0 && r.lr_noise_scale <= kMaxBatch,
        "--lr-scaling noise needs --lr-noise-scale in (0, {}] samples (got {})", kMaxBatch,
        r.lr_noise_scale);
  } else {
    DLSCALE_CHECK(r.lr_noise_scale == 0,
                  "--lr-noise-scale is for --lr-scaling noise (got --lr-scaling {})",
                  to_string(r.lr_scaling));
  }
  DLSCALE_CHECK(r.warmup_epochs >= 0 && r.warmup_epochs <= kMaxEpochs,
                "--warmup-epochs must be in [0, {:g}] (got {})", kMaxEpochs, r.warmup_epochs);
  DLSCALE_CHECK(r.warmup_start_factor >= 0 && r.warmup_start_factor <= 1,
                "--warmup-start-factor must be in [0, 1] (got {})", r.warmup_start_factor);
  check_schedule(r);
  DLSCALE_CHECK(!r.mllog_org.empty(), "--mllog-org must not be empty (MLPerf's submission_org)");
  // Checked before any work: they go into JSON lines and the results.
  check_text_value(r.mllog_org, "--mllog-org");
  check_text_value(r.mllog_platform, "--mllog-platform");
  DLSCALE_CHECK(r.lars_eta > 0 && r.lars_eta <= 1, "--lars-eta must be in (0, 1] (got {})",
                r.lars_eta);
  DLSCALE_CHECK(r.label_smoothing < 1, "--label-smoothing must be < 1 (got {}; negative = the model's default)",
                r.label_smoothing);
  DLSCALE_CHECK(r.checkpoint_every >= 0 && r.checkpoint_every <= kMaxSteps,
                "--checkpoint-every must be in [0, {}] steps (got {})", kMaxSteps,
                r.checkpoint_every);
  DLSCALE_CHECK(r.checkpoint_every_epochs >= 0 && r.checkpoint_every_epochs <= kMaxEpochs,
                "--checkpoint-every-epochs must be in [0, {:g}] (got {})", kMaxEpochs,
                r.checkpoint_every_epochs);
  DLSCALE_CHECK(r.checkpoint_every == 0 || r.checkpoint_every_epochs == 0,
                "give --checkpoint-every (steps) or --checkpoint-every-epochs, not both");
  const bool checkpoints = r.checkpoint_every > 0 || r.checkpoint_every_epochs > 0;
  DLSCALE_CHECK(!checkpoints || !r.checkpoint_path.empty(),
                "--checkpoint-every needs --checkpoint FILE (where to write them)");
}

LrSchedule::LrSchedule(const RecipeOptions& r, double base_lr, int64_t global_batch,
                       int64_t steps_per_epoch, int64_t total_steps)
    : kind_(r.lr_schedule),
      peak_(base_lr),
      warmup_start_(r.warmup_start_factor),
      total_steps_(std::max<int64_t>(1, total_steps)),
      gamma_(r.lr_gamma),
      power_(r.lr_power),
      end_factor_(r.lr_end_factor),
      onecycle_pct_(r.onecycle_pct) {
  DLSCALE_ASSERT(steps_per_epoch >= 1);
  const double ratio = static_cast<double>(global_batch) / static_cast<double>(r.base_batch);
  if (r.lr_scaling == LrScaling::kLinear) peak_ = base_lr * ratio;
  if (r.lr_scaling == LrScaling::kSqrt) peak_ = base_lr * std::sqrt(ratio);
  if (r.lr_scaling == LrScaling::kNoise) {  // McCandlish et al. 2018, section 2.2
    const double bn = r.lr_noise_scale;
    peak_ = base_lr * (1 + bn / static_cast<double>(r.base_batch)) /
            (1 + bn / static_cast<double>(global_batch));
  }
  warmup_steps_ = epochs_to_steps(r.warmup_epochs, steps_per_epoch);
  for (double m : r.lr_milestones) milestones_.push_back(epochs_to_steps(m, steps_per_epoch));
}

double LrSchedule::decay(int64_t step) const {
  const double span = static_cast<double>(std::max<int64_t>(1, total_steps_ - warmup_steps_));
  const double t = std::clamp(static_cast<double>(step - warmup_steps_) / span, 0.0, 1.0);
  switch (kind_) {
    case LrScheduleKind::kConstant:
      return 1.0;
    case LrScheduleKind::kStep: {
      const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), step) -
                          milestones_.begin();
      return std::pow(gamma_, static_cast<double>(passed));
    }
    case LrScheduleKind::kPoly:
      return end_factor_ + (1.0 - end_factor_) * std::pow(1.0 - t, power_);
    case LrScheduleKind::kCosine:
      return cosine_anneal(1.0, end_factor_, t);
    case LrScheduleKind::kOneCycle: {
      // PyTorch's OneCycleLR (cosine, div_factor 25, final_div_factor 1e4).
      const double initial = 1.0 / 25.0;
      const double minimum = initial / 1e4;
      const double up_end = onecycle_pct_ * static_cast<double>(total_steps_) - 1.0;
      const double down_end = static_cast<double>(total_steps_) - 1.0;
      const auto s = static_cast<double>(step);
      if (s <= up_end) return cosine_anneal(initial, 1.0, up_end > 0 ? s / up_end : 1.0);
      return cosine_anneal(1.0, minimum, std::min(1.0, (s - up_end) / (down_end - up_end)));
    }
  }
  return 1.0;
}

double LrSchedule::at(int64_t step) const {
  double warm = 1.0;
  if (step < warmup_steps_) {
    warm = warmup_start_ + (1.0 - warmup_start_) * static_cast<double>(step + 1) /
                               static_cast<double>(warmup_steps_);
  }
  return peak_ * warm * decay(step);
}

bool LrSchedule::depends_on_length() const {
  return kind_ == LrScheduleKind::kPoly || kind_ == LrScheduleKind::kCosine ||
         kind_ == LrScheduleKind::kOneCycle;
}

std::vector<std::pair<int64_t, double>> LrSchedule::samples_from(int64_t from) const {
  constexpr int64_t kFirst = 8;    // the steps right after the checkpoint
  constexpr int64_t kSpread = 56;  // and these many more up to the last step
  std::vector<std::pair<int64_t, double>> out;
  const int64_t last = total_steps_ - 1;
  for (int64_t s = from; s <= last && s < from + kFirst; ++s) out.emplace_back(s, at(s));
  const int64_t rest = last - (from + kFirst - 1);
  for (int64_t i = 1; rest > 0 && i <= kSpread; ++i) {
    const int64_t s = from + kFirst - 1 + (rest * i + kSpread - 1) / kSpread;
    if (s > out.back().first) out.emplace_back(s, at(s));
  }
  return out;
}

}  // namespace dlscale::train
