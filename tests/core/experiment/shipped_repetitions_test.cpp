// Every shipped experiment can decide the comparisons its header prints
// (issue 35): a side of `runner compare` needs least_runs_per_side(0.05) = 4
// runs before the two-sided Mann-Whitney test can reach p < 0.05, so with
// fewer no verdict is ever possible, whatever the effect. The files are read
// through the experiment library (parse, then expand against the built-in
// plugins), and the comparisons from their header comments (and from
// README.md's lines that name a shipped experiment), so a new file or a new
// command is checked without touching this test.
//
// A side counts what `compare` pools on it: the runs of every trial with the
// side's value of the --by key among the trials that match every --where.
// Trials pooled on one side must differ in nothing else (compare refuses them
// otherwise, issue 36 item 2, or compares them pair by pair with --pairs), so
// the count is trials x repeats for one like group, repeats for --pairs, and an
// error for unlike trials pooled.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "runner/experiment/experiment.hpp"
#include "runner/host/host.hpp"
#include "runner/store/statistics.hpp"
#include "support/shipped_commands.hpp"

namespace runner {
namespace {

namespace fs = std::filesystem;
using test::CompareCommand;

const fs::path kExperiments = fs::path(RUNNER_SOURCE_DIR) / "experiments";

// A value as compare prints and matches it: strings bare, the rest as written.
std::string bare(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::string out = "[";
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + bare(v[i]);
    return out + "]";
  }
  return v.dump();
}

std::string unquoted(const std::string& toml) {
  if (toml.size() >= 2 && toml.front() == '"' && toml.back() == '"')
    return toml.substr(1, toml.size() - 2);
  return toml;
}

// A trial's keys as compare reads them (runner/cli/split_by.cpp): every leaf
// of its resolved configuration (plugin options as keys of their section),
// then the swept keys its label names (a key at its default may be left out
// of the identity), and the plugin of each section.
struct View {
  std::map<std::string, std::string> values;
  std::map<std::string, std::string> plugins;
};

// Which plugins have an option ("comm_hook.matrix_approximation_rank" -> powersgd).
using Owners = std::map<std::string, std::set<std::string>>;

View view_of(const Trial& trial, Owners& owners) {
  View view;
  const auto walk = [&](const auto& self, const nlohmann::json& v, const std::string& prefix) -> void {
    if (!v.is_object()) {
      view.values[prefix] = bare(v);
      return;
    }
    for (const auto& [key, item] : v.items())
      self(self, item, key == "options" ? prefix : prefix.empty() ? key : prefix + "." + key);
  };
  const nlohmann::json config = nlohmann::json::parse(trial.experiment.resolved_json());
  walk(walk, config, "");
  for (const auto& [section, body] : config.items()) {
    if (!body.is_object() || !body.contains("plugin") || !body.contains("options")) continue;
    view.plugins[section] = body["plugin"].get<std::string>();
    for (const auto& [option, value] : body["options"].items())
      owners[section + "." + option].insert(view.plugins[section]);
  }
  for (const auto& [key, toml] : trial.varied) view.values.emplace(key, unquoted(toml));
  return view;
}

// A trial's value of `key`; nullopt when it is an option of another plugin
// than the trial's (it does not apply), "(default)" when absent.
std::optional<std::string> value_of(const View& t, const std::string& key, const Owners& owners) {
  if (const auto it = t.values.find(key); it != t.values.end()) return it->second;
  if (const auto owner = owners.find(key); owner != owners.end()) {
    const auto plugin = t.plugins.find(key.substr(0, key.find('.')));
    if (plugin != t.plugins.end() && !owner->second.count(plugin->second)) return std::nullopt;
  }
  return "(default)";
}

/// What one comparison pools on each side, or why it cannot be counted.
struct Sides {
  std::size_t runs_a = 0;
  std::size_t runs_b = 0;
  std::string error;  ///< empty when counted
};

Sides count_sides(const std::vector<Trial>& trials, const CompareCommand& c) {
  if (trials.empty()) return {0, 0, "the experiment has no trial"};
  const std::size_t repeats = static_cast<std::size_t>(trials.front().experiment.repeats);
  if (c.by.empty() || c.pairs) {
    // Two single trials (trial:N trial:M), or pair by pair: one trial a side.
    return {repeats, repeats, ""};
  }
  Owners owners;
  std::vector<View> views;
  for (const Trial& t : trials) views.push_back(view_of(t, owners));
  std::map<std::string, std::vector<const View*>> groups;
  std::vector<std::string> order;
  for (const View& t : views) {
    bool match = true;
    for (const auto& [k, v] : c.where) {
      const auto value = value_of(t, k, owners);
      match = match && (!value || *value == v);
    }
    if (!match) continue;
    const std::string value = value_of(t, c.by, owners).value_or("(default)");
    if (!groups.count(value)) order.push_back(value);
    groups[value].push_back(&t);
  }
  if (groups.size() < 2) return {0, 0, "--by " + c.by + " leaves fewer than two groups"};
  const std::string a = c.baseline.empty() ? order[0] : c.baseline;
  std::string b = c.versus;
  if (b.empty()) {
    if (groups.size() != 2) return {0, 0, "--by " + c.by + " splits into more than two groups"};
    b = order[0] == a ? order[1] : order[0];
  }
  if (!groups.count(a) || !groups.count(b))
    return {0, 0, "no trial has " + c.by + " = " + (groups.count(a) ? b : a)};
  std::set<std::string> fixed = {c.by};
  for (const auto& [k, v] : c.where) fixed.insert(k);
  for (const std::string* value : {&a, static_cast<const std::string*>(&b)}) {
    const auto& side = groups[*value];
    std::set<std::string> keys;
    for (const View* t : side)
      for (const auto& [k, v] : t->values) keys.insert(k);
    for (const std::string& k : keys) {
      if (fixed.count(k)) continue;
      std::set<std::string> seen;
      for (const View* t : side)
        if (const auto v = value_of(*t, k, owners)) seen.insert(*v);
      if (seen.size() > 1)
        return {0, 0, "side " + c.by + "=" + *value + " pools trials that differ in " + k +
                          " (add --where " + k + "=VALUE, or --pairs)"};
    }
  }
  return {groups[a].size() * repeats, groups[b].size() * repeats, ""};
}

std::vector<Trial> expand(const fs::path& file, const PluginHost& host) {
  return expand_trials(*parse_experiment_file(file), host);
}

// A shipped file expanded where the files it names exist: eager_vs_compiled
// names exported models (../models/..., made by scripts/make_models.py) that
// expansion requires to exist but does not read; empty stand-ins do here.
std::vector<Trial> expand_shipped(const fs::path& file, const PluginHost& host) {
  const fs::path root = fs::temp_directory_path() /
                        ("runner-shipped-" + std::to_string(::getpid()));
  fs::create_directories(root / "experiments");
  fs::create_directories(root / "models");
  const fs::path copy = root / "experiments" / file.filename();
  fs::copy_file(file, copy, fs::copy_options::overwrite_existing);
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::regex named("\"\\.\\./models/([^\"]+)\"");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), named);
       it != std::sregex_iterator(); ++it)
    std::ofstream(root / "models" / (*it)[1].str());
  std::vector<Trial> trials;
  try {
    trials = expand(copy, host);
  } catch (...) {
    fs::remove_all(root);
    throw;
  }
  fs::remove_all(root);
  return trials;
}

