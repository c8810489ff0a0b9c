// One experiment split into two sides by a key (`compare --by`, `report
// --by`): like is compared with like. A side may pool the runs of several
// trials only when those trials differ in nothing but the compared key and
// the --where keys; trials that differ in another swept key (another operator,
// shape or rank) measure different things, and pooling them turns their
// differences into noise (issue 36). Such a split is refused with the --where
// that would fix it, or compared pair by pair (--pairs).
#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include <nlohmann/json.hpp>

#include "runner/common/error.hpp"
#include "runner/common/json.hpp"
#include "runner/common/strings.hpp"
#include "selection.hpp"

namespace runner::cli {
namespace {

// The option keys of plugins ("comm_hook.matrix_approximation_rank") with the
// plugins that have them: a trial of another plugin has no such key.
using OptionOwners = std::map<std::string, std::set<std::string>>;

// A trial's keys as --by and --where read them.
struct TrialView {
  std::int64_t id = 0;
  std::map<std::string, std::string> values;   // configuration leaves, then label keys
  std::map<std::string, std::string> plugins;  // section -> its plugin
};

TrialView view_of(const store::TrialInfo& trial, OptionOwners& owners) {
  TrialView view;
  view.id = trial.id;
  const nlohmann::json config = parse_json(trial.config_json);
  for (auto& [key, value] : flatten_config(config)) view.values.emplace(key, std::move(value));
  if (config.is_object())
    for (const auto& [section, body] : config.items()) {
      if (!body.is_object()) continue;
      const auto plugin = body.find("plugin"), options = body.find("options");
      if (plugin == body.end() || !plugin->is_string() || options == body.end() ||
          !options->is_object())
        continue;
      view.plugins[section] = plugin->get<std::string>();
      for (const auto& item : options->items())
        owners[section + "." + item.key()].insert(plugin->get<std::string>());
    }
  // A swept key at its default is left out of the configuration when it
  // joined the identity later (train.precision = "fp32"); the label names it.
  for (const std::string& key : label_keys(trial.label))
    if (!view.values.count(key))
      if (auto value = label_value(trial.label, key)) view.values.emplace(key, *value);
  return view;
}

// A trial's value of `key`; nullopt when the key is an option of another
// plugin than the trial's (it does not apply), "(default)" when absent.
std::optional<std::string> value_of(const TrialView& trial, const std::string& key,
                                    const OptionOwners& owners) {
  if (const auto it = trial.values.find(key); it != trial.values.end()) return it->second;
  if (const auto owner = owners.find(key); owner != owners.end()) {
    const auto plugin = trial.plugins.find(key.substr(0, key.find('.')));
    if (plugin != trial.plugins.end() && !owner->second.count(plugin->second)) return std::nullopt;
  }
  return "(default)";
}

using Context = std::vector<std::optional<std::string>>;  // values of the varying keys

// Two trials are alike when every varying key that applies to both has one value.
bool alike(const Context& a, const Context& b) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] && b[i] && *a[i] != *b[i]) return false;
  return true;
}

// A value for people: the empty string ("", ATen's path in model.norm_op) shown.
std::string shown(const std::string& value) { return value.empty() ? "\"\"" : value; }

// The values of a pair for the varying keys, "key=value" each; as --where
// takes them (the empty string as nothing) or as people read them.
std::vector<std::string> pair_values(const std::vector<std::string>& keys, const Context& a,
                                     const Context& b, bool as_where = false) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < keys.size(); ++i)
    if (const auto& v = a[i] ? a[i] : b[i])
      out.push_back(keys[i] + "=" + (as_where ? *v : shown(*v)));
  return out;
}

// "--where KEY=VALUE" as a shell takes it: quoted when the value has spaces,
// brackets or quotes.
std::string where_option(const std::string& assignment) {
  const bool plain = std::all_of(assignment.begin(), assignment.end(), [](unsigned char c) {
    return std::isalnum(c) || std::string_view("_.:=,/+-@%").find(static_cast<char>(c)) !=
                                  std::string_view::npos;
  });
  return "--where " + (plain ? assignment : "'" + assignment + "'");
}

// The finished runs of trials, in trial order, as one side.
Side side_of(const store::Store& db, const std::vector<std::int64_t>& trials,
             const std::string& name) {
  Side side;
  side.name = name;
  std::set<std::int64_t> seen;  // two rows of one configuration share their runs
  for (const std::int64_t id : trials)
    for (auto& run : select(db, "trial:" + std::to_string(id)).runs)
      if (seen.insert(run.row.id).second) side.runs.push_back(std::move(run));
  return side;
}

std::vector<std::int64_t> ids_of(const std::vector<const TrialView*>& trials) {
  std::vector<std::int64_t> ids;
  for (const TrialView* t : trials) ids.push_back(t->id);
  return ids;
}

}  // namespace

