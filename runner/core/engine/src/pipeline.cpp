// The data pipeline every loader runs through: order, workers, reorder queue (pipeline.hpp).
#include "runner/engine/pipeline.hpp"

#include <c10/util/Exception.h>

#include <chrono>
#include <cmath>
#include <limits>

#include "runner/common/strings.hpp"
#include "runner/host/host.hpp"

namespace runner {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Salt of the shuffle buffer's generator: not the stream of IndexSampler's.
constexpr std::uint64_t kStreamShuffleSalt = 0x5deece66dULL;

std::vector<std::int64_t> sizes_of(const torch::Tensor& t) {
  return {t.sizes().begin(), t.sizes().end()};
}

}  // namespace

double PipelineStats::capacity_per_s() const {
  if (!(busy_s > 0)) return std::numeric_limits<double>::quiet_NaN();
  return static_cast<double>(samples) * static_cast<double>(std::max<std::int64_t>(1, workers)) /
         busy_s;
}

double PipelineStats::busy_fraction() const {
  if (!(elapsed_s > 0)) return std::numeric_limits<double>::quiet_NaN();
  const double available = elapsed_s * static_cast<double>(std::max<std::int64_t>(1, workers));
  return std::min(1.0, busy_s / available);
}

StreamOrder::StreamOrder(Loader& loader, std::int64_t buffer, bool shuffle, std::uint64_t seed,
                         std::int64_t rank, std::int64_t world_size)
    : loader_(loader),
      buffer_size_(shuffle ? buffer : 1),
      rank_(rank),
      world_size_(world_size),
      generator_(seed ^ kStreamShuffleSalt) {
  open();
}

void StreamOrder::open() {
  stream_ = loader_.open(epoch_);
  buffer_.clear();
  position_ = 0;
  ended_ = false;
}

void StreamOrder::next_epoch() {
  ++epoch_;
  open();
}

bool StreamOrder::pull(Example& sample, std::int64_t& id) {
  while (!ended_) {
    std::optional<Example> e = stream_->next();
    if (!e) {
      ended_ = true;
      break;
    }
    const std::int64_t position = position_++;
    if (position % world_size_ == rank_) {
      sample = std::move(*e);
      id = position;
      return true;
    }
  }
  return false;
}

bool StreamOrder::next(Example& sample, std::int64_t& id) {
  while (static_cast<std::int64_t>(buffer_.size()) < buffer_size_) {
    Example e;
    std::int64_t i = 0;
    if (!pull(e, i)) break;
    buffer_.emplace_back(i, std::move(e));
  }
  if (buffer_.empty()) return false;
  const std::size_t pick = buffer_size_ > 1 ? generator_() % buffer_.size() : 0;
  std::swap(buffer_[pick], buffer_.back());
  id = buffer_.back().first;
  sample = std::move(buffer_.back().second);
  buffer_.pop_back();
  return true;
}

DataPipeline::DataPipeline(Loader& loader, const DataSettings& settings, std::uint64_t seed,
                           std::int64_t rank, std::int64_t world_size, bool train)
    : loader_(loader),
      settings_(settings),
      augmenter_(settings.augment, seed, train),
      skip_(settings.on_error == "skip") {
  spec_ = loader_.spec();
  spec_.input_shape = augmenter_.output_shape(spec_.input_shape);
  if (loader_.streaming()) {
    stream_ = std::make_unique<StreamOrder>(loader_, settings.shuffle_buffer, settings.shuffle,
                                            seed, rank, world_size);
  } else {
    sampler_ = std::make_unique<IndexSampler>(loader_.size(), settings.batch_size,
                                              settings.shuffle, settings.drop_last, seed, rank,
                                              world_size);
  }
  drop_last_ = settings.drop_last || world_size > 1;
  stats_.workers = settings.workers;
  capacity_ = settings.workers > 0 ? settings.workers * settings.prefetch : 1;
  for (std::int64_t w = 0; w < settings.workers; ++w) workers_.emplace_back([this] { work(); });
}

DataPipeline::~DataPipeline() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (auto& worker : workers_) worker.join();
}

DataPipeline::Draw DataPipeline::draw(std::int64_t ticket) {
  Draw d;
  d.ticket = ticket;
  if (sampler_) {
    d.ids = sampler_->next();
    d.epoch = sampler_->epoch();
    return d;
  }
  const auto batch = static_cast<std::size_t>(settings_.batch_size);
  for (bool opened_empty = false;;) {
    Example sample;
    std::int64_t id = 0;
    bool any = false;
    while (d.samples.size() < batch && stream_->next(sample, id)) {
      d.samples.push_back(std::move(sample));
      d.ids.push_back(id);
      any = true;
    }
    if (d.samples.size() == batch || (!d.samples.empty() && !drop_last_)) break;
    // The epoch ended with a partial batch (dropped) or none: the next epoch.
    if (!any && opened_empty)
      throw Error("the streaming data set has fewer than one batch (" +
                      std::to_string(settings_.batch_size) + " samples) in epoch " +
                      std::to_string(stream_->epoch()) + " for this rank",
                  "lower data.batch_size, or set data.drop_last = false", ErrorKind::run);
    opened_empty = true;
    d.samples.clear();
    d.ids.clear();
    stream_->next_epoch();
  }
  d.epoch = stream_->epoch();
  return d;
}

