// Gradient synchronisation over a real two-rank Gloo group (two threads of
// this process meeting through a FileStore), with the built-in comm hooks:
// c10d::Reducer (DDP's engine) and the reduce-after-backward buckets.
#include "runner/engine/reducer.hpp"

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>
#include <torch/utils.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <functional>
#include <thread>

#include "runner/comm_hook.hpp"
#include "runner/common/error.hpp"
#include "runner/engine/process_group.hpp"
#include "runner/host/host.hpp"
#include "runner/options.hpp"
#include "support/expect_throw_msg.hpp"
#include "support/two_ranks.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kBuiltins = fs::path(RUNNER_BINARY_DIR) / "lib" / "runner" / "plugins";
const fs::path kGood = fs::path(RUNNER_BINARY_DIR) / "tests" / "support" / "plugins" / "good";

using runner::test::on_two_ranks;

using Group = c10::intrusive_ptr<c10d::ProcessGroup>;

// Three parameters of 3, 5 and 2 floats.
std::vector<torch::Tensor> parameters() {
  return {torch::zeros({3}, torch::requires_grad()), torch::zeros({5}, torch::requires_grad()),
          torch::zeros({1, 2}, torch::requires_grad())};
}

// Random numbers from a generator of their own: the two ranks are threads
// of one process, and LibTorch's default generator is shared by them.
torch::Tensor random(at::IntArrayRef shape, std::uint64_t seed) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randn(shape, generator) * 0.2;
}

// A small model, the same on every rank (seeded), and its named parameters.
torch::nn::Sequential model() {
  torch::nn::Sequential m(torch::nn::Linear(16, 64), torch::nn::ReLU(),
                          torch::nn::Linear(64, 64), torch::nn::ReLU(), torch::nn::Linear(64, 4));
  torch::NoGradGuard no_grad;
  std::uint64_t seed = 7;
  for (auto& p : m->parameters()) p.copy_(random(p.sizes(), seed++));
  return m;
}
std::vector<std::pair<std::string, torch::Tensor>> named(const torch::nn::Sequential& m) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : m->named_parameters()) out.emplace_back(item.key(), item.value());
  return out;
}
// Rank `rank`'s inputs at `step`: different on every rank.
torch::Tensor inputs(int rank, int step) {
  return random({8, 16}, static_cast<std::uint64_t>(100 + 10 * rank + step)) * 5.0;
}

// The allreduce plugin, with the time of each call and of backward's end.
class TimedHook final : public runner::CommHook {
 public:
  explicit TimedHook(runner::CommHook& inner) : inner_(inner) {}
  runner::CommLaunch run(c10d::GradBucket& bucket, const Group& group) override {
    starts.push_back(std::chrono::steady_clock::now());
    return inner_.run(bucket, group);
  }
  std::vector<std::chrono::steady_clock::time_point> starts;

 private:
  runner::CommHook& inner_;
};

class ReducerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_.load(kBuiltins);
    host_.load(kGood);
  }
  std::unique_ptr<runner::CommHook> hook(const std::string& name, runner::Options options = {}) {
    return host_.make_comm_hook(name, options);
  }
  std::vector<std::unique_ptr<runner::CommHook>> hooks(const std::string& name) {
    std::vector<std::unique_ptr<runner::CommHook>> out;
    out.push_back(hook(name));
    out.push_back(hook(name));
    return out;
  }
  runner::PluginHost host_;
};

runner::SyncOptions bucket_cap(std::int64_t bytes) {
  runner::SyncOptions options;
  options.bucket_bytes = bytes;
  return options;
}

TEST_F(ReducerTest, AfterBackwardBucketsFollowReverseParameterOrderUpToTheCap) {
  // 32 bytes: parameters 2 (8 B) and 1 (20 B) share a bucket, 0 (12 B) would overflow it.
  auto allreduce = hook("allreduce");
  const auto errors = on_two_ranks([&](int, const Group& group) {
    auto sync = runner::make_after_backward_sync(parameters(), {}, group, *allreduce, bucket_cap(32));
    EXPECT_EQ(sync->layout(), (std::vector<std::vector<std::size_t>>{{2, 1}, {0}}));
    auto one_each = runner::make_after_backward_sync(parameters(), {}, group, *allreduce, bucket_cap(1));
    EXPECT_EQ(one_each->bucket_count(), 3u);
  });
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
}

