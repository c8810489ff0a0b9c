// The data pipeline: order independent of the worker count (random access
// and streaming, augmentations included), sharding by rank, bounded work,
// skipped samples, a failing worker, and the counters of its work. The
// loader is the `pattern` test loader (tests/support/plugins/good_plugin.cpp),
// loaded through the host like any plugin.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <set>
#include <string>
#include <vector>

#include "runner/engine/pipeline.hpp"
#include "runner/host/host.hpp"
#include "support/expect_throw_msg.hpp"

namespace runner {
namespace {

namespace fs = std::filesystem;

class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override { host_.load(fs::path(RUNNER_BINARY_DIR) / "tests" / "support" / "plugins" / "good"); }

  // The pattern loader with `values` over its defaults.
  std::unique_ptr<Loader> pattern(std::map<std::string, OptionValue> values,
                                  LoaderContext context = {}) {
    const PluginDescriptor* plugin = host_.find(PluginKind::loader, "pattern");
    for (const OptionSpec& spec : plugin->schema.specs())
      if (values.count(spec.name) == 0) values[spec.name] = *spec.default_value;
    return host_.make_loader("pattern", Options(std::move(values)), context);
  }
  [[nodiscard]] std::string library() const {
    return host_.find(PluginKind::loader, "pattern")->library;
  }

  PluginHost host_;
};

DataSettings settings(std::int64_t batch, std::int64_t workers) {
  DataSettings s;
  s.batch_size = batch;
  s.workers = workers;
  s.prefetch = 2;
  return s;
}

// `count` batches from a fresh pipeline over `loader`.
std::vector<Batch> take(Loader& loader, const DataSettings& s, std::int64_t count,
                        std::int64_t rank = 0, std::int64_t world = 1) {
  DataPipeline pipeline(loader, s, /*seed=*/7, rank, world);
  std::vector<Batch> out;
  for (std::int64_t i = 0; i < count; ++i) out.push_back(pipeline.next());
  return out;
}

void expect_same(const std::vector<Batch>& a, const std::vector<Batch>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(a[i].inputs.equal(b[i].inputs)) << what << ": inputs of batch " << i;
    EXPECT_TRUE(a[i].targets.equal(b[i].targets)) << what << ": targets of batch " << i;
  }
}

std::vector<std::int64_t> targets_of(const Batch& b) {
  const torch::Tensor t = b.targets.contiguous();
  return {t.data_ptr<std::int64_t>(), t.data_ptr<std::int64_t>() + t.numel()};
}

TEST_F(PipelineTest, TheSameSeedGivesTheSameBatchesWhateverTheWorkers) {
  // 50 samples in batches of 8 (6 per epoch): 20 batches cross three epochs.
  auto loader = pattern({{"size", std::int64_t{50}}, {"image", true}});
  DataSettings s = settings(8, 0);
  s.augment.random_crop = {4};
  s.augment.crop_padding = 1;
  s.augment.hflip = 0.5;
  s.augment.normalize_mean = {0.5};
  s.augment.normalize_std = {0.25};
  const auto inline_batches = take(*loader, s, 20);
  for (std::int64_t workers : {1, 3}) {
    s.workers = workers;
    expect_same(inline_batches, take(*loader, s, 20), std::to_string(workers) + " workers");
  }
  // The augmentations did something: not every batch is its samples unaugmented.
  DataSettings plain = settings(8, 0);
  plain.augment.normalize_mean = {0.5};
  plain.augment.normalize_std = {0.25};
  const auto unaugmented = take(*loader, plain, 20);
  bool differs = false;
  for (std::size_t i = 0; i < unaugmented.size(); ++i)
    differs = differs || !unaugmented[i].inputs.equal(inline_batches[i].inputs);
  EXPECT_TRUE(differs);
}

TEST_F(PipelineTest, AStreamGivesTheSameBatchesWhateverTheWorkers) {
  auto loader = pattern({{"size", std::int64_t{30}}, {"stream", true}, {"classes", std::int64_t{30}}});
  DataSettings s = settings(4, 0);
  s.shuffle_buffer = 8;
  const auto inline_batches = take(*loader, s, 17);
  for (std::int64_t workers : {1, 3}) {
    s.workers = workers;
    expect_same(inline_batches, take(*loader, s, 17), std::to_string(workers) + " workers");
  }
  // drop_last: 7 whole batches per epoch of 30, each sample at most once per epoch.
  std::set<std::int64_t> first_epoch;
  for (std::size_t b = 0; b < 7; ++b)
    for (std::int64_t t : targets_of(inline_batches[b])) EXPECT_TRUE(first_epoch.insert(t).second);
  EXPECT_EQ(first_epoch.size(), 28u);
  // Shuffled: not the stream's order.
  EXPECT_NE(targets_of(inline_batches[0]), (std::vector<std::int64_t>{0, 1, 2, 3}));
}

