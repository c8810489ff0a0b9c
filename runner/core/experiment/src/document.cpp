// An experiment as written: its files and extends merged, --set applied (document.hpp).
#include "document.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "limits.hpp"
#include "runner/common/strings.hpp"

namespace runner::experiment::detail {

namespace fs = std::filesystem;

namespace {

const char* const kExtendsHint =
    "a path in extends is relative to the folder of the file that names it";
const char* const kSweepHint =
    "a sweep axis lists the values to try, e.g. \"train.steps\" = [100, 200]";
const char* const kZipHint =
    "declare each zip group as [sweep.zip.NAME], with the keys that vary together";
const char* const kTrialHint =
    "write each trial as [[trial]] followed by its keys, e.g. \"optimizer.lr\" = 0.1";

// The same file reached under two spellings must count as one for cycles.
fs::path identity_of(const fs::path& path) {
  std::error_code ec;
  fs::path canonical = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) return fs::absolute(path, ec).lexically_normal();
  return canonical;
}

template <typename T>
void sort_by_position(std::vector<T>& items) {
  std::stable_sort(items.begin(), items.end(), [](const T& a, const T& b) {
    return before(start_of(a.key_src, *a.node), start_of(b.key_src, *b.node));
  });
}

// toml::table is ordered by key; everything here keeps the order of the file.
std::vector<Leaf> leaves_in_file_order(const toml::table& table) {
  std::vector<Leaf> leaves;
  for (const auto& [key, node] : table) leaves.push_back({std::string(key.str()), &key, &node});
  sort_by_position(leaves);
  return leaves;
}

// `train.steps = 1`, `"train.steps" = 1` and `[x.train] steps = 1` all mean the
// dotted key "train.steps": nested tables become dotted keys.
void flatten(const toml::table& table, const std::string& prefix, std::vector<Leaf>& out) {
  for (const auto& [key, node] : table) {
    const std::string name =
        prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
    if (const auto* sub = node.as_table())
      flatten(*sub, name, out);
    else
      out.push_back({name, &key, &node});
  }
}

struct Frame {
  fs::path shown;     // as messages show it
  fs::path identity;  // for cycles
};

class Loader {
 public:
  Loader(Sources& out, const Checker& check) : out_(out), check_(check) {}

  // Reads `shown` and its bases; `via` is the extends value naming it (null for the root).
  Document load(const fs::path& shown, const std::vector<Frame>& stack, const toml::node* via,
                const std::string& via_text);

 private:
  Document read_structure(const toml::table& root,
                          std::vector<std::pair<std::string, const toml::node*>>& extends);
  std::vector<Axis> read_sweep(const toml::table& sweep);
  std::vector<TrialTable> read_trials(const toml::node& node);
  void check_varied_key(const Leaf& leaf, const std::string& where) const;
  static void merge(Document& into, Document&& from);

  Sources& out_;
  const Checker& check_;
  std::size_t reads_ = 0;  // files read so far, each time a path of extends reaches one
  std::size_t bytes_ = 0;  // their total size
};

std::string chain_of(const std::vector<Frame>& stack) {
  if (stack.empty()) return {};
  std::string chain = " (";
  for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
    if (it != stack.rbegin()) chain += ", ";
    chain += "extended by " + it->shown.string();
  }
  return chain + ")";
}

