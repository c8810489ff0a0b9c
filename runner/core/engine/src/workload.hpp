// The workload of a run: the plugins it is built from (loader, model,
// optimizer, comm hook) and what feeds and synchronises them, built the same
// way by a run's ranks and by the checks before any run (preflight.cpp).
#pragma once

#include <torch/types.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "batch_source.hpp"
#include "evaluation.hpp"
#include "run_memory.hpp"
#include "training_setup.hpp"
#include "runner/comm_hook.hpp"
#include "runner/engine/engine.hpp"
#include "runner/engine/ranks.hpp"
#include "runner/engine/reducer.hpp"
#include "runner/sdk.hpp"

namespace runner {

// This process's place in a data-parallel run (rank 0 of 1 otherwise).
struct RankInfo {
  const Rendezvous* rendezvous = nullptr;  // null: not distributed
  RankLink* link = nullptr;                // the store, heartbeat, failures, step times
  [[nodiscard]] int rank() const { return rendezvous ? rendezvous->rank : 0; }
  [[nodiscard]] int world_size() const { return rendezvous ? rendezvous->world_size : 1; }
};

// Everything a loop needs, built from the plugins.
struct Workload {
  Workload() = default;
  Workload(const Workload&) = delete;
  Workload& operator=(const Workload&) = delete;
  ~Workload() = default;
  std::unique_ptr<Loader> loader;
  std::unique_ptr<Model> model;
  std::unique_ptr<Optimizer> optimizer;
  const PluginDescriptor* optimizer_plugin = nullptr;  // names it when LibTorch's step throws
  std::unique_ptr<BatchSource> batches;
  std::int64_t batch_size = 0;
  // Data-parallel runs: the group, the hook and the gradient synchronisation
  // (the sync is declared last of the three: it goes first).
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  std::unique_ptr<CommHook> comm_hook;
  std::unique_ptr<GradientSync> sync;
  std::vector<CommStep> comm_steps;  // one per step, as out.samples
  bool gradients_computed = false;   // set by the sync when backward only communicates
  // Weights: the file read at start (and the names strict = false skipped).
  std::optional<store::RunFile> init_file;
  std::vector<std::string> skipped;
  std::unique_ptr<Evaluator> evaluator;  // [eval], rank 0
  std::unique_ptr<TrainingSetup> setup;  // precision, memory format, schedule, clipping
  std::int64_t accumulate = 1;           // micro-batches per optimizer step
  // The run's memory figures, set by rank 0 before build(): the loader's
  // bytes are counted as the data set's, the steps' peak apart. Null elsewhere.
  RunMemory* memory = nullptr;
};

/// The experiment's loader plugin, its option and data errors reported at
/// the experiment's keys.
std::unique_ptr<Loader> make_loader_for(const Experiment& exp, const PluginHost& host,
                                        const LoaderContext& context);

/// The experiment's model plugin, its option and data errors reported at
/// the experiment's keys.
std::unique_ptr<Model> make_model_for(const Experiment& exp, const PluginHost& host,
                                      const ModelContext& context);

/// The experiment's optimizer plugin, its option errors reported at the
/// experiment's keys.
std::unique_ptr<Optimizer> make_optimizer_for(const Experiment& exp, const PluginHost& host,
                                              const OptimizerContext& context);

/// What the loader of `split` is told about the run and this rank.
LoaderContext loader_context(const Experiment& exp, std::uint64_t seed, std::int64_t rank,
                             std::int64_t world_size, Split split = Split::train);

/// Builds `w` for `rank` on `device`: loader and its pipeline, training setup, model
/// (with its init_from weights), optimizer, and for a data-parallel rank the
/// process group and gradient synchronisation.
void build(Workload& w, const Experiment& exp, const PluginHost& host, std::uint64_t seed,
           torch::Device device, const RankInfo& rank);

}  // namespace runner
