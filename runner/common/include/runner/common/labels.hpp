// Run labels: free KEY=VALUE pairs a run carries (the commit under test, the
// branch, the build), shown and selected on but never part of a trial's
// identity. The rules every way in shares: `--label`, `[experiment] labels`
// and the store itself. See docs/cli.md, "Labels".
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace runner {

/// A run's labels, by key.
using Labels = std::map<std::string, std::string>;

/// The longest label key, in bytes.
inline constexpr std::size_t kMaxLabelKeyBytes = 64;
/// The longest label value, in bytes.
inline constexpr std::size_t kMaxLabelValueBytes = 256;
/// The most labels one run carries.
inline constexpr std::size_t kMaxLabels = 32;

/// What is wrong with a label key, as the end of a sentence about it ("must
/// start with a letter ..."); empty when it is valid.
[[nodiscard]] std::string label_key_problem(std::string_view key);
/// What is wrong with a label value, as the end of a sentence about it;
/// empty when it is valid.
[[nodiscard]] std::string label_value_problem(std::string_view value);
/// The first problem of a whole set of labels ("label key 'x y' must ...",
/// "33 labels, at most 32"); empty when every key and value is valid.
[[nodiscard]] std::string labels_problem(const Labels& labels);

/// One `--label KEY=VALUE` argument split and checked. Throws runner::Error
/// (input) naming the argument and what is wrong.
[[nodiscard]] std::pair<std::string, std::string> parse_label_argument(std::string_view argument);

/// Labels as one line, "branch=main commit=abc123" (by key), terminal-safe.
[[nodiscard]] std::string labels_text(const Labels& labels);

/// The environment variables `commit` is read from when no label gives it,
/// first set (and non-empty) wins.
inline constexpr const char* kCommitVariables[] = {"RUNNER_LABEL_COMMIT", "GITHUB_SHA",
                                                   "CI_COMMIT_SHA"};

/// Reads one environment variable (nullptr: unset).
using EnvLookup = std::function<const char*(const char*)>;

/// The labels a run records: the experiment file's, the command line's over
/// them for the same key, then `commit` from kCommitVariables when neither
/// gave one. Throws runner::Error (input) when the variable's value is not a
/// valid label value, naming the variable.
[[nodiscard]] Labels resolve_labels(const Labels& file, const Labels& command_line,
                                    const EnvLookup& getenv);

}  // namespace runner
