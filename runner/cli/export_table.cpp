// The tables of `runner export` and their text formats (see export_table.hpp).
#include "export_table.hpp"

#include <charconv>
#include <cmath>
#include <map>
#include <ostream>
#include <set>

#include <nlohmann/json.hpp>

#include "selection.hpp"
#include "runner/common/error.hpp"
#include "runner/common/json.hpp"
#include "runner/common/run_kind.hpp"
#include "runner/store/phases.hpp"

namespace runner::cli {
namespace {

Cell real(double value) { return std::isnan(value) ? Cell{} : Cell{value}; }
Cell text_or_null(const std::string& value) { return value.empty() ? Cell{} : Cell{value}; }

// The typed leaves of a configuration under the keys flatten_config() gives
// them (a plugin's options under their section), so a column can be typed.
void typed_leaves(const nlohmann::json& value, const std::string& prefix,
                  std::map<std::string, const nlohmann::json*>& out) {
  if (value.is_object()) {
    for (const auto& [key, item] : value.items())
      typed_leaves(item,
                   key == "options" && !prefix.empty() ? prefix
                                                       : (prefix.empty() ? key : prefix + "." + key),
                   out);
    return;
  }
  out[prefix] = &value;
}

// What the values of one configuration key across the runs can all be read as.
ColumnType common_type(const std::vector<const nlohmann::json*>& values) {
  bool all_int = true, all_number = true, all_bool = true;
  for (const nlohmann::json* v : values) {
    if (v == nullptr || v->is_null()) continue;
    all_int = all_int && v->is_number_integer();
    all_number = all_number && v->is_number();
    all_bool = all_bool && v->is_boolean();
  }
  if (all_int) return ColumnType::int64;
  if (all_number) return ColumnType::float64;
  if (all_bool) return ColumnType::boolean;
  return ColumnType::text;
}

Cell config_cell(const nlohmann::json* value, const std::string& rendered, ColumnType type) {
  if (value == nullptr || value->is_null()) return {};
  switch (type) {
    case ColumnType::int64: return value->get<std::int64_t>();
    case ColumnType::float64: return real(value->get<double>());
    case ColumnType::boolean: return value->get<bool>();
    case ColumnType::text: return rendered;
  }
  return {};
}

// The name of a configuration key's column: its dotted key ("optimizer.lr");
// a top-level key ("seed", "kind") would meet the fixed columns, so it is
// "config.seed". Fixed columns have no dot.
std::string config_column(const std::string& key) {
  return key.find('.') == std::string::npos ? "config." + key : key;
}

// `text` with every byte sequence that is not UTF-8 replaced by U+FFFD, so
// CSV readers that decode UTF-8 (Python's, pandas') accept any stored text.
std::string valid_utf8(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = byte(i);
    std::size_t length = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = length != 0 && i + length <= text.size();
    for (std::size_t k = 1; ok && k < length; ++k) ok = (byte(i + k) & 0xC0) == 0x80;
    if (ok && length > 1) {
      // Overlong forms, surrogates and code points beyond U+10FFFF are not UTF-8.
      std::uint32_t cp = c & (0xFF >> (length + 1));
      for (std::size_t k = 1; k < length; ++k) cp = (cp << 6) | (byte(i + k) & 0x3F);
      const std::uint32_t min = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000;
      ok = cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    }
    if (ok) {
      out.append(text, i, length);
      i += length;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

std::string csv_field(const std::string& text) {
  const std::string clean = valid_utf8(text);
  if (clean.find_first_of(",\"\r\n") == std::string::npos) return clean;
  std::string out = "\"";
  for (char c : clean) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string csv_cell(const Cell& cell) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) return "";
        else if constexpr (std::is_same_v<T, std::int64_t>) return std::to_string(v);
        else if constexpr (std::is_same_v<T, double>) return format_float(v);
        else if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
        else return csv_field(v);
      },
      cell);
}

// JSON has no infinities: records (for people and pandas) write null, the
// converter's lines write Infinity, which pyarrow's JSON reader accepts.
enum class NonFinite { null, infinity };

std::string json_cell(const Cell& cell, NonFinite non_finite) {
  return std::visit(
      [&](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) return "null";
        else if constexpr (std::is_same_v<T, std::int64_t>) return std::to_string(v);
        else if constexpr (std::is_same_v<T, double>) {
          if (std::isfinite(v)) return format_float(v);
          if (non_finite == NonFinite::null) return "null";
          return v > 0 ? "Infinity" : "-Infinity";
        } else if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
        else return json_quote(v);
      },
      cell);
}