TEST_F(ReducerTest, AllreduceAfterBackwardAveragesEveryGradientAcrossRanks) {
  auto allreduce = hooks("allreduce");
  std::vector<std::vector<torch::Tensor>> params{parameters(), parameters()};
  std::vector<runner::CommStep> steps(2);
  const auto errors = on_two_ranks([&](int rank, const Group& group) {
    auto& mine = params[static_cast<std::size_t>(rank)];
    // Rank 0 has gradients 1 (and none for parameter 1), rank 1 has 2.
    for (std::size_t i = 0; i < mine.size(); ++i)
      if (rank == 1 || i != 1) mine[i].mutable_grad() = torch::full_like(mine[i], rank + 1.0);
    auto sync = runner::make_after_backward_sync(mine, {}, group,
                                                 *allreduce[static_cast<std::size_t>(rank)],
                                                 bucket_cap(32));
    sync->after_backward(/*sync=*/true);
    steps[static_cast<std::size_t>(rank)] = sync->take_step();
  });
  ASSERT_EQ(errors, (std::vector<std::string>{"", ""}));
  for (const auto& mine : params) {
    EXPECT_TRUE(torch::equal(mine[0].grad(), torch::full({3}, 1.5)));
    EXPECT_TRUE(torch::equal(mine[1].grad(), torch::full({5}, 1.0)));  // (0 + 2) / 2
    EXPECT_TRUE(torch::equal(mine[2].grad(), torch::full({1, 2}, 1.5)));
  }
  for (const auto& step : steps) {
    EXPECT_EQ(step.buckets, 2);
    EXPECT_EQ(step.bucket_bytes, 40);   // 28 + 12 bytes
    EXPECT_EQ(step.payload_bytes, 40);  // allreduce sends the buckets as they are
    EXPECT_GE(step.span_ns, 0.0);
  }
}

TEST_F(ReducerTest, AnExceptionInAHookNamesThePluginAndItsLibrary) {
  auto fp16 = hooks("fp16_compress");
  const auto errors = on_two_ranks([&](int rank, const Group& group) {
    // An undefined buffer: the hook's first cast throws, before any collective.
    c10d::GradBucket bucket(0, 1, torch::Tensor(), {}, {}, {}, {}, std::nullopt);
    (void)fp16[static_cast<std::size_t>(rank)]->run(bucket, group);
  });
  const std::string prefix =
      "comm_hook plugin 'fp16_compress' (" +
      host_.library_of(runner::PluginKind::comm_hook, "fp16_compress").path.string() +
      ") failed in run: ";
  for (const std::string& error : errors) EXPECT_EQ(error.substr(0, prefix.size()), prefix) << error;
}

TEST_F(ReducerTest, CompressedHooksSendHalfTheBytes) {
  for (const std::string name : {"fp16_compress", "bf16_compress"}) {
    auto compress = hooks(name);
    std::vector<std::vector<torch::Tensor>> params{parameters(), parameters()};
    std::vector<runner::CommStep> steps(2);
    const auto errors = on_two_ranks([&](int rank, const Group& group) {
      auto& mine = params[static_cast<std::size_t>(rank)];
      for (auto& p : mine) p.mutable_grad() = torch::full_like(p, rank == 0 ? 0.5 : 2.5);
      auto sync = runner::make_after_backward_sync(mine, {}, group,
                                                   *compress[static_cast<std::size_t>(rank)],
                                                   bucket_cap(1 << 20));
      sync->after_backward(true);
      steps[static_cast<std::size_t>(rank)] = sync->take_step();
    });
    ASSERT_EQ(errors, (std::vector<std::string>{"", ""})) << name;
    for (const auto& mine : params)
      for (const auto& p : mine) {
        EXPECT_EQ(p.grad().scalar_type(), torch::kFloat32);
        EXPECT_TRUE(torch::equal(p.grad(), torch::full_like(p, 1.5))) << name;  // exact in 16 bits
      }
    for (const auto& step : steps) {
      EXPECT_EQ(step.bucket_bytes, 40) << name;
      EXPECT_EQ(step.payload_bytes, 20) << name;  // 10 values x 2 bytes
    }
  }
}

