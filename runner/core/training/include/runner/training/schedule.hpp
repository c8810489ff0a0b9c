// Learning-rate schedules ([schedule]): the learning rate each optimizer step
// uses, in closed form, as PyTorch's schedulers set it when
// scheduler.step() is called after every optimizer.step().
//
//   constant   the base learning rate
//   step       StepLR(step_size, gamma)
//   cosine     CosineAnnealingLR(T_max = total_steps - warmup_steps, eta_min = min_lr)
//   one_cycle  OneCycleLR(max_lr = the base learning rate, total_steps, ...)
//
// warmup_steps > 0 puts LinearLR(start_factor = warmup_start_factor,
// end_factor = 1, total_iters = warmup_steps) in front of constant, step or
// cosine, as SequentialLR([warm-up, main], milestones = [warmup_steps]) does:
// the main schedule counts its own steps from 0 at step warmup_steps, so the
// warm-up never reaches the full rate itself and step warmup_steps is the
// main schedule's first step.
//
// Past total_steps (the run may take more steps than planned, e.g. an
// automatic warm-up) every value holds at the last planned step's: PyTorch
// would instead swing a cosine back up and refuse one-cycle's extra steps.
//
// No LibTorch here: the experiment layer validates specs without it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace runner::training {

enum class ScheduleKind {
  constant,   ///< the base learning rate at every step
  step,       ///< multiplied by gamma every step_size steps
  cosine,     ///< cosine from the base learning rate down to min_lr
  one_cycle,  ///< up from base/div_factor to base, then down to base/div_factor/final_div_factor
};

/// How one_cycle moves between its phases' end points (OneCycleLR's anneal_strategy).
enum class Anneal { cos, linear };

/// A schedule and its parameters. Each field is read only by the kinds it names.
struct ScheduleSpec {
  ScheduleKind kind = ScheduleKind::constant;
  /// Optimizer steps the run plans, warm-up included (cosine's horizon, one_cycle's cycle).
  std::int64_t total_steps = 1;
  /// constant, step, cosine: steps of linear warm-up before the main schedule (0: none).
  std::int64_t warmup_steps = 0;
  /// Warm-up: the fraction of the base rate at step 0, in (0, 1] (LinearLR's start_factor).
  double warmup_start_factor = 1.0 / 3.0;
  /// step: steps between decays (StepLR's step_size), >= 1.
  std::int64_t step_size = 1;
  /// step: the factor of each decay (StepLR's gamma), > 0.
  double gamma = 0.1;
  /// cosine: the absolute learning rate the cosine ends at (CosineAnnealingLR's eta_min);
  /// the same for every parameter group, at most the smallest base rate.
  double min_lr = 0.0;
  /// one_cycle: fraction of the cycle spent rising, in (0, 1).
  double pct_start = 0.3;
  /// one_cycle: cosine or linear interpolation.
  Anneal anneal = Anneal::cos;
  /// one_cycle: the rate starts at base / div_factor.
  double div_factor = 25.0;
  /// one_cycle: the rate ends at base / div_factor / final_div_factor.
  double final_div_factor = 1e4;
  /// one_cycle: rise, fall back to the start, then anneal to the end (the paper's shape)
  /// instead of rise then anneal (fastai's, PyTorch's default).
  bool three_phase = false;
  /// one_cycle: cycle the momentum (SGD's momentum, Adam's beta1) against the rate.
  bool cycle_momentum = true;
  /// one_cycle: the momentum at the rate's peak.
  double base_momentum = 0.85;
  /// one_cycle: the momentum at the rate's ends.
  double max_momentum = 0.95;
};

/// The spellings an experiment file uses, in declaration order.
[[nodiscard]] const std::vector<std::string>& schedule_kind_names();
/// "cosine" -> ScheduleKind::cosine; std::nullopt for anything else.
[[nodiscard]] std::optional<ScheduleKind> parse_schedule_kind(std::string_view name);
[[nodiscard]] const char* to_string(ScheduleKind kind);

[[nodiscard]] std::optional<Anneal> parse_anneal(std::string_view name);
[[nodiscard]] const char* to_string(Anneal anneal);

/// Why `spec` cannot be scheduled (the message an experiment file's error
/// carries, without a location), or std::nullopt when it can.
[[nodiscard]] std::optional<std::string> schedule_error(const ScheduleSpec& spec);

/// As above, and also whether a parameter group with base rate `base_lr` can
/// follow it (cosine's min_lr must not exceed it).
[[nodiscard]] std::optional<std::string> schedule_error(const ScheduleSpec& spec, double base_lr);

/// A validated schedule: what every optimizer step's rate and momentum are.
class Schedule {
 public:
  /// Throws runner::Error with schedule_error(spec)'s message when it has one.
  explicit Schedule(ScheduleSpec spec);

  /// The learning rate of 0-based optimizer step `step` for a parameter group
  /// whose base rate (its lr option; one_cycle's peak) is `base_lr`.
  /// Throws std::invalid_argument for a negative step.
  [[nodiscard]] double lr_at(std::int64_t step, double base_lr) const;

  /// The momentum of step `step` when the schedule cycles it (one_cycle with
  /// cycle_momentum), else std::nullopt: the optimizer keeps its own.
  [[nodiscard]] std::optional<double> momentum_at(std::int64_t step) const;

  [[nodiscard]] const ScheduleSpec& spec() const { return spec_; }

 private:
  ScheduleSpec spec_;
};

}  // namespace runner::training