Split plan_split(const std::string& name, const std::vector<store::TrialInfo>& trials,
                 const SplitRequest& request) {
  const std::string& key = request.key;
  std::vector<std::pair<std::string, std::string>> filters;
  for (const std::string& w : request.where) {
    const auto eq = w.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("--where must be KEY=VALUE, found '" + w + "'",
                  "e.g. --where model.plugin=resnet (strings without quotes)");
    filters.emplace_back(w.substr(0, eq), w.substr(eq + 1));
  }
  OptionOwners owners;
  std::vector<TrialView> views;
  for (const auto& t : trials) views.push_back(view_of(t, owners));

  // Group the trials that match every --where by their value of the key. A
  // key at its default may be absent from every trial that has it: those
  // form the group "(default)". A key no trial has is a mistake.
  std::map<std::string, std::vector<const TrialView*>> groups;
  std::vector<std::string> order;
  bool found = false;
  std::size_t kept = 0;
  for (const TrialView& t : views) {
    found = found || t.values.count(key) != 0;
    bool match = true;
    for (const auto& [k, v] : filters) {
      const auto value = value_of(t, k, owners);
      match = match && (!value || *value == v);
    }
    if (!match) continue;
    ++kept;
    const std::string value = value_of(t, key, owners).value_or("(default)");
    if (!groups.count(value)) order.push_back(value);
    groups[value].push_back(&t);
  }
  if (!found)
    throw Error("--by " + key + ": no trial of '" + name + "' has such a key",
                "use a dotted key of the experiment file, e.g. train.steps or model.hidden");
  if (kept == 0)
    throw Error("--where " + join(request.where, " --where ") + ": no trial of '" + name +
                    "' matches",
                "the trial labels in 'runner runs' show each trial's swept keys");
  if (groups.size() < 2)
    throw Error("--by " + key + ": every trial of '" + name + "' has " + key + " = " + order[0] +
                ", so there is nothing to compare");
  const std::string a_value = request.baseline.empty() ? order[0] : request.baseline;
  if (!groups.count(a_value))
    throw Error("--baseline " + request.baseline + ": no trial of '" + name + "' has " + key +
                    " = " + request.baseline,
                "values found: " + join(order, ", "));
  std::vector<std::string> others;
  for (const auto& v : order)
    if (v != a_value) others.push_back(v);
  std::string b_value = request.versus;
  if (!b_value.empty() && (b_value == a_value || !groups.count(b_value)))
    throw Error("--versus " + request.versus + ": no other trial of '" + name + "' has " + key +
                    " = " + request.versus,
                "values found: " + join(order, ", "));
  if (b_value.empty()) {
    if (others.size() > 1)
      throw Error("--by " + key + " splits '" + name + "' into " + std::to_string(order.size()) +
                      " groups (" + join(order, ", ") + "); compare exactly two",
                  "pick them with --baseline VALUE --versus VALUE, or compare trials directly: "
                  "runner compare trial:N trial:M");
    b_value = others[0];
  }
  const auto& side_a = groups[a_value];
  const auto& side_b = groups[b_value];

  // The other keys that vary within a side, with their values in trial order.
  std::set<std::string> ignored{key};
  for (const auto& [k, v] : filters) ignored.insert(k);
  std::set<std::string> keys;
  for (const auto* side : {&side_a, &side_b})
    for (const TrialView* t : *side)
      for (const auto& [k, v] : t->values)
        if (!ignored.count(k)) keys.insert(k);
  Split split;
  std::vector<std::string> described;
  for (const std::string& k : keys) {
    std::vector<std::string> values;
    bool varies = false;
    std::vector<std::set<std::string>> per_side;
    for (const auto* side : {&side_a, &side_b}) {
      std::set<std::string> within;
      for (const TrialView* t : *side)
        if (const auto v = value_of(*t, k, owners)) {
          within.insert(*v);
          if (std::find(values.begin(), values.end(), shown(*v)) == values.end())
            values.push_back(shown(*v));
        }
      varies = varies || within.size() > 1;
      per_side.push_back(std::move(within));
    }
    // One value a side, another on each: not pooling, but not the key alone
    // either (kernel.plugin compared at two shapes); said beside the result.
    if (!varies && per_side[0].size() == 1 && per_side[1].size() == 1 && per_side[0] != per_side[1])
      split.differ_between.push_back(k + " (" + shown(*per_side[0].begin()) + " -> " +
                                     shown(*per_side[1].begin()) + ")");
    if (!varies) continue;
    split.varying.push_back(k);
    described.push_back(k + " (" + join(values, ", ") + ")");
  }
  // A side's name: the value and the --where keys that apply to its trials
  // (not another plugin's option).
  const auto side_name = [&](const std::string& value, const std::vector<const TrialView*>& side) {
    std::vector<std::string> scope;
    for (std::size_t i = 0; i < filters.size(); ++i)
      for (const TrialView* t : side)
        if (value_of(*t, filters[i].first, owners)) {
          scope.push_back(request.where[i]);
          break;
        }
    return key + "=" + shown(value) + (scope.empty() ? "" : " (" + join(scope, ", ") + ")");
  };
  const std::string a_name = side_name(a_value, side_a), b_name = side_name(b_value, side_b);
  split.side_a = a_name;
  split.side_b = b_name;
  if (split.varying.empty()) {
    split.pairs.push_back({"", 0, 0, ids_of(side_a), ids_of(side_b), {}, {}});
    return split;
  }

  const auto context_of = [&](const TrialView& t) {
    Context c;
    for (const std::string& k : split.varying) c.push_back(value_of(t, k, owners));
    return c;
  };
  const auto trial = [&](std::int64_t id) {
    for (const auto* side : {&side_a, &side_b})
      for (const TrialView* t : *side)
        if (t->id == id) return t;
    return static_cast<const TrialView*>(nullptr);
  };
  std::vector<Context> contexts_b;
  for (const TrialView* t : side_b) contexts_b.push_back(context_of(*t));
  std::set<std::int64_t> paired;
  for (const TrialView* ta : side_a) {
    const Context ca = context_of(*ta);
    for (std::size_t j = 0; j < side_b.size(); ++j) {
      if (!alike(ca, contexts_b[j])) continue;
      split.pairs.push_back({join(pair_values(split.varying, ca, contexts_b[j]), " "), ta->id,
                             side_b[j]->id, {ta->id}, {side_b[j]->id}, {}, {}});
      paired.insert(ta->id);
      paired.insert(side_b[j]->id);
    }
  }
  if (!request.pairs) {
    std::string fix;
    if (split.pairs.empty()) {
      fix = "no trial of " + b_name + " is like one of " + a_name +
            " in these keys: compare trials directly, runner compare trial:N trial:M";
    } else {
      // The first pair of like trials, as --where options.
      std::vector<std::string> options;
      const SidePair& first = split.pairs.front();
      for (const std::string& assignment :
           pair_values(split.varying, context_of(*trial(first.trial_a)),
                       context_of(*trial(first.trial_b)), true))
        options.push_back(where_option(assignment));
      fix = "compare like with like: add " + join(options, " ") + " (one value of each)" +
            (request.offer_pairs ? ", or compare pair by pair with --pairs"
                                 : "; 'runner compare' with these options and --pairs compares "
                                   "pair by pair");
    }
    throw Error("--by " + key + ": a side would pool trials that differ in more than " + key +
                    " (" + a_name + ": " + std::to_string(side_a.size()) + " trial(s), " +
                    b_name + ": " + std::to_string(side_b.size()) +
                    " trial(s)); they also differ in " +
                    join(described, ", "),
                fix);
  }
  for (const auto* side : {&side_a, &side_b})
    for (const TrialView* t : *side)
      if (!paired.count(t->id)) {
        std::vector<std::string> values{key + "=" + shown(side == &side_a ? a_value : b_value)};
        const Context c = context_of(*t);
        for (const std::string& v : pair_values(split.varying, c, c)) values.push_back(v);
        split.unmatched.push_back("trial:" + std::to_string(t->id) + " (" + join(values, " ") +
                                  ")");
      }
  return split;
}

