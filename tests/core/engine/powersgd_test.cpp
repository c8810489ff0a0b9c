// The `powersgd` comm hook over a real two-rank Gloo group (two threads of
// this process meeting through a FileStore): the bytes it sends, its error
// feedback, parity with PyTorch's powerSGD_hook (tests/oracle/
// powersgd_reference.py), and the option values it refuses.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/serialize.h>
#include <torch/types.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "runner/comm_hook.hpp"
#include "runner/common/error.hpp"
#include "runner/engine/process_group.hpp"
#include "runner/experiment/experiment.hpp"
#include "runner/host/host.hpp"
#include "runner/options.hpp"
#include "support/expect_throw_msg.hpp"
#include "support/two_ranks.hpp"
#include "support/python_oracle.hpp"

namespace fs = std::filesystem;

namespace {

using Group = c10::intrusive_ptr<c10d::ProcessGroup>;
using Shape = std::vector<std::int64_t>;
using Shapes = std::vector<Shape>;
using Values = std::map<std::string, runner::OptionValue>;

const fs::path kPlugins = fs::path(RUNNER_BINARY_DIR) / "lib" / "runner" / "plugins";

// A fresh path in the temporary folder.
fs::path scratch(const std::string& suffix) {
  static int counter = 0;
  return fs::temp_directory_path() / ("runner-powersgd-test-" + std::to_string(::getpid()) + "-" +
                                      std::to_string(counter++) + suffix);
}

using runner::test::on_two_ranks;

std::int64_t numel(const Shape& shape) {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}

// One bucket's gradients: shapes packed one after another in a flat buffer, as DDP's.
class Layout {
 public:
  explicit Layout(Shapes shapes) : shapes_(std::move(shapes)) {
    for (const Shape& shape : shapes_) {
      offsets_.push_back(static_cast<std::size_t>(size_));
      lengths_.push_back(static_cast<std::size_t>(numel(shape)));
      size_ += numel(shape);
    }
  }
  [[nodiscard]] std::int64_t size() const { return size_; }
  [[nodiscard]] const Shapes& shapes() const { return shapes_; }
  // The GradBucket over `buffer` (it refers to this layout's shapes).
  [[nodiscard]] c10d::GradBucket bucket(std::size_t index, std::size_t count,
                                        const at::Tensor& buffer) const {
    std::vector<c10::IntArrayRef> sizes(shapes_.begin(), shapes_.end());
    std::vector<at::Tensor> parameters;
    for (const Shape& shape : shapes_) parameters.push_back(torch::zeros(shape));
    return c10d::GradBucket(index, count, buffer, offsets_, lengths_, sizes, parameters,
                            std::nullopt);
  }

 private:
  Shapes shapes_;
  std::vector<std::size_t> offsets_;
  std::vector<std::size_t> lengths_;
  std::int64_t size_ = 0;
};

struct StepResult {
  std::vector<at::Tensor> outputs;
  std::vector<std::int64_t> payloads;
};

// One step as the Reducer drives it: every bucket (a copy of its input)
// handed to the hook in index order, then every future waited for; or, with
// `one_at_a_time`, each waited for before the next is handed over.
StepResult step(runner::CommHook& hook, const Group& group, const std::vector<Layout>& layouts,
                const std::vector<at::Tensor>& inputs, bool one_at_a_time = false) {
  std::vector<runner::CommLaunch> launches;
  for (std::size_t i = 0; i < layouts.size(); ++i) {
    c10d::GradBucket bucket = layouts[i].bucket(i, layouts.size(), inputs[i].clone());
    launches.push_back(hook.run(bucket, group));
    if (one_at_a_time) launches.back().future->wait();
  }
  StepResult result;
  for (const runner::CommLaunch& launch : launches) {
    launch.future->wait();
    const c10::IValue& value = launch.future->value();
    result.outputs.push_back((value.isTensor() ? value.toTensor() : value.toTensorVector().at(0)).clone());
    result.payloads.push_back(launch.payload_bytes);
  }
  return result;
}

// Values PowerSGD sends for a bucket of `shapes`: each gradient viewed as an
// n x m matrix (n its first dimension) sends its P (n r) and Q (m r), r =
// min(n, m, rank), when n m > (n + m) r min_rate, else its n m values.
std::int64_t sent_values(const Shapes& shapes, std::int64_t rank, double min_rate) {
  std::int64_t sent = 0;
  for (const Shape& shape : shapes) {
    const std::int64_t n = shape.empty() ? 1 : shape[0];
    const std::int64_t m = numel(shape) / n;
    const std::int64_t r = std::min({n, m, rank});
    const bool compressed = static_cast<double>((n + m) * r) * min_rate < static_cast<double>(n * m);
    sent += compressed ? (n + m) * r : n * m;
  }
  return sent;
}

class PowerSgdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The plugins by file: a folder of built-ins another build is rewriting
    // could hold one of an older ABI.
    for (const char* name : {"powersgd", "mlp", "synthetic", "sgd"})
      host_.load(kPlugins / ("runner_plugin_" + std::string(name) + ".so"));
  }
  // One hook per rank.
  std::vector<std::unique_ptr<runner::CommHook>> hooks(const Values& values) {
    std::vector<std::unique_ptr<runner::CommHook>> out;
    for (int rank = 0; rank < 2; ++rank)
      out.push_back(host_.make_comm_hook("powersgd", runner::Options(values)));
    return out;
  }
  runner::PluginHost host_;
};

