// The figures a run derives from its per-step records and its parts, added
// to its outcome after the loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "training_setup.hpp"
#include "runner/engine/engine.hpp"
#include "runner/engine/pipeline.hpp"
#include "runner/engine/reducer.hpp"
#include "runner/sdk.hpp"

namespace runner {

/// Summaries of the measured samples (neither warm-up nor profiled), one per
/// phase that was timed.
void summarize(RunOutcome& out, const std::string& wall_metric);

/// samples_per_s counts the samples of all ranks (each rank takes a batch per step).
void add_throughput(RunOutcome& out, std::int64_t batch_size);

/// A data-parallel run's communication over its measured steps: the total
/// time per step from the first bucket handed to the hook to the last one
/// done (summary comm_total; the comm phase is the part backward did not
/// hide), the gradient bytes, the bytes the hook sent for them (payload) and
/// their ratio, and a ring-allreduce estimate of the bytes on the wire.
void add_comm_metrics(RunOutcome& out, const std::vector<CommStep>& comm_steps,
                      std::size_t buckets, std::int64_t world);

/// What the input pipeline could do and did: its capacity in samples/s with
/// its workers (never waiting on the training loop), the fraction of its
/// workers' time spent making batches, and the samples it skipped.
void add_pipeline_metrics(RunOutcome& out, const PipelineStats& stats, std::int64_t skipped_at_start,
                          bool skipping);

/// Per run, from the per-step records: the distribution of the gradient norm
/// (clipping), and under amp_fp16 the skipped steps and the last loss scale.
void add_training_setup_metrics(RunOutcome& out, const TrainingSetup& setup);

/// Straggler figures of a data-parallel run from every rank's step times:
/// per step, the slowest rank's time and the median rank's (in the samples;
/// over the measured steps, the summaries rank_step_max, rank_step_median
/// and straggler_ratio, their ratio per step), and which rank was the
/// slowest most often.
void add_straggler_metrics(RunOutcome& out, std::vector<std::vector<double>> per_rank);

/// From samples_per_s and what the model says of one sample: tokens_per_s,
/// and the FLOP/s achieved per rank (training counts forward and backward,
/// about 3x the forward FLOPs) and its fraction of the device's peak.
void add_model_rate_metrics(RunOutcome& out, Model& model, bool training, std::int64_t world,
                            std::optional<double> peak_flop_per_s);

}  // namespace runner
