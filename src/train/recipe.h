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

#include "core/enum_names.h"
#include "core/option_table.h"

namespace dlscale::train {

enum class LrScaling { kNone, kLinear, kSqrt, kNoise };
enum class LrScheduleKind { kConstant, kStep, kPoly, kCosine, kOneCycle };
/// Which parameters weight decay (and LARS's trust ratio) skip: none, or
/// every parameter of at most one dimension (biases, batch-norm scales and
/// shifts); auto = bias-norm for LARS, none otherwise.
enum class DecayExclusion { kAuto, kNone, kBiasNorm };
/// MLPerf's submission_division and submission_status (docs/mllog.md).
enum class MllogDivision { kOpen, kClosed };
enum class MllogStatus { kResearch, kOnprem, kCloud, kPreview };

const EnumNames<LrScaling, 4>& enum_names(LrScaling);
const EnumNames<LrScheduleKind, 5>& enum_names(LrScheduleKind);
const EnumNames<DecayExclusion, 3>& enum_names(DecayExclusion);
const EnumNames<MllogDivision, 2>& enum_names(MllogDivision);
const EnumNames<MllogStatus, 4>& enum_names(MllogStatus);
std::string to_string(LrScaling scaling);
std::string to_string(LrScheduleKind kind);
std::string to_string(DecayExclusion exclusion);
std::string to_string(MllogDivision division);
std::string to_string(MllogStatus status);

struct RecipeOptions {
  // How long, and when to evaluate.
  double epochs = 0;            ///< > 0: train this many epochs (instead of --steps)
  double eval_every = 0;        ///< evaluate every this many epochs; 0 = see eval_every_steps
  int64_t eval_every_steps = 0; ///< evaluate every this many steps; 0 = never (unless epochs/target)
  int64_t eval_batch = 256;     ///< evaluation samples per batch per worker
  double target_accuracy = 0;   ///< stop at the first evaluation reaching this (fraction, or % above 1); 0 = none
  // Learning rate.
  LrScaling lr_scaling = LrScaling::kNone;  ///< linear: lr × global batch / base_batch
  int64_t base_batch = 256;                 ///< the batch --lr is given for (--lr-scaling)
  double lr_noise_scale = 0;                ///< noise: the gradient noise scale B_noise of the rule
  double warmup_epochs = 0;                 ///< linear warm-up length
  double warmup_start_factor = 0;           ///< warm-up starts at this fraction of the peak rate
  LrScheduleKind lr_schedule = LrScheduleKind::kConstant;
  std::vector<double> lr_milestones;        ///< step: epochs at which the rate is multiplied by gamma
  double lr_gamma = 0.1;                    ///< step
  double lr_power = 2;                      ///< poly
  double lr_end_factor = 0;                 ///< poly, cosine: final rate as a fraction of the peak
  double onecycle_pct = 0.3;                ///< onecycle: fraction of the steps spent rising
  // Optimizer extras.
  double lars_eta = 0.001;                          ///< LARS trust coefficient
  DecayExclusion wd_exclude = DecayExclusion::kAuto;
  double label_smoothing = -1;  ///< < 0: the model's default (0.1 for transformer and gnmt, else 0)
  // Logs and checkpoints.
  std::string mllog_path;            ///< MLPerf-style log (rank 0); "" = none
  std::string mllog_org = "unknown"; ///< submission_org
  std::string mllog_platform;        ///< submission_platform; "" = workers x device
  MllogDivision mllog_division = MllogDivision::kOpen;
  MllogStatus mllog_status = MllogStatus::kResearch;
  std::string checkpoint_path;       ///< where checkpoints go; "" = none
  int64_t checkpoint_every = 0;      ///< steps between checkpoints; 0 = see epochs, else at the end
  double checkpoint_every_epochs = 0;
  std::string resume_path;           ///< continue from this checkpoint; "" = start afresh

  /// The table (core/option_table.h); a record holds it under "recipe", with
  /// the target as a fraction (recipe_json).
  template <typename Self, typename Visitor>
  static void table(Self& s, Visitor&& v) {
    when(s, v);
    rate(s, v);
    extras(s, v);
    logs(s, v);
  }

