// Experiment files: TOML -> validated, fully resolved Experiments, one per trial.
//
// Two phases, because plugin search paths come from the file itself:
//   1. parse_experiment_file(): reads the file and every file it `extends`,
//      merges them, applies --set overrides, and checks everything that needs
//      no plugin (syntax, sections, keys, types and ranges of host-level keys,
//      [sweep] and [[trial]], for every trial); plugin tables are kept raw.
//   2. expand_trials(): every trial of the sweep, each with its plugins looked
//      up in a catalog and its plugin tables validated against the plugin's
//      declared options. resolve_experiment() does the same for the base
//      configuration alone (the files without [sweep] and [[trial]]).
// Every error is a runner::Error (ErrorKind::input) whose message starts with
// "file:line:col: " when the position is known. No LibTorch here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runner/common/error.hpp"
#include "runner/common/labels.hpp"
#include "runner/common/run_kind.hpp"
#include "runner/experiment/catalog.hpp"
#include "runner/experiment/expect.hpp"
#include "runner/options.hpp"
#include "runner/runtime/runtime.hpp"

namespace runner {

/// The experiment section that configures plugins of `kind`: "model",
/// "data" (loaders), "optimizer", "comm_hook" or "kernel".
[[nodiscard]] const std::string& section_of(PluginKind kind);

/// A plugin chosen by an experiment section ([model], [data], [optimizer]) and its options.
struct PluginChoice {
  PluginChoice() = default;
  PluginChoice(std::string plugin_name, Options plugin_options, SourceLocation plugin_where = {},
               std::map<std::string, SourceLocation> where_of_options = {},
               std::vector<std::string> omits = {})
      : plugin(std::move(plugin_name)),
        options(std::move(plugin_options)),
        where(std::move(plugin_where)),
        option_where(std::move(where_of_options)),
        identity_omits(std::move(omits)) {}

  std::string plugin;       ///< plugin name
  Options options;          ///< validated, defaults filled
  SourceLocation where;     ///< location of the `plugin = ...` value
  /// Location of each option the file writes (options left at their default are absent).
  std::map<std::string, SourceLocation> option_where;
  /// Options left out of the trial's identity: declared added_later and at their default.
  std::vector<std::string> identity_omits;
  /// Options declared content() that name a file: option -> lowercase hex
  /// SHA-256 of the file's bytes, read at validation. The trial's identity
  /// holds the hash in place of the path.
  std::map<std::string, std::string> content_sha256;

  /// Where option `name` is written, else where the plugin is named.
  [[nodiscard]] const SourceLocation& where_of(const std::string& name) const {
    const auto it = option_where.find(name);
    return it == option_where.end() ? where : it->second;
  }
};

/// [device]
struct DeviceSettings {
  std::string type = "cpu";       ///< "cpu" | "cuda" | "auto"
  std::int64_t threads = 0;       ///< intra-op threads; 0 = LibTorch default
  std::int64_t interop_threads = 0;  ///< inter-op threads; 0 = LibTorch default
  // Math and algorithm settings; unset: LibTorch's default is left alone.
  std::optional<bool> cudnn_benchmark;  ///< CUDA only: cuDNN picks convolution algorithms by timing
  std::optional<bool> deterministic;    ///< torch.use_deterministic_algorithms
  std::optional<bool> tf32_matmul;      ///< CUDA only: TF32 in cuBLAS matmuls
  std::optional<bool> tf32_conv;        ///< CUDA only: TF32 in cuDNN convolutions
  std::string float32_matmul_precision; ///< "highest" | "high" | "medium"; empty: unset

  /// The CUDA-only settings this experiment sets ("device.cudnn_benchmark", ...).
  [[nodiscard]] std::vector<std::string> cuda_only_keys() const;
};

/// [runtime]: the process a run executes in (thread counts live in DeviceSettings).
struct RuntimeSettings {
  std::string allocator = "system";  ///< "system" | "jemalloc" | "tcmalloc"
  /// CPUs the run process is bound to, normalised ("0-3,8"); empty: unbound.
  std::string cpu_affinity;
  std::int64_t numa_node = -1;       ///< NUMA node of CPUs and memory; -1: unbound

