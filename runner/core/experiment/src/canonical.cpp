// The canonical JSON of a resolved experiment, whose hash identifies a trial
// in the store. Every byte counts: a change gives every trial of every
// existing database a new identity (tests/core/experiment/canonical_test.cpp
// holds hashes recorded by earlier releases).
#include <nlohmann/json.hpp>

#include <algorithm>

#include "runner/common/json.hpp"
#include "runner/common/sha256.hpp"
#include "runner/common/strings.hpp"
#include "runner/experiment/experiment.hpp"

namespace runner {

namespace {

using Json = nlohmann::json;

Json json_of(const OptionValue& value) {
  return std::visit([](const auto& v) { return Json(v); }, value);
}

Json json_of(const PluginChoice& choice) {
  Json options = Json::object();  // {} rather than null when the plugin has none
  for (const auto& [name, value] : choice.options.values())
    if (std::find(choice.identity_omits.begin(), choice.identity_omits.end(), name) ==
        choice.identity_omits.end())
      options[name] = json_of(value);
  // A file named by content: its bytes identify the trial, not its path.
  for (const auto& [name, sha] : choice.content_sha256) options[name] = {{"sha256", sha}};
  Json section = Json::object();
  section["plugin"] = choice.plugin;
  section["options"] = std::move(options);
  return section;
}

// -1 stands for "auto" in TrainSettings, InferSettings and KernelSettings.
Json warmup_of(std::int64_t warmup) { return warmup < 0 ? Json("auto") : Json(warmup); }

}  // namespace

std::string Experiment::resolved_json() const {
  Json root = Json::object();
  root["kind"] = to_string(kind);
  root["seed"] = seed;
  root["device"] = {{"type", device.type},
                    {"threads", device.threads},
                    {"interop_threads", device.interop_threads}};
  if (kind != RunKind::kernel) root["model"] = json_of(model);
  if (kernel) {
    Json section = json_of(*kernel);
    section["shape"] = kernel_settings.shape;
    section["dtype"] = kernel_settings.dtype;
    section["impl"] = kernel_settings.impl;
    section["calls"] = kernel_settings.calls;
    section["warmup"] = warmup_of(kernel_settings.warmup);
    section["buffers"] = kernel_settings.buffers;
    root["kernel"] = std::move(section);
  }
  // Only when set, as below: experiments without weights keep their hashes.
  // The file's bytes identify the trial, not its path.
  if (!model_settings.init_from.empty())
    root["model"]["init_from"] = {{"sha256", model_settings.init_from_sha256},
                                  {"strict", model_settings.strict}};
  if (!model_settings.check_against.empty())
    root["model"]["check_against"] = {{"sha256", model_settings.check_against_sha256},
                                      {"tolerance", model_settings.check_tolerance}};
  if (data) {
    Json section = json_of(*data);
    section["batch_size"] = data_settings.batch_size;
    section["shuffle"] = data_settings.shuffle;
    section["drop_last"] = data_settings.drop_last;
    // Only when not the default: experiments without them keep their hashes.
    const DataSettings defaults;
    if (data_settings.workers != defaults.workers) section["workers"] = data_settings.workers;
    if (data_settings.workers > 0 && data_settings.prefetch != defaults.prefetch)
      section["prefetch"] = data_settings.prefetch;
    if (data_settings.pin_memory) section["pin_memory"] = true;
    if (data_settings.on_error != defaults.on_error) section["on_error"] = data_settings.on_error;
    if (data_settings.shuffle_buffer != defaults.shuffle_buffer)
      section["shuffle_buffer"] = data_settings.shuffle_buffer;
    const AugmentSettings& a = data_settings.augment;
    if (!a.resize.empty()) section["resize"] = a.resize;
    if (!a.center_crop.empty()) section["center_crop"] = a.center_crop;
    if (!a.random_crop.empty()) section["random_crop"] = a.random_crop;
    if (a.crop_padding != 0) section["crop_padding"] = a.crop_padding;
    if (a.hflip != 0) section["hflip"] = a.hflip;
    if (!a.normalize_mean.empty()) section["normalize_mean"] = a.normalize_mean;
    if (!a.normalize_std.empty()) section["normalize_std"] = a.normalize_std;
    root["data"] = std::move(section);
  }
  if (optimizer) root["optimizer"] = json_of(*optimizer);
  // Only when present: experiments without it keep the hashes they had.
  if (distributed.enabled)
    root["distributed"] = {{"world_size", distributed.world_size},
                           {"backend", distributed.backend},
                           {"bucket_mb", distributed.bucket_mb},
                           {"first_bucket_mb", distributed.first_bucket_mb},
                           {"reducer", distributed.reducer},
                           {"find_unused_parameters", distributed.find_unused_parameters},
                           {"gradient_as_bucket_view", distributed.gradient_as_bucket_view},
                           {"static_graph", distributed.static_graph},
                           {"broadcast_buffers", distributed.broadcast_buffers}};
  if (comm_hook) root["comm_hook"] = json_of(*comm_hook);
  if (kind == RunKind::train)
    root["train"] = {{"steps", train.steps}, {"warmup", warmup_of(train.warmup)}};
  else if (kind == RunKind::infer)
    root["infer"] = {{"batches", infer.batches},
                     {"warmup", warmup_of(infer.warmup)},
                     {"mode", infer.mode}};
  if (eval.enabled) root["eval"] = {{"every", eval.every}, {"batches", eval.batches}};
  // The recipe keys join the identity only when they differ from what runner
  // did before they existed: earlier trials keep their hashes.
  if (device.cudnn_benchmark) root["device"]["cudnn_benchmark"] = *device.cudnn_benchmark;
  if (device.deterministic) root["device"]["deterministic"] = *device.deterministic;
  if (device.tf32_matmul) root["device"]["tf32_matmul"] = *device.tf32_matmul;
  if (device.tf32_conv) root["device"]["tf32_conv"] = *device.tf32_conv;
  if (!device.float32_matmul_precision.empty())
    root["device"]["float32_matmul_precision"] = device.float32_matmul_precision;
  if (model_settings.channels_last) root["model"]["channels_last"] = true;
  // The process the run executes in, when it is not runner's own.
  if (!env.empty()) root["env"] = env;
  if (!runtime.is_default()) {
    Json r = Json::object();
    if (runtime.allocator != "system") r["allocator"] = runtime.allocator;
    if (!runtime.cpu_affinity.empty()) r["cpu_affinity"] = runtime.cpu_affinity;
    if (runtime.numa_node >= 0) r["numa_node"] = runtime.numa_node;
    root["runtime"] = std::move(r);
  }
  const std::string& loop_precision = precision();
  if (loop_precision != "fp32" && kind != RunKind::kernel)
    root[kind == RunKind::train ? "train" : "infer"]["precision"] = loop_precision;
  if (kind == RunKind::train) {
    if (train.accumulate != 1) root["train"]["accumulate"] = train.accumulate;
    if (train.clip_grad_norm > 0) root["train"]["clip_grad_norm"] = train.clip_grad_norm;
    if (schedule.enabled) {
      Json s = {{"type", schedule.type}, {"warmup_steps", schedule.warmup_steps}};
      if (schedule.warmup_steps > 0) s["warmup_start_factor"] = schedule.warmup_start_factor;
      if (schedule.type == "step") {
        s["step_size"] = schedule.step_size;
        s["gamma"] = schedule.gamma;
      } else if (schedule.type == "cosine") {
        s["min_lr"] = schedule.min_lr;
      } else if (schedule.type == "one_cycle") {
        s["pct_start"] = schedule.pct_start;
        s["anneal"] = schedule.anneal;
        s["div_factor"] = schedule.div_factor;
        s["final_div_factor"] = schedule.final_div_factor;
        s["three_phase"] = schedule.three_phase;
        s["cycle_momentum"] = schedule.cycle_momentum;
        if (schedule.cycle_momentum) {
          s["base_momentum"] = schedule.base_momentum;
          s["max_momentum"] = schedule.max_momentum;
        }
      }
      root["schedule"] = std::move(s);
    }
  }
  // Only when on: trials that do not profile keep their hashes. A profiled
  // trial is another trial (its measured steps follow the profiled ones,
  // and resume must not take an unprofiled run for it).
  if (profile.enabled() && kind != RunKind::kernel)
    root["profile"] = {{"steps", profile.steps}, {"record_shapes", profile.record_shapes}};
  return canonical_json(root);
}

std::vector<std::string> DeviceSettings::cuda_only_keys() const {
  std::vector<std::string> keys;
  if (cudnn_benchmark) keys.emplace_back("device.cudnn_benchmark");
  if (tf32_matmul) keys.emplace_back("device.tf32_matmul");
  if (tf32_conv) keys.emplace_back("device.tf32_conv");
  return keys;
}

SourceLocation Experiment::where_of(const std::string& dotted) const {
  const auto it = key_where.find(dotted);
  if (it != key_where.end()) return it->second;
  return SourceLocation{source ? source->path.string() : std::string(), 0, 0};
}

std::int64_t Experiment::total_train_steps() const {
  return train.steps + (train.warmup < 0 ? max_auto_warmup_steps(train.steps) : train.warmup) +
         profile.steps;
}

std::filesystem::path Experiment::save_path(std::int64_t repeat_index) const {
  if (train.save_to.empty()) return {};
  return replace_all(train.save_to, "{repeat}", std::to_string(repeat_index));
}

RuntimeRequest Experiment::runtime_request() const {
  RuntimeRequest r;
  r.env = env;
  r.allocator = runtime.allocator;
  if (!runtime.cpu_affinity.empty()) r.cpus = parse_cpu_list(runtime.cpu_affinity);
  r.numa_node = static_cast<int>(runtime.numa_node);
  return r;
}

std::string Experiment::config_hash() const { return sha256_hex(resolved_json()); }

}  // namespace runner