// One row as a JSON object with every column; `keys` are the quoted names and a colon.
void write_object(std::ostream& out, const std::vector<std::string>& keys,
                  const std::vector<Cell>& fixed, const std::vector<Cell>& config,
                  NonFinite non_finite) {
  out << "{";
  std::size_t k = 0;
  for (const auto* cells : {&fixed, &config})
    for (const Cell& cell : *cells) {
      out << (k ? "," : "") << keys[k] << json_cell(cell, non_finite);
      ++k;
    }
  out << "}";
}

std::vector<std::string> json_keys(const ExportTable& table) {
  std::vector<std::string> keys;
  for (const auto& column : table.columns()) keys.push_back(json_quote(column.name) + ":");
  return keys;
}

}  // namespace

std::optional<ExportWhat> parse_export_what(std::string_view text) {
  if (text == "runs") return ExportWhat::runs;
  if (text == "samples") return ExportWhat::samples;
  if (text == "summaries") return ExportWhat::summaries;
  if (text == "metrics") return ExportWhat::metrics;
  return std::nullopt;
}

const char* to_string(ColumnType type) {
  switch (type) {
    case ColumnType::int64: return "int64";
    case ColumnType::float64: return "float64";
    case ColumnType::text: return "string";
    case ColumnType::boolean: return "bool";
  }
  return "?";
}