Document Loader::load(const fs::path& shown, const std::vector<Frame>& stack,
                      const toml::node* via, const std::string& via_text) {
  if (via != nullptr && stack.size() > kMaxExtendsDepth)
    throw check_.error(*via,
                       "extends chain is deeper than " + std::to_string(kMaxExtendsDepth) + " files",
                       "an experiment may extend at most " + std::to_string(kMaxExtendsDepth) +
                           " files deep; flatten the chain");
  if (++reads_ > kMaxFileReads)
    throw check_.error(*via,
                       "extends reaches more than " + std::to_string(kMaxFileReads) +
                           " files (a base reached by several paths counts each time)",
                       "share bases through fewer paths, or merge files");
  std::string text;
  if (const auto failure = read_experiment_file(shown, text)) {
    if (via == nullptr)
      throw Error("cannot open experiment file '" + shown.string() + "': " + failure->reason,
                  failure->hint.empty() ? "check the path; experiments/ holds ready-to-run examples"
                                        : failure->hint);
    std::error_code ec;
    throw check_.error(*via,
                       "cannot open extended file '" + via_text + "' (resolved to " +
                           fs::absolute(shown, ec).lexically_normal().string() +
                           "): " + failure->reason,
                       failure->hint.empty() ? kExtendsHint : failure->hint);
  }
  bytes_ += text.size();
  if (bytes_ > kMaxTotalBytes) {
    const std::string message = "the files of this experiment hold more than " +
                                std::to_string(kMaxTotalBytes / (1024 * 1024)) + " MiB in all";
    const std::string hint = "an experiment and the files it extends may hold at most " +
                             std::to_string(kMaxTotalBytes / (1024 * 1024)) + " MiB together";
    if (via == nullptr) throw Error(message, hint);
    throw check_.error(*via, message, hint);
  }
  if (const auto problem = find_text_problem(text))
    throw Error(SourceLocation{shown.string(), problem->where.line, problem->where.column},
                problem->message + chain_of(stack), problem->hint);
  const std::string chain = chain_of(stack);
  toml::table root;
  try {
    root = toml::parse(std::string_view(text), shown.string());
  } catch (const toml::parse_error& e) {
    const auto& pos = e.source().begin;
    throw Error(SourceLocation{shown.string(), static_cast<int>(pos.line),
                               static_cast<int>(pos.column)},
                "invalid TOML: " + std::string(e.description()) + chain);
  }
  out_.files.push_back(SourceFile{shown, text});
  out_.trees.push_back(std::make_unique<toml::table>(std::move(root)));
  const toml::table& tree = *out_.trees.back();
  out_.origins.add(tree.source().path, Origin{shown.string(), false, chain, shown.parent_path()});

  std::vector<std::pair<std::string, const toml::node*>> extends;
  Document own = read_structure(tree, extends);
  if (extends.empty()) return own;

  std::vector<Frame> inner = stack;
  inner.push_back({shown, identity_of(shown)});
  Document merged;
  for (const auto& [value, node] : extends) {
    fs::path base(value);
    base = (base.is_absolute() ? base : shown.parent_path() / base).lexically_normal();
    const fs::path identity = identity_of(base);
    if (std::any_of(inner.begin(), inner.end(),
                    [&](const Frame& frame) { return frame.identity == identity; })) {
      std::vector<std::string> names;
      for (const auto& frame : inner) names.push_back(frame.shown.string());
      names.push_back(base.string());
      // The chain is the message; no "(extended by ...)" after it.
      throw Error(check_.at(*node), "extends cycle: " + join(names, " -> "),
                  "an experiment cannot extend itself, directly or through other files");
    }
    Document based = load(base, inner, node, value);
    // A name or description describes the file that writes it, not its extensions.
    for (auto& section : based.sections)
      if (section.name == "experiment")
        std::erase_if(section.items, [](const Leaf& leaf) {
          return leaf.key == "name" || leaf.key == "description";
        });
    merge(merged, std::move(based));
  }
  merge(merged, std::move(own));
  return merged;
}

Document Loader::read_structure(const toml::table& root,
                                std::vector<std::pair<std::string, const toml::node*>>& extends) {
  Document doc;
  const std::string known = "known sections: " + join(top_level_names(), ", ");
  for (const Leaf& entry : leaves_in_file_order(root)) {
    const std::string& name = entry.key;
    const toml::node& node = *entry.node;
    if (name == "extends") {
      auto add = [&](const toml::node& item, const std::string& dotted) {
        const auto* text = item.as_string();
        if (text == nullptr)
          check_.fail(item, "'" + dotted + "' must be a string, found " + describe(item));
        if (text->get().empty()) check_.fail(item, "'" + dotted + "' must not be empty");
        extends.emplace_back(text->get(), &item);
      };
      if (node.is_string()) {
        add(node, name);
      } else if (const auto* list = node.as_array()) {
        for (std::size_t i = 0; i < list->size(); ++i)
          add(*list->get(i), name + "[" + std::to_string(i) + "]");
      } else {
        check_.fail(node, std::string("'extends' must be a string or a list of strings, found ") +
                              describe(node), kExtendsHint);
      }
      continue;
    }
    if (name == "sweep") {
      const auto* table = node.as_table();
      if (table == nullptr)
        check_.fail(node, "'sweep' must be a table, found " + std::string(describe(node)),
                    "write it as a section: [sweep]");
      doc.axes = read_sweep(*table);
      continue;
    }
    if (name == "trial") {
      doc.trials = read_trials(node);
      continue;
    }
    if (name == "expect") {
      // Each table's keys are checked against the sweep once it is merged (expect.cpp).
      const auto* list = node.as_array();
      if (list == nullptr || !list->is_array_of_tables())
        check_.fail(node, "'expect' must be an array of tables, found " + std::string(describe(node)),
                    "write each expectation as [[expect]] followed by its keys");
      for (const toml::node& item : *list) doc.expects.push_back(&item);
      continue;
    }
    const bool is_table = node.is_table();
    if (find_section(name) != nullptr) {
      if (!is_table)
        check_.fail(node, "'" + name + "' must be a table, found " + describe(node),
                    "write it as a section: [" + name + "]");
      doc.sections.push_back({name, entry.key_src, &node, leaves_in_file_order(*node.as_table())});
      continue;
    }
    if (!is_table)
      throw check_.error(entry, "key '" + name + "' is outside any section",
                         "put it under one of the sections; " + known);
    std::string message = "unknown section [" + name + "]";
    if (const auto match = closest_match(name, top_level_names()))
      message += "; did you mean [" + *match + "]?";
    throw check_.error(entry, message, known);
  }
  return doc;
}