TEST_F(ReducerTest, BroadcastGivesEveryRankRankZerosTensors) {
  std::vector<std::vector<torch::Tensor>> params{parameters(), parameters()};
  const auto errors = on_two_ranks([&](int rank, const Group& group) {
    auto& mine = params[static_cast<std::size_t>(rank)];
    torch::NoGradGuard no_grad;
    for (auto& p : mine) p.fill_(rank == 0 ? 3.0 : -1.0);
    runner::broadcast_from_rank0(mine, group);
  });
  ASSERT_EQ(errors, (std::vector<std::string>{"", ""}));
  for (const auto& mine : params)
    for (const auto& p : mine) EXPECT_TRUE(torch::equal(p, torch::full_like(p, 3.0)));
}

TEST_F(ReducerTest, AHookThatReturnsAnotherSizeIsAnError) {
  auto truncating = hook("truncating");
  auto params = parameters();
  for (auto& p : params) p.mutable_grad() = torch::ones_like(p);
  runner::Rendezvous alone;
  alone.store_path =
      (fs::temp_directory_path() / ("runner-reducer-test-" + std::to_string(::getpid()) + "-one.store"))
          .string();
  alone.timeout = std::chrono::milliseconds(20000);
  fs::remove(alone.store_path);
  auto group = runner::make_process_group("gloo", alone);
  auto sync = runner::make_after_backward_sync(params, {}, group, *truncating, bucket_cap(1 << 20));
  EXPECT_THROW_MSG(sync->after_backward(true), runner::Error,
                   "the comm hook returned a tensor of 5 elements for bucket 0 of 10 elements");
  fs::remove(alone.store_path);
}

// One DDP step of model() on each rank's inputs through `sync`; returns the gradients.
std::vector<torch::Tensor> ddp_step(torch::nn::Sequential& m, runner::GradientSync& sync, int rank,
                                    int step) {
  m->zero_grad();
  sync.before_forward(true);
  const torch::Tensor loss = m->forward(inputs(rank, step)).pow(2).mean();
  sync.before_backward(loss, true);
  loss.backward();
  sync.after_backward(true);
  std::vector<torch::Tensor> grads;
  for (const auto& p : m->parameters()) grads.push_back(p.grad().clone());
  return grads;
}

// The gradients each rank would get alone at `step`.
std::vector<torch::Tensor> local_gradients(int rank, int step) {
  auto m = model();
  m->forward(inputs(rank, step)).pow(2).mean().backward();
  std::vector<torch::Tensor> grads;
  for (const auto& p : m->parameters()) grads.push_back(p.grad().clone());
  return grads;
}

TEST_F(ReducerTest, TheReducerGivesEveryRankTheMeanGradientAndItsBucketsAreRebuilt) {
  auto allreduce = hooks("allreduce");
  std::vector<std::vector<std::vector<torch::Tensor>>> got(2);
  std::vector<std::size_t> buckets_first(2), buckets_later(2);
  std::vector<runner::CommStep> steps(2);
  const auto errors = on_two_ranks([&](int rank, const Group& group) {
    const auto r = static_cast<std::size_t>(rank);
    auto m = model();
    runner::SyncOptions options;
    options.bucket_bytes = 8 * 1024;  // the 64x64 layer (16 KiB) alone, the rest together
    options.first_bucket_bytes = 1024;
    auto sync = runner::make_ddp_sync(named(m), {}, group, *allreduce[r], options);
    buckets_first[r] = sync->bucket_count();
    for (int step = 0; step < 3; ++step) {  // no optimizer: the same model every step
      got[r].push_back(ddp_step(m, *sync, rank, step));
      steps[r] = sync->take_step();
      if (step == 0) buckets_later[r] = sync->bucket_count();
    }
    buckets_later[r] = sync->bucket_count();
  });
  ASSERT_EQ(errors, (std::vector<std::string>{"", ""}));
  for (int step = 0; step < 3; ++step) {
    const auto a = local_gradients(0, step), b = local_gradients(1, step);
    for (std::size_t rank = 0; rank < 2; ++rank)
      for (std::size_t i = 0; i < a.size(); ++i)
        EXPECT_TRUE(torch::allclose(got[rank][static_cast<std::size_t>(step)][i], (a[i] + b[i]) / 2,
                                    1e-6, 1e-7))
            << "rank " << rank << " step " << step << " parameter " << i;
  }
  // DDP's first step has one bucket; then the order of the gradients is known
  // and the buckets are rebuilt, the first up to 1 KiB, the others up to 8 KiB.
  EXPECT_EQ(buckets_first, (std::vector<std::size_t>{1, 1}));
  EXPECT_GT(buckets_later[0], 2u);
  EXPECT_EQ(buckets_later[0], buckets_later[1]);
  const std::int64_t gradient_bytes = (16 * 64 + 64 + 64 * 64 + 64 + 64 * 4 + 4) * 4;
  for (const auto& step : steps) {
    EXPECT_EQ(step.bucket_bytes, gradient_bytes);
    EXPECT_EQ(step.payload_bytes, gradient_bytes);
    EXPECT_EQ(static_cast<std::size_t>(step.buckets), buckets_later[0]);
  }
}