  [[nodiscard]] bool is_default() const {
    return allocator == "system" && cpu_affinity.empty() && numa_node < 0;
  }
};

/// [schedule]: the learning rate of every parameter group over the optimizer
/// steps, as a factor of the group's own lr (PyTorch's lr_scheduler semantics).
struct ScheduleSettings {
  bool enabled = false;            ///< true when the experiment has a [schedule] section
  std::string type = "constant";   ///< "constant" | "step" | "cosine" | "one_cycle"
  std::int64_t warmup_steps = 0;   ///< linear warm-up steps before the schedule (LinearLR)
  double warmup_start_factor = 1.0 / 3.0;  ///< lr factor at the first warm-up step, (0, 1]
  std::int64_t step_size = 0;      ///< step: steps between decays (required by "step")
  double gamma = 0.1;              ///< step: decay factor
  double min_lr = 0.0;             ///< cosine: the lr it ends at (eta_min)
  double pct_start = 0.3;          ///< one_cycle: fraction of steps rising
  std::string anneal = "cos";      ///< one_cycle: "cos" | "linear"
  double div_factor = 25.0;        ///< one_cycle: initial lr = lr / div_factor
  double final_div_factor = 1e4;   ///< one_cycle: final lr = initial lr / final_div_factor
  bool three_phase = false;        ///< one_cycle: a third phase down to the final lr
  bool cycle_momentum = true;      ///< one_cycle: momentum (beta1) cycles against the lr
  double base_momentum = 0.85;     ///< one_cycle: momentum at the lr's peak
  double max_momentum = 0.95;      ///< one_cycle: momentum at the start and end
};

/// Augmentations of [data], applied per sample in this order, each seeded
/// by (run seed, epoch, sample): resize, center_crop, random_crop (after
/// zero padding), hflip; then uint8 samples become float32 in [0, 1] and
/// normalize applies per channel. Sizes are [] (off), [n] or [height, width].
struct AugmentSettings {
  std::vector<std::int64_t> resize;       ///< [n]: shorter side to n; [h, w]: exactly
  std::vector<std::int64_t> center_crop;  ///< crop the center to this size
  std::vector<std::int64_t> random_crop;  ///< crop a random window of this size
  std::int64_t crop_padding = 0;          ///< zero padding on every side before random_crop
  double hflip = 0.0;                     ///< probability of a horizontal flip
  std::vector<double> normalize_mean;     ///< per channel; empty: no normalisation
  std::vector<double> normalize_std;      ///< per channel, with normalize_mean
  /// True when any augmentation is on.
  [[nodiscard]] bool any() const {
    return !resize.empty() || !center_crop.empty() || !random_crop.empty() || hflip > 0 ||
           !normalize_mean.empty();
  }
};

/// Host-level keys of [data] (the rest of the table are loader options).
struct DataSettings {
  std::int64_t batch_size = 32;   ///< samples per batch, >= 1
  bool shuffle = true;            ///< seeded shuffle of sample order each epoch
  bool drop_last = true;          ///< drop a final partial batch
  std::int64_t workers = 0;       ///< decoding threads; 0: on the training thread
  std::int64_t prefetch = 2;      ///< batches in flight per worker
  bool pin_memory = false;        ///< batches in pinned memory, copied on a side stream (CUDA)
  std::string on_error = "fail";  ///< a sample that cannot be read: "fail" | "skip"
  std::int64_t shuffle_buffer = 1024;  ///< streaming data sets: samples shuffled together
  AugmentSettings augment;
};

/// Host-level keys of [model] (the rest of the table are model options).
struct ModelSettings {
  bool channels_last = false;       ///< NHWC parameters and inputs (image models)
  std::filesystem::path init_from;  ///< weights to start from (absolute); empty: the plugin's init
  std::string init_from_sha256;     ///< lowercase hex SHA-256 of that file, read at validation
  bool strict = true;               ///< false: names missing from / unknown to the model are skipped
  /// Reference input and output (safetensors: "input", "output") the model
  /// must reproduce before it is timed (absolute; empty: no check).
  std::filesystem::path check_against;
  std::string check_against_sha256; ///< lowercase hex SHA-256 of that file, read at validation
  double check_tolerance = 1e-4;    ///< largest max|y - ref| / max|ref| that passes
};

/// [train]
struct TrainSettings {
  std::int64_t steps = 100;       ///< measured steps, >= 1
  std::int64_t warmup = 10;       ///< warm-up steps before measurement, >= 0; -1: "auto"
  std::string precision = "fp32"; ///< "fp32" | "bf16" | "amp_bf16" | "amp_fp16"
  std::int64_t accumulate = 1;    ///< micro-batches per optimizer step, >= 1
  double clip_grad_norm = 0.0;    ///< clip gradients to this global L2 norm; 0: no clipping
  /// Safetensors file written at the end of every run (absolute; empty: none).
  /// "{trial}" has become the trial's number; "{repeat}" stands for the
  /// repetition (0-based) and is replaced by save_path().
  std::string save_to;
};

/// [eval]: held-out evaluation of the model (the loader's eval split).
struct EvalSettings {
  bool enabled = false;            ///< true when the experiment has an [eval] section
  std::int64_t every = 0;          ///< evaluate after every N steps (train); 0: only at the end
  std::int64_t batches = 10;       ///< held-out batches per evaluation (data.batch_size each)
};

/// [profile]: steps recorded under LibTorch's profiler after the warm-up
/// (docs/profiling.md); excluded from every statistic.
struct ProfileSettings {
  std::int64_t steps = 0;          ///< profiled steps (train) or batches (infer); 0: off
  bool record_shapes = false;      ///< record the operators' input shapes (per-shape op rows)
  [[nodiscard]] bool enabled() const { return steps > 0; }
};

/// [infer]
struct InferSettings {
  std::int64_t batches = 100;     ///< measured batches, >= 1
  std::int64_t warmup = 10;       ///< warm-up batches, >= 0; -1: "auto"
  std::string mode = "inference"; ///< "inference" (torch::InferenceMode) | "no_grad"
  std::string precision = "fp32"; ///< "fp32" | "bf16" | "amp_bf16" | "amp_fp16"
};

/// [distributed]: data-parallel training over world_size ranks (processes runner
/// forks, or the processes of a launched job; see docs/distributed.md).
struct DistributedSettings {
  bool enabled = false;            ///< true when the experiment has a [distributed] section
  std::int64_t world_size = 2;     ///< ranks, >= 1 (a launched job's WORLD_SIZE)
  std::string backend = "gloo";    ///< "gloo" (CPU tensors) | "nccl" (CUDA tensors)
  double bucket_mb = 25.0;         ///< gradient bucket size in MiB (DDP's bucket_cap_mb), > 0
  double first_bucket_mb = 1.0;    ///< the first bucket once rebuilt (DDP's 1 MiB), > 0
  std::string reducer = "ddp";     ///< "ddp" (c10d::Reducer) | "after_backward"
  bool find_unused_parameters = false;   ///< DDP's option
  bool gradient_as_bucket_view = false;  ///< DDP's option
  bool static_graph = false;             ///< DDP's option
  bool broadcast_buffers = true;         ///< DDP's option: rank 0's buffers before each step
  double timeout_s = 60.0;         ///< collective and rendezvous time limit, seconds
};

/// [kernel]: one custom op's benchmark, checked before it is timed
/// (kind = "kernel"; docs/kernels.md). The rest of the table are the kernel
/// plugin's options.
struct KernelSettings {
  std::vector<std::int64_t> shape;  ///< the input shape the kernel plugin builds (required)
  std::string dtype = "float32";    ///< "float32" | "float64" | "bfloat16" | "float16"
  std::string impl = "custom";      ///< "custom" | "native" | "eager"
  std::int64_t calls = 100;         ///< measured calls, >= 1
  std::int64_t warmup = 10;         ///< warm-up calls, >= 0; -1: "auto"
  /// Input and output sets rotated from call to call; 0: "auto", enough that
  /// the working set of the others exceeds twice the last-level cache.
  std::int64_t buffers = 0;
};

/// A parsed experiment file before plugin options are validated.
class ParsedExperiment;

/// A file an experiment was read from.
struct SourceFile {
  std::filesystem::path path;  ///< as messages show it (relative to the extending file's folder)
  std::string text;            ///< its full text
};

/// Where an experiment came from: read once, shared by all its trials (a
/// sweep of 100,000 trials holds one copy of the text, not 100,000).
struct ExperimentSource {
  std::filesystem::path path;               ///< the experiment file as given
  std::string text;                         ///< its full text (stored with the experiment)
  std::vector<SourceFile> base_files;       ///< files read through `extends`, in the order read
  std::vector<std::string> set_overrides;   ///< the --set arguments ("key=value"), as given
};

/// A fully validated experiment, ready to run.
struct Experiment {
  std::shared_ptr<const ExperimentSource> source;  ///< never null once parsed

