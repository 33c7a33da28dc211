#pragma once
// Training to a target accuracy (docs/convergence.md): how long to train,
// when to evaluate, and the large-batch recipe — learning-rate scaling,
// warm-up, schedule, LARS, weight-decay exclusions and label smoothing.
// Parsed at the edge into RecipeOptions, checked by check_recipe(), and
// turned into a pure step → learning-rate function by LrSchedule.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dlscale::train {

enum class LrScaling { kNone, kLinear };
enum class LrScheduleKind { kConstant, kStep, kPoly, kCosine, kOneCycle };
/// Which parameters weight decay (and LARS's trust ratio) skip: none, or
/// every parameter of at most one dimension (biases, batch-norm scales and shifts).
enum class DecayExclusion { kNone, kBiasNorm };

LrScaling parse_lr_scaling(const std::string& name);
std::string to_string(LrScaling scaling);
LrScheduleKind parse_lr_schedule(const std::string& name);
std::string to_string(LrScheduleKind kind);

struct RecipeOptions {
  // How long, and when to evaluate.
  double epochs = 0;            ///< > 0: train this many epochs (instead of --steps)
  double eval_every = 0;        ///< evaluate every this many epochs; 0 = see eval_every_steps
  int64_t eval_every_steps = 0; ///< evaluate every this many steps; 0 = never (unless epochs/target)
  int64_t eval_batch = 256;     ///< evaluation samples per batch per worker
  double target_accuracy = 0;   ///< stop at the first evaluation with top-1 ≥ this (fraction); 0 = none
  // Learning rate.
  std::string lr_scaling = "none";  ///< none | linear (lr × global batch / base_batch)
  int64_t base_batch = 256;         ///< the batch --lr is given for, under linear scaling
  double warmup_epochs = 0;         ///< linear warm-up length
  double warmup_start_factor = 0;   ///< warm-up starts at this fraction of the peak rate
  std::string lr_schedule = "constant";  ///< constant | step | poly | cosine | onecycle
  std::vector<double> lr_milestones;     ///< step: epochs at which the rate is multiplied by gamma
  double lr_gamma = 0.1;                 ///< step
  double lr_power = 2;                   ///< poly
  double lr_end_factor = 0;              ///< poly, cosine: final rate as a fraction of the peak
  double onecycle_pct = 0.3;             ///< onecycle: fraction of the steps spent rising
  // Optimizer extras.
  double lars_eta = 0.001;           ///< LARS trust coefficient
  std::string wd_exclude = "auto";   ///< auto | none | bias-norm (auto: bias-norm for lars)
  double label_smoothing = 0;
  // Logs and checkpoints.
  std::string mllog_path;            ///< MLPerf-style log (rank 0); "" = none
  std::string checkpoint_path;       ///< where checkpoints go; "" = none
  int64_t checkpoint_every = 0;      ///< steps between checkpoints; 0 = see epochs
  double checkpoint_every_epochs = 0;
  std::string resume_path;           ///< continue from this checkpoint; "" = start afresh
};

/// Throws dlscale::Error naming the first bad value. `has_dataset` is false
/// for synthetic data, which has no epochs.
void check_recipe(const RecipeOptions& recipe, bool has_dataset);

/// `epochs` in steps of an epoch of `steps_per_epoch`, rounded to the nearest.
int64_t epochs_to_steps(double epochs, int64_t steps_per_epoch);

/// The recipe's target as a fraction: values above 1 are percentages.
double target_fraction(double target);

/// The learning rate at every step, a pure function of the step (so a
/// resumed run continues on the same curve). Rate(s) = peak × warmup(s) ×
/// decay(s), with peak = --lr × (global batch / --base-batch under linear scaling).
class LrSchedule {
 public:
  LrSchedule() = default;
  /// `steps_per_epoch` converts the recipe's epochs to steps (≥ 1);
  /// `total_steps` is the length of the run.
  LrSchedule(const RecipeOptions& recipe, double base_lr, int64_t global_batch,
             int64_t steps_per_epoch, int64_t total_steps);
  double at(int64_t step) const;
  double peak() const { return peak_; }
  /// Whether the curve depends on the run's length (poly, cosine, onecycle).
  bool depends_on_length() const;
  /// (step, rate) at the first steps from `from` and at steps spread evenly
  /// up to the run's last: what a checkpoint keeps so that a resumed run can
  /// check it continues on the same curve.
  std::vector<std::pair<int64_t, double>> samples_from(int64_t from) const;
  int64_t warmup_steps() const { return warmup_steps_; }

 private:
  double decay(int64_t step) const;

  LrScheduleKind kind_ = LrScheduleKind::kConstant;
  double peak_ = 0.01;
  int64_t warmup_steps_ = 0;
  double warmup_start_ = 0;
  int64_t total_steps_ = 1;
  std::vector<int64_t> milestones_;  ///< in steps, ascending
  double gamma_ = 0.1;
  double power_ = 2;
  double end_factor_ = 0;
  double onecycle_pct_ = 0.3;
};

}  // namespace dlscale::train
