// The tables of `runner export` (docs/export.md): one row per run, step,
// summary or metric of the selected runs, the run's columns first, then one
// column per configuration key, then one per run label (label.KEY); written as CSV (RFC 4180), JSON records, or
// JSON Lines for the parquet converter (export_parquet.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runner/store/store.hpp"

namespace runner::cli {

/// What one row of an export is.
enum class ExportWhat { runs, samples, summaries, metrics };

/// "runs" | "samples" | "summaries" | "metrics", or nullopt.
[[nodiscard]] std::optional<ExportWhat> parse_export_what(std::string_view text);

/// A column's type, as parquet stores it (and as CSV and JSON spell it).
enum class ColumnType { int64, float64, text, boolean };

/// "int64" | "float64" | "string" | "bool": the converter's and the docs' names.
[[nodiscard]] const char* to_string(ColumnType type);

/// One column of an export.
struct ExportColumn {
  std::string name;
  ColumnType type = ColumnType::text;
};

/// One value: NULL (monostate), an integer, a float (never NaN: NaN is NULL),
/// text or a boolean, as the column's type says.
using Cell = std::variant<std::monostate, std::int64_t, double, std::string, bool>;

/// The rows of one export of some runs. Rows are produced on demand
/// (the samples are read from the store one run at a time), so a large
/// export is never held in memory whole.
class ExportTable {
 public:
  /// Reads what it needs about `runs` from `db` (which must outlive the table).
  ExportTable(const store::Store& db, std::vector<store::RunDetail> runs, ExportWhat what);

  /// The fixed columns of `what`, then the configuration columns, then the
  /// label columns (label.KEY).
  [[nodiscard]] const std::vector<ExportColumn>& columns() const { return columns_; }

  /// Receives a row as its fixed cells and its configuration and label cells (the run's).
  using RowSink = std::function<void(const std::vector<Cell>& fixed, const std::vector<Cell>& config)>;
  /// Calls `sink` with every row, in run order (selector order), then step,
  /// metric or name order; returns the number of rows.
  std::size_t for_each_row(const RowSink& sink) const;

 private:
  const store::Store& db_;
  std::vector<store::RunDetail> runs_;
  ExportWhat what_;
  std::vector<ExportColumn> columns_;
  std::vector<std::vector<Cell>> config_;  ///< per run, one cell per configuration and label column
};

/// The fixed columns of `what`, before the configuration columns.
[[nodiscard]] std::vector<ExportColumn> fixed_columns(ExportWhat what);

/// CSV (RFC 4180: CRLF, fields with a comma, quote, CR or LF quoted): a
/// header, then one line per row; NULL is an empty field. Returns the rows.
std::size_t write_csv(const ExportTable& table, std::ostream& out);

/// JSON: an array of objects, one per row, every column in every object
/// (NULL and non-finite floats as null). Returns the rows.
std::size_t write_json(const ExportTable& table, std::ostream& out);

/// JSON Lines, one object per row, floats as they are (Infinity, -Infinity):
/// what the parquet converter reads with its typed schema. Returns the rows.
std::size_t write_json_lines(const ExportTable& table, std::ostream& out);

/// The shortest text that reads back as exactly `value`, always with a '.'
/// or an exponent ("1.0", "0.1", "1e-05"), "inf" / "-inf" when infinite.
[[nodiscard]] std::string format_float(double value);

}  // namespace runner::cli
