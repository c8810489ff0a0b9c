// The training recipe end to end against PyTorch: `runner run` trains
// runner's mlp from the same initial weights on the same samples (the test
// loader tensor_file) as tests/oracle/recipe_reference.py, and after 10
// optimizer steps the weights it saves ([train] save_to) and what it records
// per step (samples.loss, lr, grad_norm, loss_scale, skipped) equal
// PyTorch's, within the tolerances stated beside each case. Both sides run
// the same ATen kernels on one thread, so where they run the same operations
// in the same order the results are bit-identical and the bound is 0; it is
// wider only where the two compute differently (a batch of 12 against three
// accumulated batches of 4, schedules in closed form against recurrences).
//
// The oracle runs once per ctest invocation (the fixture recipe_e2e_reference
// of CMakeLists.txt hands its folder over in RUNNER_RECIPE_REFERENCE), or
// once per process when this binary runs by itself.
//
// Bad recipes given to the command line are refused with exit code 2, their
// exact message at the key's file:line:col, and nothing recorded.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <torch/serialize.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "runner/weights/torch_file.hpp"
#include "support/cli_harness.hpp"
#include "support/python_oracle.hpp"

namespace {

namespace fs = std::filesystem;
using runner::test::Result;

constexpr int kSteps = 10;  // the oracle's STEPS

// What the oracle wrote, read once per process.
struct Reference {
  std::string missing;  // why the oracle cannot run (the tests skip)
  std::string error;    // why it failed (the tests fail)
  fs::path dir;
  fs::path init;         // initial weights: init.safetensors, or init.pt without safetensors
  c10::IValue cases;     // reference.pt

  [[nodiscard]] c10::IValue of(const std::string& name) const {
    return cases.toGenericDict().at(name);
  }
  [[nodiscard]] torch::Tensor series(const std::string& name, const std::string& key) const {
    return of(name).toGenericDict().at(key).toTensor();
  }
};

Reference load_reference() {
  Reference r;
  if (const char* dir = std::getenv("RUNNER_RECIPE_REFERENCE"); dir != nullptr && *dir != '\0') {
    r.dir = dir;
  } else {
    r.missing = runner::test::oracle_missing("torch");
    if (!r.missing.empty()) return r;
    static const runner::test::TempDir scratch("runner-recipe-reference-");
    r.dir = scratch.path();
    const auto made = runner::test::run_oracle("recipe_reference.py", {"--out", r.dir.string()});
    if (made.code != 0) {
      r.error = "recipe_reference.py failed:\n" + made.output;
      return r;
    }
  }
  if (fs::exists(r.dir / "missing.txt")) {
    r.missing = runner::test::slurp(r.dir / "missing.txt");
    return r;
  }
  const std::string bytes = runner::test::slurp(r.dir / "reference.pt");
  if (bytes.empty()) {
    r.error = "the oracle wrote no " + (r.dir / "reference.pt").string();
    return r;
  }
  r.cases = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  r.init = fs::exists(r.dir / "init.safetensors") ? r.dir / "init.safetensors" : r.dir / "init.pt";
  return r;
}

const Reference& reference() {
  static const Reference r = load_reference();
  return r;
}

// One run's recipe; the oracle's case of the same name trains the same way.
struct Case {
  std::string name = "";
  std::string data = "data.pt";  // a file of the oracle's folder
  int batch_size = 4;
  std::string optimizer = "plugin = \"sgd\"\nlr = 0.1\nmomentum = 0.9\n";
  std::string train = "";  // more [train] lines
  std::string rest = "";   // more tables
};

std::string toml_path(const fs::path& path) { return "\"" + path.string() + "\""; }

// The largest |a - b| between two states of the same names, shapes and dtypes.
double max_abs_difference(const std::map<std::string, torch::Tensor>& actual,
                          const c10::IValue& expected) {
  double most = 0;
  for (const auto& entry : expected.toGenericDict()) {
    const std::string name = entry.key().toStringRef();
    const torch::Tensor want = entry.value().toTensor();
    const auto it = actual.find(name);
    if (it == actual.end()) {
      ADD_FAILURE() << "runner saved no '" << name << "'";
      return INFINITY;
    }
    EXPECT_EQ(it->second.scalar_type(), want.scalar_type()) << name;
    EXPECT_EQ(it->second.sizes(), want.sizes()) << name;
    if (it->second.sizes() != want.sizes()) return INFINITY;
    most = std::max(most, (it->second.to(torch::kDouble) - want.to(torch::kDouble))
                              .abs()
                              .max()
                              .item<double>());
  }
  EXPECT_EQ(actual.size(), expected.toGenericDict().size());
  return most;
}

class RecipeParityTest : public runner::test::CliTestBase {
 protected:
  RecipeParityTest() : CliTestBase("runner-recipe-e2e-") {}