void Loader::check_varied_key(const Leaf& leaf, const std::string& where) const {
  const auto key = lookup_dotted(leaf.key);
  if (!key) {
    auto [message, hint] = unknown_dotted_key(leaf.key, where);
    throw check_.error(leaf, message, hint);
  }
  if (!key->per_trial())
    throw check_.error(leaf, "'" + leaf.key + "' cannot vary between trials",
                       "these keys are the same for every trial: " + fixed_keys_list());
}

std::vector<Axis> Loader::read_sweep(const toml::table& sweep) {
  std::vector<Axis> axes;
  // A list of values, non-empty, for the axis key `leaf` named `name` in messages.
  auto check_list = [&](const Leaf& leaf, const std::string& name) {
    const auto* list = leaf.node->as_array();
    if (list == nullptr)
      check_.fail(*leaf.node, "'" + name + "' must be a list of values, found " +
                                  describe(*leaf.node), kSweepHint);
    if (list->empty())
      check_.fail(*leaf.node, "'" + name + "' is empty: a sweep axis needs at least one value",
                  kSweepHint);
  };
  for (const auto& [key, node] : sweep) {
    if (key.str() != "zip") {
      std::vector<Leaf> leaves;
      if (const auto* sub = node.as_table())
        flatten(*sub, std::string(key.str()), leaves);
      else
        leaves.push_back({std::string(key.str()), &key, &node});
      for (const Leaf& leaf : leaves)
        axes.push_back({leaf.key, false, leaf.key_src, leaf.node, {leaf}});
      continue;
    }
    const auto* groups = node.as_table();
    if (groups == nullptr)
      check_.fail(node, "'sweep.zip' must be a table of zip groups, found " +
                            std::string(describe(node)), kZipHint);
    for (const auto& [group_key, group_node] : *groups) {
      const std::string group = "sweep.zip." + std::string(group_key.str());
      const auto* table = group_node.as_table();
      if (table == nullptr)
        check_.fail(group_node, "'" + group + "' must be a table, found " +
                                    std::string(describe(group_node)), kZipHint);
      Axis axis{"zip." + std::string(group_key.str()), true, &group_key, &group_node, {}};
      flatten(*table, "", axis.keys);
      sort_by_position(axis.keys);
      if (axis.keys.empty())
        check_.fail(group_node, "'" + group + "' is empty: a zip group needs at least one key",
                    kZipHint);
      axes.push_back(std::move(axis));
    }
  }
  sort_by_position(axes);
  // Checked in file order, now that the order is known.
  std::set<std::string> seen;
  for (const Axis& axis : axes) {
    for (const Leaf& leaf : axis.keys) {
      const std::string name =
          axis.zip ? "sweep." + axis.name + "." + leaf.key : "sweep." + leaf.key;
      check_varied_key(leaf, "[sweep]");
      check_list(leaf, name);
      if (!seen.insert(leaf.key).second)
        throw check_.error(leaf, "'" + leaf.key + "' is swept twice",
                           "a key belongs to one axis or zip group of [sweep]");
      const Leaf& first = axis.keys.front();
      const std::size_t want = first.node->as_array()->size();
      const std::size_t have = leaf.node->as_array()->size();
      if (have != want)
        check_.fail(*leaf.node,
                    "'" + name + "' has " + std::to_string(have) + " values, but 'sweep." +
                        axis.name + "." + first.key + "' has " + std::to_string(want),
                    "the keys of a zip group vary together, so their lists need the same length");
    }
  }
  return axes;
}

