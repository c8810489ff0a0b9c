// [[expect]] tables: read, checked against the experiment's kind and sweep,
// and resolved to the trials of each side (expect.hpp). Everything here is
// known without plugins, so a bad expectation stops `validate`, `run` and
// `check` at its position before anything runs.
#include "runner/experiment/expect.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>

#include "parsed_experiment.hpp"
#include "runner/common/strings.hpp"

namespace runner {

using experiment::detail::before;
using experiment::detail::describe;
using experiment::detail::Leaf;
using experiment::detail::render;
using experiment::detail::start_of;

namespace {

const std::vector<std::string> kKeys = {"claim",    "source", "metric",      "by",
                                        "baseline", "versus", "where",       "ratio_below",
                                        "ratio_above", "equivalent_within"};
const std::vector<ExpectBound> kBounds = {ExpectBound::ratio_below, ExpectBound::ratio_above,
                                          ExpectBound::equivalent_within};

const char* const kBoundHint =
    "give exactly one of ratio_below, ratio_above, equivalent_within (e.g. ratio_below = 0.5: "
    "B takes less than half of A)";

// The metrics every run of a kind can record, beyond its headline and phases
// (docs/store.md; the engine's metrics.cpp, run_memory.cpp, kernel_run.cpp).
std::vector<std::string> model_metrics() {
  return {"samples_per_s",          "tokens_per_s",          "loader_samples_per_s",
          "loader_busy_fraction",   "achieved_flop_per_s",   "time_to_first_step_s",
          "first_call_s",           "setup_s",               "run_s",
          "peak_rss_bytes",         "peak_cpu_alloc_bytes",  "peak_cpu_alloc_setup_bytes",
          "peak_cuda_allocated_bytes", "peak_cuda_allocated_setup_bytes", "data_set_bytes",
          "eval_loss",              "eval_accuracy",         "eval_perplexity"};
}

std::vector<std::string> metrics_of(RunKind kind) {
  std::vector<std::string> out{headline_metric(kind)};
  if (kind == RunKind::kernel) {
    for (const char* name : {"bandwidth_bytes_per_s", "flop_per_s", "fraction_of_peak_bandwidth",
                             "fraction_of_peak_flops", "max_rel_error", "grad_max_rel_error",
                             "setup_s", "run_s", "time_to_first_step_s"})
      out.emplace_back(name);
    return out;
  }
  // The phases of store/phases.hpp (a store header this library may not include).
  for (const char* phase : {"data", "h2d", "forward"}) out.emplace_back(phase);
  if (kind == RunKind::train)
    for (const char* phase : {"backward", "optimizer", "comm"}) out.emplace_back(phase);
  for (std::string& name : model_metrics()) out.push_back(std::move(name));
  if (kind == RunKind::train)
    for (const char* name : {"loss_initial", "loss_final", "comm_bytes_per_step",
                             "comm_payload_bytes_per_step", "comm_gradient_bytes_per_step",
                             "compression_ratio"})
      out.emplace_back(name);
  return out;
}

// A key's leaves in file order, inline and nested tables flattened to dotted keys.
void flatten(const toml::table& table, const std::string& prefix, std::vector<Leaf>& out) {
  for (const auto& [key, node] : table) {
    const std::string name = prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
    if (const auto* sub = node.as_table())
      flatten(*sub, name, out);
    else
      out.push_back({name, &key, &node});
  }
}

void sort_in_file_order(std::vector<Leaf>& leaves) {
  std::stable_sort(leaves.begin(), leaves.end(), [](const Leaf& a, const Leaf& b) {
    return before(start_of(a.key_src, *a.node), start_of(b.key_src, *b.node));
  });
}

}  // namespace

const char* bound_key(ExpectBound bound) {
  switch (bound) {
    case ExpectBound::ratio_below: return "ratio_below";
    case ExpectBound::ratio_above: return "ratio_above";
    case ExpectBound::equivalent_within: return "equivalent_within";
  }
  return "";
}

const std::vector<std::string>& expectation_metrics(RunKind kind) {
  static const std::map<RunKind, std::vector<std::string>> all = {
      {RunKind::train, metrics_of(RunKind::train)},
      {RunKind::infer, metrics_of(RunKind::infer)},
      {RunKind::kernel, metrics_of(RunKind::kernel)}};
  return all.at(kind);
}

std::string bare_value(const std::string& toml_text) {
  if (toml_text.size() >= 2 && toml_text.front() == '"' && toml_text.back() == '"') {
    // Undo toml_quote's escapes of the common characters.
    std::string out;
    for (std::size_t i = 1; i + 1 < toml_text.size(); ++i) {
      if (toml_text[i] == '\\' && i + 2 < toml_text.size()) ++i;
      out += toml_text[i];
    }
    return out;
  }
  return toml_text;
}

bool same_value(const std::string& trial_value, const std::string& named) {
  return trial_value == named || bare_value(trial_value) == bare_value(named);
}

// ---------------------------------------------------------------------------

std::optional<std::string> ParsedExperiment::value_in_trial(const std::vector<Leaf>& overrides,
                                                            const std::string& dotted) const {
  for (const Leaf& leaf : overrides)
    if (leaf.key == dotted) return render(*leaf.node);
  const auto dot = dotted.find('.');
  if (dot == std::string::npos) return std::nullopt;
  for (const auto& section : sources_.doc.sections)
    if (section.name == dotted.substr(0, dot))
      for (const Leaf& leaf : section.items)
        if (leaf.key == dotted.substr(dot + 1)) return render(*leaf.node);
  return std::nullopt;
}

void ParsedExperiment::check_expectations(RunKind kind) {
  const auto& tables = sources_.doc.expects;
  if (tables.empty()) return;
  // The keys the sweep varies, and each trial's overrides, read once.
  std::vector<std::string> swept;
  for (const auto& axis : sources_.doc.axes)
    for (const Leaf& key : axis.keys) swept.push_back(key.key);
  if (sources_.doc.trials)
    for (const auto& trial : *sources_.doc.trials)
      for (const Leaf& leaf : trial.overrides)
        if (std::find(swept.begin(), swept.end(), leaf.key) == swept.end())
          swept.push_back(leaf.key);
  std::vector<std::vector<Leaf>> overrides;
  for (std::int64_t index = 0; index < trial_count(); ++index)
    overrides.push_back(overrides_of(index));

  auto list = std::make_shared<std::vector<Expectation>>();
  for (std::size_t i = 0; i < tables.size(); ++i)
    list->push_back(read_expectation(*tables[i], i + 1, kind, swept, overrides));
  defaults_.expectations = std::move(list);
}

Expectation ParsedExperiment::read_expectation(
    const toml::node& node, std::size_t number, RunKind kind,
    const std::vector<std::string>& swept,
    const std::vector<std::vector<Leaf>>& overrides) const {
  Expectation e;
  e.number = number;
  e.at = check_.at(node);
  std::vector<Leaf> leaves;
  for (const auto& [key, value] : *node.as_table())
    leaves.push_back({std::string(key.str()), &key, &value});
  sort_in_file_order(leaves);
  std::map<std::string, const Leaf*> found;
  for (const Leaf& leaf : leaves) {
    if (std::find(kKeys.begin(), kKeys.end(), leaf.key) == kKeys.end()) {
      std::string message = "unknown key '" + leaf.key + "' in [[expect]]";
      if (const auto match = closest_match(leaf.key, kKeys)) message += "; did you mean '" + *match + "'?";
      throw check_.error(leaf, message, "an [[expect]] takes: " + join(kKeys, ", "));
    }
    found[leaf.key] = &leaf;
  }
  // A required or optional string; "" when absent and optional.
  auto text = [&](const std::string& key, bool required) -> std::string {
    const auto it = found.find(key);
    if (it == found.end()) {
      if (!required) return {};
      throw check_.error(node, "[[expect]] number " + std::to_string(number) + " has no '" + key + "'",
                         "an [[expect]] needs claim, metric, by, baseline and versus");
    }
    const toml::node& value = *it->second->node;
    if (key != "baseline" && key != "versus") {
      if (!value.is_string())
        throw check_.error(*it->second, "'expect." + key + "' must be a string, found " + describe(value));
      if (value.as_string()->get().empty())
        throw check_.error(*it->second, "'expect." + key + "' must not be empty");
      return value.as_string()->get();
    }
    if (value.is_table())
      throw check_.error(*it->second, "'expect." + key + "' must be a value of '" + e.by + "', found a table");
    return render(value);
  };
  e.claim = text("claim", true);
  e.source = text("source", false);
  e.metric = text("metric", true);
  const std::vector<std::string>& metrics = expectation_metrics(kind);
  if (std::find(metrics.begin(), metrics.end(), e.metric) == metrics.end()) {
    const std::string a_kind = std::string(kind == RunKind::infer ? "an " : "a ") + to_string(kind);
    std::string message = "unknown metric '" + e.metric + "' for " + a_kind + " experiment";
    if (const auto match = closest_match(e.metric, metrics)) message += "; did you mean '" + *match + "'?";
    throw check_.error(*found.at("metric"), message,
                       a_kind + " experiment records: " + join(metrics, ", "));
  }
  e.by = text("by", true);
  if (std::find(swept.begin(), swept.end(), e.by) == swept.end()) {
    std::string message = "'by' names '" + e.by + "', which this experiment does not sweep";
    if (const auto match = closest_match(e.by, swept)) message += "; did you mean '" + *match + "'?";
    throw check_.error(*found.at("by"), message,
                       swept.empty() ? "the two sides are two values of a key of [sweep] or of the "
                                       "[[trial]] tables; this experiment varies none"
                                     : "the two sides are two values of a swept key: " + join(swept, ", "));
  }
  e.baseline = text("baseline", true);
  e.versus = text("versus", true);
  if (same_value(e.baseline, e.versus))
    throw check_.error(*found.at("versus"),
                       "baseline and versus are both " + e.versus + ": the two sides must differ",
                       "name two different values of '" + e.by + "'");

  if (const auto it = found.find("where"); it != found.end()) {
    const toml::node& where = *it->second->node;
    if (!where.is_table() || where.as_table()->empty())
      throw check_.error(*it->second, "'expect.where' must be a table of key = value, found " +
                                          std::string(describe(where)),
                         "e.g. where = { \"model.plugin\" = \"mlp\" }: only trials with these values");
    std::vector<Leaf> pairs;
    flatten(*where.as_table(), "", pairs);
    sort_in_file_order(pairs);
    for (const Leaf& pair : pairs) {
      if (pair.key == e.by)
        throw check_.error(pair, "'where' sets '" + e.by + "', the key the sides differ in",
                           "baseline and versus name its two values");
      const std::string wanted = render(*pair.node);
      const bool any = std::any_of(overrides.begin(), overrides.end(), [&](const std::vector<Leaf>& o) {
        const auto value = value_in_trial(o, pair.key);
        return value && same_value(*value, wanted);
      });
      if (!any)
        throw check_.error(pair, "no trial has " + pair.key + " = " + wanted,
                           "'where' keeps the trials with these values; check the key and the "
                           "value against [sweep] and the [[trial]] tables");
      e.where.emplace_back(pair.key, wanted);
    }
  }

  // Each side: the trials with its value of `by` and every `where`.
  std::set<std::string> values;
  for (std::size_t t = 0; t < overrides.size(); ++t) {
    const auto value = value_in_trial(overrides[t], e.by);
    if (!value) continue;
    values.insert(*value);
    const bool kept = std::all_of(e.where.begin(), e.where.end(), [&](const auto& pair) {
      const auto v = value_in_trial(overrides[t], pair.first);
      return v && same_value(*v, pair.second);
    });
    if (!kept) continue;
    if (same_value(*value, e.baseline)) e.trials_a.push_back(static_cast<std::int64_t>(t));
    if (same_value(*value, e.versus)) e.trials_b.push_back(static_cast<std::int64_t>(t));
  }
  auto where_text = [&] {
    std::vector<std::string> parts;
    for (const auto& [key, value] : e.where) parts.push_back(key + " = " + value);
    return parts.empty() ? std::string() : " where " + join(parts, ", ");
  };
  for (const auto& [key, side] : {std::pair{"baseline", &e.trials_a}, std::pair{"versus", &e.trials_b}}) {
    if (!side->empty()) continue;
    const std::string& value = side == &e.trials_a ? e.baseline : e.versus;
    throw check_.error(*found.at(key), "no trial has " + e.by + " = " + value + where_text(),
                       "the sweep gives " + e.by + ": " +
                           join(std::vector<std::string>(values.begin(), values.end()), ", "));
  }

  const Leaf* bound = nullptr;
  for (const ExpectBound b : kBounds) {
    const auto it = found.find(bound_key(b));
    if (it == found.end()) continue;
    if (bound != nullptr) {
      const Leaf* later = before(start_of(bound->key_src, *bound->node),
                                 start_of(it->second->key_src, *it->second->node))
                              ? it->second
                              : bound;
      const Leaf* earlier = later == bound ? it->second : bound;
      throw check_.error(*later, "[[expect]] states both '" + earlier->key + "' and '" + later->key + "'",
                         kBoundHint);
    }
    bound = it->second;
    e.bound = b;
  }
  if (bound == nullptr)
    throw check_.error(node, "[[expect]] number " + std::to_string(number) + " states no bound", kBoundHint);
  const toml::node& value = *bound->node;
  if (!value.is_number())
    throw check_.error(*bound, "'expect." + bound->key + "' must be a number, found " + describe(value));
  e.value = value.is_integer() ? static_cast<double>(value.as_integer()->get())
                               : value.as_floating_point()->get();
  if (!std::isfinite(e.value) || e.value <= 0)
    throw check_.error(*bound, "'expect." + bound->key + "' must be greater than 0, found " + render(value),
                       e.bound == ExpectBound::equivalent_within
                           ? "a fraction of A: 0.02 claims B within +/-2 % of A"
                           : "a ratio B / A is positive: ratio_below = 0.5 claims B under half of A, "
                             "which no bound at or below 0 can be met by");
  return e;
}

}  // namespace runner