  void SetUp() override {
    const Reference& r = reference();
    if (!r.missing.empty()) GTEST_SKIP() << r.missing;
    ASSERT_TRUE(r.error.empty()) << r.error;
  }

  // Trains `c` with `runner run` to the end.
  void train(const Case& c) const {
    const Reference& r = reference();
    const fs::path file = write(
        c.name + ".toml",
        "[experiment]\nname = \"" + c.name + "\"\n\n[device]\nthreads = 1\n\n[model]\nplugin = "
        "\"mlp\"\nhidden = [32, 32]\ninit_from = " + toml_path(r.init) +
            "\n\n[data]\nplugin = \"tensor_file\"\npath = " + toml_path(r.dir / c.data) +
            "\nclasses = 5\nbatch_size = " + std::to_string(c.batch_size) +
            "\nshuffle = false\ndrop_last = true\n\n[optimizer]\n" + c.optimizer +
            "\n[train]\nsteps = " + std::to_string(kSteps) +
            "\nwarmup = 0\nsave_to = \"final.safetensors\"\n" + c.train + c.rest);
    const Result run = runner::test::run_runner("run " + file.string(), dir_,
                                                {db_, runner::test::test_plugins("tensor_file")});
    ASSERT_EQ(run.code, 0) << run.err;
    ASSERT_EQ(runner::test::query_text(db_, "SELECT status FROM runs"), "finished");
    ASSERT_EQ(runner::test::query_int(db_, "SELECT count(*) FROM samples WHERE warmup = 0"),
              kSteps);
  }

  // The weights runner saved.
  [[nodiscard]] std::map<std::string, torch::Tensor> saved() const {
    return runner::weights::read_weights(dir_ / "final.safetensors");
  }

  // A column of samples, step by step; nan where it is NULL. Read as
  // doubles: SQLite's printf keeps fewer digits than a double has.
  [[nodiscard]] std::vector<double> recorded(const std::string& column) const {
    std::vector<double> values;
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2(db_.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* select = nullptr;
    const std::string sql = "SELECT " + column + " FROM samples ORDER BY step";
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &select, nullptr), SQLITE_OK) << sql;
    while (select != nullptr && sqlite3_step(select) == SQLITE_ROW)
      values.push_back(sqlite3_column_type(select, 0) == SQLITE_NULL
                           ? std::nan("")
                           : sqlite3_column_double(select, 0));
    sqlite3_finalize(select);
    sqlite3_close(db);
    EXPECT_EQ(values.size(), static_cast<std::size_t>(kSteps)) << column;
    values.resize(kSteps, std::nan(""));
    return values;
  }

  // Runner's weights within atol of the oracle's case `name`; prints the distance.
  static void expect_weights(const std::map<std::string, torch::Tensor>& actual,
                             const std::string& name, double atol) {
    const double distance =
        max_abs_difference(actual, reference().of(name).toGenericDict().at("final"));
    std::printf("[ figures  ] %s: max |runner - torch| over the final weights = %.3g\n",
                name.c_str(), distance);
    EXPECT_LE(distance, atol) << name;
  }

