// Reads the compare commands an experiment file's comments print and says,
// before anything runs, whether the planned repetitions can decide each.
// The sides are formed from the prepared trials by the rule `compare --by`
// applies to the stored ones (selection.hpp's plan_split), so what the plan
// promises is what compare will find.
#include "implied_comparisons.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "selection.hpp"
#include "runner/common/error.hpp"
#include "runner/common/strings.hpp"
#include "runner/store/statistics.hpp"

namespace runner::cli {

namespace {

constexpr double kAlpha = 0.05;

// The comment text of a line ("#   runner compare ..." -> "runner compare
// ..."), or nothing for a line that is not a comment.
std::optional<std::string> comment_of(const std::string& line) {
  const auto start = line.find_first_not_of(" \t");
  if (start == std::string::npos || line[start] != '#') return std::nullopt;
  return trim(line.substr(start + 1));
}

// Whitespace-separated words, double quotes grouping.
std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool quoted = false, any = false;
  for (char c : text) {
    if (c == '"') {
      quoted = !quoted;
      any = true;
    } else if (!quoted && (c == ' ' || c == '\t')) {
      if (any) words.push_back(word);
      word.clear();
      any = false;
    } else {
      word += c;
      any = true;
    }
  }
  if (any) words.push_back(word);
  return words;
}

// The comparison a command's words give, or nothing when it is not a
// `runner compare experiment:NAME --by KEY` command.
std::optional<ImpliedComparison> comparison_of(const std::vector<std::string>& words) {
  if (words.size() < 3 || words[0] != "runner" || words[1] != "compare") return std::nullopt;
  ImpliedComparison c;
  for (std::size_t i = 2; i < words.size(); ++i) {
    const std::string& w = words[i];
    const bool has_value = i + 1 < words.size();
    if (w.rfind("experiment:", 0) == 0 && c.experiment.empty()) {
      c.experiment = w.substr(11);
    } else if (w == "--by" && has_value) {
      c.by = words[++i];
    } else if (w == "--baseline" && has_value) {
      c.baseline = words[++i];
    } else if (w == "--versus" && has_value) {
      c.versus = words[++i];
    } else if (w == "--where" && has_value) {
      c.where.push_back(words[++i]);
    } else if (w == "--pairs") {
      c.pairs = true;
    }
  }
  if (c.experiment.empty() || c.by.empty()) return std::nullopt;
  return c;
}

std::string format_p(double p) {
  char text[32];
  std::snprintf(text, sizeof text, "%#.2g", p);
  return text;
}

// "4 runs a side" or "8 and 4 runs a side".
std::string runs_a_side(std::size_t n_a, std::size_t n_b) {
  return (n_a == n_b ? std::to_string(n_a) : std::to_string(n_a) + " and " + std::to_string(n_b)) +
         (n_a == 1 && n_b == 1 ? " run a side" : " runs a side");
}

// What `runs` repetitions of two single trials can decide.
std::string repetitions_verdict(std::size_t n_a, std::size_t n_b) {
  const double smallest = store::smallest_two_sided_p(n_a, n_b);
  if (smallest < kAlpha)
    return runs_a_side(n_a, n_b) + " can reach p < 0.05 (smallest two-sided p " +
           format_p(smallest) + ")";
  const std::size_t least = store::least_runs_per_side(kAlpha);
  return runs_a_side(n_a, n_b) + " cannot reach p < 0.05 (smallest two-sided p " +
         format_p(smallest) + "); " + std::to_string(least) + " is the least, " +
         std::to_string(std::max(least, store::kMinReliableRepetitions)) + "+ recommended";
}

}  // namespace

