// Learning-rate schedules: every step's lr (and one-cycle's momentum) against
// PyTorch's schedulers driven by a real optimizer with two parameter groups,
// the hold past total_steps, and the exact errors of impossible specs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "runner/common/error.hpp"
#include "runner/training/schedule.hpp"
#include "support/expect_throw_msg.hpp"
#include "support/python_oracle.hpp"

namespace {

namespace fs = std::filesystem;
using runner::training::Anneal;
using runner::training::Schedule;
using runner::training::ScheduleKind;
using runner::training::ScheduleSpec;

// PyTorch computes most schedules recursively (each lr from the previous
// one), runner in closed form; over 40 steps the two drift apart by a few
// ulps, far below this bound.
constexpr double kRelativeBound = 1e-12;

struct Case {
  std::string name;
  ScheduleSpec spec;
  std::vector<double> base_lrs{0.1, 0.03};
};

ScheduleSpec spec_of(ScheduleKind kind, std::int64_t total, std::int64_t warmup = 0) {
  ScheduleSpec s;
  s.kind = kind;
  s.total_steps = total;
  s.warmup_steps = warmup;
  return s;
}

std::vector<Case> parity_cases() {
  std::vector<Case> cases;
  cases.push_back({"constant", spec_of(ScheduleKind::constant, 40)});
  {
    ScheduleSpec s = spec_of(ScheduleKind::step, 40);
    s.step_size = 7;
    s.gamma = 0.5;
    cases.push_back({"step", s});
  }
  {
    ScheduleSpec s = spec_of(ScheduleKind::cosine, 40);
    s.min_lr = 0.001;
    cases.push_back({"cosine", s});
  }
  cases.push_back({"cosine_to_zero", spec_of(ScheduleKind::cosine, 40)});
  {
    ScheduleSpec s = spec_of(ScheduleKind::constant, 40, 5);
    s.warmup_start_factor = 0.1;
    cases.push_back({"warmup_constant", s});
  }
  {
    ScheduleSpec s = spec_of(ScheduleKind::step, 40, 6);
    s.step_size = 5;
    s.gamma = 0.3;
    cases.push_back({"warmup_step", s});
  }
  {
    ScheduleSpec s = spec_of(ScheduleKind::cosine, 40, 8);
    s.warmup_start_factor = 0.01;
    s.min_lr = 0.002;
    cases.push_back({"warmup_cosine", s});
  }
  cases.push_back({"one_cycle_cos", spec_of(ScheduleKind::one_cycle, 40)});
  {
    ScheduleSpec s = spec_of(ScheduleKind::one_cycle, 40);
    s.anneal = Anneal::linear;
    cases.push_back({"one_cycle_linear", s});
  }
  {
    ScheduleSpec s = spec_of(ScheduleKind::one_cycle, 40);
    s.three_phase = true;
    cases.push_back({"one_cycle_three_phase", s});
  }
  {
    // Phase ends that fall between steps (pct_start * total_steps not whole).
    ScheduleSpec s = spec_of(ScheduleKind::one_cycle, 37);
    s.pct_start = 0.25;
    s.three_phase = true;
    s.anneal = Anneal::linear;
    s.div_factor = 10.0;
    s.final_div_factor = 100.0;
    s.base_momentum = 0.8;
    s.max_momentum = 0.9;
    cases.push_back({"one_cycle_uneven", s});
  }
  return cases;
}

nlohmann::json to_json(const Case& c) {
  const ScheduleSpec& s = c.spec;
  return {{"name", c.name},
          {"kind", runner::training::to_string(s.kind)},
          {"total_steps", s.total_steps},
          {"steps", s.total_steps},
          {"warmup_steps", s.warmup_steps},
          {"warmup_start_factor", s.warmup_start_factor},
          {"step_size", s.step_size},
          {"gamma", s.gamma},
          {"min_lr", s.min_lr},
          {"pct_start", s.pct_start},
          {"anneal", runner::training::to_string(s.anneal)},
          {"div_factor", s.div_factor},
          {"final_div_factor", s.final_div_factor},
          {"three_phase", s.three_phase},
          {"cycle_momentum", s.cycle_momentum},
          {"base_momentum", s.base_momentum},
          {"max_momentum", s.max_momentum},
          {"base_lrs", c.base_lrs}};
}

double relative_difference(double actual, double expected) {
  if (actual == expected) return 0.0;
  return std::abs(actual - expected) / std::abs(expected);
}

TEST(ScheduleParity, EveryStepsLrAndMomentumMatchPyTorchsSchedulers) {
  RUNNER_REQUIRE_ORACLE("torch");
  const std::vector<Case> cases = parity_cases();
  const fs::path dir = fs::temp_directory_path() / ("runner_schedule_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  nlohmann::json list = nlohmann::json::array();
  for (const Case& c : cases) list.push_back(to_json(c));
  std::ofstream(dir / "cases.json") << list.dump();
  const auto r = runner::test::run_oracle(
      "schedule_reference.py",
      {"--cases", (dir / "cases.json").string(), "--out", (dir / "out.json").string()});
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream in(dir / "out.json");
  const nlohmann::json reference = nlohmann::json::parse(in);
  fs::remove_all(dir);

  double worst = 0.0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Schedule schedule(c.spec);
    const auto& lrs = reference.at(c.name).at("lr");
    const auto& momenta = reference.at(c.name).at("momentum");
    ASSERT_EQ(static_cast<std::int64_t>(lrs.size()), c.spec.total_steps);
    double case_worst = 0.0;
    for (std::int64_t step = 0; step < c.spec.total_steps; ++step) {
      const auto k = static_cast<std::size_t>(step);
      for (std::size_t g = 0; g < c.base_lrs.size(); ++g) {
        const double expected = lrs[k][g].get<double>();
        const double actual = schedule.lr_at(step, c.base_lrs[g]);
        const double difference = relative_difference(actual, expected);
        case_worst = std::max(case_worst, difference);
        EXPECT_LE(difference, kRelativeBound)
            << "step " << step << " group " << g << ": " << actual << " vs " << expected;
        const double expected_momentum = momenta[k][g].get<double>();
        if (const auto momentum = schedule.momentum_at(step)) {
          EXPECT_LE(relative_difference(*momentum, expected_momentum), kRelativeBound)
              << "momentum at step " << step << ": " << *momentum << " vs " << expected_momentum;
        } else {
          // A schedule that leaves the momentum alone: PyTorch's stays SGD's.
          EXPECT_EQ(expected_momentum, 0.9) << "step " << step;
        }
      }
    }
    worst = std::max(worst, case_worst);
    std::cout << "[ schedule ] " << c.name << ": largest relative lr difference " << case_worst
              << "\n";
  }
  RecordProperty("largest_relative_lr_difference", std::to_string(worst));
}

TEST(Schedule, EveryValueHoldsAtTheLastPlannedStepPastTotalSteps) {
  std::vector<Case> cases = parity_cases();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Schedule schedule(c.spec);
    const std::int64_t last = c.spec.total_steps - 1;
    for (const std::int64_t past : {last + 1, last + 7, 2 * c.spec.total_steps + 3}) {
      EXPECT_EQ(schedule.lr_at(past, 0.1), schedule.lr_at(last, 0.1)) << past;
      EXPECT_EQ(schedule.momentum_at(past), schedule.momentum_at(last)) << past;
    }
  }
}