TEST_F(PowerSgdTest, SendsTheWholeBucketUntilItStartsThenPsQsAndWhatIsNotWorthCompressing) {
  const Shapes first{{64, 32}, {32}, {16, 48}, {10}, {4, 4}, {8, 4, 3, 3}};
  const Shapes second{{24, 20}, {5}};
  // By hand, at rank 2 and the default min_compression_rate 2: [64, 32]
  // sends P 64x2 and Q 32x2 = 192 (192 x 2 < 2048); [32] is 32x1 and would
  // send 33 (its 32 go as they are); [16, 48]: 32 + 96 = 128; [10]: 10;
  // [4, 4] would send 16 = its size, a rate of 1 < 2: its 16 go as they are;
  // [8, 4, 3, 3] is 8x36: 16 + 72 = 88. The second bucket: [24, 20] 48 + 40, [5] 5.
  ASSERT_EQ(sent_values(first, 2, 2.0), 192 + 32 + 128 + 10 + 16 + 88);
  ASSERT_EQ(sent_values(second, 2, 2.0), 88 + 5);
  const std::vector<Layout> layouts{Layout(first), Layout(second)};

  auto hook = hooks({{"matrix_approximation_rank", std::int64_t{2}},
                     {"start_powerSGD_iter", std::int64_t{2}}});
  std::vector<std::vector<StepResult>> results(2);
  std::vector<std::vector<std::vector<at::Tensor>>> inputs(2);
  const auto errors = on_two_ranks([&](int rank, const Group& group) {
    const auto r = static_cast<std::size_t>(rank);
    for (int s = 0; s < 4; ++s) {
      // The same draws on both ranks, scaled differently.
      torch::Generator generator = at::make_generator<at::CPUGeneratorImpl>(s);
      std::vector<at::Tensor> in;
      for (const Layout& layout : layouts)
        in.push_back(torch::randn({layout.size()}, generator) * (rank == 0 ? 1.0 : -0.5) + s);
      inputs[r].push_back(in);
      results[r].push_back(step(*hook[r], group, layouts, in));
    }
  });
  ASSERT_EQ(errors, (std::vector<std::string>{"", ""}));
  const std::int64_t f = sizeof(float);
  for (const auto& rank : results) {
    // Steps 0 and 1: the whole buckets (the counter moves with the last
    // bucket only, or bucket 0 would be compressed at step 1).
    for (int s : {0, 1})
      EXPECT_EQ(rank[s].payloads, (std::vector<std::int64_t>{layouts[0].size() * f,
                                                             layouts[1].size() * f}))
          << "step " << s;
    for (int s : {2, 3})
      EXPECT_EQ(rank[s].payloads, (std::vector<std::int64_t>{466 * f, 93 * f})) << "step " << s;
  }
  // Before it starts: the exact mean; after: the same approximation on both ranks.
  for (std::size_t b = 0; b < 2; ++b) {
    const at::Tensor mean = (inputs[0][0][b] + inputs[1][0][b]) / 2;
    EXPECT_TRUE(torch::allclose(results[0][0].outputs[b], mean, 0, 1e-6));
    EXPECT_TRUE(torch::equal(results[0][3].outputs[b], results[1][3].outputs[b]));
    const at::Tensor later = (inputs[0][3][b] + inputs[1][3][b]) / 2;
    EXPECT_FALSE(torch::allclose(results[0][3].outputs[b], later, 1e-3, 1e-3));
  }

  // At rank 4 from the first step (no state kept, so it may start at 0):
  // [64, 32] 96 x 4; [32] 32; [16, 48] 64 x 4; [10]; [4, 4] 16 (32 > 16);
  // [8, 4, 3, 3] 44 x 4.
  ASSERT_EQ(sent_values(first, 4, 1.0), 384 + 32 + 256 + 10 + 16 + 176);
  auto rank4 = hooks({{"matrix_approximation_rank", std::int64_t{4}},
                      {"start_powerSGD_iter", std::int64_t{0}},
                      {"min_compression_rate", 1.0},
                      {"use_error_feedback", false},
                      {"warm_start", false}});
  std::vector<std::int64_t> sent(2);
  const auto errors4 = on_two_ranks([&](int rank, const Group& group) {
    const auto r = static_cast<std::size_t>(rank);
    torch::Generator generator = at::make_generator<at::CPUGeneratorImpl>(rank);
    sent[r] = step(*rank4[r], group, {layouts[0]}, {torch::randn({layouts[0].size()}, generator)})
                  .payloads[0];
  });
  ASSERT_EQ(errors4, (std::vector<std::string>{"", ""}));
  EXPECT_EQ(sent, (std::vector<std::int64_t>{874 * f, 874 * f}));
}

