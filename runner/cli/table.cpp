#include "table.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace runner::cli {

namespace {
bool looks_numeric(const std::string& s) {
  return !s.empty() && (std::isdigit(static_cast<unsigned char>(s.front())) || s.front() == '-' ||
                        s.front() == '.');
}
}  // namespace

std::vector<std::size_t> Table::column_widths() const {
  std::vector<std::size_t> width(header_.size(), 0);
  for (std::size_t c = 0; c < header_.size(); ++c) width[c] = header_[c].size();
  for (const auto& row : rows_)
    for (std::size_t c = 0; c < row.size() && c < width.size(); ++c)
      width[c] = std::max(width[c], row[c].size());
  return width;
}

std::size_t Table::width() const {
  const std::vector<std::size_t> widths = column_widths();
  std::size_t total = widths.empty() ? 0 : 2 * (widths.size() - 1);
  for (std::size_t w : widths) total += w;
  return total;
}

std::size_t terminal_width() {
  if (const char* columns = std::getenv("COLUMNS"); columns != nullptr) {
    char* end = nullptr;
    const long value = std::strtol(columns, &end, 10);
    if (end != columns && *end == '\0' && value > 0) return static_cast<std::size_t>(value);
  }
  winsize size{};
  if (::isatty(STDOUT_FILENO) == 1 && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 &&
      size.ws_col > 0)
    return size.ws_col;
  return 100;
}

void Table::print(std::ostream& out) const {
  const std::vector<std::size_t> width = column_widths();
  auto line = [&](const std::vector<std::string>& cells, bool header) {
    std::string text;
    for (std::size_t c = 0; c < width.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      const std::string pad(width[c] - std::min(width[c], cell.size()), ' ');
      if (!header && looks_numeric(cell)) text += pad + cell;
      else text += cell + pad;
      if (c + 1 < width.size()) text += "  ";
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out << text << "\n";
  };
  line(header_, true);
  for (const auto& row : rows_) line(row, false);
}

std::string format_ns(double ns) {
  if (std::isnan(ns) || ns < 0) return "-";
  char buffer[32];
  if (ns < 1e3) std::snprintf(buffer, sizeof buffer, "%.0f ns", ns);
  else if (ns < 1e6) std::snprintf(buffer, sizeof buffer, "%.3g us", ns / 1e3);
  else if (ns < 1e9) std::snprintf(buffer, sizeof buffer, "%.3g ms", ns / 1e6);
  else std::snprintf(buffer, sizeof buffer, "%.3g s", ns / 1e9);
  return buffer;
}

std::string fixed(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

std::string format_number(double value) {
  if (std::isnan(value)) return "-";
  char buffer[32];
  if (std::fabs(value) >= 1e5 || (value != 0 && std::fabs(value) < 1e-3))
    std::snprintf(buffer, sizeof buffer, "%.3g", value);
  else if (std::fabs(value) >= 100)
    std::snprintf(buffer, sizeof buffer, "%.0f", value);
  else
    std::snprintf(buffer, sizeof buffer, "%.3g", value);
  return buffer;
}

}  // namespace runner::cli