  std::string name;                   ///< [experiment] name (default: file stem)
  std::string description;            ///< [experiment] description
  Labels labels;                      ///< [experiment] labels: recorded with every run, not its identity
  RunKind kind = RunKind::train;      ///< [experiment] kind
  std::int64_t seed = 0;              ///< global seed, >= 0
  std::int64_t repeats = 1;           ///< repetitions of every trial, >= 1 (auto: max_repeats)
  /// repeats = "auto": rounds of one repetition of every trial that stop
  /// once every expectation is decided (docs/method.md, "Repetitions that
  /// stop when the answer is known").
  bool auto_repeats = false;
  std::int64_t min_repeats = 3;          ///< auto: rounds before the first look
  std::int64_t max_repeats = 30;         ///< auto: the most rounds
  std::optional<double> time_budget_s;   ///< auto: no round starts once this much time has passed
  double timeout_s = 3600.0;          ///< per-run time limit in seconds ([experiment] timeout), > 0

  DeviceSettings device;
  RuntimeSettings runtime;                  ///< [runtime]
  std::map<std::string, std::string> env;   ///< [env]: variables of the run process
  PluginChoice model;                       ///< [model], required but for kind = "kernel"
  ModelSettings model_settings;             ///< [model] init_from, strict
  std::optional<PluginChoice> data;         ///< [data]; required for train
  DataSettings data_settings;
  std::optional<PluginChoice> optimizer;    ///< [optimizer]; required for train
  TrainSettings train;
  ScheduleSettings schedule;                ///< [schedule] (train only)
  InferSettings infer;
  EvalSettings eval;                        ///< [eval]
  ProfileSettings profile;                  ///< [profile] (train and infer)
  DistributedSettings distributed;          ///< [distributed] (train only)
  std::optional<PluginChoice> comm_hook;    ///< [comm_hook]; "allreduce" when distributed without one
  std::optional<PluginChoice> kernel;       ///< [kernel]; required for kind = "kernel"
  KernelSettings kernel_settings;
  /// [plugins] path, each entry resolved against the folder of the file that writes it
  std::vector<std::filesystem::path> plugin_paths;
  /// Where each host-level key the files write is ("train.precision" -> file:line:col),
  /// for errors found after validation (before any run starts).
  std::map<std::string, SourceLocation> key_where;
  /// The file's [[expect]] tables, validated (expect.hpp); shared by every
  /// trial, and no part of a trial's identity: a claim added to a file
  /// does not make its recorded runs another configuration's.
  std::shared_ptr<const std::vector<Expectation>> expectations;