std::string format_float(double value) {
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string text(buffer, ec == std::errc() ? end : buffer);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

std::vector<ExportColumn> fixed_columns(ExportWhat what) {
  using T = ColumnType;
  switch (what) {
    case ExportWhat::runs:
      return {{"run_id", T::int64},         {"uuid", T::text},
              {"experiment", T::text},      {"trial_id", T::int64},
              {"config_hash", T::text},     {"label", T::text},
              {"repeat_index", T::int64},   {"rank", T::int64},
              {"kind", T::text},            {"status", T::text},
              {"error", T::text},           {"started_at", T::text},
              {"finished_at", T::text},     {"duration_s", T::float64},
              {"seed", T::int64},           {"fingerprint_hash", T::text},
              {"load_average", T::float64}, {"headline_metric", T::text},
              {"headline_p50_ns", T::float64}, {"headline_p90_ns", T::float64},
              {"samples_per_s", T::float64}, {"tokens_per_s", T::float64},
              {"loss_final", T::float64}};
    case ExportWhat::samples: {
      std::vector<ExportColumn> columns = {
          {"run_id", T::int64}, {"step", T::int64}, {"warmup", T::int64},
          {"profiled", T::int64}, {"wall_ns", T::float64}};
      for (const auto& phase : store::kPhases) columns.push_back({phase.column, T::float64});
      for (const char* name : {"loss", "lr", "grad_norm", "loss_scale"})
        columns.push_back({name, T::float64});
      columns.push_back({"skipped", T::int64});
      columns.push_back({"rank_max_ns", T::float64});
      columns.push_back({"rank_median_ns", T::float64});
      return columns;
    }
    case ExportWhat::summaries: {
      std::vector<ExportColumn> columns = {
          {"run_id", T::int64}, {"metric", T::text}, {"unit", T::text}, {"n", T::int64}};
      for (const char* name : {"mean", "stddev", "min", "p5", "p50", "p90", "p95", "p99", "max", "cv"})
        columns.push_back({name, T::float64});
      return columns;
    }
    case ExportWhat::metrics:
      return {{"run_id", T::int64}, {"name", T::text}, {"value", T::float64}, {"unit", T::text}};
  }
  return {};
}

ExportTable::ExportTable(const store::Store& db, std::vector<store::RunDetail> runs, ExportWhat what)
    : db_(db), runs_(std::move(runs)), what_(what), columns_(fixed_columns(what)) {
  // The union of the configuration keys over the runs, sorted, each typed by
  // what all its values can be read as.
  std::vector<std::map<std::string, std::string>> rendered;
  std::vector<std::map<std::string, const nlohmann::json*>> typed;
  std::vector<nlohmann::json> configs;
  configs.reserve(runs_.size());
  std::set<std::string> keys;
  for (const auto& run : runs_) {
    configs.push_back(parse_json(run.config_json));
    auto& flat = rendered.emplace_back();
    for (auto& [key, value] : flatten_config(configs.back())) {
      keys.insert(key);
      flat.emplace(key, std::move(value));
    }
    typed_leaves(configs.back(), "", typed.emplace_back());
  }
  // Columns in the order of their names, so config.* stay together.
  std::map<std::string, std::string> key_of_column;
  std::set<std::string> names;
  for (const auto& column : columns_) names.insert(column.name);
  for (const std::string& key : keys) {
    const std::string name = config_column(key);
    if (!names.insert(name).second)
      throw Error("cannot export the configuration key '" + key + "': its column '" + name +
                      "' is already taken",
                  {}, ErrorKind::run);
    key_of_column.emplace(name, key);
  }
  std::vector<std::string> ordered;
  for (const auto& [name, key] : key_of_column) ordered.push_back(key);
  std::vector<ColumnType> types;
  for (const std::string& key : ordered) {
    std::vector<const nlohmann::json*> values;
    for (const auto& leaves : typed) {
      const auto it = leaves.find(key);
      values.push_back(it == leaves.end() ? nullptr : it->second);
    }
    columns_.push_back({config_column(key), common_type(values)});
    types.push_back(columns_.back().type);
  }
  // Then the runs' labels, label.KEY (text; NULL where a run has none).
  std::set<std::string> label_keys;
  for (const auto& run : runs_)
    for (const auto& [key, value] : run.labels) label_keys.insert(key);
  for (const std::string& key : label_keys) {
    if (!names.insert("label." + key).second)
      throw Error("cannot export the label '" + key + "': its column 'label." + key +
                      "' is already taken",
                  {}, ErrorKind::run);
    columns_.push_back({"label." + key, ColumnType::text});
  }
  for (std::size_t r = 0; r < runs_.size(); ++r) {
    auto& cells = config_.emplace_back();
    std::size_t k = 0;
    for (const std::string& key : ordered) {
      const auto value = typed[r].find(key);
      const auto text = rendered[r].find(key);
      if (value == typed[r].end() || text == rendered[r].end())
        cells.emplace_back();
      else
        cells.push_back(config_cell(value->second, text->second, types[k]));
      ++k;
    }
    for (const std::string& key : label_keys) {
      const auto it = runs_[r].labels.find(key);
      cells.push_back(it == runs_[r].labels.end() ? Cell{} : Cell{it->second});
    }
  }
}

std::size_t ExportTable::for_each_row(const RowSink& sink) const {
  std::size_t rows = 0;
  std::vector<Cell> fixed;
  const auto emit = [&](std::size_t run) {
    sink(fixed, config_[run]);
    fixed.clear();
    ++rows;
  };
  for (std::size_t r = 0; r < runs_.size(); ++r) {
    const store::RunDetail& run = runs_[r];
    const Cell run_id = run.row.id;
    switch (what_) {
      case ExportWhat::runs: {
        const auto metric = [&](const std::string& name) -> Cell {
          for (const auto& m : run.metrics)
            if (m.name == name) return real(m.value);
          return {};
        };
        const char* headline = headline_metric(run.row.kind);
        Cell p50, p90;
        for (const auto& s : run.summaries)
          if (s.metric == headline) {
            p50 = real(s.p50);
            p90 = real(s.p90);
          }
        Cell duration;
        const auto started = epoch_seconds(run.row.started_at);
        const auto finished = epoch_seconds(run.row.finished_at);
        if (started && finished) duration = *finished - *started;
        fixed = {run_id,
                 run.uuid,
                 run.row.experiment,
                 run.row.trial_id,
                 run.config_hash,
                 text_or_null(run.row.label),
                 run.row.repeat_index,
                 run.rank,
                 std::string(to_string(run.row.kind)),
                 std::string(to_string(run.row.status)),
                 text_or_null(run.error),
                 run.row.started_at,
                 text_or_null(run.row.finished_at),
                 duration,
                 run.seed,
                 text_or_null(run.fingerprint_hash),
                 real(run.load_average),
                 std::string(headline),
                 p50,
                 p90,
                 metric("samples_per_s"),
                 metric("tokens_per_s"),
                 metric("loss_final")};
        emit(r);
        break;
      }
      case ExportWhat::samples:
        // Negative times and a negative skipped flag mean "does not apply".
        for (const store::Sample& s : db_.samples(run.row.id)) {
          const auto ns = [](double v) { return v < 0 ? Cell{} : real(v); };
          fixed = {run_id, s.step, std::int64_t{s.warmup}, std::int64_t{s.profiled}, ns(s.wall_ns)};
          for (double phase : s.phase_ns) fixed.push_back(ns(phase));
          fixed.push_back(real(s.loss));
          fixed.push_back(real(s.lr));
          fixed.push_back(real(s.grad_norm));
          fixed.push_back(real(s.loss_scale));
          fixed.push_back(s.skipped < 0 ? Cell{} : Cell{std::int64_t{s.skipped}});
          fixed.push_back(ns(s.rank_max_ns));
          fixed.push_back(ns(s.rank_median_ns));
          emit(r);
        }
        break;
      case ExportWhat::summaries:
        for (const store::Summary& s : run.summaries) {
          fixed = {run_id, s.metric, s.unit, s.n, real(s.mean), real(s.stddev), real(s.min),
                   real(s.p5), real(s.p50), real(s.p90), real(s.p95), real(s.p99), real(s.max),
                   real(s.cv)};
          emit(r);
        }
        break;
      case ExportWhat::metrics:
        for (const store::Metric& m : run.metrics) {
          fixed = {run_id, m.name, real(m.value), m.unit};
          emit(r);
        }
        break;
    }
  }
  return rows;
}

std::size_t write_csv(const ExportTable& table, std::ostream& out) {
  const auto& columns = table.columns();
  for (std::size_t k = 0; k < columns.size(); ++k)
    out << (k ? "," : "") << csv_field(columns[k].name);
  out << "\r\n";
  return table.for_each_row([&](const std::vector<Cell>& fixed, const std::vector<Cell>& config) {
    bool first = true;
    for (const auto* cells : {&fixed, &config})
      for (const Cell& cell : *cells) {
        out << (first ? "" : ",") << csv_cell(cell);
        first = false;
      }
    out << "\r\n";
  });
}

std::size_t write_json(const ExportTable& table, std::ostream& out) {
  const std::vector<std::string> keys = json_keys(table);
  out << "[";
  bool first = true;
  const std::size_t rows = table.for_each_row([&](const auto& fixed, const auto& config) {
    out << (first ? "\n" : ",\n");
    first = false;
    write_object(out, keys, fixed, config, NonFinite::null);
  });
  out << (rows ? "\n]\n" : "]\n");
  return rows;
}

std::size_t write_json_lines(const ExportTable& table, std::ostream& out) {
  const std::vector<std::string> keys = json_keys(table);
  return table.for_each_row([&](const auto& fixed, const auto& config) {
    write_object(out, keys, fixed, config, NonFinite::infinity);
    out << "\n";
  });
}

}  // namespace runner::cli