TEST(Schedule, WarmUpRisesLinearlyAndHandsOverAtTheMainSchedulesFirstStep) {
  ScheduleSpec s = spec_of(ScheduleKind::cosine, 20, 4);
  s.warmup_start_factor = 0.2;
  const Schedule schedule(s);
  EXPECT_DOUBLE_EQ(schedule.lr_at(0, 1.0), 0.2);
  EXPECT_DOUBLE_EQ(schedule.lr_at(2, 1.0), 0.2 + 0.8 * 2.0 / 4.0);
  // SequentialLR restarts the main schedule at its step 0: the full rate.
  EXPECT_EQ(schedule.lr_at(4, 1.0), 1.0);
  EXPECT_LT(schedule.lr_at(5, 1.0), 1.0);
}

TEST(Schedule, OneCycleStartsAtTheDividedRateAndPeaksAtTheBaseRate) {
  ScheduleSpec s = spec_of(ScheduleKind::one_cycle, 101);
  s.pct_start = 0.3;
  const Schedule schedule(s);
  // OneCycleLR's cosine reaches its start point through (start - end) / 2 * 2,
  // a few ulps away from base / div_factor.
  EXPECT_NEAR(schedule.lr_at(0, 2.5), 2.5 / 25.0, 2.5 / 25.0 * 1e-14);
  EXPECT_DOUBLE_EQ(*schedule.momentum_at(0), 0.95);
  // The rise ends at step pct_start * total_steps - 1 = 29.3: the peak lies
  // between steps 29 and 30, so both are just below it.
  EXPECT_LT(schedule.lr_at(29, 2.5), 2.5);
  EXPECT_NEAR(schedule.lr_at(29, 2.5), 2.5, 2.5 * 1e-3);
  EXPECT_DOUBLE_EQ(schedule.lr_at(100, 2.5), 2.5 / 25.0 / 1e4);
  EXPECT_DOUBLE_EQ(*schedule.momentum_at(100), 0.95);
  s.cycle_momentum = false;
  EXPECT_EQ(Schedule(s).momentum_at(10), std::nullopt);
}