  // A recorded column against the oracle's series, each value within
  // rtol of it (nan: both not recorded); prints the largest relative difference.
  void expect_series(const std::string& column, const std::string& name, double rtol) const {
    const std::vector<double> actual = recorded(column);
    const torch::Tensor want = reference().series(name, column).to(torch::kDouble);
    double most = 0;
    for (int step = 0; step < kSteps; ++step) {
      const double w = want[step].item<double>();
      const double a = actual[static_cast<std::size_t>(step)];
      if (std::isnan(w)) {
        EXPECT_TRUE(std::isnan(a)) << column << " at step " << step << ": " << a;
      } else {
        EXPECT_NEAR(a, w, rtol * std::abs(w)) << column << " at step " << step;
        if (w != 0) most = std::max(most, std::abs(a - w) / std::abs(w));
      }
    }
    std::printf("[ figures  ] %s: max relative difference of samples.%s = %.3g\n", name.c_str(),
                column.c_str(), most);
  }
};

// Accumulation: 3 micro-batches of 4 per SGD-with-momentum step, each loss
// divided by 3, as PyTorch's accumulation loop: bit-identical.
TEST_F(RecipeParityTest, AccumulationMatchesPyTorchsLoop) {
  ASSERT_NO_FATAL_FAILURE(train({.name = "accumulate", .train = "accumulate = 3\n"}));
  expect_weights(saved(), "accumulate", 0);
  expect_series("loss", "accumulate", 0);
  expect_series("lr", "accumulate", 0);
  // Nothing else was asked for: no norm, no loss scale, no skips.
  expect_series("grad_norm", "accumulate", 0);
  expect_series("loss_scale", "accumulate", 0);
  expect_series("skipped", "accumulate", 0);
}

// One batch of 12 is the 3 accumulated micro-batches of 4: the mean over 12
// samples equals the sum of three means over 4 divided by 3, up to the order
// of the float32 sums (measured: 3e-8 on the weights after 10 steps).
TEST_F(RecipeParityTest, AThreeTimesLargerBatchMatchesTheAccumulation) {
  ASSERT_NO_FATAL_FAILURE(train({.name = "accumulate", .batch_size = 12}));
  expect_weights(saved(), "accumulate", 1e-6);
  expect_series("loss", "accumulate", 1e-6);
}

// Clipping to a global norm below every step's: each step is clipped, and the
// norm recorded per step is the one torch.nn.utils.clip_grad_norm_ returned.
TEST_F(RecipeParityTest, ClippingRecordsPyTorchsNormsEveryStep) {
  const torch::Tensor norms = reference().series("clip", "grad_norm");
  ASSERT_GT(norms.min().item<double>(), 0.05) << "the oracle's norms must all be clipped";
  ASSERT_NO_FATAL_FAILURE(train({.name = "clip", .train = "clip_grad_norm = 0.05\n"}));
  expect_series("grad_norm", "clip", 0);
  expect_weights(saved(), "clip", 0);
  expect_series("loss", "clip", 0);
}

// StepLR after 3 steps of LinearLR warm-up (SequentialLR): the lr of every step
// and the weights. runner computes the lr in closed form, PyTorch by
// recurrence: they may differ in the last bits of a double, and so, rarely,
// a float32 weight (measured: lr and weights identical in all three schedules).
TEST_F(RecipeParityTest, StepScheduleWithWarmUp) {
  ASSERT_NO_FATAL_FAILURE(
      train({.name = "step_warmup",
             .rest = "\n[schedule]\ntype = \"step\"\nwarmup_steps = 3\nwarmup_start_factor = "
                     "0.25\nstep_size = 2\ngamma = 0.5\n"}));
  expect_series("lr", "step_warmup", 1e-12);
  expect_weights(saved(), "step_warmup", 1e-6);
}

// CosineAnnealingLR after 2 warm-up steps at runner's default start factor (1/3, LinearLR's).
TEST_F(RecipeParityTest, CosineScheduleWithWarmUp) {
  ASSERT_NO_FATAL_FAILURE(train(
      {.name = "cosine_warmup",
       .rest = "\n[schedule]\ntype = \"cosine\"\nwarmup_steps = 2\nmin_lr = 0.01\n"}));
  expect_series("lr", "cosine_warmup", 1e-12);
  expect_weights(saved(), "cosine_warmup", 1e-6);
}