// DDP's builtin hooks (registered by type; their classes are not exported)
// against the plugins that stand for them: the same gradients, bit for bit.
TEST_F(ReducerTest, ThePluginsComputeWhatDdpsBuiltinHooksCompute) {
  for (const auto& [name, builtin] :
       {std::pair{std::string("allreduce"), c10d::BuiltinCommHookType::ALLREDUCE},
        std::pair{std::string("fp16_compress"), c10d::BuiltinCommHookType::FP16_COMPRESS}}) {
    auto plugin = hooks(name);
    std::vector<std::vector<torch::Tensor>> ours(2), theirs(2);
    const auto errors = on_two_ranks([&](int rank, const Group& group) {
      const auto r = static_cast<std::size_t>(rank);
      auto m = model();
      auto sync = runner::make_ddp_sync(named(m), {}, group, *plugin[r], runner::SyncOptions{});
      ours[r] = ddp_step(m, *sync, rank, 0);
      auto reference = model();
      std::vector<torch::Tensor> params = reference->parameters();
      std::vector<std::vector<std::size_t>> one_bucket(1);
      for (std::size_t i = params.size(); i-- > 0;) one_bucket[0].push_back(i);
      c10d::Reducer reducer(params, one_bucket, group, std::vector<bool>(params.size(), false),
                            25 << 20, false, false, {}, 1 << 20, false, false, {});
      reducer.register_builtin_comm_hook(builtin);
      reducer.prepare_for_forward();
      const torch::Tensor loss = reference->forward(inputs(rank, 0)).pow(2).mean();
      reducer.prepare_for_backward({});
      loss.backward();
      for (const auto& p : params) theirs[r].push_back(p.grad().clone());
    });
    ASSERT_EQ(errors, (std::vector<std::string>{"", ""})) << name;
    for (std::size_t r = 0; r < 2; ++r)
      for (std::size_t i = 0; i < ours[r].size(); ++i)
        EXPECT_TRUE(torch::equal(ours[r][i], theirs[r][i])) << name << " rank " << r << " param " << i;
  }
}

// fp16 and bf16 on the wire: the mean gradient within the precision's
// rounding of allreduce's (fp16 keeps 11 significant bits, bf16 8), and not
// equal to it (the values are not exactly representable).
TEST_F(ReducerTest, CompressedHooksAreWithinTheirPrecisionOfAllreduce) {
  std::map<std::string, std::vector<std::vector<torch::Tensor>>> got;
  for (const std::string name : {"allreduce", "fp16_compress", "bf16_compress"}) {
    auto plugin = hooks(name);
    got[name].resize(2);
    const auto errors = on_two_ranks([&](int rank, const Group& group) {
      const auto r = static_cast<std::size_t>(rank);
      auto m = model();
      auto sync = runner::make_ddp_sync(named(m), {}, group, *plugin[r], runner::SyncOptions{});
      got[name][r] = ddp_step(m, *sync, rank, 0);
    });
    ASSERT_EQ(errors, (std::vector<std::string>{"", ""})) << name;
  }
  for (const auto& [name, tolerance] :
       {std::pair{std::string("fp16_compress"), 1e-3}, std::pair{std::string("bf16_compress"), 8e-3}}) {
    double worst = 0, any = 0;
    for (std::size_t i = 0; i < got["allreduce"][0].size(); ++i) {
      const torch::Tensor exact = got["allreduce"][0][i];
      const torch::Tensor approx = got[name][0][i];
      const double error = (approx - exact).abs().max().item<double>();
      worst = std::max(worst, error / exact.abs().max().item<double>());
      any = std::max(any, error);
      EXPECT_TRUE(torch::equal(got[name][0][i], got[name][1][i])) << name;  // every rank the same
    }
    EXPECT_LE(worst, tolerance) << name;
    EXPECT_GT(any, 0.0) << name << " is exactly allreduce: the comparison shows nothing";
  }
}

