// Gradient buckets and their reduction over a real two-rank Gloo group (two
// threads of this process meeting through a FileStore), with the built-in
// comm hooks.
#include "runner/engine/reducer.hpp"

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/types.h>
#include <torch/utils.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <thread>

#include "runner/comm_hook.hpp"
#include "runner/common/error.hpp"
#include "runner/engine/process_group.hpp"
#include "runner/host/host.hpp"
#include "runner/options.hpp"
#include "support/expect_throw_msg.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kBuiltins = fs::path(RUNNER_BINARY_DIR) / "lib" / "runner" / "plugins";
const fs::path kGood = fs::path(RUNNER_BINARY_DIR) / "tests" / "plugins" / "good";

// Runs `body(rank, group)` on two ranks, one thread each; returns their failures.
std::vector<std::string> on_two_ranks(
    const std::function<void(int, c10d::ProcessGroup&)>& body) {
  static int counter = 0;
  const fs::path store = fs::temp_directory_path() /
                         ("runner-reducer-test-" + std::to_string(::getpid()) + "-" +
                          std::to_string(counter++) + ".store");
  fs::remove(store);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank)
    threads.emplace_back([&, rank] {
      try {
        runner::Rendezvous rendezvous{store.string(), rank, 2, std::chrono::milliseconds(20000)};
        auto group = runner::make_process_group("gloo", rendezvous);
        // Both ranks connected before either runs its body: a rank whose body
        // throws at once must not close its group while the other still connects.
        group->barrier()->wait();
        body(rank, *group);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(rank)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  std::error_code ignored;
  fs::remove(store, ignored);
  return errors;
}

// Three parameters of 3, 5 and 2 floats.
std::vector<torch::Tensor> parameters() {
  return {torch::zeros({3}, torch::requires_grad()), torch::zeros({5}, torch::requires_grad()),
          torch::zeros({1, 2}, torch::requires_grad())};
}

class ReducerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_.load(kBuiltins);
    host_.load(kGood);
  }
  std::unique_ptr<runner::CommHook> hook(const std::string& name, runner::Options options = {}) {
    return host_.make_comm_hook(name, options);
  }
  runner::PluginHost host_;
};

TEST_F(ReducerTest, BucketsFollowReverseParameterOrderUpToTheCap) {
  // 32 bytes: parameters 2 (8 B) and 1 (20 B) share a bucket, 0 (12 B) would overflow it.
  auto allreduce = hook("allreduce");
  const auto errors = on_two_ranks([&](int, c10d::ProcessGroup& group) {
    runner::GradientReducer reducer(parameters(), 32, *allreduce, group);
    EXPECT_EQ(reducer.layout(), (std::vector<std::vector<std::size_t>>{{2, 1}, {0}}));
    runner::GradientReducer one_each(parameters(), 1, *allreduce, group);
    EXPECT_EQ(one_each.bucket_count(), 3u);
  });
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
}

TEST_F(ReducerTest, AllreduceAveragesEveryGradientAcrossRanks) {
  std::vector<std::unique_ptr<runner::CommHook>> hooks;
  hooks.push_back(hook("allreduce"));
  hooks.push_back(hook("allreduce"));
  std::vector<std::vector<torch::Tensor>> params{parameters(), parameters()};
  std::vector<std::int64_t> sent(2);
  const auto errors = on_two_ranks([&](int rank, c10d::ProcessGroup& group) {
    auto& mine = params[static_cast<std::size_t>(rank)];
    // Rank 0 has gradients 1 (and none for parameter 1), rank 1 has 2.
    for (std::size_t i = 0; i < mine.size(); ++i)
      if (rank == 1 || i != 1) mine[i].mutable_grad() = torch::full_like(mine[i], rank + 1.0);
    runner::GradientReducer reducer(mine, 32, *hooks[static_cast<std::size_t>(rank)], group);
    sent[static_cast<std::size_t>(rank)] = reducer.reduce();
  });
  ASSERT_EQ(errors, (std::vector<std::string>{"", ""}));
  for (const auto& mine : params) {
    EXPECT_TRUE(torch::equal(mine[0].grad(), torch::full({3}, 1.5)));
    EXPECT_TRUE(torch::equal(mine[1].grad(), torch::full({5}, 1.0)));  // (0 + 2) / 2
    EXPECT_TRUE(torch::equal(mine[2].grad(), torch::full({1, 2}, 1.5)));
  }
  // A ring allreduce of B bytes over 2 ranks sends B: 28 + 12 bytes.
  EXPECT_EQ(sent, (std::vector<std::int64_t>{40, 40}));
}