// OneCycleLR with its defaults, cycling SGD's momentum from 0.95 to 0.85 and
// back: the momentum shows only in the weights.
TEST_F(RecipeParityTest, OneCycleCyclesLrAndMomentum) {
  ASSERT_NO_FATAL_FAILURE(
      train({.name = "one_cycle", .rest = "\n[schedule]\ntype = \"one_cycle\"\n"}));
  expect_series("lr", "one_cycle", 1e-12);
  expect_weights(saved(), "one_cycle", 1e-6);
}

// CPU autocast to bfloat16 (float32 weights), against torch.autocast("cpu",
// torch.bfloat16). A bf16-appropriate bound would be ~1e-3 (2^-8 relative on
// weights of ~0.3); the same autocast kernels run on both sides, and the
// weights are bit-identical, so the bound is 0.
TEST_F(RecipeParityTest, AmpBf16MatchesAutocast) {
  ASSERT_NO_FATAL_FAILURE(train({.name = "amp_bf16", .train = "precision = \"amp_bf16\"\n"}));
  const auto weights = saved();
  EXPECT_EQ(weights.at("net.0.weight").scalar_type(), torch::kFloat);
  expect_weights(weights, "amp_bf16", 0);
  expect_series("loss", "amp_bf16", 0);
}

// bfloat16 weights, activations and momentum (model.to(torch.bfloat16)),
// against torch.optim.SGD as it runs on the CPU by default (one tensor at a
// time, buf.mul_(momentum) in float32 arithmetic): the weights runner saves
// are bf16 and bit-identical.
TEST_F(RecipeParityTest, Bf16WeightsEqualPyTorchsBf16Run) {
  ASSERT_NO_FATAL_FAILURE(train({.name = "bf16", .train = "precision = \"bf16\"\n"}));
  const auto weights = saved();
  EXPECT_EQ(weights.at("net.0.weight").scalar_type(), torch::kBFloat16);
  expect_weights(weights, "bf16", 0);
  expect_series("loss", "bf16", 0);
}

// float16 autocast with loss scaling on inputs large enough that float16
// gradients overflow at first: the steps GradScaler skips, and the scale
// each step used (65536, halved after each skip), are runner's too.
TEST_F(RecipeParityTest, AmpFp16SkipsAndBacksOffAsGradScaler) {
  const torch::Tensor skipped = reference().series("amp_fp16", "skipped");
  const auto skips = static_cast<std::int64_t>(skipped.sum().item<double>());
  ASSERT_GT(skips, 0) << "the oracle's data must overflow float16 gradients at least once";
  ASSERT_LT(skips, kSteps) << "and let some steps through";
  ASSERT_NO_FATAL_FAILURE(
      train({.name = "amp_fp16", .data = "data_fp16.pt", .train = "precision = \"amp_fp16\"\n"}));
  expect_series("loss_scale", "amp_fp16", 0);
  expect_series("skipped", "amp_fp16", 0);
  expect_series("loss", "amp_fp16", 0);
  const std::vector<double> scales = recorded("loss_scale");
  const std::vector<double> skips_recorded = recorded("skipped");
  EXPECT_EQ(scales.front(), 65536.0);
  for (std::size_t step = 1; step < scales.size(); ++step)
    EXPECT_EQ(scales[step],
              skips_recorded[step - 1] == 1 ? scales[step - 1] / 2 : scales[step - 1])
        << "step " << step;
  EXPECT_EQ(runner::test::query_text(
                db_, "SELECT printf('%d', value) FROM metrics WHERE name = 'skipped_steps'"),
            std::to_string(skips));
  expect_weights(saved(), "amp_fp16", 0);
}