// DDP's point: with buckets small enough, communication starts while
// backward is still computing gradients of earlier layers.
TEST_F(ReducerTest, TheFirstBucketIsHandedOverBeforeBackwardEnds) {
  auto allreduce = hooks("allreduce");
  using TimePoint = std::chrono::steady_clock::time_point;
  std::vector<std::vector<TimePoint>> starts(2);
  std::vector<TimePoint> first_layer_grad(2), computed(2), backward_start(2), backward_end(2);
  const auto errors = on_two_ranks([&](int rank, const Group& group) {
    const auto r = static_cast<std::size_t>(rank);
    auto m = model();
    TimedHook timed(*allreduce[r]);
    runner::SyncOptions options;
    options.bucket_bytes = 4 * 1024;
    options.first_bucket_bytes = 1024;
    auto sync = runner::make_ddp_sync(named(m), {}, group, timed, options);
    sync->on_gradients_computed([&] { computed[r] = std::chrono::steady_clock::now(); });
    // The gradient of the first layer's weight is the last one backward computes.
    m->parameters()[0].register_hook([&](const torch::Tensor& g) {
      first_layer_grad[r] = std::chrono::steady_clock::now();
      return g;
    });
    for (int step = 0; step < 2; ++step) {  // the second step runs on rebuilt buckets
      timed.starts.clear();
      m->zero_grad();
      sync->before_forward(true);
      const torch::Tensor loss = m->forward(inputs(rank, step)).pow(2).mean();
      sync->before_backward(loss, true);
      backward_start[r] = std::chrono::steady_clock::now();
      loss.backward();
      backward_end[r] = std::chrono::steady_clock::now();
    }
    starts[r] = timed.starts;
  });
  ASSERT_EQ(errors, (std::vector<std::string>{"", ""}));
  for (std::size_t r = 0; r < 2; ++r) {
    ASSERT_GE(starts[r].size(), 3u) << "rank " << r;
    EXPECT_GT(starts[r].front(), backward_start[r]);
    EXPECT_LT(starts[r].front(), first_layer_grad[r]) << "rank " << r << ": no overlap";
    EXPECT_LT(starts[r].back(), backward_end[r]);
    EXPECT_GE(computed[r], first_layer_grad[r]);  // the last bucket waits for every gradient
    EXPECT_LE(computed[r], backward_end[r]);
  }
}

TEST_F(ReducerTest, NoSyncMicroBatchesAccumulateLocallyAndTheLastOneAverages) {
  auto allreduce = hooks("allreduce");
  std::vector<std::vector<torch::Tensor>> got(2);
  std::vector<std::vector<runner::CommStep>> steps(2);
  const auto errors = on_two_ranks([&](int rank, const Group& group) {
    const auto r = static_cast<std::size_t>(rank);
    auto m = model();
    auto sync = runner::make_ddp_sync(named(m), {}, group, *allreduce[r], runner::SyncOptions{});
    m->zero_grad();
    for (int micro = 0; micro < 2; ++micro) {
      const bool last = micro == 1;
      sync->before_forward(last);
      const torch::Tensor loss = m->forward(inputs(rank, micro)).pow(2).mean();
      sync->before_backward(loss, last);
      loss.backward();
      sync->after_backward(last);
      steps[r].push_back(sync->take_step());
    }
    for (const auto& p : m->parameters()) got[r].push_back(p.grad().clone());
  });
  ASSERT_EQ(errors, (std::vector<std::string>{"", ""}));
  std::vector<torch::Tensor> expected;
  const auto a0 = local_gradients(0, 0), a1 = local_gradients(0, 1);
  const auto b0 = local_gradients(1, 0), b1 = local_gradients(1, 1);
  for (std::size_t i = 0; i < a0.size(); ++i) expected.push_back((a0[i] + a1[i] + b0[i] + b1[i]) / 2);
  for (std::size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(steps[r][0].buckets, 0) << "the no_sync micro-batch communicated";
    EXPECT_EQ(steps[r][1].buckets, 1);
    for (std::size_t i = 0; i < expected.size(); ++i)
      EXPECT_TRUE(torch::allclose(got[r][i], expected[i], 1e-5, 1e-6)) << "rank " << r << " param " << i;
  }
}