 private:
  template <typename Self, typename Visitor>
  static void when(Self& s, Visitor&& v) {
    v(Option{"--epochs",
             "Train this many epochs (may be fractional) instead of --steps; evaluates after each epoch "
             "unless told otherwise",
             "epochs"}
          .no_default(),
      s.epochs);
    v(Option{"--eval-every", "Evaluate on the test split every E epochs", "eval_every"}.no_default(), s.eval_every);
    v(Option{"--eval-every-steps", "Evaluate on the test split every N steps", "eval_every_steps"}.no_default(),
      s.eval_every_steps);
    v(Option{"--eval-batch", "Evaluation samples per batch per worker", "eval_batch"}, s.eval_batch);
    v(Option{"--target-accuracy",
             "Stop at the first evaluation whose top-1 reaches this (0.9 or 90 = 90%); a run that ends without "
             "it has status aborted",
             nullptr}
          .no_default(),
      s.target_accuracy);
  }
  template <typename Self, typename Visitor>
  static void rate(Self& s, Visitor&& v) {
    v(Option{"--lr-scaling",
             "none | linear: peak rate = --lr x global batch / --base-batch (Goyal et al. 2017) | "
             "sqrt: --lr x "
             "sqrt(global batch / --base-batch) (Hoffer et al. 2017; for Adam) | "
             "noise: --lr x (1 + Bn / --base-batch) / (1 + Bn / global batch), "
             "Bn = --lr-noise-scale (McCandlish et al. 2018's optimal SGD rate: "
             "linear well below Bn, level above it)",
             "lr_scaling"},
      s.lr_scaling);
    v(Option{"--base-batch", "The global batch --lr is meant for (--lr-scaling)", "base_batch"},
      s.base_batch);
    v(Option{"--lr-noise-scale",
             "--lr-scaling noise: the gradient noise scale Bn in samples, "
             "e.g. the B_simple a run at --base-batch measured with --noise-scale",
             "lr_noise_scale"}
          .no_default(),
      s.lr_noise_scale);
    v(Option{"--warmup-epochs", "Ramp the rate linearly to its peak over this many epochs (gradual warm-up)",
             "warmup_epochs"},
      s.warmup_epochs);
    v(Option{"--warmup-start-factor", "Warm-up starts at this fraction of the peak rate", "warmup_start_factor"},
      s.warmup_start_factor);
    v(Option{"--lr-schedule",
             "constant | step (x --lr-gamma at each of --lr-milestones) | poly (power --lr-power) | cosine | "
             "onecycle (PyTorch OneCycleLR)",
             "lr_schedule"},
      s.lr_schedule);
    v(Option{"--lr-milestones", "step: epochs at which the rate is multiplied by --lr-gamma, e.g. 30,60,80",
             "lr_milestones"}
          .no_default(),
      s.lr_milestones);
    v(Option{"--lr-gamma", "step: factor at each milestone", "lr_gamma"}, s.lr_gamma);
    v(Option{"--lr-power", "poly: (1 - t)^power decay after warm-up", "lr_power"}, s.lr_power);
    v(Option{"--lr-end-factor", "poly, cosine: the final rate as a fraction of the peak", "lr_end_factor"},
      s.lr_end_factor);
    v(Option{"--onecycle-pct", "onecycle: fraction of the run spent rising to the peak", "onecycle_pct"},
      s.onecycle_pct);
  }
  template <typename Self, typename Visitor>
  static void extras(Self& s, Visitor&& v) {
    v(Option{"--lars-eta", "LARS trust coefficient (--optimizer lars)", "lars_eta"}, s.lars_eta);
    v(Option{"--wd-exclude",
             "auto | none | bias-norm: exempt biases and norm weights (1-D tensors) from weight decay and "
             "LARS's trust ratio; auto = bias-norm for lars, none otherwise",
             "wd_exclude"},
      s.wd_exclude);
    v(Option{"--label-smoothing", "Label smoothing of the cross-entropy loss (Szegedy et al. 2016); negative = the model's "
             "default (0.1 for transformer and gnmt, 0 for the others)",
             "label_smoothing"},
      s.label_smoothing);
  }
  template <typename Self, typename Visitor>
  static void logs(Self& s, Visitor&& v) {
    v(Option{"--mllog", "Write MLPerf Training-style ':::MLLOG {json}' lines here (rank 0; docs/mllog.md)",
             "mllog"}
          .no_default(),
      s.mllog_path);
    v(Option{"--mllog-org", "MLPerf submission_org: who ran it", "mllog_org"}, s.mllog_org);
    v(Option{"--mllog-platform", "MLPerf submission_platform; default: the workers and device, e.g. '2x AMD EPYC'",
             "mllog_platform"}
          .no_default(),
      s.mllog_platform);
    v(Option{"--mllog-division", "MLPerf submission_division: open | closed", "mllog_division"}, s.mllog_division);
    v(Option{"--mllog-status", "MLPerf submission_status: research | onprem | cloud | preview", "mllog_status"},
      s.mllog_status);
    v(Option{"--checkpoint",
             "Checkpoint file (written atomically by rank 0, replaced each time; '{step}' in the name keeps one "
             "file per checkpoint, e.g. ckpt-{step}.bin)",
             "checkpoint"}
          .no_default(),
      s.checkpoint_path);
    v(Option{"--checkpoint-every",
             "Write a checkpoint every N steps; without it or --checkpoint-every-epochs (or with 0), "
             "--checkpoint writes one when the run ends",
             "checkpoint_every"}
          .no_default(),
      s.checkpoint_every);
    v(Option{"--checkpoint-every-epochs", "Write a checkpoint every E epochs", "checkpoint_every_epochs"}
          .no_default(),
      s.checkpoint_every_epochs);
    v(Option{"--resume", "Continue exactly from this checkpoint (same model, workers and batch)", "resume"}
          .no_default(),
      s.resume_path);
  }
};

/// Throws dlscale::Error naming the first bad value. (Synthetic data has
/// epochs, its pool, and a held-out split too: libtorch/data/synthetic.h.)
void check_recipe(const RecipeOptions& recipe);

/// `epochs` in steps of an epoch of `steps_per_epoch`, rounded to the nearest.
int64_t epochs_to_steps(double epochs, int64_t steps_per_epoch);

/// The recipe's target as a fraction: values above 1 are percentages.
double target_fraction(double target);

/// The learning rate at every step, a pure function of the step (so a
/// resumed run continues on the same curve). Rate(s) = peak × warmup(s) ×
/// decay(s), with peak = --lr × (global batch / --base-batch under linear
/// scaling, its square root under sqrt, (1 + Bn / base) / (1 + Bn / global)
/// under noise).
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
