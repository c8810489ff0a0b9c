// Which runs a command reads, and the values of a trial's configuration keys.
#include "selection.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "runner/common/error.hpp"
#include "runner/common/json.hpp"
#include "runner/common/labels.hpp"
#include "runner/common/strings.hpp"

namespace runner::cli {

namespace {

// Trials of one configuration share their runs (runs_of_trial): two of them
// in one selector, or two rows of one experiment name, give a run once.
void add_run(std::int64_t run_id, std::vector<std::int64_t>& ids, std::set<std::int64_t>& seen) {
  if (seen.insert(run_id).second) ids.push_back(run_id);
}

void add_trial(const store::Store& db, std::int64_t trial_id, std::vector<std::int64_t>& ids,
               std::set<std::int64_t>& seen) {
  for (const auto& r : db.runs_of_trial(trial_id)) add_run(r.run_id, ids, seen);
}

// The runs `ids` names, read as `read` asks; a run that is not stored is an error.
void read_runs(const store::Store& db, const std::vector<std::int64_t>& ids, RunFilter filter,
               RunRead read, Side& side) {
  std::vector<store::RunDetail> runs;
  if (read == RunRead::brief) {
    runs = db.get_runs_brief(ids);
  } else {
    for (const std::int64_t id : ids)
      if (auto run = db.get_run(id)) runs.push_back(std::move(*run));
  }
  if (runs.size() < ids.size()) {
    std::set<std::int64_t> found;
    for (const auto& run : runs) found.insert(run.row.id);
    for (const std::int64_t id : ids)
      if (!found.count(id))
        throw Error("run " + std::to_string(id) + " is not in the database",
                    "run 'runner runs' to list the recorded runs");
  }
  for (auto& run : runs)
    if (filter == RunFilter::all || run.row.status == store::RunStatus::finished)
      side.runs.push_back(std::move(run));
}

const nlohmann::json* member(const nlohmann::json& object, const std::string& key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

}  // namespace

Side select(const store::Store& db, const std::string& selector, RunFilter filter, RunRead read) {
  Side side;
  side.name = selector;
  std::set<std::int64_t> seen;
  std::vector<std::int64_t> ids;
  const auto colon = selector.find(':');
  const std::string kind = colon == std::string::npos ? "run" : selector.substr(0, colon);
  const std::string rest = colon == std::string::npos ? selector : selector.substr(colon + 1);
  if (kind == "run") {
    for (const auto& id : split(rest, ','))
      add_run(parse_integer(id, "a run id", 1), ids, seen);
  } else if (kind == "trial") {
    for (const auto& id : split(rest, ','))
      add_trial(db, parse_integer(id, "a trial id", 1), ids, seen);
  } else if (kind == "experiment") {
    const auto trials = db.trials_of_experiment(rest);
    if (trials.empty())
      throw Error("no experiment named '" + rest + "' in the database",
                  "run 'runner runs' to see the recorded experiments");
    for (const auto& t : trials) add_trial(db, t.id, ids, seen);
  } else if (kind == "label") {
    // label:KEY=VALUE: the runs that carry it, oldest first (a CI's commit).
    const auto eq = rest.find('=');
    const std::string key = rest.substr(0, eq);
    if (eq == std::string::npos || !label_key_problem(key).empty() || eq + 1 == rest.size())
      throw Error("cannot read the selector '" + selector + "': expected label:KEY=VALUE",
                  "e.g. label:commit=abc123 (runs recorded with --label commit=abc123)");
    for (const std::int64_t id : db.runs_with_label(key, rest.substr(eq + 1)))
      add_run(id, ids, seen);
  } else {
    throw Error("cannot read the selector '" + selector +
                    "': expected RUN_ID, run:ID[,ID...], trial:ID[,ID...], experiment:NAME or "
                    "label:KEY=VALUE",
                "e.g. runner compare trial:1 trial:2");
  }
  read_runs(db, ids, filter, read, side);
  return side;
}

Side select_all(const store::Store& db, const std::vector<std::string>& selectors,
                RunFilter filter, RunRead read) {
  Side all;
  all.name = join(selectors, " ");
  std::set<std::int64_t> seen;
  for (const std::string& selector : selectors)
    for (auto& run : select(db, selector, filter, read).runs)
      if (seen.insert(run.row.id).second) all.runs.push_back(std::move(run));
  if (all.runs.empty())
    throw Error("'" + all.name + "' matches no " +
                    (filter == RunFilter::finished ? "finished " : "") + "run in the database",
                "run 'runner runs' to list the recorded runs");
  return all;
}

// A configuration value as users write it in --by and --baseline: strings bare.
std::string render(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::string: return v.get<std::string>();
    case nlohmann::json::value_t::array: {
      std::string out = "[";
      for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + render(v[i]);
      return out + "]";
    }
    case nlohmann::json::value_t::object: return "{...}";
    default: return canonical_json(v);  // numbers as stored: 0.1, 1e-04, 3.0, 64
  }
}

// The value of a dotted key in a trial's resolved configuration: a host key
// ("train.steps") or a plugin option ("model.hidden", stored under options).
std::optional<std::string> config_value(const nlohmann::json& config, const std::string& dotted) {
  const auto dot = dotted.find('.');
  const nlohmann::json* section = member(config, dotted.substr(0, dot));
  if (dot == std::string::npos) return section ? std::optional(render(*section)) : std::nullopt;
  if (section == nullptr) return std::nullopt;
  const std::string key = dotted.substr(dot + 1);
  if (const nlohmann::json* v = member(*section, key)) return render(*v);
  if (const nlohmann::json* options = member(*section, "options"))
    if (const nlohmann::json* v = member(*options, key)) return render(*v);
  return std::nullopt;
}

// The value the trial's label gives `dotted` ("data.workers=0 model.hidden=[64, 64]
// optimizer.name=\"x\""), strings unquoted, or nothing. A swept key at its
// default is left out of the identity (see split_by) but named in the label.
std::optional<std::string> label_value(const std::string& label, const std::string& dotted) {
  const std::string key = dotted + "=";
  std::size_t at = 0;
  while ((at = label.find(key, at)) != std::string::npos) {
    if (at == 0 || label[at - 1] == ' ') break;
    at += key.size();
  }
  if (at == std::string::npos) return std::nullopt;
  const std::size_t start = at + key.size();
  if (start < label.size() && label[start] == '"') {
    const std::size_t end = label.find('"', start + 1);
    if (end == std::string::npos) return std::nullopt;
    return label.substr(start + 1, end - start - 1);
  }
  if (start < label.size() && label[start] == '[') {
    int depth = 0;
    for (std::size_t i = start; i < label.size(); ++i) {
      depth += label[i] == '[' ? 1 : label[i] == ']' ? -1 : 0;
      if (depth == 0) return label.substr(start, i + 1 - start);
    }
    return std::nullopt;
  }
  return label.substr(start, label.find(' ', start) - start);
}

// A trial's value of a dotted key as --by and --where read it: from its
// configuration, else from its label, else "(default)" (see split_by).
std::string trial_value(const nlohmann::json& config, const std::string& label,
                        const std::string& key) {
  if (auto value = config_value(config, key)) return *value;
  return label_value(label, key).value_or("(default)");
}

std::vector<OptionDef> side_options() {
  return {
      {"--by", "KEY", "split one experiment:NAME into two sides by a swept key", false},
      {"--baseline", "VALUE", "with --by: the value that is side A (default: the first)", false},
      {"--versus", "VALUE", "with --by: the value that is side B (default: the only other)",
       false},
      {"--where", "KEY=VALUE",
       "with --by: only trials with this value of KEY (trials whose plugin lacks the option stay)",
       true},
      {"--margin", "PCT",
       "practical-equivalence margin: differences within +/-PCT % are not called (default: "
       "the run-to-run noise of the two sides)",
       false},
  };
}

std::string by_option(const Args& args) {
  const std::string by = args.get("--by");
  if (!by.empty() && args.positionals.size() != 1)
    throw Error("with --by, give one experiment:NAME selector, found " +
                std::to_string(args.positionals.size()));
  return by;
}

std::optional<double> margin_option(const Args& args) {
  if (!args.has("--margin")) return std::nullopt;
  const std::optional<double> value = parse_double(args.get("--margin"));
  if (!value || !(*value >= 0) || !(*value < 100))
    throw Error("--margin must be a percentage in [0, 100), found '" + args.get("--margin") + "'",
                "e.g. --margin 2 calls differences within +/-2% equivalent");
  return value;
}

std::vector<std::string> label_keys(const std::string& label) {
  std::vector<std::string> keys;
  std::size_t at = 0;
  while (at < label.size()) {
    const std::size_t eq = label.find('=', at);
    if (eq == std::string::npos) break;
    const std::string key = label.substr(at, eq - at);
    keys.push_back(key);
    // Skip the value: quoted, bracketed or up to the next space.
    std::size_t end = eq + 1;
    if (end < label.size() && label[end] == '"') {
      end = label.find('"', end + 1);
      end = end == std::string::npos ? label.size() : end + 1;
    } else if (end < label.size() && label[end] == '[') {
      int depth = 0;
      for (; end < label.size(); ++end) {
        depth += label[end] == '[' ? 1 : label[end] == ']' ? -1 : 0;
        if (depth == 0) {
          ++end;
          break;
        }
      }
    } else {
      end = label.find(' ', end);
      if (end == std::string::npos) end = label.size();
    }
    at = end;
    while (at < label.size() && label[at] == ' ') ++at;
  }
  return keys;
}

namespace {

void flatten_into(const nlohmann::json& value, const std::string& prefix,
                  std::vector<std::pair<std::string, std::string>>& out) {
  if (value.is_object()) {
    for (const auto& [key, item] : value.items()) {
      // A plugin's options read as keys of their section, as users write them.
      const std::string dotted =
          key == "options" && !prefix.empty() ? prefix : (prefix.empty() ? key : prefix + "." + key);
      flatten_into(item, dotted, out);
    }
    return;
  }
  out.emplace_back(prefix, render(value));
}

}  // namespace

std::vector<std::pair<std::string, std::string>> flatten_config(const nlohmann::json& config) {
  std::vector<std::pair<std::string, std::string>> out;
  flatten_into(config, "", out);
  std::sort(out.begin(), out.end());
  return out;
}

// Seconds since the epoch of an ISO-8601 UTC time as the store writes it
// ("2026-11-26T10:45:10.850Z"); nullopt when it is not of that form.
std::optional<double> epoch_seconds(const std::string& iso) {
  std::tm tm{};
  int year = 0, month = 0, day = 0, hour = 0, minute = 0;
  double second = 0;
  if (std::sscanf(iso.c_str(), "%d-%d-%dT%d:%d:%lfZ", &year, &month, &day, &hour, &minute,
                  &second) != 6)
    return std::nullopt;
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  return static_cast<double>(::timegm(&tm)) + second;
}

}  // namespace runner::cli