// The same gradients step after step: the sum of the outputs stays within a
// bounded distance of the sum of the inputs' means with error feedback (what
// compression left out is sent later), and falls behind linearly without.
TEST_F(PowerSgdTest, ErrorFeedbackKeepsTheSumOfOutputsOnTheSumOfInputs) {
  const std::vector<Layout> layouts{Layout({{64, 32}, {32}})};
  constexpr int kSteps = 240;
  // |sum of outputs - sum of means| after kSteps / 2 and kSteps steps, and |sum of means|.
  auto residuals = [&](bool feedback) {
    auto hook = hooks({{"matrix_approximation_rank", std::int64_t{1}},
                       {"start_powerSGD_iter", std::int64_t{2}},
                       {"use_error_feedback", feedback}});
    std::vector<double> out(3);
    const auto errors = on_two_ranks([&](int rank, const Group& group) {
      torch::Generator generator = at::make_generator<at::CPUGeneratorImpl>(rank + 11);
      const at::Tensor gradient = torch::randn({layouts[0].size()}, generator);
      std::vector<at::Tensor> both{gradient.clone()};
      group->allreduce(both)->wait();
      const at::Tensor mean = both[0] / 2;
      at::Tensor residual = torch::zeros_like(mean);
      for (int s = 1; s <= kSteps; ++s) {
        residual += step(*hook[static_cast<std::size_t>(rank)], group, layouts, {gradient})
                        .outputs[0] - mean;
        if (rank == 0 && s == kSteps / 2) out[0] = residual.norm().item<double>();
      }
      if (rank == 0) {
        out[1] = residual.norm().item<double>();
        out[2] = (mean * kSteps).norm().item<double>();
      }
    });
    EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
    return out;
  };
  const std::vector<double> with = residuals(true);
  const std::vector<double> without = residuals(false);
  // With it the residual (minus the mean error left on the ranks) does not grow...
  EXPECT_LT(with[1], 1.3 * with[0]) << with[0] << " then " << with[1];
  EXPECT_LT(with[1], 0.2 * with[2]) << with[1] << " of " << with[2];
  // ... without it, rank 1 of a 64x32 Gaussian matrix misses most of it at every step.
  EXPECT_GT(without[1], 1.8 * without[0]) << without[0] << " then " << without[1];
  EXPECT_GT(without[1], 0.7 * without[2]) << without[1] << " of " << without[2];
}

