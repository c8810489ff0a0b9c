// The canonical JSON of a resolved experiment, whose hash identifies a trial
// in the store. Every byte counts: a change gives every trial of every
// existing database a new identity (tests/core/experiment/canonical_test.cpp
// holds hashes recorded by earlier releases).
#include <nlohmann/json.hpp>

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
  for (const auto& [name, value] : choice.options.values()) options[name] = json_of(value);
  Json section = Json::object();
  section["plugin"] = choice.plugin;
  section["options"] = std::move(options);
  return section;
}

// -1 stands for "auto" in TrainSettings and InferSettings.
Json warmup_of(std::int64_t warmup) { return warmup < 0 ? Json("auto") : Json(warmup); }

}  // namespace

std::string Experiment::resolved_json() const {
  Json root = Json::object();
  root["kind"] = to_string(kind);
  root["seed"] = seed;
  root["device"] = {{"type", device.type},
                    {"threads", device.threads},
                    {"interop_threads", device.interop_threads}};
  root["model"] = json_of(model);
  // Only when set, as below: experiments without weights keep their hashes.
  // The file's bytes identify the trial, not its path.
  if (!model_settings.init_from.empty())
    root["model"]["init_from"] = {{"sha256", model_settings.init_from_sha256},
                                  {"strict", model_settings.strict}};
  if (data) {
    Json section = json_of(*data);
    section["batch_size"] = data_settings.batch_size;
    section["shuffle"] = data_settings.shuffle;
    section["drop_last"] = data_settings.drop_last;
    root["data"] = std::move(section);
  }
  if (optimizer) root["optimizer"] = json_of(*optimizer);
  // Only when present: experiments without it keep the hashes they had.
  if (distributed.enabled)
    root["distributed"] = {{"world_size", distributed.world_size},
                           {"backend", distributed.backend},
                           {"bucket_mb", distributed.bucket_mb}};
  if (comm_hook) root["comm_hook"] = json_of(*comm_hook);
  if (kind == RunKind::train)
    root["train"] = {{"steps", train.steps}, {"warmup", warmup_of(train.warmup)}};
  else if (kind == RunKind::infer)
    root["infer"] = {{"batches", infer.batches},
                     {"warmup", warmup_of(infer.warmup)},
                     {"mode", infer.mode}};
  if (eval.enabled) root["eval"] = {{"every", eval.every}, {"batches", eval.batches}};
  return canonical_json(root);
}

std::filesystem::path Experiment::save_path(std::int64_t repeat_index) const {
  if (train.save_to.empty()) return {};
  return replace_all(train.save_to, "{repeat}", std::to_string(repeat_index));
}

std::string Experiment::config_hash() const { return sha256_hex(resolved_json()); }

}  // namespace runner