std::vector<ImpliedComparison> implied_comparisons(const std::string& text) {
  std::vector<ImpliedComparison> found;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  std::string pending;  // a command continued by a trailing backslash
  int pending_line = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::optional<std::string> comment = comment_of(line);
    if (!comment) {
      pending.clear();
      continue;
    }
    std::string part = *comment;
    if (pending.empty()) {
      const auto at = part.find("runner compare ");
      if (at == std::string::npos) continue;
      part = part.substr(at);
      pending_line = number;
    }
    // A comment after the command ("--versus fused   # loop (A) vs fused").
    if (const auto hash = part.find(" #"); hash != std::string::npos) part = part.substr(0, hash);
    part = trim(part);
    const bool continued = !part.empty() && part.back() == '\\';
    if (continued) part = trim(part.substr(0, part.size() - 1));
    pending += (pending.empty() ? "" : " ") + part;
    if (continued) continue;
    if (auto c = comparison_of(words_of(pending))) {
      c->line = pending_line;
      c->command = pending;
      found.push_back(std::move(*c));
    }
    pending.clear();
  }
  return found;
}

std::string decidability(const ImpliedComparison& comparison, const PreparedExperiment& prepared) {
  // The planned trials as the store will hold them, numbered in expansion
  // order, split by the rule compare applies (plan_split).
  std::vector<store::TrialInfo> trials;
  for (const Trial& t : prepared.trials)
    trials.push_back({t.index + 1, t.experiment.resolved_json(), t.label, ""});
  const SplitRequest request{"experiment:" + comparison.experiment, comparison.by,
                             comparison.baseline, comparison.versus, comparison.where,
                             comparison.pairs, true};
  Split split;
  try {
    split = plan_split(comparison.experiment, trials, request);
  } catch (const Error& e) {
    return std::string("compare would refuse it: ") + e.what() +
           (e.hint().empty() ? "" : "; " + e.hint());
  }
  const auto repeats = static_cast<std::size_t>(prepared.first().repeats);
  const std::string sides = split.side_a + " vs " + split.side_b;
  if (!comparison.pairs || split.pairs.size() == 1) {
    const SidePair& pair = split.pairs.front();
    return sides + ": " +
           repetitions_verdict(pair.trials_a.size() * repeats, pair.trials_b.size() * repeats);
  }
  // Pair by pair: the pair whose runs reach the least decides what every pair can.
  std::size_t n_a = 0, n_b = 0;
  for (const SidePair& pair : split.pairs) {
    const std::size_t a = pair.trials_a.size() * repeats, b = pair.trials_b.size() * repeats;
    if (n_a == 0 || store::smallest_two_sided_p(a, b) > store::smallest_two_sided_p(n_a, n_b)) {
      n_a = a;
      n_b = b;
    }
  }
  std::string line = sides + ", " + std::to_string(split.pairs.size()) + " pairs: " +
                     repetitions_verdict(n_a, n_b);
  if (!split.unmatched.empty())
    line += "; " + std::to_string(split.unmatched.size()) +
            " trial(s) with no like trial on the other side";
  return line;
}

std::vector<std::string> decidability_lines(const Sweep& sweep) {
  std::vector<std::string> lines;
  for (const PreparedExperiment* p : sweep) {
    const std::string prefix = sweep.size() > 1 ? p->first().name + ": " : std::string();
    const auto n = static_cast<std::size_t>(p->first().repeats);
    if (p->trials.size() >= 2) {
      const std::size_t least = store::least_runs_per_side(kAlpha);
      const double smallest = store::smallest_two_sided_p(n, n);
      lines.push_back(prefix + std::to_string(n) + (n == 1 ? " repetition" : " repetitions") +
                      " a trial: a comparison of two trials " +
                      (smallest < kAlpha
                           ? "can reach p < 0.05 (smallest two-sided p " + format_p(smallest) + ")"
                           : "cannot reach p < 0.05 (" + std::to_string(least) +
                                 " is the least, " +
                                 std::to_string(std::max(least, store::kMinReliableRepetitions)) +
                                 "+ recommended)"));
    }
    // The comparisons of the experiment's own header; others name another file's.
    const Experiment& first = p->first();
    for (const ImpliedComparison& c : implied_comparisons(first.source->text)) {
      if (c.experiment != first.name) continue;
      lines.push_back(first.source->path.string() + ":" + std::to_string(c.line) + ": " +
                      c.command);
      lines.push_back("  " + decidability(c, *p));
    }
  }
  return lines;
}

}  // namespace runner::cli