// AdamW with impl = "fused" against torch.optim.AdamW(fused=True): one kernel each.
TEST_F(RecipeParityTest, FusedAdamWMatchesTorchFused) {
  ASSERT_NO_FATAL_FAILURE(
      train({.name = "adamw_fused",
             .optimizer =
                 "plugin = \"adamw\"\nlr = 0.01\nweight_decay = 0.05\nimpl = \"fused\"\n"}));
  expect_weights(saved(), "adamw_fused", 0);
  expect_series("loss", "adamw_fused", 0);
}

// Bad recipes: refused before anything runs, on the synthetic loader (no oracle needed).
class RecipeInputTest : public runner::test::CliTestBase {
 protected:
  RecipeInputTest() : CliTestBase("runner-recipe-input-") {}

  // An mlp on 16 synthetic features, with the [optimizer] table's lines,
  // more [train] lines, more tables, and more [model] lines.
  fs::path experiment(const std::string& optimizer, const std::string& train,
                      const std::string& rest = "", const std::string& model = "") const {
    return write("bad.toml", "[model]\nplugin = \"mlp\"\nhidden = [8]\n" + model +
                                 "\n[data]\nplugin = \"synthetic\"\nshape = [16]\nclasses = 5\n"
                                 "size = 32\nbatch_size = 4\n\n[optimizer]\n" + optimizer +
                                 "\n[train]\nsteps = 4\nwarmup = 0\n" + train + rest);
  }

  const std::string sgd_ = "plugin = \"sgd\"\nlr = 0.1\n";
};

TEST_F(RecipeInputTest, AccumulationOfZeroMicroBatches) {
  expect_refused(experiment(sgd_, "accumulate = 0\n"), "accumulate = 0",
                 "'train.accumulate' must be between 1 and 4096, found 0");
}

TEST_F(RecipeInputTest, ClippingToANormOfZero) {
  expect_refused(experiment(sgd_, "clip_grad_norm = 0\n"), "clip_grad_norm = 0",
                 "'train.clip_grad_norm' must be > 0, found 0");
}

TEST_F(RecipeInputTest, AnUnknownOptimizerImpl) {
  expect_refused(experiment("plugin = \"adamw\"\nimpl = \"vectorized\"\n", ""),
                 "impl = \"vectorized\"",
                 "'optimizer.impl' must be one of \"loop\", \"foreach\", \"fused\", found "
                 "\"vectorized\"");
}

TEST_F(RecipeInputTest, OneCycleOnAnOptimizerWithoutMomentum) {
  expect_refused(experiment("plugin = \"adagrad\"\nlr = 0.1\n", "",
                            "\n[schedule]\ntype = \"one_cycle\"\n"),
                 "type = \"one_cycle\"",
                 "schedule type \"one_cycle\" cycles the momentum, but optimizer 'adagrad' has "
                 "none");
}

TEST_F(RecipeInputTest, AmpFp16WithAnOptimizerThatCannotUnscale) {
  expect_refused(experiment("plugin = \"copying_sgd\"\n", "precision = \"amp_fp16\"\n"),
                 "precision = \"amp_fp16\"",
                 "precision \"amp_fp16\" unscales the gradients of the optimizer's parameter "
                 "groups, but optimizer 'copying_sgd' does not hold the model's parameters in its "
                 "groups",
                 runner::test::test_plugins("good"));
}

// What a fused impl on a device without its kernel raises (runner::OptionError
// from the optimizer's factory; the real refusal's text is in optim_test),
// reported where the file sets the option.
TEST_F(RecipeInputTest, AnOptimizersRefusedImplIsReportedAtTheOption) {
  expect_refused(experiment("plugin = \"copying_sgd\"\nimpl = \"fused\"\n", ""),
                 "impl = \"fused\"",
                 "'optimizer.impl' of optimizer plugin 'copying_sgd': impl = \"fused\" has no "
                 "kernel for device 'cpu'",
                 runner::test::test_plugins("good"));
}

TEST_F(RecipeInputTest, ChannelsLastOnFlatSamples) {
  expect_refused(experiment(sgd_, "", "", "channels_last = true\n"), "channels_last = true",
                 "model.channels_last needs image samples [channels, height, width]; the "
                 "loader's samples have shape [16]");
}

}  // namespace