std::vector<TrialTable> Loader::read_trials(const toml::node& node) {
  const auto* list = node.as_array();
  if (list == nullptr)
    check_.fail(node, "'trial' must be an array of tables, found " + std::string(describe(node)),
                kTrialHint);
  if (list->empty()) check_.fail(node, "'trial' is empty: list at least one [[trial]]", kTrialHint);
  // The cap on trials holds for [[trial]] alone too, and is checked before
  // any table is flattened and checked: that work, not the count, is what
  // grows with it.
  if (list->size() > static_cast<std::size_t>(kMaxTrials))
    check_.fail(*list->get(static_cast<std::size_t>(kMaxTrials)),
                "this [[trial]] is number " + std::to_string(kMaxTrials + 1) +
                    ": an experiment may have at most " + std::to_string(kMaxTrials) + " trials",
                "split the study into several experiments");
  std::vector<TrialTable> trials;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const toml::node& item = *list->get(i);
    const auto* table = item.as_table();
    if (table == nullptr)
      check_.fail(item, "'trial[" + std::to_string(i) + "]' must be a table, found " +
                            describe(item), kTrialHint);
    TrialTable trial{&item, {}};
    flatten(*table, "", trial.overrides);
    sort_by_position(trial.overrides);
    std::set<std::string> seen;
    for (const Leaf& leaf : trial.overrides) {
      check_varied_key(leaf, "[[trial]]");
      if (!seen.insert(leaf.key).second)
        throw check_.error(leaf, "'" + leaf.key + "' is set twice in this [[trial]]");
    }
    trials.push_back(std::move(trial));
  }
  return trials;
}

bool shares_key(const Axis& a, const Axis& b) {
  if (a.name == b.name) return true;
  for (const Leaf& x : a.keys)
    for (const Leaf& y : b.keys)
      if (x.key == y.key) return true;
  return false;
}

void Loader::merge(Document& into, Document&& from) {
  // A file that extends another keeps the base's claims and adds its own.
  into.expects.insert(into.expects.end(), from.expects.begin(), from.expects.end());
  for (Section& section : from.sections) {
    auto it = std::find_if(into.sections.begin(), into.sections.end(),
                           [&](const Section& s) { return s.name == section.name; });
    if (it == into.sections.end()) {
      into.sections.push_back(std::move(section));
      continue;
    }
    // Messages about the section as a whole point at the extending file.
    it->key_src = section.key_src;
    it->node = section.node;
    for (Leaf& leaf : section.items) {
      auto item = std::find_if(it->items.begin(), it->items.end(),
                               [&](const Leaf& l) { return l.key == leaf.key; });
      if (item != it->items.end())
        *item = std::move(leaf);
      else
        it->items.push_back(std::move(leaf));
    }
  }
  for (Axis& axis : from.axes) {
    // An axis replaces every base axis it shares a key with, at the first one's place.
    std::size_t first = into.axes.size();
    for (std::size_t i = into.axes.size(); i-- > 0;) {
      if (!shares_key(into.axes[i], axis)) continue;
      if (first != into.axes.size())
        into.axes.erase(into.axes.begin() + static_cast<std::ptrdiff_t>(first));
      first = i;
    }
    if (first == into.axes.size())
      into.axes.push_back(std::move(axis));
    else
      into.axes[first] = std::move(axis);
  }
  if (from.trials) into.trials = std::move(from.trials);
}

// --- --set ---------------------------------------------------------------------------

const char* const kSetHint =
    "the value is read as TOML (50, 0.1, true, [64, 64], \"text\"); a value that is not TOML "
    "and does not start with a quote or a bracket is taken as a string";

