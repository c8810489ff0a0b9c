// Which runs a command reads: the selectors of `compare`, `report` and
// `export` (RUN_ID, run:ID[,ID...], trial:ID[,ID...], experiment:NAME,
// label:KEY=VALUE), the
// split of one experiment by a swept key (--by, split_by.cpp) with the options
// that ask for it, and the values of dotted configuration keys in a trial's resolved
// configuration and sweep label.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "args.hpp"
#include "runner/store/store.hpp"

namespace runner::cli {

/// The runs one selector (or one value of a --by key) names, in selector order.
struct Side {
  std::string name;                    ///< as the user wrote it, or "KEY=VALUE"
  std::vector<store::RunDetail> runs;
};

/// Which runs a selector keeps: compare reads finished runs only; report and
/// export show every run, failed and interrupted ones included.
enum class RunFilter { finished, all };

/// How much of each run a selector reads: everything (get_run), or what a
/// series over thousands of runs needs (store::Store::get_runs_brief).
enum class RunRead { full, brief };

/// The runs of "12", "run:12,13", "trial:3[,4]", "experiment:NAME" or
/// "label:KEY=VALUE" (the runs recorded with that label, oldest first). Throws
/// runner::Error (input) for a run or experiment that is not in the database
/// and for a selector of another form.
[[nodiscard]] Side select(const store::Store& db, const std::string& selector,
                          RunFilter filter = RunFilter::finished, RunRead read = RunRead::full);

/// Several selectors as one list of runs, each run once, in selector order.
/// Throws runner::Error (input) when they match no run at all.
[[nodiscard]] Side select_all(const store::Store& db, const std::vector<std::string>& selectors,
                              RunFilter filter, RunRead read = RunRead::full);

/// What splitting one experiment:NAME by a key asks for: side A has
/// `baseline` (default: the first value), side B `versus` (default: the only
/// other one), among the trials that match every `where` ("KEY=VALUE"; a
/// trial whose plugin has no such option is kept).
struct SplitRequest {
  std::string selector;            ///< "experiment:NAME"
  std::string key;                 ///< the compared key, "comm_hook.plugin"
  std::string baseline, versus;    ///< "" for the defaults
  std::vector<std::string> where;  ///< "KEY=VALUE", each one kept trials must match
  bool pairs = false;              ///< one comparison per pair of like trials (--pairs)
  bool offer_pairs = true;         ///< the command takes --pairs (compare, not report)
};

/// One comparison of a split: its two sides and, pair by pair, the values of
/// the other keys that vary and the two trials ("" and 0 for a plain split).
struct SidePair {
  std::string context;                    ///< "kernel.plugin=scale kernel.shape=[1024, 1024]"
  std::int64_t trial_a = 0, trial_b = 0;  ///< the pair's trials
  std::vector<std::int64_t> trials_a, trials_b;  ///< the trials each side pools
  Side a, b;                              ///< their finished runs (empty from plan_split)
};

/// The sides of one experiment split by a key.
struct Split {
  std::string side_a, side_b;          ///< the sides' names, "KEY=VALUE (where...)"
  std::vector<std::string> varying;    ///< the other keys that vary within a side
  /// Other keys with one value on each side, different between them: "kernel.shape ([8192,
  /// 8192] -> [8192, 4096])"; a plugin's options beside KEY.plugin have none on the other side.
  std::vector<std::string> differ_between;
  std::vector<SidePair> pairs;         ///< one, or pair by pair one per matching pair of trials
  std::vector<std::string> unmatched;  ///< pair by pair: trials with no like trial on the other side
};

/// Splits one experiment's finished runs into two sides by a key. A side
/// pools only trials that differ in nothing but the key and the --where keys;
/// otherwise, without `pairs`, throws runner::Error (input) naming the other
/// keys that vary, their values and the --where that would fix it. Throws
/// runner::Error (input) with what to do for every other bad request too.
[[nodiscard]] Split split_experiment(const store::Store& db, const SplitRequest& request);

/// The split of experiment `name`'s `trials` (ids, resolved configurations and
/// labels: stored or planned) that `request` asks for, as split_experiment()
/// makes it but without reading runs: each pair names its sides' trials. For
/// `run --dry-run`, which judges the comparisons a file implies before it runs.
[[nodiscard]] Split plan_split(const std::string& name, const std::vector<store::TrialInfo>& trials,
                               const SplitRequest& request);

/// split_experiment() without pairs, for a command without --pairs: its one pair of sides.
[[nodiscard]] std::pair<Side, Side> split_by(const store::Store& db, const std::string& selector,
                                             const std::string& key, const std::string& baseline,
                                             const std::string& versus,
                                             const std::vector<std::string>& where);

/// The options of the two sides of a comparison, as `compare` and `report`
/// take them: --by, --baseline, --versus, --where and --margin.
[[nodiscard]] std::vector<OptionDef> side_options();

/// The --by key, or "" without one. Throws runner::Error (input) when --by
/// comes with other than one selector.
[[nodiscard]] std::string by_option(const Args& args);

/// The split the one selector and the --by, --baseline, --versus and --where
/// options of `args` ask for (pairs: false; `compare` sets it from --pairs).
[[nodiscard]] SplitRequest split_request(const Args& args);

/// split_by() of the one selector by the --by key, with --baseline, --versus
/// and every --where of `args`.
[[nodiscard]] std::pair<Side, Side> split_by(const store::Store& db, const Args& args);

/// --margin in percent, nullopt without it. Throws runner::Error (input) for
/// a value that is not a percentage in [0, 100).
[[nodiscard]] std::optional<double> margin_option(const Args& args);

/// A configuration value as users write it in --by and --baseline: strings
/// bare, numbers as stored, arrays as "[64, 64]".
[[nodiscard]] std::string render(const nlohmann::json& value);

/// The value of a dotted key in a trial's resolved configuration: a host key
/// ("train.steps") or a plugin option ("model.hidden", stored under options).
[[nodiscard]] std::optional<std::string> config_value(const nlohmann::json& config,
                                                      const std::string& dotted);

/// The value a trial's sweep label gives `dotted` ("data.workers=0
/// model.hidden=[64, 64] optimizer.name=\"x\""), strings unquoted.
[[nodiscard]] std::optional<std::string> label_value(const std::string& label,
                                                     const std::string& dotted);

/// The keys a sweep label names, in label order ("a.b=1 c.d=[1, 2]" -> a.b, c.d).
[[nodiscard]] std::vector<std::string> label_keys(const std::string& label);

/// A trial's value of a dotted key: from its configuration, else from its
/// label, else "(default)".
[[nodiscard]] std::string trial_value(const nlohmann::json& config, const std::string& label,
                                      const std::string& key);

/// Every leaf of a resolved configuration as dotted key -> rendered value, in
/// key order; a plugin's options appear under the section ("model.hidden"),
/// not "model.options.hidden".
[[nodiscard]] std::vector<std::pair<std::string, std::string>> flatten_config(
    const nlohmann::json& config);

/// Seconds since the epoch of an ISO-8601 UTC time as the store writes it
/// ("2026-11-26T10:45:10.850Z"); nullopt when it is not of that form.
[[nodiscard]] std::optional<double> epoch_seconds(const std::string& iso);

}  // namespace runner::cli
