// The data phase is the time a step waits for its batch: a slow loader (the
// `pattern` test loader sleeping per batch, as a disk or a decoder would
// take time) shows up there, and two workers halve it. Also the pipeline's
// metrics and a failing worker, through the engine.
#include <gtest/gtest.h>

#include "core/engine/engine_fixture.hpp"

namespace runner::test {
namespace {

class DataWaitTest : public EngineFixture {
 protected:
  void SetUp() override {
    EngineFixture::SetUp();
    host_.load(std::filesystem::path(RUNNER_BINARY_DIR) / "tests" / "support" / "plugins" / "good");
  }
  // Training on the pattern loader with `workers` threads.
  Experiment slow_data(std::int64_t workers, std::int64_t sleep_ms) {
    Experiment e = mlp_sgd("data_wait", 3);
    e.data = PluginChoice{"pattern", Options({{"size", std::int64_t{4096}},
                                              {"classes", std::int64_t{2}},
                                              {"image", false},
                                              {"stream", false},
                                              {"sleep_ms", sleep_ms},
                                              {"bad", std::vector<std::int64_t>{}},
                                              {"throw_at", std::int64_t{-1}}})};
    e.data_settings.batch_size = 8;
    // One compute thread: an OpenMP team's barriers on a loaded machine
    // would make the step's own (tiny) work slow and erratic.
    e.device.threads = 1;
    e.data_settings.workers = workers;
    e.data_settings.prefetch = 2;
    e.train.steps = 20;
    e.train.warmup = 3;
    return e;
  }
  static double mean_of(const RunOutcome& o, const std::string& metric) {
    for (const auto& s : o.summaries)
      if (s.metric == metric) return s.mean;
    return std::nan("");
  }
};

TEST_F(DataWaitTest, ASlowLoaderIsDataWaitAndTwoWorkersHalveIt) {
  const RunOutcome inline_run = run(slow_data(0, 30));
  ASSERT_EQ(inline_run.status, store::RunStatus::finished) << inline_run.error;
  const RunOutcome two = run(slow_data(2, 30));
  ASSERT_EQ(two.status, store::RunStatus::finished) << two.error;
  const double wait0 = mean_of(inline_run, "data");
  const double wait2 = mean_of(two, "data");
  const double step2 = mean_of(two, "step_time");
  // Inline, every step waits the whole 30 ms. Two workers make two batches
  // every 30 ms, so a step takes 15 ms (while its own work takes less): the
  // loader's 30 ms per batch is halved, and the wait is what the step's own
  // work leaves of those 15 ms. (Steps wait ~30 ms and ~0 ms in turn, as the
  // workers deliver in pairs: means, not medians.) Sleeping, the loader's
  // time does not stretch on a loaded machine; the step's own work does,
  // which is why the bound on wait2 is loose below.
  EXPECT_GT(wait0, 29e6);
  EXPECT_GT(step2 / wait0, 0.40) << step2 << " vs " << wait0;
  EXPECT_LT(step2 / wait0, 0.70) << step2 << " vs " << wait0;
  EXPECT_LT(wait2 / wait0, 0.60) << wait2 << " vs " << wait0;
  // The loader is the bottleneck either way: its workers never rest.
  EXPECT_GT(metric(two, "loader_busy_fraction"), 0.8);
  EXPECT_GT(metric(inline_run, "loader_busy_fraction"), 0.6);
  // With two workers it can make about twice as many samples per second.
  EXPECT_NEAR(metric(two, "loader_samples_per_s") / metric(inline_run, "loader_samples_per_s"),
              2.0, 0.4);
}

TEST_F(DataWaitTest, AFailingWorkerFailsTheRunWithItsMessage) {
  Experiment e = slow_data(2, 0);
  e.data_settings.shuffle = false;
  e.data->options = Options({{"size", std::int64_t{4096}},
                             {"classes", std::int64_t{2}},
                             {"image", false},
                             {"stream", false},
                             {"sleep_ms", std::int64_t{0}},
                             {"bad", std::vector<std::int64_t>{}},
                             {"throw_at", std::int64_t{45}}});
  const RunOutcome out = run(e);
  EXPECT_EQ(out.status, store::RunStatus::failed);
  EXPECT_EQ(out.error, "loader plugin 'pattern' (" +
                           host_.find(PluginKind::loader, "pattern")->library +
                           ") failed in get_batch: reading sample 45 failed on purpose");
}

TEST_F(DataWaitTest, SkippedSamplesAreRecordedWithTheRun) {
  Experiment e = slow_data(1, 0);
  e.data->options = Options({{"size", std::int64_t{64}},
                             {"classes", std::int64_t{2}},
                             {"image", false},
                             {"stream", false},
                             {"sleep_ms", std::int64_t{0}},
                             {"bad", std::vector<std::int64_t>{3, 40}},
                             {"throw_at", std::int64_t{-1}}});
  e.data_settings.on_error = "skip";
  e.train.steps = 8;  // with 3 warm-up steps: 88 samples, the first epoch whole
  const RunOutcome out = run(e);
  ASSERT_EQ(out.status, store::RunStatus::finished) << out.error;
  EXPECT_GE(metric(out, "skipped_samples"), 2.0);
}

}  // namespace
}  // namespace runner::test
