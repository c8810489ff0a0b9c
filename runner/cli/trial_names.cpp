#include "trial_names.hpp"

#include <algorithm>
#include <set>

#include "table.hpp"

namespace runner::cli {
namespace {

// How many groups the trials fall into by their values of `keys`.
std::size_t groups(const std::vector<const Trial*>& trials, const std::vector<std::string>& keys) {
  std::set<std::vector<std::string>> seen;
  for (const Trial* t : trials) {
    std::vector<std::string> values;
    for (const auto& key : keys) values.push_back(key_value(*t, key));
    seen.insert(std::move(values));
  }
  return seen.size();
}

}  // namespace

std::vector<std::string> distinguishing_keys(const std::vector<const Trial*>& trials) {
  if (trials.size() < 2) return {};
  std::vector<std::string> all;
  for (const Trial* t : trials)
    for (const auto& [key, value] : t->varied)
      if (std::find(all.begin(), all.end(), key) == all.end()) all.push_back(key);
  const std::size_t target = groups(trials, all);
  // Forward, in label order: a key stays when it splits trials that the keys
  // before it left together (a sweep's axes all do; of a [[trial]] list's
  // keys, only the first of several that change together).
  std::vector<std::string> chosen;
  std::size_t now = 1;
  for (const auto& key : all) {
    if (now == target) break;
    chosen.push_back(key);
    const std::size_t with = groups(trials, chosen);
    if (with > now) now = with;
    else chosen.pop_back();
  }
  // Backward, widest values first: a key that a later one made redundant goes.
  std::vector<std::pair<std::size_t, std::string>> by_width;
  for (const auto& key : chosen) {
    std::size_t width = 0;
    for (const Trial* t : trials) width = std::max(width, key_value(*t, key).size());
    by_width.emplace_back(width, key);
  }
  std::stable_sort(by_width.begin(), by_width.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [width, key] : by_width) {
    std::vector<std::string> without;
    for (const auto& k : chosen)
      if (k != key) without.push_back(k);
    if (groups(trials, without) == target) chosen = std::move(without);
  }
  return chosen;
}

std::string key_value(const Trial& trial, const std::string& key) {
  for (const auto& [k, value] : trial.varied) {
    if (k != key) continue;
    // A plain TOML string reads bare, as --by and --where take it.
    const bool plain = value.size() >= 2 && value.front() == '"' && value.back() == '"' &&
                       value.find_first_of("\\\"", 1) == value.size() - 1;
    return plain ? value.substr(1, value.size() - 2) : value;
  }
  return "-";
}

std::string short_label(const Trial& trial, const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& key : keys) out += (out.empty() ? "" : " ") + key + "=" + key_value(trial, key);
  return out;
}

std::string trial_reference(const Trial& trial, std::optional<std::int64_t> id) {
  return id ? "trial:" + std::to_string(*id) : "trial " + trial_cell(trial, id);
}

std::string trial_cell(const Trial& trial, std::optional<std::int64_t> id) {
  return id ? std::to_string(*id) : "#" + std::to_string(trial.index + 1) + " (new)";
}

std::string trial_column_note() {
  return "trial: the store's id (runner compare trial:N, runner report trial:N)";
}

void TrialTable::add(std::vector<std::string> before, const Trial& trial, std::string cell,
                     std::vector<std::string> after) {
  rows_.push_back({std::move(before), &trial, std::move(cell), std::move(after)});
}

void TrialTable::print(std::ostream& out, std::size_t width) const {
  const auto build = [&](bool with_keys) {
    std::vector<std::string> header = before_;
    header.emplace_back("trial");
    if (with_keys) header.insert(header.end(), keys_.begin(), keys_.end());
    header.insert(header.end(), after_.begin(), after_.end());
    Table table(header);
    for (const Row& row : rows_) {
      std::vector<std::string> cells = row.before;
      cells.push_back(row.cell);
      if (with_keys)
        for (const auto& key : keys_) cells.push_back(key_value(*row.trial, key));
      cells.insert(cells.end(), row.after.begin(), row.after.end());
      table.add(std::move(cells));
    }
    return table;
  };
  const Table wide = build(true);
  if (keys_.empty() || wide.width() <= width) {
    wide.print(out);
    return;
  }
  build(false).print(out);
  std::set<const Trial*> shown;
  for (const Row& row : rows_)
    if (shown.insert(row.trial).second)
      out << "trial " << row.cell << ": " << terminal_safe(short_label(*row.trial, keys_)) << "\n";
}

}  // namespace runner::cli
