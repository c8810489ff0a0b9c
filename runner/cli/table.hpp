// Plain text tables and human units for terminal output.
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "runner/common/strings.hpp"  // terminal_safe

namespace runner::cli {

/// A table printed with aligned columns; numeric-looking cells align right.
/// Cells are made terminal_safe().
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) {
    for (auto& cell : row) cell = terminal_safe(cell);
    rows_.push_back(std::move(row));
  }
  void print(std::ostream& out) const;
  [[nodiscard]] bool empty() const { return rows_.empty(); }
  /// The characters of its widest printed line.
  [[nodiscard]] std::size_t width() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;

  [[nodiscard]] std::vector<std::size_t> column_widths() const;
};

/// The width tables should fit: $COLUMNS when set, else the terminal's on
/// standard output, else 100 (a pipe, a file).
[[nodiscard]] std::size_t terminal_width();

/// A duration in ns as "812 ns", "3.41 us", "12.0 ms", "1.50 s".
[[nodiscard]] std::string format_ns(double ns);
/// `value` with `digits` digits after the point ("1.157").
[[nodiscard]] std::string fixed(double value, int digits);
/// A number with 3 significant digits, or "-" when NaN.
[[nodiscard]] std::string format_number(double value);

}  // namespace runner::cli
