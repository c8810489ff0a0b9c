// The figures a run derives from its per-step records and its parts
// (metrics.hpp): the step-time summaries, throughput, communication, the
// input pipeline, the training setup's gradient norms and loss scale, stragglers.
#include "metrics.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "runner/engine/ranks.hpp"
#include "runner/store/statistics.hpp"

namespace runner {

void summarize(RunOutcome& out, const std::string& wall_metric) {
  std::vector<double> wall;
  std::array<std::vector<double>, store::kPhaseCount> phases;
  for (const auto& s : out.samples) {
    if (!s.measured()) continue;
    wall.push_back(s.wall_ns);
    for (std::size_t p = 0; p < store::kPhaseCount; ++p)
      if (s.phase_ns[p] >= 0) phases[p].push_back(s.phase_ns[p]);
  }
  out.summaries.push_back(store::summarize(wall_metric, "ns", wall));
  for (const store::PhaseInfo& phase : store::kPhases) {
    auto& values = phases[store::phase_index(phase.phase)];
    if (!values.empty())
      out.summaries.push_back(store::summarize(phase.name, "ns", std::move(values)));
  }
}

void add_throughput(RunOutcome& out, std::int64_t batch_size) {
  double wall_ns = 0;
  std::int64_t measured = 0;
  for (const auto& s : out.samples)
    if (s.measured()) {
      wall_ns += s.wall_ns;
      ++measured;
    }
  out.metrics.push_back({"measured_steps", static_cast<double>(measured), "count"});
  if (measured > 0 && wall_ns > 0)
    out.metrics.push_back(
        {"samples_per_s", static_cast<double>(measured * batch_size) / (wall_ns * 1e-9), "1/s"});
}

void add_comm_metrics(RunOutcome& out, const std::vector<CommStep>& comm_steps,
                      std::size_t buckets, std::int64_t world) {
  std::vector<double> spans;
  double gradient = 0, payload = 0;
  std::int64_t steps = 0;
  for (std::size_t i = 0; i < comm_steps.size() && i < out.samples.size(); ++i) {
    if (!out.samples[i].measured()) continue;
    const CommStep& c = comm_steps[i];
    if (c.span_ns >= 0) spans.push_back(c.span_ns);
    gradient += static_cast<double>(c.bucket_bytes);
    payload += static_cast<double>(c.payload_bytes);
    ++steps;
  }
  out.metrics.push_back({"world_size", static_cast<double>(world), "count"});
  out.metrics.push_back({"comm_buckets", static_cast<double>(buckets), "count"});
  if (!spans.empty()) out.summaries.push_back(store::summarize("comm_total", "ns", std::move(spans)));
  if (steps == 0) return;
  gradient /= static_cast<double>(steps);
  payload /= static_cast<double>(steps);
  const double n = static_cast<double>(world);
  out.metrics.push_back({"comm_gradient_bytes_per_step", gradient, "B"});
  out.metrics.push_back({"comm_payload_bytes_per_step", payload, "B"});
  out.metrics.push_back({"comm_bytes_per_step", world > 1 ? 2.0 * payload * (n - 1) / n : 0.0, "B"});
  if (payload > 0) out.metrics.push_back({"compression_ratio", gradient / payload, ""});
}

void add_pipeline_metrics(RunOutcome& out, const PipelineStats& stats, std::int64_t skipped_at_start,
                          bool skipping) {
  if (const double capacity = stats.capacity_per_s(); !std::isnan(capacity))
    out.metrics.push_back({"loader_samples_per_s", capacity, "1/s"});
  if (const double busy = stats.busy_fraction(); !std::isnan(busy))
    out.metrics.push_back({"loader_busy_fraction", busy, ""});
  if (skipping || stats.skipped > 0 || skipped_at_start > 0)
    out.metrics.push_back(
        {"skipped_samples", static_cast<double>(stats.skipped + skipped_at_start), "count"});
}

void add_training_setup_metrics(RunOutcome& out, const TrainingSetup& setup) {
  std::vector<double> norms;
  std::int64_t skipped = 0;
  double last_scale = std::nan("");
  for (const auto& s : out.samples) {
    if (s.measured() && !std::isnan(s.grad_norm)) norms.push_back(s.grad_norm);
    if (s.skipped == 1) ++skipped;
    if (!std::isnan(s.loss_scale)) last_scale = s.loss_scale;
  }
  if (!norms.empty()) out.summaries.push_back(store::summarize("grad_norm", "", std::move(norms)));
  if (setup.scales_loss()) {
    out.metrics.push_back({"skipped_steps", static_cast<double>(skipped), "count"});
    if (!std::isnan(last_scale)) out.metrics.push_back({"loss_scale_final", last_scale, ""});
  }
}

void add_straggler_metrics(RunOutcome& out, std::vector<std::vector<double>> per_rank) {
  per_rank[0].clear();
  for (const auto& sample : out.samples) per_rank[0].push_back(sample.wall_ns);
  std::vector<std::vector<double>> reported;
  std::vector<std::size_t> ranks;  // which rank each row of `reported` is
  for (std::size_t r = 0; r < per_rank.size(); ++r)
    if (!per_rank[r].empty()) {
      reported.push_back(std::move(per_rank[r]));
      ranks.push_back(r);
    }
  out.metrics.push_back({"ranks_reporting_times", static_cast<double>(reported.size()), "count"});
  const StragglerSteps steps =
      straggler_steps(reported, std::vector<bool>(out.samples.size(), true));
  std::vector<double> max, median, ratio;
  std::vector<std::int64_t> slowest_count(per_rank.size());
  for (std::size_t i = 0; i < steps.max_ns.size(); ++i) {
    store::Sample& sample = out.samples[i];
    sample.rank_max_ns = steps.max_ns[i];
    sample.rank_median_ns = steps.median_ns[i];
    if (!sample.measured()) continue;
    max.push_back(steps.max_ns[i]);
    median.push_back(steps.median_ns[i]);
    ratio.push_back(steps.median_ns[i] > 0 ? steps.max_ns[i] / steps.median_ns[i] : 1.0);
    ++slowest_count[ranks[static_cast<std::size_t>(steps.slowest_rank[i])]];
  }
  if (max.empty()) return;
  const double measured = static_cast<double>(max.size());
  out.summaries.push_back(store::summarize("rank_step_max", "ns", std::move(max)));
  out.summaries.push_back(store::summarize("rank_step_median", "ns", std::move(median)));
  out.summaries.push_back(store::summarize("straggler_ratio", "", std::move(ratio)));
  const auto most = std::max_element(slowest_count.begin(), slowest_count.end());
  out.metrics.push_back({"slowest_rank", static_cast<double>(most - slowest_count.begin()), ""});
  out.metrics.push_back({"slowest_rank_share", static_cast<double>(*most) / measured, ""});
}

void add_model_rate_metrics(RunOutcome& out, Model& model, bool training, std::int64_t world,
                            std::optional<double> peak_flop_per_s) {
  double samples_per_s = std::nan("");
  for (const auto& m : out.metrics)
    if (m.name == "samples_per_s") samples_per_s = m.value;
  if (const auto tokens = model.tokens_per_sample(); tokens && !std::isnan(samples_per_s))
    out.metrics.push_back({"tokens_per_s", *tokens * samples_per_s, "1/s"});
  if (const auto flops = model.flops_per_sample(); flops && !std::isnan(samples_per_s)) {
    // Training does forward + backward, about 3x the forward FLOPs.
    const double factor = training ? 3.0 : 1.0;
    // Per rank, against one device's peak.
    const double achieved = factor * *flops * samples_per_s / static_cast<double>(world);
    out.metrics.push_back({"achieved_flop_per_s", achieved, "flop/s"});
    if (peak_flop_per_s && *peak_flop_per_s > 0)
      out.metrics.push_back({"fraction_of_peak", achieved / *peak_flop_per_s, ""});
  }
}

}  // namespace runner
