// Learning-rate schedules in closed form, as PyTorch's schedulers set them (schedule.hpp).
#include "runner/training/schedule.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <utility>

#include "runner/common/error.hpp"
#include "runner/training/names.hpp"

namespace runner::training {
namespace {

constexpr EnumNames<ScheduleKind, 4> kKindNames{{{
    {ScheduleKind::constant, "constant"},
    {ScheduleKind::step, "step"},
    {ScheduleKind::cosine, "cosine"},
    {ScheduleKind::one_cycle, "one_cycle"},
}}};

constexpr EnumNames<Anneal, 2> kAnnealNames{{{
    {Anneal::cos, "cos"},
    {Anneal::linear, "linear"},
}}};

std::string shortest(double x) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, x);
  return {buffer, result.ptr};
}

std::string key(const char* name) { return std::string("'schedule.") + name + "'"; }

// The comparisons are written so that NaN fails them: a NaN is never in range.
bool in_open_unit(double x) { return x > 0.0 && x < 1.0; }
bool positive(double x) { return x > 0.0 && std::isfinite(x); }

// OneCycleLR's interpolations, in its operation order so that the rates are
// the same doubles, not merely close.
double anneal_between(Anneal anneal, double start, double end, double pct) {
  if (anneal == Anneal::cos) {
    const double cos_out = std::cos(std::numbers::pi * pct) + 1.0;
    return end + (start - end) / 2.0 * cos_out;
  }
  return (end - start) * pct + start;
}

struct Phase {
  double end_step;
  double start_lr, end_lr;
  double start_momentum, end_momentum;
};

struct CycleValue {
  double lr, momentum;
};

CycleValue one_cycle_at(const ScheduleSpec& s, std::int64_t step, double max_lr) {
  const double initial_lr = max_lr / s.div_factor;
  const double min_lr = initial_lr / s.final_div_factor;
  const auto total = static_cast<double>(s.total_steps);
  const double lo = s.base_momentum, hi = s.max_momentum;
  std::array<Phase, 3> phases{};
  std::size_t count = 0;
  if (s.three_phase) {
    phases[count++] = {s.pct_start * total - 1.0, initial_lr, max_lr, hi, lo};
    phases[count++] = {2.0 * s.pct_start * total - 2.0, max_lr, initial_lr, lo, hi};
    phases[count++] = {total - 1.0, initial_lr, min_lr, hi, hi};
  } else {
    phases[count++] = {s.pct_start * total - 1.0, initial_lr, max_lr, hi, lo};
    phases[count++] = {total - 1.0, max_lr, min_lr, lo, hi};
  }
  const auto at = static_cast<double>(step);
  double start_step = 0.0;
  for (std::size_t i = 0; i < count; ++i) {
    const Phase& phase = phases[i];
    if (at <= phase.end_step || i + 1 == count) {
      const double pct = (at - start_step) / (phase.end_step - start_step);
      return {anneal_between(s.anneal, phase.start_lr, phase.end_lr, pct),
              anneal_between(s.anneal, phase.start_momentum, phase.end_momentum, pct)};
    }
    start_step = phase.end_step;
  }
  return {max_lr, hi};  // unreachable: the last phase always matches
}

}  // namespace

const std::vector<std::string>& schedule_kind_names() {
  static const std::vector<std::string> names = kKindNames.all();
  return names;
}

std::optional<ScheduleKind> parse_schedule_kind(std::string_view name) {
  return kKindNames.parse(name);
}

const char* to_string(ScheduleKind kind) { return kKindNames.name(kind); }

std::optional<Anneal> parse_anneal(std::string_view name) { return kAnnealNames.parse(name); }

const char* to_string(Anneal anneal) { return kAnnealNames.name(anneal); }