class ShippedRepetitions : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    host_ = new PluginHost;
    host_->load(fs::path(RUNNER_BINARY_DIR) / "lib" / "runner" / "plugins");
  }
  static void TearDownTestSuite() {
    delete host_;
    host_ = nullptr;
  }
  static PluginHost* host_;
};
PluginHost* ShippedRepetitions::host_ = nullptr;

std::vector<fs::path> shipped_files() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kExperiments))
    if (entry.path().extension() == ".toml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

// The compare lines that name `experiment` (experiment:NAME, or trial:N
// printed in its own header), from its header and from README.md.
std::vector<std::pair<test::ShippedCommand, CompareCommand>> comparisons_of(
    const fs::path& file, const std::string& experiment) {
  std::vector<std::pair<test::ShippedCommand, CompareCommand>> out;
  for (const auto& command : test::header_commands(file))
    if (auto c = test::parse_compare(command.text)) out.emplace_back(command, *c);
  for (const auto& command : test::readme_commands(fs::path(RUNNER_SOURCE_DIR) / "README.md")) {
    auto c = test::parse_compare(command.text);
    if (c && c->selectors.size() == 1 && c->selectors[0] == "experiment:" + experiment)
      out.emplace_back(command, *c);
  }
  return out;
}

TEST_F(ShippedRepetitions, EveryComparisonAHeaderOrTheReadmePrintsCanReachAVerdict) {
  const std::size_t least = store::least_runs_per_side(0.05);
  ASSERT_EQ(least, 4u);
  int checked = 0;
  for (const fs::path& file : shipped_files()) {
    SCOPED_TRACE(file.filename().string());
    const std::vector<Trial> trials = expand_shipped(file, *host_);
    ASSERT_FALSE(trials.empty());
    const std::string name = trials.front().experiment.name;
    for (const auto& [command, compare] : comparisons_of(file, name)) {
      const std::string where = command.file.filename().string() + ":" +
                                std::to_string(command.line) + ": " + command.text;
      for (const std::string& selector : compare.selectors)
        EXPECT_TRUE(selector == "experiment:" + name || selector.rfind("trial:", 0) == 0)
            << where << ": names another experiment than the file's own";
      const Sides sides = count_sides(trials, compare);
      ++checked;
      EXPECT_EQ(sides.error, "") << where;
      EXPECT_GE(std::min(sides.runs_a, sides.runs_b), least)
          << where << ": " << sides.runs_a << " and " << sides.runs_b
          << " runs a side; the rank test needs " << least << " to reach p < 0.05";
    }
  }
  EXPECT_GE(checked, 10);  // the headers print more than that; a parser that finds none fails
}

TEST_F(ShippedRepetitions, AFileWithoutAComparisonRunsFourRepetitionsOrSaysWhyNot) {
  for (const fs::path& file : shipped_files()) {
    SCOPED_TRACE(file.filename().string());
    const std::vector<Trial> trials = expand_shipped(file, *host_);
    if (!comparisons_of(file, trials.front().experiment.name).empty()) continue;
    if (trials.front().experiment.repeats >= 4) continue;
    // The reason is a header line of its own, "Repetitions: ...", so a reader finds it.
    const auto lines = test::header_lines(file);
    const bool says_why = std::any_of(lines.begin(), lines.end(), [](const std::string& l) {
      return l.find(" Repetitions: ") == 0;
    });
    EXPECT_TRUE(says_why) << file << ": " << trials.front().experiment.repeats
                          << " repetitions, no comparison, and no header line '# Repetitions: "
                             "...' saying why fewer than 4";
  }
}

// The counting itself, on files written for the test.
class SideCount : public ShippedRepetitions {
 protected:
  std::vector<Trial> sweep(const std::string& repeats) {
    const fs::path file = fs::temp_directory_path() /
                          ("runner-repetitions-" + std::to_string(::getpid()) + ".toml");
    {
      std::FILE* f = std::fopen(file.c_str(), "w");
      const std::string text = "[experiment]\nrepeats = " + repeats +
                               "\n[model]\nplugin = \"mlp\"\n[data]\nplugin = \"synthetic\"\n"
                               "shape = [8]\n[optimizer]\nplugin = \"sgd\"\nlr = 0.1\n"
                               "[sweep]\n\"optimizer.lr\" = [0.1, 0.2]\n"
                               "\"model.activation\" = [\"relu\", \"gelu\", \"tanh\"]\n";
      std::fputs(text.c_str(), f);
      std::fclose(f);
    }
    auto trials = expand(file, *host_);
    fs::remove(file);
    return trials;
  }
};

TEST_F(SideCount, ASideThatPoolsUnlikeTrialsIsReportedNotCounted) {
  const auto trials = sweep("5");
  ASSERT_EQ(trials.size(), 6u);
  const auto c = test::parse_compare("runner compare experiment:x --by optimizer.lr");
  ASSERT_TRUE(c);
  EXPECT_EQ(count_sides(trials, *c).error,
            "side optimizer.lr=0.1 pools trials that differ in model.activation (add --where "
            "model.activation=VALUE, or --pairs)");
}

TEST_F(SideCount, AWhereLeavesOneTrialASide) {
  const auto trials = sweep("3");
  const auto c = test::parse_compare(
      "runner compare experiment:x --by model.activation --baseline relu --versus tanh "
      "--where optimizer.lr=0.2 --db x.db");
  ASSERT_TRUE(c);
  const Sides sides = count_sides(trials, *c);
  EXPECT_EQ(sides.error, "");
  EXPECT_EQ(sides.runs_a, 3u);
  EXPECT_EQ(sides.runs_b, 3u);
  EXPECT_EQ(count_sides(trials, *test::parse_compare("runner compare experiment:x --by "
                                                     "model.activation --where optimizer.lr=0.2"))
                .error,
            "--by model.activation splits into more than two groups");
}

TEST(ShippedCommands, HeaderCommandsJoinContinuationsAndDropRemarks) {
  const fs::path file = fs::temp_directory_path() /
                        ("runner-header-" + std::to_string(::getpid()) + ".toml");
  {
    std::FILE* f = std::fopen(file.c_str(), "w");
    std::fputs("# Prose that mentions runner run x.toml is not a command.\n"
               "#\n"
               "#   runner run x.toml\n"
               "#   runner compare experiment:x --by a.b \\\n"
               "#       --where c.d=1   # a remark\n"
               "#   runner show RUN_ID     # details\n"
               "\n[experiment]\n# runner run not.toml\n",
               f);
    std::fclose(f);
  }
  const auto commands = test::header_commands(file);
  fs::remove(file);
  ASSERT_EQ(commands.size(), 3u);
  EXPECT_EQ(commands[0].text, "runner run x.toml");
  EXPECT_EQ(commands[1].text, "runner compare experiment:x --by a.b --where c.d=1");
  EXPECT_EQ(commands[1].line, 4);
  EXPECT_EQ(commands[2].text, "runner show RUN_ID");
  const auto c = test::parse_compare(commands[1].text);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->by, "a.b");
  ASSERT_EQ(c->where.size(), 1u);
  EXPECT_EQ(c->where[0].first, "c.d");
  EXPECT_EQ(c->where[0].second, "1");
}

}  // namespace
}  // namespace runner
