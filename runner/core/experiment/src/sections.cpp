// The host-level keys of an experiment file: every section, every key with
// its type, default, range and where it goes in an Experiment (the one
// source of defaults). The look-ups into this table are section_lookup.cpp.
#include <limits>
#include <optional>
#include <utility>

#include "format.hpp"
#include "host_key_builders.hpp"
#include "runner/common/strings.hpp"

namespace runner::experiment::detail {

using namespace host_key_builders;  // the table is written in them

const std::vector<SectionSpec>& section_specs() {
  static const std::vector<SectionSpec> specs = [] {
    std::vector<SectionSpec> s;
    // [train] and [infer] precision (runner_training parses them in the engine).
    const std::vector<std::string> precisions{"fp32", "bf16", "amp_bf16", "amp_fp16"};

    HostKey name = string_key("name", "", {}, "experiment name (default: the file's stem)",
                              [](Experiment& e, const OptionValue& v) { e.name = str(v); });
    name.spec.default_value.reset();  // the default depends on the file
    name.non_empty = true;
    name.printable = true;
    HostKey timeout{spec_of("timeout", OptionType::number, OptionValue{3600.0},
                            "per-run time limit: \"90s\", \"30m\", \"2h\" or seconds"),
                    [](Experiment& e, const OptionValue& v) {
                      e.timeout_s = std::get<double>(v);
                    }};
    timeout.role = KeyRole::duration;
    timeout.spec.min = kMinRunTimeoutSeconds;
    timeout.spec.max = kMaxRunTimeoutSeconds;
    // Labels describe a run (the commit under test), they do not configure
    // it: fixed, and never in the canonical JSON.
    HostKey labels{spec_of("labels", OptionType::string, std::nullopt,
                           "KEY = \"value\" pairs every run records, e.g. { branch = \"main\" }; "
                           "not part of the identity"),
                   nullptr};
    labels.role = KeyRole::labels;
    // "auto" (read as -1): rounds that stop when the answer is known.
    HostKey repeats = integer_key("repeats", 1, 1, kMaxRepeats,
                                  "independent repetitions of every trial, or \"auto\"",
                                  [](Experiment& e, const OptionValue& v) {
                                    e.auto_repeats = int_of(v) < 0;
                                    if (!e.auto_repeats) e.repeats = int_of(v);
                                  });
    repeats.role = KeyRole::repeats;
    HostKey time_budget = without_default(
        HostKey{spec_of("time_budget", OptionType::number, std::nullopt,
                        "repeats = \"auto\": no round starts after this long: \"20m\", \"2h\""),
                [](Experiment& e, const OptionValue& v) { e.time_budget_s = std::get<double>(v); }});
    time_budget.role = KeyRole::duration;
    time_budget.spec.min = kMinRunTimeoutSeconds;
    time_budget.spec.max = kMaxRunTimeoutSeconds;
    s.push_back({"experiment", std::nullopt, {},
                 {fixed(name),
                  fixed(string_key("description", "", {}, "free text",
                                   [](Experiment& e, const OptionValue& v) {
                                     e.description = str(v);
                                   })),
                  fixed(string_key("kind", "train", {"train", "infer", "kernel"},
                                   "what the experiment runs: training steps, inference "
                                   "batches, or calls of one kernel",
                                   [](Experiment& e, const OptionValue& v) {
                                     e.kind = parse_run_kind(str(v));
                                   })),
                  integer_key("seed", 0, 0, std::nullopt, "global seed",
                              [](Experiment& e, const OptionValue& v) { e.seed = int_of(v); }),
                  fixed(repeats),
                  fixed(integer_key("min_repeats", 3, 2, kMaxRepeats,
                                    "repeats = \"auto\": rounds before the first look",
                                    [](Experiment& e, const OptionValue& v) {
                                      e.min_repeats = int_of(v);
                                    })),
                  fixed(integer_key("max_repeats", 30, 2, kMaxRepeats,
                                    "repeats = \"auto\": the most rounds",
                                    [](Experiment& e, const OptionValue& v) {
                                      e.max_repeats = int_of(v);
                                    })),
                  fixed(time_budget),
                  fixed(timeout), fixed(labels)}});

    s.push_back({"device", std::nullopt, {},
                 {string_key("type", "cpu", {"cpu", "cuda", "auto"}, "where to run",
                             [](Experiment& e, const OptionValue& v) { e.device.type = str(v); }),
                  integer_key("threads", 0, 0, kMaxThreads,
                              "intra-op threads; 0 = LibTorch default",
                              [](Experiment& e, const OptionValue& v) {
                                e.device.threads = int_of(v);
                              }),
                  integer_key("interop_threads", 0, 0, kMaxThreads,
                              "inter-op threads; 0 = LibTorch default",
                              [](Experiment& e, const OptionValue& v) {
                                e.device.interop_threads = int_of(v);
                              }),
                  optional_boolean_key("cudnn_benchmark",
                                       "CUDA: cuDNN times convolution algorithms and keeps the "
                                       "fastest (torch.backends.cudnn.benchmark)",
                                       [](Experiment& e, const OptionValue& v) {
                                         e.device.cudnn_benchmark = bool_of(v);
                                       }),
                  optional_boolean_key("deterministic",
                                       "deterministic algorithms only, an error where none "
                                       "exists (torch.use_deterministic_algorithms)",
                                       [](Experiment& e, const OptionValue& v) {
                                         e.device.deterministic = bool_of(v);
                                       }),
                  optional_boolean_key("tf32_matmul",
                                       "CUDA: TF32 tensor cores in float32 matmuls "
                                       "(torch.backends.cuda.matmul.allow_tf32)",
                                       [](Experiment& e, const OptionValue& v) {
                                         e.device.tf32_matmul = bool_of(v);
                                       }),
                  optional_boolean_key("tf32_conv",
                                       "CUDA: TF32 tensor cores in float32 convolutions "
                                       "(torch.backends.cudnn.allow_tf32)",
                                       [](Experiment& e, const OptionValue& v) {
                                         e.device.tf32_conv = bool_of(v);
                                       }),
                  // unset: LibTorch's default
                  without_default(string_key(
                      "float32_matmul_precision", "", {"highest", "high", "medium"},
                      "float32 matmul precision (torch.set_float32_matmul_precision)",
                      [](Experiment& e, const OptionValue& v) {
                        e.device.float32_matmul_precision = str(v);
                      }))}});

    // [runtime]: the process a run executes in. The thread counts are the
    // same settings as [device] threads and interop_threads (either place,
    // not both).
    HostKey cpu_affinity = without_default(string_key(
        "cpu_affinity", "", {},
        "CPUs the run process is bound to before LibTorch starts its threads: \"0-3\", "
        "\"0,2\"",
        [](Experiment& e, const OptionValue& v) { e.runtime.cpu_affinity = str(v); }));
    cpu_affinity.non_empty = true;
    s.push_back({"runtime", std::nullopt, {},
                 {string_key("allocator", "system", {"system", "jemalloc", "tcmalloc"},
                             "memory allocator: the C library's, or jemalloc / tcmalloc "
                             "preloaded into a fresh run process",
                             [](Experiment& e, const OptionValue& v) {
                               e.runtime.allocator = str(v);
                             }),
                  cpu_affinity,
                  without_default(integer_key("numa_node", 0, 0, 1023,
                                              "NUMA node the run's CPUs and memory are bound to",
                                              [](Experiment& e, const OptionValue& v) {
                                                e.runtime.numa_node = int_of(v);
                                              })),
                  // [device] threads and interop_threads hold the defaults.
                  without_default(integer_key("threads", 0, 0, kMaxThreads,
                                              "intra-op threads (as device.threads)",
                                              [](Experiment& e, const OptionValue& v) {
                                                e.device.threads = int_of(v);
                                              })),
                  without_default(integer_key("interop_threads", 0, 0, kMaxThreads,
                                              "inter-op threads (as device.interop_threads)",
                                              [](Experiment& e, const OptionValue& v) {
                                                e.device.interop_threads = int_of(v);
                                              }))}});

    // [env]: environment variables of the run process, NAME = "value".
    s.push_back({"env", std::nullopt, {}, {}, /*environment=*/true});

    HostKey init_from{spec_of("init_from", OptionType::string, std::nullopt,
                              "weights to start from: a .safetensors file or a state dict "
                              "saved by torch.save, relative to this file"),
                      [](Experiment& e, const OptionValue& v) {
                        e.model_settings.init_from = str(v);
                      }};
    init_from.role = KeyRole::path;
    HostKey check_against{spec_of("check_against", OptionType::string, std::nullopt,
                                  "reference input and output (safetensors with tensors 'input' "
                                  "and 'output', as runner-export writes) the model must "
                                  "reproduce before it is timed, relative to this file"),
                          [](Experiment& e, const OptionValue& v) {
                            e.model_settings.check_against = str(v);
                          }};
    check_against.role = KeyRole::path;
    s.push_back({"model", PluginKind::model, {RunKind::train, RunKind::infer},
                 {init_from,
                  boolean_key("strict", true,
                              "init_from must name every parameter and buffer of the model and "
                              "nothing else; false: skip (and record) the others",
                              [](Experiment& e, const OptionValue& v) {
                                e.model_settings.strict = bool_of(v);
                              }),
                  check_against,
                  positive_key(number_key("check_tolerance", 1e-4, std::nullopt, 1.0,
                                          "check_against: the largest relative error "
                                          "max|y - ref| / max|ref| that passes",
                                          [](Experiment& e, const OptionValue& v) {
                                            e.model_settings.check_tolerance = num(v);
                                          })),
                  boolean_key("channels_last", false,
                              "channels-last (NHWC) parameters and inputs, for convolutional "
                              "models of image samples",
                              [](Experiment& e, const OptionValue& v) {
                                e.model_settings.channels_last = bool_of(v);
                              })}});

    s.push_back({"data", PluginKind::loader, {RunKind::train, RunKind::infer},
                 {integer_key("batch_size", 32, 1, kMaxBatchSize, "samples per batch",
                              [](Experiment& e, const OptionValue& v) {
                                e.data_settings.batch_size = int_of(v);
                              }),
                  boolean_key("shuffle", true, "seeded shuffle of the sample order each epoch",
                              [](Experiment& e, const OptionValue& v) {
                                e.data_settings.shuffle = bool_of(v);
                              }),
                  boolean_key("drop_last", true, "drop a final partial batch",
                              [](Experiment& e, const OptionValue& v) {
                                e.data_settings.drop_last = bool_of(v);
                              }),
                  integer_key("workers", 0, 0, kMaxDataWorkers,
                              "threads that read and augment batches; 0: on the training thread",
                              [](Experiment& e, const OptionValue& v) {
                                e.data_settings.workers = int_of(v);
                              }),
                  integer_key("prefetch", 2, 1, kMaxPrefetch,
                              "batches in flight per worker (workers > 0)",
                              [](Experiment& e, const OptionValue& v) {
                                e.data_settings.prefetch = int_of(v);
                              }),
                  boolean_key("pin_memory", false,
                              "batches in pinned host memory, copied to the GPU on a side "
                              "stream (CUDA runs only)",
                              [](Experiment& e, const OptionValue& v) {
                                e.data_settings.pin_memory = bool_of(v);
                              }),
                  string_key("on_error", "fail", {"fail", "skip"},
                             "a sample that cannot be read: fail the run, or skip it (counted)",
                             [](Experiment& e, const OptionValue& v) {
                               e.data_settings.on_error = str(v);
                             }),
                  integer_key("shuffle_buffer", 1024, 1, kMaxShuffleBuffer,
                              "streaming data sets: samples shuffled together (shuffle = true)",
                              [](Experiment& e, const OptionValue& v) {
                                e.data_settings.shuffle_buffer = int_of(v);
                              }),
                  size_key("resize", "resize: [n] the shorter side to n, [height, width] exactly",
                           [](Experiment& e, const OptionValue& v) {
                             e.data_settings.augment.resize = ints(v);
                           }),
                  size_key("center_crop", "crop the center: [n] or [height, width]",
                           [](Experiment& e, const OptionValue& v) {
                             e.data_settings.augment.center_crop = ints(v);
                           }),
                  size_key("random_crop",
                           "crop a random window: [n] or [height, width] (after crop_padding)",
                           [](Experiment& e, const OptionValue& v) {
                             e.data_settings.augment.random_crop = ints(v);
                           }),
                  integer_key("crop_padding", 0, 0, kMaxImageSide,
                              "zero padding on every side before random_crop",
                              [](Experiment& e, const OptionValue& v) {
                                e.data_settings.augment.crop_padding = int_of(v);
                              }),
                  number_key("hflip", 0.0, 0.0, 1.0, "probability of a horizontal flip",
                             [](Experiment& e, const OptionValue& v) {
                               e.data_settings.augment.hflip = num(v);
                             }),
                  channels_key("normalize_mean", "per-channel mean subtracted (after [0, 1] scaling)",
                               [](Experiment& e, const OptionValue& v) {
                                 e.data_settings.augment.normalize_mean = numbers(v);
                               }),
                  channels_key("normalize_std", "per-channel standard deviation divided by",
                               [](Experiment& e, const OptionValue& v) {
                                 e.data_settings.augment.normalize_std = numbers(v);
                               })}});

    s.push_back({"optimizer", PluginKind::optimizer, {RunKind::train}, {}});

    HostKey save_to{spec_of("save_to", OptionType::string, std::nullopt,
                            "safetensors file the trained weights are written to at the end, "
                            "relative to this file; {trial} and {repeat} name the run"),
                    [](Experiment& e, const OptionValue& v) { e.train.save_to = str(v); }};
    save_to.role = KeyRole::path;
    s.push_back({"train", std::nullopt, {RunKind::train},
                 {integer_key("steps", 100, 1, kMaxSteps, "measured steps",
                              [](Experiment& e, const OptionValue& v) {
                                e.train.steps = int_of(v);
                              }),
                  warmup_key("warm-up steps before measurement, or \"auto\"",
                             [](Experiment& e, const OptionValue& v) {
                               e.train.warmup = int_of(v);
                             }),
                  string_key("precision", "fp32", precisions,
                             "fp32; bf16 weights and activations; or autocast to bf16 / fp16 "
                             "(amp_fp16 with dynamic loss scaling)",
                             [](Experiment& e, const OptionValue& v) {
                               e.train.precision = str(v);
                             }),
                  integer_key("accumulate", 1, 1, kMaxAccumulate,
                              "micro-batches (data.batch_size each) per optimizer step",
                              [](Experiment& e, const OptionValue& v) {
                                e.train.accumulate = int_of(v);
                              }),
                  positive_key(number_key("clip_grad_norm", std::nullopt, std::nullopt, 1e12,
                                          "clip the gradients to this global L2 norm before "
                                          "each optimizer step",
                                          [](Experiment& e, const OptionValue& v) {
                                            e.train.clip_grad_norm = num(v);
                                          })),
                  fixed(save_to)}});

    // Defaults are PyTorch's: LinearLR's start_factor, StepLR's gamma,
    // CosineAnnealingLR's eta_min, OneCycleLR's parameters.
    s.push_back(
        {"schedule", std::nullopt, {RunKind::train},
         {string_key("type", "constant", {"constant", "step", "cosine", "one_cycle"},
                     "the learning rate over the optimizer steps, as a factor of each "
                     "parameter group's lr",
                     [](Experiment& e, const OptionValue& v) { e.schedule.type = str(v); }),
          integer_key("warmup_steps", 0, 0, kMaxSteps,
                      "linear warm-up steps before the schedule (not with one_cycle)",
                      [](Experiment& e, const OptionValue& v) {
                        e.schedule.warmup_steps = int_of(v);
                      }),
          positive_key(number_key("warmup_start_factor", 1.0 / 3.0, std::nullopt, 1.0,
                                  "lr factor at the first warm-up step",
                                  [](Experiment& e, const OptionValue& v) {
                                    e.schedule.warmup_start_factor = num(v);
                                  })),
          without_default(integer_key("step_size", 0, 1, kMaxSteps,
                                      "step: optimizer steps between decays (required)",
                                      [](Experiment& e, const OptionValue& v) {
                                        e.schedule.step_size = int_of(v);
                                      })),
          number_key("gamma", 0.1, 0.0, 1e6, "step: decay factor",
                     [](Experiment& e, const OptionValue& v) { e.schedule.gamma = num(v); }),
          number_key("min_lr", 0.0, 0.0, 1e6, "cosine: the lr it ends at (eta_min)",
                     [](Experiment& e, const OptionValue& v) { e.schedule.min_lr = num(v); }),
          number_key("pct_start", 0.3, 0.0, 1.0, "one_cycle: fraction of the steps rising",
                     [](Experiment& e, const OptionValue& v) { e.schedule.pct_start = num(v); }),
          string_key("anneal", "cos", {"cos", "linear"}, "one_cycle: annealing shape",
                     [](Experiment& e, const OptionValue& v) { e.schedule.anneal = str(v); }),
          positive_key(number_key("div_factor", 25.0, std::nullopt, 1e12,
                                  "one_cycle: initial lr = lr / div_factor",
                                  [](Experiment& e, const OptionValue& v) {
                                    e.schedule.div_factor = num(v);
                                  })),
          positive_key(number_key("final_div_factor", 1e4, std::nullopt, 1e12,
                                  "one_cycle: final lr = initial lr / final_div_factor",
                                  [](Experiment& e, const OptionValue& v) {
                                    e.schedule.final_div_factor = num(v);
                                  })),
          boolean_key("three_phase", false,
                      "one_cycle: a third phase annealing to the final lr",
                      [](Experiment& e, const OptionValue& v) {
                        e.schedule.three_phase = bool_of(v);
                      }),
          boolean_key("cycle_momentum", true,
                      "one_cycle: cycle the optimizer's momentum (beta1) against the lr",
                      [](Experiment& e, const OptionValue& v) {
                        e.schedule.cycle_momentum = bool_of(v);
                      }),
          number_key("base_momentum", 0.85, 0.0, 1.0, "one_cycle: momentum at the lr's peak",
                     [](Experiment& e, const OptionValue& v) {
                       e.schedule.base_momentum = num(v);
                     }),
          number_key("max_momentum", 0.95, 0.0, 1.0,
                     "one_cycle: momentum at the start and the end",
                     [](Experiment& e, const OptionValue& v) {
                       e.schedule.max_momentum = num(v);
                     })}});

    s.push_back({"infer", std::nullopt, {RunKind::infer},
                 {integer_key("batches", 100, 1, kMaxSteps, "measured batches",
                              [](Experiment& e, const OptionValue& v) {
                                e.infer.batches = int_of(v);
                              }),
                  warmup_key("warm-up batches before measurement, or \"auto\"",
                             [](Experiment& e, const OptionValue& v) {
                               e.infer.warmup = int_of(v);
                             }),
                  string_key("mode", "inference", {"inference", "no_grad"},
                             "autograd guard of the loop",
                             [](Experiment& e, const OptionValue& v) { e.infer.mode = str(v); }),
                  string_key("precision", "fp32", precisions,
                             "fp32; bf16 weights and activations; or autocast to bf16 / fp16",
                             [](Experiment& e, const OptionValue& v) {
                               e.infer.precision = str(v);
                             })}});

    s.push_back({"eval", std::nullopt, {RunKind::train, RunKind::infer},
                 {integer_key("every", 0, 0, kMaxSteps,
                              "evaluate after every N training steps; 0: only at the end",
                              [](Experiment& e, const OptionValue& v) {
                                e.eval.every = int_of(v);
                              }),
                  integer_key("batches", 10, 1, kMaxSteps,
                              "held-out batches per evaluation (data.batch_size samples each)",
                              [](Experiment& e, const OptionValue& v) {
                                e.eval.batches = int_of(v);
                              })}});

    // [profile]: after the warm-up, before the measured steps (docs/profiling.md).
    s.push_back({"profile", std::nullopt, {RunKind::train, RunKind::infer},
                 {integer_key("steps", 0, 0, kMaxProfileSteps,
                              "steps (train) or batches (infer) recorded under LibTorch's "
                              "profiler after the warm-up, excluded from the statistics; 0: off",
                              [](Experiment& e, const OptionValue& v) {
                                e.profile.steps = int_of(v);
                              }),
                  boolean_key("record_shapes", false,
                              "record each operator's input shapes (one op row per shape)",
                              [](Experiment& e, const OptionValue& v) {
                                e.profile.record_shapes = bool_of(v);
                              })}});

    HostKey bucket{spec_of("bucket_mb", OptionType::number, OptionValue{25.0},
                           "gradient bucket size in MiB"),
                   [](Experiment& e, const OptionValue& v) {
                     e.distributed.bucket_mb = std::get<double>(v);
                   }};
    bucket.spec.min = 0.001;
    bucket.spec.max = 4096.0;
    HostKey collective_timeout{spec_of("timeout", OptionType::number, OptionValue{60.0},
                                       "time limit of rendezvous and of each collective: "
                                       "\"90s\", \"2m\" or seconds"),
                               [](Experiment& e, const OptionValue& v) {
                                 e.distributed.timeout_s = std::get<double>(v);
                               }};
    collective_timeout.role = KeyRole::duration;
    collective_timeout.spec.min = kMinCollectiveTimeoutSeconds;
    collective_timeout.spec.max = kMaxCollectiveTimeoutSeconds;
    s.push_back({"distributed", std::nullopt, {RunKind::train},
                 {integer_key("world_size", 2, 1, kMaxWorldSize,
                              "data-parallel ranks (forked by runner, or a launched "
                              "job's WORLD_SIZE)",
                              [](Experiment& e, const OptionValue& v) {
                                e.distributed.world_size = int_of(v);
                              }),
                  string_key("backend", "gloo", {"gloo", "nccl"},
                             "c10d backend: gloo (CPU tensors) or nccl (CUDA tensors)",
                             [](Experiment& e, const OptionValue& v) {
                               e.distributed.backend = str(v);
                             }),
                  bucket,
                  number_key("first_bucket_mb", 1.0, 0.001, 4096.0,
                             "size of the first gradient bucket in MiB (DDP's 1 MiB), "
                             "once buckets are rebuilt",
                             [](Experiment& e, const OptionValue& v) {
                               e.distributed.first_bucket_mb = num(v);
                             }),
                  string_key("reducer", "ddp", {"ddp", "after_backward"},
                             "ddp: c10d::Reducer, communication overlapping backward; "
                             "after_backward: buckets reduced once backward has finished",
                             [](Experiment& e, const OptionValue& v) {
                               e.distributed.reducer = str(v);
                             }),
                  boolean_key("find_unused_parameters", false,
                              "DDP's find_unused_parameters: parameters the step does not use "
                              "count as ready",
                              [](Experiment& e, const OptionValue& v) {
                                e.distributed.find_unused_parameters = bool_of(v);
                              }),
                  boolean_key("gradient_as_bucket_view", false,
                              "DDP's gradient_as_bucket_view: gradients are views of the "
                              "buckets (no copy, less memory)",
                              [](Experiment& e, const OptionValue& v) {
                                e.distributed.gradient_as_bucket_view = bool_of(v);
                              }),
                  boolean_key("static_graph", false,
                              "DDP's static_graph: the same parameters are used every step",
                              [](Experiment& e, const OptionValue& v) {
                                e.distributed.static_graph = bool_of(v);
                              }),
                  boolean_key("broadcast_buffers", true,
                              "rank 0's module buffers (batch-norm statistics) before each "
                              "step's forward, as DDP",
                              [](Experiment& e, const OptionValue& v) {
                                e.distributed.broadcast_buffers = bool_of(v);
                              }),
                  fixed(collective_timeout)}});

    s.push_back({"comm_hook", PluginKind::comm_hook, {RunKind::train}, {}});

    // [kernel]: one custom op's benchmark (docs/kernels.md).
    HostKey shape{spec_of("shape", OptionType::integer_list, std::nullopt,
                          "the input shape the kernel plugin builds, e.g. [4096, 4096]"),
                  [](Experiment& e, const OptionValue& v) { e.kernel_settings.shape = ints(v); }};
    shape.spec.min = 1;
    shape.spec.max = static_cast<double>(kMaxKernelElements);
    shape.spec.items(1, kMaxKernelRank);
    s.push_back({"kernel", PluginKind::kernel, {RunKind::kernel},
                 {shape,
                  string_key("dtype", "float32", {"float32", "float64", "bfloat16", "float16"},
                             "the dtype of the inputs and the output",
                             [](Experiment& e, const OptionValue& v) {
                               e.kernel_settings.dtype = str(v);
                             }),
                  string_key("impl", "custom", {"custom", "native", "eager"},
                             "custom: the plugin's op; native: the ATen composition into a "
                             "preallocated output; eager: as user code writes it (allocates)",
                             [](Experiment& e, const OptionValue& v) {
                               e.kernel_settings.impl = str(v);
                             }),
                  integer_key("calls", 100, 1, kMaxSteps, "measured calls",
                              [](Experiment& e, const OptionValue& v) {
                                e.kernel_settings.calls = int_of(v);
                              }),
                  warmup_key("warm-up calls before measurement, or \"auto\"",
                             [](Experiment& e, const OptionValue& v) {
                               e.kernel_settings.warmup = int_of(v);
                             }),
                  integer_key("buffers", 0, 0, kMaxKernelBuffers,
                              "input and output sets rotated between calls; 0: enough to "
                              "defeat the last-level cache",
                              [](Experiment& e, const OptionValue& v) {
                                e.kernel_settings.buffers = int_of(v);
                              })}});

    HostKey path{spec_of("path", OptionType::string, std::nullopt,
                         "plugin libraries or folders, relative to this file")};
    path.role = KeyRole::path_list;
    path.non_empty = true;
    s.push_back({"plugins", std::nullopt, {}, {fixed(path)}});
    return s;
  }();
  return specs;
}

}  // namespace runner::experiment::detail