Split split_experiment(const store::Store& db, const SplitRequest& request) {
  if (request.selector.rfind("experiment:", 0) != 0)
    throw Error("--by needs one experiment:NAME selector, found '" + request.selector + "'",
                "e.g. runner compare experiment:amp --by train.precision");
  const std::string name = request.selector.substr(11);
  const auto trials = db.trials_of_experiment(name);
  if (trials.empty())
    throw Error("no experiment named '" + name + "' in the database",
                "run 'runner runs' to see the recorded experiments");
  Split split = plan_split(name, trials, request);
  for (SidePair& pair : split.pairs) {
    pair.a = side_of(db, pair.trials_a, split.side_a);
    pair.b = side_of(db, pair.trials_b, split.side_b);
  }
  return split;
}

std::pair<Side, Side> split_by(const store::Store& db, const std::string& selector,
                               const std::string& key, const std::string& baseline,
                               const std::string& versus, const std::vector<std::string>& where) {
  Split split = split_experiment(db, {selector, key, baseline, versus, where, false, false});
  return {std::move(split.pairs.front().a), std::move(split.pairs.front().b)};
}

SplitRequest split_request(const Args& args) {
  SplitRequest request;
  request.selector = args.positionals.at(0);
  request.key = args.get("--by");
  request.baseline = args.get("--baseline");
  request.versus = args.get("--versus");
  if (auto it = args.values.find("--where"); it != args.values.end()) request.where = it->second;
  return request;
}

std::pair<Side, Side> split_by(const store::Store& db, const Args& args) {
  const SplitRequest r = split_request(args);
  return split_by(db, r.selector, r.key, r.baseline, r.versus, r.where);
}

}  // namespace runner::cli