Leaf parse_set(const std::string& argument, Sources& out) {
  const std::string shown = "--set " + terminal_safe(argument);  // the raw bytes never reach a terminal
  auto fail = [&](const std::string& message, const std::string& hint) {
    return Error(SourceLocation{shown, 0, 0}, message, hint);
  };
  const auto eq = argument.find('=');
  const std::string key = trim(std::string_view(argument).substr(0, eq));
  if (eq == std::string::npos || key.empty())
    throw fail("expected key=value", "e.g. --set train.steps=50");
  if (!lookup_dotted(key)) {
    auto [message, hint] = unknown_dotted_key(key, "");
    throw fail(message, hint);
  }
  const std::string value = argument.substr(eq + 1);
  // One TOML value, or else (unless it was clearly meant as TOML) a string.
  auto parse = [&](const std::string& toml_value) -> std::optional<toml::table> {
    // What toml++ cannot take safely is not TOML here either (limits.hpp).
    if (find_text_problem("v = " + toml_value)) return std::nullopt;
    try {
      toml::table table = toml::parse("v = " + toml_value, shown);
      if (table.size() == 1 && table.contains("v")) return table;
    } catch (const toml::parse_error&) {
    }
    return std::nullopt;
  };
  // An environment variable's value and a CPU list are text: --set
  // env.OMP_NUM_THREADS=1 means the string "1" (a quoted TOML string is read as one).
  const bool text_only = key.rfind("env.", 0) == 0 || key == "runtime.cpu_affinity";
  std::optional<toml::table> table = parse(value);
  if (table && text_only && !table->get("v")->is_string()) table.reset();
  if (!table && text_only) table = parse(toml_quote(value));
  if (!table) {
    const std::string start = trim(value);
    if (!start.empty() && std::string_view("\"'[{").find(start.front()) != std::string_view::npos) {
      std::string reason = "not one TOML value";
      if (const auto problem = find_text_problem("v = " + value)) {
        reason = problem->message;
      } else {
        try {
          static_cast<void>(toml::parse("v = " + value, shown));
        } catch (const toml::parse_error& e) {
          reason = std::string(e.description());
        }
      }
      throw fail("invalid TOML value: " + reason, kSetHint);
    }
    table = parse(toml_quote(value));
    if (!table) throw fail("invalid TOML value: not valid UTF-8", kSetHint);
  }
  out.trees.push_back(std::make_unique<toml::table>(std::move(*table)));
  const toml::table& tree = *out.trees.back();
  out.origins.add(tree.source().path, Origin{shown, true, "", {}});
  return Leaf{key, nullptr, tree.get("v")};
}

}  // namespace

void apply_override(std::vector<Section>& sections, const Leaf& leaf) {
  const auto dot = leaf.key.find('.');
  const std::string section_name = leaf.key.substr(0, dot);
  Leaf item{leaf.key.substr(dot + 1), leaf.key_src, leaf.node};
  auto it = std::find_if(sections.begin(), sections.end(),
                         [&](const Section& s) { return s.name == section_name; });
  if (it == sections.end()) {
    sections.push_back({section_name, leaf.key_src, leaf.node, {std::move(item)}});
    return;
  }
  auto found = std::find_if(it->items.begin(), it->items.end(),
                            [&](const Leaf& l) { return l.key == item.key; });
  if (found != it->items.end())
    *found = std::move(item);
  else
    it->items.push_back(std::move(item));
}

void load_sources(const fs::path& root, const std::vector<std::string>& set_overrides,
                  Sources& out) {
  const Checker check(root.string(), &out.origins);
  Loader loader(out, check);
  out.doc = loader.load(root, {}, nullptr, {});
  Document& doc = out.doc;

  // Checked after every merge: the base may sweep what the extension sets per trial.
  if (doc.trials)
    for (const TrialTable& trial : *doc.trials)
      for (const Leaf& leaf : trial.overrides)
        for (const Axis& axis : doc.axes)
          for (const Leaf& swept : axis.keys)
            if (swept.key == leaf.key)
              throw check.error(leaf, "'" + leaf.key + "' is set in [[trial]] and swept in [sweep]",
                                "a key varies in one place: list it in [sweep], or set it in "
                                "each [[trial]]");

  for (const std::string& argument : set_overrides) {
    const Leaf leaf = parse_set(argument, out);
    const SourceLocation where{"--set " + terminal_safe(argument), 0, 0};
    for (const Axis& axis : doc.axes)
      for (const Leaf& swept : axis.keys)
        if (swept.key == leaf.key)
          throw Error(where,
                      "'" + leaf.key + "' is swept in [sweep], so this value would never be used",
                      "--set changes the configuration every trial starts from; remove '" +
                          leaf.key + "' from [sweep] to fix its value");
    if (doc.trials && std::all_of(doc.trials->begin(), doc.trials->end(), [&](const TrialTable& t) {
          return std::any_of(t.overrides.begin(), t.overrides.end(),
                             [&](const Leaf& l) { return l.key == leaf.key; });
        }))
      throw Error(where,
                  "every [[trial]] sets '" + leaf.key + "', so this value would never be used",
                  "--set changes the configuration every trial starts from; remove '" + leaf.key +
                      "' from the [[trial]] tables to fix its value");
    apply_override(doc.sections, leaf);
  }
}

}  // namespace runner::experiment::detail