// Eight buckets in flight at once, their collectives chained from Gloo's
// threads while the next buckets are handed over: the same results as one
// bucket at a time (a collective started out of order on one rank would meet
// another bucket's on the other, and fail or mix them).
TEST_F(PowerSgdTest, BucketsInFlightTogetherGiveWhatOneAtATimeGives) {
  std::vector<Layout> layouts;
  for (std::int64_t b = 0; b < 8; ++b) layouts.emplace_back(Shapes{{24 + 8 * b, 16}, {16}});
  const Values values{{"matrix_approximation_rank", std::int64_t{2}},
                      {"start_powerSGD_iter", std::int64_t{2}}};
  auto together = hooks(values);
  auto alone = hooks(values);
  std::vector<std::vector<StepResult>> results(4);  // [rank * 2 + one_at_a_time][step]
  const auto errors = on_two_ranks([&](int rank, const Group& group) {
    const auto r = static_cast<std::size_t>(rank);
    for (int s = 0; s < 12; ++s) {
      torch::Generator generator = at::make_generator<at::CPUGeneratorImpl>(100 * rank + s);
      std::vector<at::Tensor> in;
      for (const Layout& layout : layouts) in.push_back(torch::randn({layout.size()}, generator));
      results[2 * r].push_back(step(*together[r], group, layouts, in));
      results[2 * r + 1].push_back(step(*alone[r], group, layouts, in, true));
    }
  });
  ASSERT_EQ(errors, (std::vector<std::string>{"", ""}));
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t s = 0; s < 12; ++s)
      for (std::size_t b = 0; b < layouts.size(); ++b) {
        EXPECT_TRUE(torch::equal(results[2 * r][s].outputs[b], results[2 * r + 1][s].outputs[b]))
            << "rank " << r << " step " << s << " bucket " << b;
        EXPECT_TRUE(torch::equal(results[2 * r][s].outputs[b], results[0][s].outputs[b]));
      }
}

// --- parity with PyTorch ------------------------------------------------------

struct Case {
  Values options;
  std::vector<Shapes> buckets;
  int steps = 0;
  int seed = 0;
};

std::string json_of(const runner::OptionValue& value) {
  if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const auto* i = std::get_if<std::int64_t>(&value)) return std::to_string(*i);
  char text[64];
  std::snprintf(text, sizeof text, "%.17g", std::get<double>(value));
  return text;
}

std::string json_of(const std::vector<Case>& cases) {
  auto list = [](const auto& items, const auto& render) {
    std::string out = "[";
    for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + render(items[i]);
    return out + "]";
  };
  auto shape = [&](const Shape& s) {
    return list(s, [](std::int64_t d) { return std::to_string(d); });
  };
  auto bucket = [&](const Shapes& b) { return list(b, shape); };
  return list(cases, [&](const Case& c) {
    std::string options;
    for (const auto& [name, value] : c.options)
      options += (options.empty() ? "\"" : ", \"") + name + "\": " + json_of(value);
    return "{\"options\": {" + options + "}, \"buckets\": " + list(c.buckets, bucket) +
           ", \"steps\": " + std::to_string(c.steps) + ", \"seed\": " + std::to_string(c.seed) + "}";
  });
}