TEST_F(PipelineTest, AStreamWithoutShuffleIsReadInOrderAndKeepsItsLastPartialBatch) {
  auto loader = pattern({{"size", std::int64_t{10}}, {"stream", true}, {"classes", std::int64_t{10}}});
  DataSettings s = settings(4, 2);
  s.shuffle = false;
  s.drop_last = false;
  const auto batches = take(*loader, s, 4);
  EXPECT_EQ(targets_of(batches[0]), (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(targets_of(batches[1]), (std::vector<std::int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(targets_of(batches[2]), (std::vector<std::int64_t>{8, 9}));
  EXPECT_EQ(targets_of(batches[3]), (std::vector<std::int64_t>{0, 1, 2, 3}));
}

TEST_F(PipelineTest, RanksSeeDisjointSamplesThatCoverTheEpoch) {
  for (const bool stream : {false, true}) {
    auto loader =
        pattern({{"size", std::int64_t{30}}, {"stream", stream}, {"classes", std::int64_t{30}}});
    DataSettings s = settings(5, 2);
    s.shuffle_buffer = 6;
    std::set<std::int64_t> seen;
    for (std::int64_t rank = 0; rank < 3; ++rank)
      for (const Batch& b : take(*loader, s, 2, rank, 3))  // 2 x 5 x 3 ranks = 30
        for (std::int64_t t : targets_of(b))
          EXPECT_TRUE(seen.insert(t).second) << "sample " << t << " twice (stream " << stream << ")";
    EXPECT_EQ(seen.size(), 30u) << "stream " << stream;
  }
}

TEST_F(PipelineTest, UnreadableSamplesAreSkippedAndCountedUnderSkip) {
  auto loader = pattern({{"size", std::int64_t{12}},
                         {"classes", std::int64_t{12}},
                         {"bad", std::vector<std::int64_t>{2, 5, 6}}});
  DataSettings s = settings(4, 2);
  s.shuffle = false;
  s.on_error = "skip";
  DataPipeline pipeline(*loader, s, 7, 0, 1);
  EXPECT_EQ(targets_of(pipeline.next()), (std::vector<std::int64_t>{0, 1, 3}));
  EXPECT_EQ(targets_of(pipeline.next()), (std::vector<std::int64_t>{4, 7}));
  EXPECT_EQ(targets_of(pipeline.next()), (std::vector<std::int64_t>{8, 9, 10, 11}));
  const PipelineStats stats = pipeline.stats();
  // Only the batches handed out count, however far the workers read ahead.
  EXPECT_EQ(stats.skipped, 3);
}

TEST_F(PipelineTest, AnUnreadableSampleFailsTheRunUnderFail) {
  auto loader = pattern({{"size", std::int64_t{12}}, {"bad", std::vector<std::int64_t>{5}}});
  DataSettings s = settings(4, 0);
  s.shuffle = false;
  DataPipeline pipeline(*loader, s, 7, 0, 1);
  (void)pipeline.next();
  EXPECT_THROW_MSG((void)pipeline.next(), PluginSampleError,
                   "loader plugin 'pattern': sample 5 is corrupt");
}

TEST_F(PipelineTest, AWorkersExceptionFailsNextWithItsMessageAndNeverHangs) {
  for (std::int64_t workers : {0, 1, 3}) {
    auto loader = pattern({{"size", std::int64_t{40}}, {"throw_at", std::int64_t{13}}});
    DataSettings s = settings(4, workers);
    s.shuffle = false;
    DataPipeline pipeline(*loader, s, 7, 0, 1);
    for (int b = 0; b < 3; ++b) (void)pipeline.next();  // samples 0..11
    EXPECT_THROW_MSG((void)pipeline.next(), Error,
                     "loader plugin 'pattern' (" + library() +
                         ") failed in get_batch: reading sample 13 failed on purpose");
    // Asked again, it fails again rather than waiting for a batch that will never come.
    if (workers > 0) {
      EXPECT_THROW((void)pipeline.next(), Error);
    }
  }
}

TEST_F(PipelineTest, WorkersReadAheadAtMostWorkersTimesPrefetchBatches) {
  auto loader = pattern({{"size", std::int64_t{400}}});
  DataSettings s = settings(2, 3);
  s.prefetch = 2;
  DataPipeline pipeline(*loader, s, 7, 0, 1);
  (void)pipeline.next();
  // The workers fill their queue: 6 batches beyond the one delivered, then they wait.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (pipeline.stats().batches < 7 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  EXPECT_EQ(pipeline.stats().batches, 7);
  EXPECT_EQ(pipeline.stats().drawn, 7);
  (void)pipeline.next();  // one more delivered: room for one more
  while (pipeline.stats().batches < 8 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  EXPECT_EQ(pipeline.stats().drawn, 8);
}

TEST_F(PipelineTest, CountsBatchesSamplesAndBusyTime) {
  auto loader = pattern({{"size", std::int64_t{40}}});
  DataPipeline pipeline(*loader, settings(4, 0), 7, 0, 1);
  for (int b = 0; b < 5; ++b) (void)pipeline.next();
  const PipelineStats stats = pipeline.stats();
  EXPECT_EQ(stats.workers, 0);
  EXPECT_EQ(stats.batches, 5);
  EXPECT_EQ(stats.samples, 20);
  EXPECT_GT(stats.busy_s, 0.0);
  EXPECT_LE(stats.busy_fraction(), 1.0);
  EXPECT_DOUBLE_EQ(stats.capacity_per_s(), 20.0 / stats.busy_s);
}

TEST_F(PipelineTest, TheSpecIsTheShapeAfterAugmentation) {
  auto loader = pattern({{"image", true}});
  DataSettings s = settings(4, 0);
  s.augment.resize = {8};
  s.augment.center_crop = {6, 5};
  DataPipeline pipeline(*loader, s, 7, 0, 1);
  EXPECT_EQ(pipeline.spec().input_shape, (std::vector<std::int64_t>{3, 6, 5}));
  const Batch b = pipeline.next();
  EXPECT_EQ(b.inputs.sizes(), (std::vector<std::int64_t>{4, 3, 6, 5}));
  EXPECT_EQ(b.inputs.scalar_type(), torch::kFloat32);
}

}  // namespace
}  // namespace runner
