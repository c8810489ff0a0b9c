// The data pipeline every loader runs through: sample order (seeded shuffle,
// sharding by rank, epochs), reading and augmenting batches on worker
// threads or on the training thread, a bounded reorder queue, and the
// counters that say whether the input pipeline is the bottleneck.
//
// Determinism: the order of batches, and every random choice of the
// augmentations, is a function of the seed alone, not of data.workers; the
// batch handed out k-th is always the k-th the sampler drew.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "runner/engine/augment.hpp"
#include "runner/engine/sampler.hpp"
#include "runner/experiment/experiment.hpp"
#include "runner/loader.hpp"

namespace runner {

/// What the pipeline did: read at the end of a run.
struct PipelineStats {
  std::int64_t workers = 0;   ///< threads that made batches (0: the training thread)
  std::int64_t drawn = 0;     ///< batches whose samples were drawn (made or in the making)
  std::int64_t batches = 0;   ///< batches made
  std::int64_t samples = 0;   ///< samples in them
  std::int64_t skipped = 0;   ///< unreadable samples left out of the batches handed out (on_error = "skip")
  double busy_s = 0;          ///< summed time spent making batches, over all workers
  double elapsed_s = 0;       ///< since the first batch was asked for
  /// Samples per second the pipeline can make with its workers when never
  /// blocked (samples / busy time per worker); NaN before any batch.
  [[nodiscard]] double capacity_per_s() const;
  /// Fraction of the workers' time spent making batches (1: always busy, the
  /// input pipeline cannot keep up; near 0: it waits on the training loop).
  [[nodiscard]] double busy_fraction() const;
};

/// Samples stacked into a batch. Throws runner::Error (run) when their
/// shapes differ or only some have targets.
[[nodiscard]] Batch collate(std::vector<Example> samples);

/// One epoch's order of a streaming data set, for one rank: every
/// world_size-th sample from offset rank, through a seeded shuffle buffer.
class StreamOrder {
 public:
  StreamOrder(Loader& loader, std::int64_t buffer, bool shuffle, std::uint64_t seed,
              std::int64_t rank, std::int64_t world_size);
  /// The next sample of this rank and its id (its position in the stream),
  /// or nothing at the end of the current epoch.
  bool next(Example& sample, std::int64_t& id);
  /// Opens the next epoch.
  void next_epoch();
  [[nodiscard]] std::int64_t epoch() const { return epoch_; }

 private:
  void open();
  bool pull(Example& sample, std::int64_t& id);  // the stream's next sample for this rank

  Loader& loader_;
  std::unique_ptr<SampleStream> stream_;
  std::int64_t buffer_size_;
  std::int64_t rank_, world_size_;
  std::mt19937_64 generator_;
  std::vector<std::pair<std::int64_t, Example>> buffer_;
  std::int64_t position_ = 0;  // samples read from the stream this epoch (all ranks')
  std::int64_t epoch_ = 0;
  bool ended_ = false;          // the stream has no more samples this epoch
};

class DataPipeline {
 public:
  /// Starts settings.workers threads (none when 0); they begin reading at once.
  /// `train` selects the training augmentations (see Augmenter).
  DataPipeline(Loader& loader, const DataSettings& settings, std::uint64_t seed, std::int64_t rank,
               std::int64_t world_size, bool train = true);
  /// Stops the workers (a batch in the making is finished first).
  ~DataPipeline();
  DataPipeline(const DataPipeline&) = delete;
  DataPipeline& operator=(const DataPipeline&) = delete;

  /// The shape of the batches' samples (after augmentation) and the task.
  [[nodiscard]] DataSpec spec() const { return spec_; }
  /// The next batch, in order. Blocks until it is ready; rethrows what a
  /// worker threw making it (the run fails with the worker's message).
  Batch next();
  /// Counters so far.
  [[nodiscard]] PipelineStats stats() const;

 private:
  // The sample ids and raw samples of one batch, drawn in order.
  struct Draw {
    std::int64_t ticket = 0;
    std::int64_t epoch = 0;
    std::vector<std::int64_t> ids;
    std::vector<Example> samples;  // streaming data sets: the samples themselves
  };

  Draw draw(std::int64_t ticket);  // under mutex_: the order is drawn sequentially
  // Reads, collates and augments one batch (any thread); counts skipped samples.
  Batch make(Draw draw, std::int64_t& skipped);
  // The loader's batch of `ids`; under on_error = "skip", without the unreadable
  // samples (their ids are removed from `ids`).
  Batch read(std::vector<std::int64_t>& ids, std::int64_t& skipped);
  void work();  // a worker thread's loop
  void account(const Batch& batch, double seconds);  // under mutex_
  void fail(std::int64_t ticket, std::exception_ptr error);  // under mutex_: keeps the earliest

  Loader& loader_;
  DataSettings settings_;
  Augmenter augmenter_;
  DataSpec spec_;
  bool skip_;
  bool drop_last_ = true;  // a partial last batch of a stream is dropped
  std::unique_ptr<IndexSampler> sampler_;  // random access
  std::unique_ptr<StreamOrder> stream_;    // streaming

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::int64_t next_ticket_ = 0;   // the next batch to draw
  std::int64_t delivered_ = 0;     // batches handed out by next()
  std::int64_t capacity_ = 1;      // batches drawn but not handed out, at most
  // Made batches by ticket, with the samples each left out (counted when handed out).
  std::map<std::int64_t, std::pair<Batch, std::int64_t>> ready_;
  std::exception_ptr failure_;  // of the earliest batch that failed
  // That batch's ticket: batches before it are still delivered (their workers
  // finish them), next() throws from this one on.
  std::int64_t failed_ticket_ = std::numeric_limits<std::int64_t>::max();
  bool stopping_ = false;
  PipelineStats stats_;
  std::chrono::steady_clock::time_point started_{};
  bool started_clock_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace runner