// [case][step][bucket] of one of the oracle's lists ("inputs" or "outputs").
using Steps = std::vector<std::vector<at::Tensor>>;
std::vector<Steps> read_reference(const fs::path& file, const std::string& key) {
  std::ifstream in(file, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  const c10::IValue all = torch::pickle_load(bytes);
  std::vector<Steps> out;
  for (const c10::IValue& c : all.toList()) {
    Steps steps;
    for (const c10::IValue& s : c.toGenericDict().at(key).toList()) {
      std::vector<at::Tensor> buckets;
      for (const c10::IValue& b : s.toList()) buckets.push_back(b.toTensor());
      steps.push_back(buckets);
    }
    out.push_back(steps);
  }
  return out;
}

// Tolerance: every output within 1e-5 of the largest magnitude of PyTorch's
// output for that bucket and step (max |runner - torch| / max |torch|).
constexpr double kTolerance = 1e-5;

TEST_F(PowerSgdTest, MatchesPyTorchsPowerSGDHookStepByStep) {
  RUNNER_REQUIRE_ORACLE("torch,numpy");
  const Shapes mixed{{64, 32}, {32}, {16, 48}, {10}, {4, 4}};
  const std::vector<Case> cases{
      // Ranks 2 (Gram-Schmidt), warm start and error feedback, three buckets,
      // the last with nothing worth compressing (empty P and Q allreduces).
      {{{"matrix_approximation_rank", std::int64_t{2}}, {"start_powerSGD_iter", std::int64_t{2}}},
       {mixed, {{24, 20}, {8, 4, 3, 3}, {24, 20}, {5}}, {{7}, {3}}},
       6,
       1},
      // Same-shaped gradients batched (one of them a 4-D one of the same
      // matrix shape), another seed, an epsilon large enough to show (a
      // 1e-8 would not: P Q^T = P P^T M is the same for any orthonormal P).
      {{{"matrix_approximation_rank", std::int64_t{2}},
        {"start_powerSGD_iter", std::int64_t{2}},
        {"batch_tensors_with_same_shape", true},
        {"random_seed", std::int64_t{7}},
        {"orthogonalization_epsilon", 0.5}},
       {{{24, 20}, {24, 20}, {8, 4, 3, 3}, {8, 36}, {5}}, {{16, 16}, {16, 16}, {16, 16}, {3}}},
       5,
       2},
      // Rank 3 (QR) from the first step, without kept state: a fresh random
      // Q per bucket per step.
      {{{"matrix_approximation_rank", std::int64_t{3}},
        {"start_powerSGD_iter", std::int64_t{0}},
        {"use_error_feedback", false},
        {"warm_start", false},
        {"min_compression_rate", 1.0},
        {"random_seed", std::int64_t{5}}},
       {mixed, {{12, 30}, {6}}},
       4,
       3},
      // Rank 4 (QR, which ignores the epsilon; rank 1 for the vectors) with
      // warm start and error feedback; min_compression_rate 0.5 compresses
      // the vectors [32] and [10] as 32x1 and 10x1 matrices, as PyTorch does.
      {{{"matrix_approximation_rank", std::int64_t{4}},
        {"start_powerSGD_iter", std::int64_t{3}},
        {"min_compression_rate", 0.5},
        {"orthogonalization_epsilon", 0.5},
        {"random_seed", std::int64_t{3}}},
       {mixed},
       6,
       4},
  };
  const fs::path spec = scratch(".json");
  const fs::path stem = scratch("");
  std::ofstream(spec) << json_of(cases);
  const auto r = runner::test::run_oracle("powersgd_reference.py",
                                          {"--cases", spec.string(), "--out", stem.string()});
  ASSERT_EQ(r.code, 0) << r.output;
  std::vector<std::vector<Steps>> inputs, expected;
  for (int rank = 0; rank < 2; ++rank) {
    const fs::path file = stem.string() + ".rank" + std::to_string(rank) + ".pt";
    inputs.push_back(read_reference(file, "inputs"));
    expected.push_back(read_reference(file, "outputs"));
    fs::remove(file);
  }
  fs::remove(spec);

  double worst = 0;
  for (std::size_t c = 0; c < cases.size(); ++c) {
    std::vector<Layout> layouts;
    for (const Shapes& shapes : cases[c].buckets) layouts.emplace_back(shapes);
    auto hook = hooks(cases[c].options);
    std::vector<Steps> actual(2);
    const auto errors = on_two_ranks([&](int rank, const Group& group) {
      const auto r = static_cast<std::size_t>(rank);
      for (const auto& in : inputs[r][c])
        actual[r].push_back(step(*hook[r], group, layouts, in).outputs);
    });
    ASSERT_EQ(errors, (std::vector<std::string>{"", ""})) << "case " << c;
    for (std::size_t rank = 0; rank < 2; ++rank) {
      ASSERT_EQ(actual[rank].size(), expected[rank][c].size());
      for (std::size_t s = 0; s < actual[rank].size(); ++s)
        for (std::size_t b = 0; b < layouts.size(); ++b) {
          const at::Tensor& a = actual[rank][s][b];
          const at::Tensor& e = expected[rank][c][s][b];
          ASSERT_EQ(a.sizes(), e.sizes());
          const double error = ((a - e).abs().max() / e.abs().max()).item<double>();
          EXPECT_LE(error, kTolerance) << "case " << c << " rank " << rank << " step " << s
                                       << " bucket " << b;
          worst = std::max(worst, error);
        }
    }
  }
  std::printf("largest difference from PyTorch: %g of the output's largest magnitude\n", worst);
  RecordProperty("max_relative_difference", std::to_string(worst));
}

// --- options ------------------------------------------------------------------

TEST_F(PowerSgdTest, DefaultsAreThoseOfPyTorchsPowerSGDState) {
  const runner::PluginDescriptor* plugin = host_.find(runner::PluginKind::comm_hook, "powersgd");
  ASSERT_NE(plugin, nullptr);
  const std::map<std::string, runner::OptionValue> expected{
      {"matrix_approximation_rank", std::int64_t{1}},
      {"start_powerSGD_iter", std::int64_t{1000}},
      {"min_compression_rate", 2.0},
      {"use_error_feedback", true},
      {"warm_start", true},
      {"orthogonalization_epsilon", 0.0},
      {"random_seed", std::int64_t{0}},
      {"batch_tensors_with_same_shape", false}};
  std::map<std::string, runner::OptionValue> declared;
  for (const runner::OptionSpec& spec : plugin->schema.specs())
    declared[spec.name] = spec.default_value.value();
  EXPECT_EQ(declared, expected);
}

TEST_F(PowerSgdTest, BadValuesAreRefusedWhereTheExperimentWritesThem) {
  const fs::path dir = scratch("-experiment");
  fs::create_directories(dir);
  const fs::path file = dir / "exp.toml";
  // The line after the [comm_hook] plugin line is line 12.
  auto error_of = [&](const std::string& line) {
    std::ofstream(file) << "[model]\nplugin = \"mlp\"\n[data]\nplugin = \"synthetic\"\n"
                           "[optimizer]\nplugin = \"sgd\"\nlr = 0.1\n[distributed]\n"
                           "world_size = 2\n[comm_hook]\nplugin = \"powersgd\"\n"
                        << line << "\n";
    try {
      (void)runner::load_experiment(file, host_);
    } catch (const runner::Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  // file:12:COLUMN of the value, after "KEY = ".
  auto at = [&](const std::string& key) {
    return file.string() + ":12:" + std::to_string(key.size() + 4) + ": 'comm_hook." + key + "' ";
  };
  EXPECT_EQ(error_of("matrix_approximation_rank = 0"),
            at("matrix_approximation_rank") + "must be >= 1, found 0");
  EXPECT_EQ(error_of("start_powerSGD_iter = -1"),
            at("start_powerSGD_iter") + "must be >= 0, found -1");
  EXPECT_EQ(error_of("min_compression_rate = -0.5"),
            at("min_compression_rate") + "must be >= 0, found -0.5");
  EXPECT_EQ(error_of("orthogonalization_epsilon = -1"),
            at("orthogonalization_epsilon") + "must be >= 0, found -1");
  EXPECT_EQ(error_of("random_seed = 4294967296"),
            at("random_seed") + "must be between 0 and 4294967295, found 4294967296");
  EXPECT_EQ(error_of("use_error_feedback = 1"),
            at("use_error_feedback") + "must be a boolean, found an integer");
  EXPECT_EQ(error_of("matrix_approximation_rank = 1.5"),
            at("matrix_approximation_rank") + "must be an integer, found a float");
  EXPECT_EQ(error_of("random_seed = 4294967295"), "(no error)");
  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

TEST_F(PowerSgdTest, KeptStateNeedsTwoStepsOfPlainAllreduceAsInPyTorch) {
  const std::string library = host_.find(runner::PluginKind::comm_hook, "powersgd")->library;
  const std::string detail =
      "must be at least 2 with use_error_feedback or warm_start on, found 1 (the state they keep "
      "per bucket must not see DDP rebuild its buckets after the first step, as PyTorch's "
      "PowerSGDState requires)";
  for (const Values& values :
       {Values{{"start_powerSGD_iter", std::int64_t{1}}},
        Values{{"start_powerSGD_iter", std::int64_t{1}}, {"use_error_feedback", false}},
        Values{{"start_powerSGD_iter", std::int64_t{1}}, {"warm_start", false}}}) {
    try {
      (void)host_.make_comm_hook("powersgd", runner::Options(values));
      ADD_FAILURE() << "start_powerSGD_iter = 1 was accepted";
    } catch (const runner::PluginOptionError& e) {
      EXPECT_EQ(e.option(), "start_powerSGD_iter");
      EXPECT_EQ(e.detail(), detail);
      EXPECT_EQ(std::string(e.what()), "comm_hook plugin 'powersgd' (" + library +
                                           ") refused option 'start_powerSGD_iter': " + detail);
    }
  }
  // Without either, nothing is kept: compression may start at once.
  EXPECT_NE(host_.make_comm_hook("powersgd",
                                 runner::Options({{"start_powerSGD_iter", std::int64_t{0}},
                                                  {"use_error_feedback", false},
                                                  {"warm_start", false}})),
            nullptr);
}

}  // namespace
