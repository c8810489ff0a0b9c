// How output names a schedule's trials: by the store's id, which `compare
// trial:N` and `report trial:N` take back, and by the few keys that tell the
// trials apart (a sweep's axes; of a [[trial]] list, only what separates the
// entries), so that a table stays as narrow as its terminal.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "runner/experiment/experiment.hpp"

namespace runner::cli {

/// The fewest of the trials' varied keys, in label order, whose values tell
/// apart every two trials with different labels; empty for fewer than two.
[[nodiscard]] std::vector<std::string> distinguishing_keys(const std::vector<const Trial*>& trials);

/// The value `trial`'s label gives `key` as TOML text (a plain string bare),
/// "-" when it sets none.
[[nodiscard]] std::string key_value(const Trial& trial, const std::string& key);

/// "model.plugin=resnet train.precision=fp32": `trial`'s values of `keys`.
[[nodiscard]] std::string short_label(const Trial& trial, const std::vector<std::string>& keys);

/// A trial in prose: "trial:2" when the store holds it (the selector that
/// names it), else "trial #1 (new)", its position in its file.
[[nodiscard]] std::string trial_reference(const Trial& trial, std::optional<std::int64_t> id);

/// A trial in a table's "trial" column: "2", or "#1 (new)" as above.
[[nodiscard]] std::string trial_cell(const Trial& trial, std::optional<std::int64_t> id);

/// The line under a table of trials that says what its "trial" column holds.
[[nodiscard]] std::string trial_column_note();

/// A table whose rows each belong to a trial: the columns `before`, then
/// "trial", one column per key that tells the trials apart, then `after`.
/// When that is wider than the width it is printed at, the key columns give
/// way to a legend under the table, one line per trial.
class TrialTable {
 public:
  TrialTable(std::vector<std::string> before, std::vector<std::string> after,
             std::vector<std::string> keys)
      : before_(std::move(before)), after_(std::move(after)), keys_(std::move(keys)) {}
  /// A row of `trial`, named `cell` in the trial column (trial_cell()).
  void add(std::vector<std::string> before, const Trial& trial, std::string cell,
           std::vector<std::string> after);
  /// Prints it at most `width` characters wide where the key columns allow.
  void print(std::ostream& out, std::size_t width) const;
  [[nodiscard]] bool empty() const { return rows_.empty(); }

 private:
  struct Row {
    std::vector<std::string> before;
    const Trial* trial = nullptr;
    std::string cell;
    std::vector<std::string> after;
  };
  std::vector<std::string> before_, after_, keys_;
  std::vector<Row> rows_;
};

}  // namespace runner::cli