std::optional<std::string> schedule_error(const ScheduleSpec& s) {
  if (s.total_steps < 1)
    return "a schedule needs at least 1 optimizer step, but total_steps is " +
           std::to_string(s.total_steps);
  if (s.warmup_steps < 0)
    return key("warmup_steps") + " is " + std::to_string(s.warmup_steps) +
           "; it must be 0 or more";
  if (s.warmup_steps > 0) {
    if (s.kind == ScheduleKind::one_cycle)
      return key("warmup_steps") +
             " does not apply to type = \"one_cycle\", which warms up by itself (pct_start)";
    if (s.warmup_steps >= s.total_steps)
      return key("warmup_steps") + " is " + std::to_string(s.warmup_steps) +
             ", but the run takes " + std::to_string(s.total_steps) +
             " optimizer steps; the warm-up must be shorter than the run";
    if (!(s.warmup_start_factor > 0.0 && s.warmup_start_factor <= 1.0))
      return key("warmup_start_factor") + " is " + shortest(s.warmup_start_factor) +
             "; it must be in (0, 1]";
  }
  switch (s.kind) {
    case ScheduleKind::constant: break;
    case ScheduleKind::step:
      if (s.step_size < 1)
        return key("step_size") + " is " + std::to_string(s.step_size) +
               "; it must be at least 1";
      if (!positive(s.gamma))
        return key("gamma") + " is " + shortest(s.gamma) + "; it must be above 0";
      break;
    case ScheduleKind::cosine:
      if (!(s.min_lr >= 0.0 && std::isfinite(s.min_lr)))
        return key("min_lr") + " is " + shortest(s.min_lr) + "; it must be 0 or more";
      break;
    case ScheduleKind::one_cycle: {
      if (!in_open_unit(s.pct_start))
        return key("pct_start") + " is " + shortest(s.pct_start) + "; it must be in (0, 1)";
      if (s.three_phase && !(s.pct_start < 0.5))
        return key("pct_start") + " is " + shortest(s.pct_start) +
               ", but three_phase rises and falls back for pct_start of the cycle each; it "
               "must be below 0.5";
      // OneCycleLR's first phase ends at pct_start * total_steps - 1: at 0 it
      // divides by zero, below it the rate never rises.
      const double rise = s.pct_start * static_cast<double>(s.total_steps);
      if (!(rise > 1.0))
        return "one_cycle rises over pct_start * total_steps = " + shortest(rise) +
               " steps (" + std::to_string(s.total_steps) +
               " optimizer steps); it needs more than 1: raise pct_start or train longer";
      if (!positive(s.div_factor))
        return key("div_factor") + " is " + shortest(s.div_factor) + "; it must be above 0";
      if (!positive(s.final_div_factor))
        return key("final_div_factor") + " is " + shortest(s.final_div_factor) +
               "; it must be above 0";
      if (s.cycle_momentum) {
        for (const auto& [name, value] : {std::pair{"base_momentum", s.base_momentum},
                                          std::pair{"max_momentum", s.max_momentum}})
          if (!(value >= 0.0 && value < 1.0))
            return key(name) + " is " + shortest(value) + "; it must be in [0, 1)";
        if (s.base_momentum > s.max_momentum)
          return key("base_momentum") + " (" + shortest(s.base_momentum) +
                 ") is above " + key("max_momentum") + " (" + shortest(s.max_momentum) +
                 "); the momentum falls from max_momentum to base_momentum while the rate "
                 "rises";
      }
      break;
    }
  }
  return std::nullopt;
}

std::optional<std::string> schedule_error(const ScheduleSpec& s, double base_lr) {
  if (auto error = schedule_error(s)) return error;
  if (s.kind == ScheduleKind::cosine && s.min_lr > base_lr)
    return key("min_lr") + " (" + shortest(s.min_lr) +
           ") is above the learning rate it decays from (" + shortest(base_lr) +
           "); lower min_lr";
  return std::nullopt;
}

Schedule::Schedule(ScheduleSpec spec) : spec_(std::move(spec)) {
  if (auto error = schedule_error(spec_)) throw Error(*error);
}

double Schedule::lr_at(std::int64_t step, double base_lr) const {
  if (step < 0)
    throw std::invalid_argument("Schedule::lr_at: step " + std::to_string(step) +
                                " is negative; steps count from 0");
  const ScheduleSpec& s = spec_;
  step = std::min(step, s.total_steps - 1);
  if (s.kind == ScheduleKind::one_cycle) return one_cycle_at(s, step, base_lr).lr;
  if (step < s.warmup_steps) {
    // LinearLR's closed form with end_factor 1.
    const double s0 = s.warmup_start_factor;
    return base_lr * (s0 + (1.0 - s0) * static_cast<double>(step) /
                               static_cast<double>(s.warmup_steps));
  }
  const std::int64_t j = step - s.warmup_steps;  // the main schedule's own count
  switch (s.kind) {
    case ScheduleKind::constant: return base_lr;
    case ScheduleKind::step:
      return base_lr * std::pow(s.gamma, static_cast<double>(j / s.step_size));
    case ScheduleKind::cosine: {
      const auto t_max = static_cast<double>(s.total_steps - s.warmup_steps);
      return s.min_lr + (base_lr - s.min_lr) *
                            (1.0 + std::cos(std::numbers::pi * static_cast<double>(j) / t_max)) /
                            2.0;
    }
    case ScheduleKind::one_cycle: break;
  }
  return base_lr;
}

std::optional<double> Schedule::momentum_at(std::int64_t step) const {
  if (step < 0)
    throw std::invalid_argument("Schedule::momentum_at: step " + std::to_string(step) +
                                " is negative; steps count from 0");
  if (spec_.kind != ScheduleKind::one_cycle || !spec_.cycle_momentum) return std::nullopt;
  // The momentum does not depend on the rate: any max_lr gives the same one.
  return one_cycle_at(spec_, std::min(step, spec_.total_steps - 1), 1.0).momentum;
}

}  // namespace runner::training