TEST_F(ReducerTest, GradientsAsBucketViewsStayViewsWhenZeroedInPlace) {
  auto allreduce = hooks("allreduce");
  std::vector<bool> aliased(2);
  std::vector<std::vector<torch::Tensor>> got(2);
  const auto errors = on_two_ranks([&](int rank, const Group& group) {
    const auto r = static_cast<std::size_t>(rank);
    auto m = model();
    runner::SyncOptions options;
    options.gradient_as_bucket_view = true;
    auto sync = runner::make_ddp_sync(named(m), {}, group, *allreduce[r], options);
    EXPECT_TRUE(sync->gradients_are_bucket_views());
    std::vector<const void*> storage;
    for (int step = 0; step < 3; ++step) {
      m->zero_grad(/*set_to_none=*/false);
      sync->before_forward(true);
      const torch::Tensor loss = m->forward(inputs(rank, step)).pow(2).mean();
      sync->before_backward(loss, true);
      loss.backward();
      if (step == 1) {
        for (const auto& p : m->parameters()) storage.push_back(p.grad().data_ptr());
      }
      if (step == 2) {
        bool same = true;
        for (std::size_t i = 0; i < storage.size(); ++i)
          same = same && m->parameters()[i].grad().data_ptr() == storage[i];
        aliased[r] = same;
        for (const auto& p : m->parameters()) got[r].push_back(p.grad().clone());
      }
    }
  });
  ASSERT_EQ(errors, (std::vector<std::string>{"", ""}));
  const auto a = local_gradients(0, 2), b = local_gradients(1, 2);
  for (std::size_t r = 0; r < 2; ++r) {
    EXPECT_TRUE(aliased[r]) << "rank " << r << ": the gradients moved out of the buckets";
    for (std::size_t i = 0; i < a.size(); ++i)
      EXPECT_TRUE(torch::allclose(got[r][i], (a[i] + b[i]) / 2, 1e-6, 1e-7));
  }
}

TEST_F(ReducerTest, FindUnusedParametersLetsAStepSkipAParameter) {
  auto allreduce = hooks("allreduce");
  std::vector<torch::Tensor> unused_grad(2);
  const auto errors = on_two_ranks([&](int rank, const Group& group) {
    const auto r = static_cast<std::size_t>(rank);
    auto m = model();
    torch::nn::Linear spare(16, 2);  // registered, never used in forward
    m->register_module("spare", spare);
    runner::SyncOptions options;
    options.find_unused_parameters = true;
    auto sync = runner::make_ddp_sync(named(m), {}, group, *allreduce[r], options);
    for (int step = 0; step < 2; ++step) {
      m->zero_grad();
      sync->before_forward(true);
      const torch::Tensor loss = m->forward(inputs(rank, step)).pow(2).mean();
      sync->before_backward(loss, true);
      loss.backward();
    }
    unused_grad[r] = spare->weight.grad();
  });
  ASSERT_EQ(errors, (std::vector<std::string>{"", ""}));
  for (const auto& g : unused_grad)  // DDP leaves a parameter no rank used without a gradient
    EXPECT_TRUE(!g.defined() || g.abs().sum().item<double>() == 0.0);
}

TEST(ProcessGroup, AnUnknownBackendIsAnError) {
  runner::Rendezvous nowhere;
  nowhere.store_path = "/nonexistent";
  EXPECT_THROW_MSG(
      (void)runner::make_process_group("mpi", nowhere),
      runner::Error, "unknown process group backend 'mpi'");
}

}  // namespace