TEST_F(ReducerTest, AnExceptionInAHookNamesThePluginAndItsLibrary) {
  std::vector<std::unique_ptr<runner::CommHook>> hooks;
  hooks.push_back(hook("compressed_allreduce", runner::Options({{"dtype", std::string("fp16")}})));
  hooks.push_back(hook("compressed_allreduce", runner::Options({{"dtype", std::string("fp16")}})));
  const auto errors = on_two_ranks([&](int rank, c10d::ProcessGroup& group) {
    // An undefined bucket: the hook's first cast throws, before any collective.
    (void)hooks[static_cast<std::size_t>(rank)]->reduce(torch::Tensor(), 0, group);
  });
  const std::string prefix =
      "comm_hook plugin 'compressed_allreduce' (" +
      host_.library_of(runner::PluginKind::comm_hook, "compressed_allreduce").path.string() +
      ") failed in reduce: ";
  for (const std::string& error : errors) EXPECT_EQ(error.substr(0, prefix.size()), prefix) << error;
}

TEST_F(ReducerTest, CompressedAllreduceSendsHalfTheBytes) {
  std::vector<std::unique_ptr<runner::CommHook>> hooks;
  for (int i = 0; i < 2; ++i)
    hooks.push_back(hook("compressed_allreduce",
                         runner::Options({{"dtype", std::string("bf16")}})));
  std::vector<std::vector<torch::Tensor>> params{parameters(), parameters()};
  std::vector<std::int64_t> sent(2);
  const auto errors = on_two_ranks([&](int rank, c10d::ProcessGroup& group) {
    auto& mine = params[static_cast<std::size_t>(rank)];
    for (auto& p : mine) p.mutable_grad() = torch::full_like(p, rank == 0 ? 0.5 : 2.5);
    runner::GradientReducer reducer(mine, 1 << 20, *hooks[static_cast<std::size_t>(rank)], group);
    sent[static_cast<std::size_t>(rank)] = reducer.reduce();
  });
  ASSERT_EQ(errors, (std::vector<std::string>{"", ""}));
  for (const auto& mine : params)
    for (const auto& p : mine) {
      EXPECT_EQ(p.grad().scalar_type(), torch::kFloat32);
      EXPECT_TRUE(torch::equal(p.grad(), torch::full_like(p, 1.5)));  // exact in bf16
    }
  EXPECT_EQ(sent, (std::vector<std::int64_t>{20, 20}));  // 10 values x 2 bytes
}

TEST_F(ReducerTest, BroadcastGivesEveryRankRankZerosParameters) {
  std::vector<std::vector<torch::Tensor>> params{parameters(), parameters()};
  const auto errors = on_two_ranks([&](int rank, c10d::ProcessGroup& group) {
    auto& mine = params[static_cast<std::size_t>(rank)];
    torch::NoGradGuard no_grad;
    for (auto& p : mine) p.fill_(rank == 0 ? 3.0 : -1.0);
    runner::broadcast_parameters(mine, group);
  });
  ASSERT_EQ(errors, (std::vector<std::string>{"", ""}));
  for (const auto& mine : params)
    for (const auto& p : mine) EXPECT_TRUE(torch::equal(p, torch::full_like(p, 3.0)));
}

TEST_F(ReducerTest, AHookThatReturnsAnotherSizeIsAnError) {
  auto truncating = hook("truncating");
  auto params = parameters();
  for (auto& p : params) p.mutable_grad() = torch::ones_like(p);
  runner::Rendezvous alone{(fs::temp_directory_path() /
                            ("runner-reducer-test-" + std::to_string(::getpid()) + "-one.store"))
                               .string(),
                           0, 1, std::chrono::milliseconds(20000)};
  fs::remove(alone.store_path);
  auto group = runner::make_process_group("gloo", alone);
  runner::GradientReducer reducer(params, 1 << 20, *truncating, *group);
  EXPECT_THROW_MSG(reducer.reduce(), runner::Error,
                   "the comm hook returned a tensor of 5 elements for bucket 0 of 10 elements");
  fs::remove(alone.store_path);
}

TEST(ProcessGroup, AnUnknownBackendIsAnError) {
  EXPECT_THROW_MSG(
      (void)runner::make_process_group("mpi", runner::Rendezvous{"/nonexistent", 0, 1, {}}),
      runner::Error, "unknown process group backend 'mpi'");
}

}  // namespace