Batch collate(std::vector<Example> samples) {
  std::vector<torch::Tensor> inputs, targets;
  inputs.reserve(samples.size());
  for (Example& s : samples) {
    if (!inputs.empty() && !s.input.sizes().equals(inputs.front().sizes()))
      throw Error("samples of one batch differ in shape: " + shape_text(sizes_of(inputs.front())) +
                      " and " + shape_text(sizes_of(s.input)),
                  "give every sample one size (resize and crop options of the loader, or "
                  "data.resize and data.center_crop)",
                  ErrorKind::run);
    inputs.push_back(std::move(s.input));
    if (s.target.defined()) targets.push_back(std::move(s.target));
  }
  Batch b;
  b.inputs = torch::stack(inputs);
  if (!targets.empty()) {
    if (targets.size() != inputs.size())
      throw Error("some samples of a batch have targets and some do not", {}, ErrorKind::run);
    b.targets = torch::stack(targets);
  }
  b.size = static_cast<std::int64_t>(inputs.size());
  return b;
}

Batch DataPipeline::read(std::vector<std::int64_t>& ids, std::int64_t& skipped) {
  try {
    return loader_.get_batch(ids);
  } catch (const PluginSampleError&) {
    if (!skip_) throw;
  }
  // on_error = "skip": the batch again, sample by sample, without the bad ones.
  std::vector<Example> kept;
  std::vector<std::int64_t> kept_ids;
  std::string last_error;
  for (std::int64_t id : ids) {
    try {
      kept.push_back(loader_.get(id));
      kept_ids.push_back(id);
    } catch (const PluginSampleError& e) {
      ++skipped;
      last_error = e.what();
    }
  }
  if (kept.empty())
    throw Error("every sample of a batch is unreadable (data.on_error = \"skip\"); the last: " +
                    last_error,
                "check the data files", ErrorKind::run);
  ids = std::move(kept_ids);
  return collate(std::move(kept));
}

Batch DataPipeline::make(Draw d, std::int64_t& skipped) {
  Batch b = d.samples.empty() ? read(d.ids, skipped) : collate(std::move(d.samples));
  b.inputs = augmenter_.apply(b.inputs, d.ids, d.epoch);
  if (settings_.pin_memory) {
    b.inputs = b.inputs.pin_memory();
    if (b.targets.defined()) b.targets = b.targets.pin_memory();
  }
  return b;
}

void DataPipeline::account(const Batch& batch, double seconds) {
  ++stats_.batches;
  stats_.samples += batch.size;
  stats_.busy_s += seconds;
}

void DataPipeline::work() {
  for (;;) {
    Draw d;
    Clock::time_point start;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] {
        return stopping_ || failure_ || next_ticket_ < delivered_ + capacity_;
      });
      if (stopping_ || failure_) return;
      start = Clock::now();
      try {
        d = draw(next_ticket_);
        ++next_ticket_;
      } catch (...) {
        fail(next_ticket_, std::current_exception());
        changed_.notify_all();
        return;
      }
    }
    const std::int64_t ticket = d.ticket;
    try {
      std::int64_t skipped = 0;
      Batch b = make(std::move(d), skipped);
      const double seconds = seconds_since(start);
      const std::lock_guard lock(mutex_);
      account(b, seconds);
      ready_.emplace(ticket, std::make_pair(std::move(b), skipped));
    } catch (...) {
      const std::lock_guard lock(mutex_);
      fail(ticket, std::current_exception());
    }
    changed_.notify_all();
  }
}

void DataPipeline::fail(std::int64_t ticket, std::exception_ptr error) {
  if (ticket < failed_ticket_) {
    failed_ticket_ = ticket;
    failure_ = std::move(error);
  }
}

Batch DataPipeline::next() {
  std::unique_lock lock(mutex_);
  if (!started_clock_) {
    started_ = Clock::now();
    started_clock_ = true;
  }
  if (workers_.empty()) {
    // On the training thread: the step waits exactly as long as the batch takes.
    const auto start = Clock::now();
    std::int64_t skipped = 0;
    Batch b = make(draw(next_ticket_++), skipped);
    account(b, seconds_since(start));
    stats_.skipped += skipped;
    ++delivered_;
    return b;
  }
  // A batch before the failed one is on its way (its worker finishes it, or
  // fails it and becomes the failed one): wait for it.
  changed_.wait(lock, [&] {
    return ready_.count(delivered_) != 0 || (failure_ && delivered_ >= failed_ticket_);
  });
  const auto it = ready_.find(delivered_);
  if (it == ready_.end()) std::rethrow_exception(failure_);
  Batch b = std::move(it->second.first);
  stats_.skipped += it->second.second;
  ready_.erase(it);
  ++delivered_;
  lock.unlock();
  changed_.notify_all();
  return b;
}

PipelineStats DataPipeline::stats() const {
  const std::lock_guard lock(mutex_);
  PipelineStats s = stats_;
  s.drawn = next_ticket_;
  s.elapsed_s = started_clock_ ? seconds_since(started_) : 0.0;
  return s;
}

}  // namespace runner