TEST(Schedule, KindsAndAnnealsReadAndWriteTheirSpellings) {
  for (const std::string& name : runner::training::schedule_kind_names())
    EXPECT_EQ(runner::training::to_string(*runner::training::parse_schedule_kind(name)), name);
  EXPECT_EQ(runner::training::parse_schedule_kind("cosine_annealing"), std::nullopt);
  EXPECT_EQ(runner::training::schedule_kind_names().size(), 4U);
  for (const Anneal anneal : {Anneal::cos, Anneal::linear})
    EXPECT_EQ(runner::training::parse_anneal(runner::training::to_string(anneal)), anneal);
  EXPECT_STREQ(runner::training::to_string(Anneal::linear), "linear");
  EXPECT_EQ(runner::training::parse_anneal("cosine"), std::nullopt);
}

std::optional<std::string> error_of(const ScheduleSpec& s) {
  return runner::training::schedule_error(s);
}

TEST(Schedule, ImpossibleSpecsAreRefusedWithWhatToChange) {
  EXPECT_EQ(error_of(spec_of(ScheduleKind::constant, 0)),
            "a schedule needs at least 1 optimizer step, but total_steps is 0");
  EXPECT_EQ(error_of(spec_of(ScheduleKind::constant, 10, -1)),
            "'schedule.warmup_steps' is -1; it must be 0 or more");
  EXPECT_EQ(error_of(spec_of(ScheduleKind::cosine, 10, 10)),
            "'schedule.warmup_steps' is 10, but the run takes 10 optimizer steps; the warm-up "
            "must be shorter than the run");
  EXPECT_EQ(error_of(spec_of(ScheduleKind::one_cycle, 10, 2)),
            "'schedule.warmup_steps' does not apply to type = \"one_cycle\", which warms up by "
            "itself (pct_start)");
  ScheduleSpec s = spec_of(ScheduleKind::constant, 10, 2);
  s.warmup_start_factor = 0.0;
  EXPECT_EQ(error_of(s), "'schedule.warmup_start_factor' is 0; it must be in (0, 1]");
  s.warmup_start_factor = 1.5;
  EXPECT_EQ(error_of(s), "'schedule.warmup_start_factor' is 1.5; it must be in (0, 1]");
  s.warmup_start_factor = 1.0;
  EXPECT_EQ(error_of(s), std::nullopt);
  s.warmup_steps = 0;
  s.warmup_start_factor = 0.0;  // no warm-up: the factor is not read
  EXPECT_EQ(error_of(s), std::nullopt);

  s = spec_of(ScheduleKind::step, 10);
  s.step_size = 0;
  EXPECT_EQ(error_of(s), "'schedule.step_size' is 0; it must be at least 1");
  s.step_size = 3;
  s.gamma = 0.0;
  EXPECT_EQ(error_of(s), "'schedule.gamma' is 0; it must be above 0");
  s.gamma = std::nan("");
  EXPECT_EQ(error_of(s), "'schedule.gamma' is nan; it must be above 0");

  s = spec_of(ScheduleKind::cosine, 10);
  s.min_lr = -0.1;
  EXPECT_EQ(error_of(s), "'schedule.min_lr' is -0.1; it must be 0 or more");
  s.min_lr = 0.5;
  EXPECT_EQ(error_of(s), std::nullopt);
  EXPECT_EQ(runner::training::schedule_error(s, 0.1),
            "'schedule.min_lr' (0.5) is above the learning rate it decays from (0.1); lower "
            "min_lr");
  EXPECT_EQ(runner::training::schedule_error(s, 0.5), std::nullopt);
}