  /// Where host key `dotted` is written, else the experiment file itself.
  [[nodiscard]] SourceLocation where_of(const std::string& dotted) const;
  /// The precision of the loop this experiment runs ([train] or [infer] precision).
  [[nodiscard]] const std::string& precision() const {
    return kind == RunKind::train ? train.precision : infer.precision;
  }
  /// Optimizer steps a run takes, warm-up and profiled steps included (auto
  /// warm-up: its most).
  [[nodiscard]] std::int64_t total_train_steps() const;

  /// Canonical JSON of everything that defines the trial (sorted keys, no
  /// whitespace, no source text or path): equal configs give equal strings.
  [[nodiscard]] std::string resolved_json() const;
  /// Lowercase hex SHA-256 of resolved_json().
  [[nodiscard]] std::string config_hash() const;
  /// [env] and [runtime] as the run process applies and checks them.
  [[nodiscard]] RuntimeRequest runtime_request() const;
  /// Where repetition `repeat_index` saves its weights ([train] save_to with
  /// "{repeat}" replaced); empty when the experiment saves none.
  [[nodiscard]] std::filesystem::path save_path(std::int64_t repeat_index) const;
};

/// One point of an experiment's sweep: the configuration it runs and what
/// distinguishes it from the other trials.
struct Trial {
  Experiment experiment;  ///< fully resolved; its config_hash() identifies the trial
  std::string label;      ///< "optimizer.lr=0.1 data.batch_size=32"; empty when nothing varies
  /// Dotted key -> value as TOML text, in label order.
  std::vector<std::pair<std::string, std::string>> varied;
  /// 0-based position in expansion order ("trial N" in messages is index + 1).
  std::int64_t index = 0;
};

/// The comm_hook plugin a [distributed] experiment without [comm_hook] uses.
inline constexpr const char* kDefaultCommHook = "allreduce";

/// Most trials one experiment may expand to.
inline constexpr std::int64_t kMaxTrials = 100000;
/// Most runs (trials x repeats) one experiment may plan.
inline constexpr std::int64_t kMaxRuns = 1000000;
/// Bounds of numeric keys (docs/experiment.md#limits): every value that
/// validates must also be able to run.
inline constexpr std::int64_t kMaxRepeats = 10000;
inline constexpr std::int64_t kMaxSteps = 1000000;            ///< steps, batches, warm-up
inline constexpr std::int64_t kMaxBatchSize = 1 << 20;
inline constexpr std::int64_t kMaxAccumulate = 4096;          ///< micro-batches per step
/// The most warm-up steps `warmup = "auto"` takes before measuring
/// `measured_steps` steps (the engine's warm-up detector gives up there).
[[nodiscard]] constexpr std::int64_t max_auto_warmup_steps(std::int64_t measured_steps) {
  return measured_steps > 50 ? measured_steps : 50;
}
inline constexpr std::int64_t kMaxThreads = 1024;
/// Most profiled steps ([profile] steps): a trace of every operator of every
/// step grows by megabytes per step.
inline constexpr std::int64_t kMaxProfileSteps = 1000;
inline constexpr std::size_t kMaxKernelRank = 8;               ///< kernel.shape dimensions
inline constexpr std::int64_t kMaxKernelElements = std::int64_t{1} << 32;  ///< product of kernel.shape
inline constexpr std::int64_t kMaxKernelBuffers = 4096;        ///< kernel.buffers
inline constexpr std::int64_t kMaxWorldSize = 64;
inline constexpr std::int64_t kMaxDataWorkers = 64;            ///< data.workers
inline constexpr std::int64_t kMaxPrefetch = 64;               ///< batches per worker
inline constexpr std::int64_t kMaxShuffleBuffer = 1 << 20;     ///< samples
inline constexpr std::int64_t kMaxImageSide = 1 << 14;         ///< resize and crop sizes
inline constexpr std::size_t kMaxChannels = 1024;              ///< normalize_mean / _std
inline constexpr double kMaxRunTimeoutSeconds = 30.0 * 24 * 3600;        ///< 30 days
inline constexpr double kMaxCollectiveTimeoutSeconds = 24.0 * 3600;      ///< 1 day
/// Shortest run timeout: the scheduler reports and records a timeout in
/// whole seconds, and a run's own start (fork, plugins, model) takes a good
/// part of one, so a shorter limit can only ever kill every run.
inline constexpr double kMinRunTimeoutSeconds = 1.0;
/// Shortest collective timeout: c10d takes it in whole milliseconds, and a
/// rendezvous of two processes does not finish in under a second.
inline constexpr double kMinCollectiveTimeoutSeconds = 1.0;

/// Phase 1: reads the file, the files it extends, applies `set_overrides`
/// ("section.key=value", as given to --set) and checks everything that needs
/// no plugin, for every trial. Throws runner::Error.
[[nodiscard]] std::shared_ptr<const ParsedExperiment> parse_experiment_file(
    const std::filesystem::path& path, const std::vector<std::string>& set_overrides = {});

/// Plugin search folders named by [plugins] path (absolute; each resolved against the
/// folder of the file that writes it).
[[nodiscard]] std::vector<std::filesystem::path> plugin_paths_of(const ParsedExperiment& parsed);

/// How many trials the experiment expands to ([[trial]] tables x sweep points; 1 without either).
[[nodiscard]] std::int64_t trial_count(const ParsedExperiment& parsed);

/// The file's [[expect]] tables, validated without plugins (empty when none).
[[nodiscard]] std::vector<Expectation> file_expectations(const ParsedExperiment& parsed);

/// Phase 2: every trial, in expansion order, each fully validated against the
/// catalog. Throws runner::Error; an error caused by a trial's values names
/// the trial: "... (in trial 3: model.plugin=\"resnet\")".
[[nodiscard]] std::vector<Trial> expand_trials(const ParsedExperiment& parsed,
                                               const PluginCatalog& catalog);

/// Phase 2 for the base configuration alone: the files and --set values with
/// [sweep] and [[trial]] left out. Throws runner::Error, also when the base is
/// incomplete without a trial's values (e.g. [model] plugin comes from [sweep]).
[[nodiscard]] Experiment resolve_experiment(const ParsedExperiment& parsed,
                                            const PluginCatalog& catalog);

/// Convenience: both phases, for the base configuration.
[[nodiscard]] Experiment load_experiment(const std::filesystem::path& path,
                                         const PluginCatalog& catalog);

}  // namespace runner