TEST(Schedule, ImpossibleOneCyclesAreRefusedWithWhatToChange) {
  ScheduleSpec s = spec_of(ScheduleKind::one_cycle, 100);
  for (const auto& [pct, text] : {std::pair{0.0, "0"}, std::pair{1.0, "1"}, std::pair{-0.2, "-0.2"}}) {
    s.pct_start = pct;
    EXPECT_EQ(error_of(s), std::string("'schedule.pct_start' is ") + text + "; it must be in (0, 1)");
  }
  s.pct_start = 0.5;
  s.three_phase = true;
  EXPECT_EQ(error_of(s),
            "'schedule.pct_start' is 0.5, but three_phase rises and falls back for pct_start of "
            "the cycle each; it must be below 0.5");
  s.three_phase = false;
  // pct_start * total_steps = 1: OneCycleLR would divide 0 by 0 at step 0.
  s.pct_start = 0.1;
  s.total_steps = 10;
  EXPECT_EQ(error_of(s),
            "one_cycle rises over pct_start * total_steps = 1 steps (10 optimizer steps); it "
            "needs more than 1: raise pct_start or train longer");
  s.total_steps = 11;
  EXPECT_EQ(error_of(s), std::nullopt);
  s.div_factor = 0.0;
  EXPECT_EQ(error_of(s), "'schedule.div_factor' is 0; it must be above 0");
  s.div_factor = 25.0;
  s.final_div_factor = -1.0;
  EXPECT_EQ(error_of(s), "'schedule.final_div_factor' is -1; it must be above 0");
  s.final_div_factor = 1e4;
  s.max_momentum = 1.0;
  EXPECT_EQ(error_of(s), "'schedule.max_momentum' is 1; it must be in [0, 1)");
  s.max_momentum = 0.8;
  EXPECT_EQ(error_of(s),
            "'schedule.base_momentum' (0.85) is above 'schedule.max_momentum' (0.8); the "
            "momentum falls from max_momentum to base_momentum while the rate rises");
  s.cycle_momentum = false;  // then the momenta are not read
  EXPECT_EQ(error_of(s), std::nullopt);
}

TEST(Schedule, ConstructingAnImpossibleScheduleThrowsItsMessage) {
  ScheduleSpec s = spec_of(ScheduleKind::step, 10);
  s.step_size = -2;
  EXPECT_THROW_MSG(Schedule{s}, runner::Error, "'schedule.step_size' is -2; it must be at least 1");
  const Schedule ok(spec_of(ScheduleKind::constant, 10));
  EXPECT_THROW_MSG(static_cast<void>(ok.lr_at(-1, 0.1)), std::invalid_argument,
                   "Schedule::lr_at: step -1 is negative; steps count from 0");
}

}  // namespace
