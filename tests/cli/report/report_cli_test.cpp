// runner report end to end: one database with finished, failed and
// interrupted runs, a sweep, a kernel experiment and a comparison; the page
// holds what the store holds, loads nothing, and renders in headless Chromium
// without an error or warning (a screenshot of each page is saved under the
// build folder, report-screenshots/), and what Chromium drew reads as it
// should (measured by page_probe.js in a copy of the page: the step-time
// boxes, the legends, the tables' widths, the time axes, the comparison's
// configuration differences, the forest plot's metrics without spread); bad
// input leaves nothing behind.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <tuple>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "support/cli_harness.hpp"

namespace {

namespace fs = std::filesystem;
using runner::test::query_int;
using runner::test::query_text;
using runner::test::Result;
using runner::test::slurp;

// The Chromium of the machine (scripts/dev installs Debian's), or empty.
std::string chromium() {
  for (const char* name : {"chromium", "chromium-headless-shell", "chromium-browser"}) {
    for (const char* dir : {"/usr/bin", "/usr/local/bin", "/snap/bin"}) {
      const fs::path candidate = fs::path(dir) / name;
      if (fs::exists(candidate)) return candidate.string();
    }
  }
  return {};
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The page without the contents of its <script> elements (the chart
// library's code mentions elements it can make).
std::string markup_of(const std::string& html) {
  std::string out;
  std::size_t at = 0;
  while (true) {
    const std::size_t open = html.find("<script", at);
    if (open == std::string::npos) break;
    const std::size_t body = html.find('>', open);
    const std::size_t close = html.find("</script>", body);
    if (body == std::string::npos || close == std::string::npos) break;
    out += html.substr(at, body + 1 - at);
    at = close;
  }
  return out + html.substr(at);
}

// The database every test reads, made once: a sweep of two learning rates x 2
// repetitions, a run that fails at step 2, a run stopped by Ctrl-C, and a
// kernel experiment.
class ReportCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new runner::test::TempDir("runner-report-cli-");
    db_ = tmp_->path() / "runs.db";
    runner::test::record_runs_of_every_status(tmp_->path(), db_, 2);
    if (::testing::Test::HasFatalFailure()) return;
    // And a profiled run ([profile], docs/profiling.md).
    const fs::path plugins = runner::test::test_plugins("good");
    const fs::path profiled = tmp_->write(
        "profiled.toml", runner::test::tiny_experiment(
                             {.optimizer = "lr = 0.05", .steps = 10, .warmup = 2,
                              .rest = "[experiment]\nname = \"profiled\"\n\n[profile]\nsteps = 3\n"}));
    const Result traced =
        runner::test::run_runner("run " + profiled.string(), tmp_->path(), {db_, plugins});
    ASSERT_EQ(traced.code, 0) << traced.err;
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }

  Result report(const std::string& args, const fs::path& db = {}) const {
    return runner::test::run_runner("report " + args, dir_.path(), {db.empty() ? db_ : db, {}});
  }
  // Writes a report of `selectors` to OUT in this test's folder; returns the page.
  std::string page(const std::string& selectors, const std::string& name,
                   const fs::path& db = {}) const {
    const fs::path out = dir_.path() / name;
    const Result r = report(selectors + " --out " + out.string(), db);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("wrote " + out.string()), std::string::npos) << r.out;
    return slurp(out);
  }
  std::string status_of(const std::string& experiment) const {
    return query_text(db_, "SELECT r.status FROM runs r JOIN trials t ON t.id = r.trial_id JOIN "
                           "experiments e ON e.id = t.experiment_id WHERE e.name = '" +
                               experiment + "'");
  }
  // A copy of the database in this test's folder, changed by `sql`.
  fs::path changed_copy(const std::string& name, const std::string& sql) const {
    const fs::path copy = dir_.path() / name;
    fs::copy_file(db_, copy);
    sqlite3* handle = nullptr;
    EXPECT_EQ(sqlite3_open(copy.c_str(), &handle), SQLITE_OK);
    char* message = nullptr;
    EXPECT_EQ(sqlite3_exec(handle, sql.c_str(), nullptr, nullptr, &message), SQLITE_OK)
        << (message ? message : "") << "\n" << sql;
    sqlite3_free(message);
    sqlite3_close(handle);
    return copy;
  }
  std::int64_t trial_of(const std::string& experiment, const std::string& label = "") const {
    return query_int(db_, "SELECT t.id FROM trials t JOIN experiments e ON e.id = t.experiment_id "
                          "WHERE e.name = '" + experiment + "' AND coalesce(t.label, '') LIKE '%" +
                              label + "%' ORDER BY t.id LIMIT 1");
  }
  std::set<std::string> files_in(const fs::path& dir) const {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename());
    return names;
  }

  static inline runner::test::TempDir* tmp_ = nullptr;
  static inline fs::path db_;
  runner::test::TempDir dir_{"runner-report-out-"};
};

// What a headless Chromium made of a page: the attributes the page's script
// sets on <html> once it has drawn every chart, and a screenshot.
struct Rendered {
  std::string html_tag;  ///< <html lang="en" data-errors="0" ...>
  bool screenshot = false;
};

std::string chromium_flags(const std::string& name, const fs::path& work) {
  return " --headless --no-sandbox --disable-gpu --hide-scrollbars --virtual-time-budget=20000 "
         "--user-data-dir=" + (work / ("chromium-" + name)).string();
}

Rendered render(const fs::path& page, const std::string& name, const fs::path& work) {
  Rendered out;
  const std::string browser = chromium();
  const std::string flags = chromium_flags(name, work);
  const fs::path dom = work / (name + ".dom");
  const std::string dump = browser + flags + " --dump-dom file://" + page.string() + " >" +
                           dom.string() + " 2>" + (work / (name + ".chromium.err")).string();
  EXPECT_EQ(std::system(dump.c_str()), 0) << dump;
  std::smatch match;
  const std::string text = slurp(dom);
  if (std::regex_search(text, match, std::regex("<html[^>]*>"))) out.html_tag = match.str();
  const fs::path shots = fs::path(RUNNER_REPORT_SCREENSHOT_DIR);
  fs::create_directories(shots);
  const fs::path png = shots / (name + ".png");
  fs::remove(png);
  const std::string shot = browser + flags + " --window-size=1280,2400 --screenshot=" +
                           png.string() + " file://" + page.string() + " >/dev/null 2>&1";
  EXPECT_EQ(std::system(shot.c_str()), 0) << shot;
  out.screenshot = fs::exists(png) && fs::file_size(png) > 10000;
  return out;
}

// What Chromium drew of `page` in a window `width` px wide, as page_probe.js
// measured it in a copy of the page (in Auckland's time zone, so that a
// label in local time instead of UTC shows): the charts' titles, legends,
// axes and mark items, and the tables' widths. Null when it could not be read.
nlohmann::json probe(const fs::path& page, const fs::path& work, int width) {
  const std::string html = slurp(page);
  const std::size_t body = html.rfind("</body>");
  EXPECT_NE(body, std::string::npos);
  const std::string name = page.stem().string() + "-probe-" + std::to_string(width);
  const fs::path copy = runner::test::write_file(
      work / (name + ".html"), html.substr(0, body) + "<script>\n" +
                                   slurp(RUNNER_REPORT_PROBE) + "</script>\n" + html.substr(body));
  const fs::path dom = work / (name + ".dom");
  const std::string command = "TZ=Pacific/Auckland " + chromium() + chromium_flags(name, work) +
                              " --window-size=" + std::to_string(width) + ",2400 --dump-dom file://" +
                              copy.string() + " >" + dom.string() + " 2>/dev/null";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  const std::string text = slurp(dom);
  const std::string open = "<pre id=\"probe\">";
  const std::size_t from = text.rfind(open), to = text.find("</pre>", from);
  if (from == std::string::npos || to == std::string::npos) {
    ADD_FAILURE() << "no probe in the page Chromium drew: " << dom;
    return nullptr;
  }
  std::string json_text = text.substr(from + open.size(), to - from - open.size());
  for (const auto& [entity, character] : {std::pair{"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""},
                                          {"&#39;", "'"}, {"&nbsp;", "\u00a0"}, {"&amp;", "&"}})
    for (std::size_t at = json_text.find(entity); at != std::string::npos;
         at = json_text.find(entity, at + 1))
      json_text.replace(at, std::string_view(entity).size(), character);
  return nlohmann::json::parse(json_text);
}

// The first chart whose title contains `title`, or null.
const nlohmann::json* chart_titled(const nlohmann::json& drawn, const std::string& title) {
  for (const auto& chart : drawn["charts"])
    if (chart.value("title", "").find(title) != std::string::npos) return &chart;
  return nullptr;
}

// The value of `field` in a mark item's description ("run: run 1; stage: measured; ...").
std::string field_of(const nlohmann::json& item, const std::string& field) {
  const std::string label = item["label"].get<std::string>();
  const std::size_t at = label.find(field + ": ");
  if (at == std::string::npos) return {};
  const std::size_t from = at + field.size() + 2;
  return label.substr(from, label.find(';', from) - from);
}

// The rows of the table with this id.
std::vector<std::vector<std::string>> table_rows(const nlohmann::json& drawn, const std::string& id) {
  for (const auto& table : drawn["tables"])
    if (table["id"] == id) return table["rows"].get<std::vector<std::vector<std::string>>>();
  return {};
}

TEST_F(ReportCliTest, ThePageHoldsEveryRunAndLoadsNothing) {
  ASSERT_EQ(status_of("failing"), "failed");
  ASSERT_EQ(status_of("stopped"), "interrupted");
  const std::string html =
      page("experiment:sweep experiment:failing experiment:stopped experiment:kernel", "all.html");
  ASSERT_FALSE(html.empty());
  // Every run of the database, with its status; the failed run's error text.
  const auto runs = query_int(db_, "SELECT count(*) FROM runs");
  EXPECT_EQ(runs, 9);
  const auto profiled_run = query_int(db_, "SELECT run_id FROM run_files WHERE role = 'profile_trace'");
  for (std::int64_t id = 1; id <= runs; ++id) {
    if (id == profiled_run) continue;
    EXPECT_NE(html.find("<details id=\"run-" + std::to_string(id) + "\">"), std::string::npos) << id;
  }
  EXPECT_EQ(count_of(html, "<span class=\"status status-finished\">finished</span>"), 2u * 6u);
  EXPECT_EQ(count_of(html, "<span class=\"status status-failed\">failed</span>"), 2u);
  EXPECT_EQ(count_of(html, "<span class=\"status status-interrupted\">interrupted</span>"), 2u);
  const std::string error = query_text(db_, "SELECT error FROM runs WHERE status = 'failed'");
  ASSERT_FALSE(error.empty());
  EXPECT_NE(error.find("forward failed on purpose"), std::string::npos) << error;
  EXPECT_NE(html.find("failed in forward: forward failed on purpose</td>"), std::string::npos);
  // The sweep's key drawn against the headline; the kernel runs' call_time.
  EXPECT_NE(html.find("sweep: step_time (median over runs, 95% CI) against optimizer.lr"), std::string::npos);
  EXPECT_NE(html.find("call_time p50 of every recorded run of this configuration"), std::string::npos);
  // The configuration as TOML, plugin versions and hashes, the fingerprint.
  EXPECT_NE(html.find("<pre>[experiment]\nkind = &quot;train&quot;\nseed = 0\n"), std::string::npos);
  EXPECT_NE(html.find("[optimizer]\nplugin = &quot;sgd&quot;\nlr = 0.01\nmomentum = 0.0\n"),
            std::string::npos);
  const std::string sha = query_text(db_, "SELECT sha256 FROM run_plugins LIMIT 1");
  EXPECT_NE(html.find("<code>" + sha + "</code>"), std::string::npos);
  EXPECT_NE(html.find("<td>cpu.model</td>"), std::string::npos);
  // The data set the loaders hold, apart from the run's peak (issue 36 item 6).
  const std::string data_set = query_text(
      db_, "SELECT value FROM metrics WHERE name = 'data_set_bytes' AND run_id = 1");
  ASSERT_FALSE(data_set.empty());
  EXPECT_NE(html.find("<th class=\"num\">peak memory</th><th class=\"num\">data set</th>"),
            std::string::npos);
  std::ostringstream sort_key;  // as the page writes it
  sort_key.precision(17);
  sort_key << std::stod(data_set);
  EXPECT_NE(html.find("<td class=\"num\" data-sort=\"" + sort_key.str() + "\">"), std::string::npos)
      << data_set;
  // A profiled run: its trace linked, its operators listed, its profiled
  // steps in a box of their own.
  const std::string profiled = page("experiment:profiled", "profiled.html");
  const std::string trace = query_text(db_, "SELECT path FROM run_files WHERE role = 'profile_trace'");
  ASSERT_FALSE(trace.empty());
  EXPECT_NE(profiled.find("<a href=\"file://" + trace + "\">" + trace + "</a>"), std::string::npos);
  EXPECT_NE(profiled.find("<h3>Top operators of the profiled steps</h3>"), std::string::npos);
  const std::string top = query_text(db_, "SELECT name FROM run_ops ORDER BY self_cpu_ns DESC LIMIT 1");
  EXPECT_NE(profiled.find("<td><code>" + top + "</code></td>"), std::string::npos) << top;
  EXPECT_NE(profiled.find("\"stage\":\"profiled\""), std::string::npos);
  EXPECT_EQ(html.find("\"stage\":\"profiled\""), std::string::npos);

  // Self-contained: no element loads a file or an address, and the page's
  // policy forbids any load.
  EXPECT_EQ(count_of(html, "<script"),
            count_of(html, "<script>") + count_of(html, "<script type=\"application/json\""));
  const std::string markup = markup_of(html);
  EXPECT_LT(markup.size(), html.size() / 2);  // the libraries are inline
  for (const char* element : {"<link", "<img", "<iframe", "<object", "<embed", " src="})
    EXPECT_EQ(markup.find(element), std::string::npos) << element;
  EXPECT_NE(html.find("content=\"default-src 'none';"), std::string::npos);
  EXPECT_EQ(html.find("sourceMappingURL"), std::string::npos);
  // One data island per chart, and the footer counts them.
  const std::size_t charts = count_of(html, "<div class=\"chart\" data-spec=");
  EXPECT_GE(charts, 5u);
  EXPECT_NE(html.find(" " + std::to_string(charts) + " chart(s)."), std::string::npos);
}

TEST_F(ReportCliTest, TwoSidesAreComparedWithTheFingerprintDiffFirst) {
  const std::string html = page("trial:1 trial:2", "compare.html");
  const auto comparison = html.find("<h2 id=\"comparison\">Comparison</h2>");
  ASSERT_NE(comparison, std::string::npos);
  const auto environment = html.find("<h3>Environment</h3>");
  const auto verdicts = html.find("<h3>Verdicts</h3>");
  EXPECT_LT(comparison, environment);
  EXPECT_LT(environment, verdicts);
  EXPECT_NE(html.find("No fingerprint differences that matter for performance."), std::string::npos);
  EXPECT_NE(html.find("B / A per metric (ratio of per-run medians, 95% bootstrap CI)"),
            std::string::npos);
  EXPECT_NE(html.find("<table id=\"verdicts\">"), std::string::npos);
  EXPECT_NE(html.find("<tr><td>step_time</td>"), std::string::npos);
  EXPECT_NE(html.find("fewer than 5 repetitions per side: the result is unreliable"),
            std::string::npos);
  // As compare says it, before the verdicts: 2 runs a side cannot decide.
  const auto sample_size = html.find("<p class=\"warning\" id=\"sample-size\">cannot decide: ");
  EXPECT_NE(sample_size, std::string::npos);
  EXPECT_LT(sample_size, html.find("<table id=\"verdicts\">"));

  // The same through --by, as compare takes it.
  const std::string by = page("experiment:sweep --by optimizer.lr", "by.html");
  EXPECT_NE(by.find("A: <code>optimizer.lr=0.01</code>"), std::string::npos);
  EXPECT_NE(by.find("B: <code>optimizer.lr=0.05</code>"), std::string::npos);
  EXPECT_NE(by.find("<tr><td>step_time</td>"), std::string::npos);

  // A side without finished runs is said, not compared.
  const std::string none = page("experiment:sweep experiment:failing", "none.html");
  EXPECT_NE(none.find("Side experiment:failing has no finished runs: nothing to compare."),
            std::string::npos);
}

TEST_F(ReportCliTest, HeadlessChromiumDrawsEveryChartWithoutErrors) {
  if (chromium().empty()) GTEST_SKIP() << "no Chromium on this machine (scripts/dev installs it)";
  const std::string all =
      page("experiment:sweep experiment:failing experiment:stopped experiment:kernel", "all.html");
  const std::string compare = page("experiment:sweep --by optimizer.lr", "compare.html");
  for (const auto& [name, html] : {std::pair{std::string("all"), all}, {std::string("compare"), compare}}) {
    const std::size_t charts = count_of(html, "<div class=\"chart\" data-spec=");
    const Rendered r = render(dir_.path() / (name + ".html"), "report-" + name, dir_.path());
    EXPECT_NE(r.html_tag.find("data-errors=\"0\""), std::string::npos) << name << ": " << r.html_tag;
    EXPECT_NE(r.html_tag.find("data-warnings=\"0\""), std::string::npos) << name << ": " << r.html_tag;
    EXPECT_NE(r.html_tag.find("data-charts=\"rendered " + std::to_string(charts) + "\""),
              std::string::npos)
        << name << ": " << r.html_tag;
    EXPECT_TRUE(r.screenshot) << name;
  }

  // The check can fail: a chart whose specification names no mark type is an
  // error the page records, and the charts are not all drawn.
  std::string broken = all;
  const auto at = broken.find("{\"type\":\"rule\"");
  ASSERT_NE(at, std::string::npos);
  broken.replace(at, 14, "{\"type\":\"no_such_mark\"");
  runner::test::write_file(dir_.path() / "broken.html", broken);
  const Rendered r = render(dir_.path() / "broken.html", "report-broken", dir_.path());
  EXPECT_EQ(r.html_tag.find("data-errors=\"0\""), std::string::npos) << r.html_tag;
  EXPECT_NE(r.html_tag.find("data-charts=\"failed\""), std::string::npos) << r.html_tag;
}

// Issue 36: the measured steps are the run; the discarded warm-up steps
// stand beside them, narrow and faint, and the legend names only the kinds of
// steps drawn.
TEST_F(ReportCliTest, ChromiumDrawsMeasuredStepsProminentAndWarmUpFaint) {
  if (chromium().empty()) GTEST_SKIP() << "no Chromium on this machine (scripts/dev installs it)";
  page("experiment:sweep experiment:failing experiment:stopped experiment:kernel", "all.html");
  page("experiment:profiled", "profiled.html");
  for (const std::string name : {"all", "profiled"}) {
    const nlohmann::json drawn = probe(dir_.path() / (name + ".html"), dir_.path(), 1400);
    ASSERT_TRUE(drawn.is_object()) << name;
    const nlohmann::json* boxes = chart_titled(drawn, "Step time by phase");
    ASSERT_NE(boxes, nullptr) << name;
    const auto legend = (*boxes)["legend"].get<std::vector<std::string>>();
    std::vector<std::string> stages = {"measured", "warm-up"};
    if (name == "profiled") stages.push_back("profiled");
    EXPECT_EQ(legend, stages) << name;
    std::map<std::string, int> seen;
    for (const auto& mark : (*boxes)["marks"]) {
      if (mark["name"].get<std::string>().find("mark-rect") == std::string::npos) continue;
      for (const auto& item : mark["items"]) {
        const std::string stage = field_of(item, "stage");
        const bool box = !field_of(item, "q1").empty();
        const double width = item["width"], height = item["height"], opacity = item["opacity"];
        ++seen[stage + (box ? " box" : " median")];
        if (stage == "measured" && box) {
          EXPECT_GE(width, 12) << item;
          EXPECT_EQ(opacity, 1) << item;
        } else if (stage == "measured") {
          // The median stays visible when the quartiles coincide.
          EXPECT_GE(height, 2) << item;
          EXPECT_NE(item["fill"], "white") << item;
        } else if (box) {
          EXPECT_LE(width, 7) << item;
          EXPECT_LE(opacity, 0.5) << item;
        }
      }
    }
    EXPECT_GT(seen["measured box"], 0) << name;
    EXPECT_GT(seen["measured median"], 0) << name;
    EXPECT_GT(seen["warm-up box"], 0) << name;
    EXPECT_EQ(seen["profiled box"] > 0, name == "profiled") << name;
  }
}

// Issue 36: at 1,400 px every table fits the page; narrower, a table or a
// chart that does not fit scrolls in its own box instead of being cut.
TEST_F(ReportCliTest, ChromiumFitsEveryTableAt1400PxAndScrollsNarrower) {
  if (chromium().empty()) GTEST_SKIP() << "no Chromium on this machine (scripts/dev installs it)";
  page("experiment:sweep experiment:failing experiment:stopped experiment:kernel", "all.html");
  const nlohmann::json wide = probe(dir_.path() / "all.html", dir_.path(), 1400);
  ASSERT_TRUE(wide.is_object());
  EXPECT_EQ(wide["viewport"], 1400);
  int shown = 0;
  for (const auto& table : wide["tables"]) {
    if (table["client_width"] == 0) continue;  // in a folded <details>
    ++shown;
    EXPECT_LE(table["scroll_width"].get<double>(), table["client_width"].get<double>()) << table;
    EXPECT_LE(table["right"].get<double>(), 1400) << table;
  }
  EXPECT_GE(shown, 3);
  // Nor is the page: a chart wider than the window scrolls in its own box.
  EXPECT_EQ(wide["page_width"], 1400);
  const nlohmann::json narrow = probe(dir_.path() / "all.html", dir_.path(), 700);
  ASSERT_TRUE(narrow.is_object());
  EXPECT_EQ(narrow["page_width"], 700);
  for (const auto& chart : narrow["charts"])
    EXPECT_LE(chart["scroll_height"].get<double>(), chart["client_height"].get<double>()) << chart["title"];
  int overflowing = 0;
  for (const auto& table : narrow["tables"]) {
    if (table["scroll_width"].get<double>() <= table["client_width"].get<double>()) continue;
    ++overflowing;
    EXPECT_TRUE(table["overflow_x"] == "auto" || table["overflow_x"] == "scroll") << table;
  }
  EXPECT_GT(overflowing, 0);  // the check above ran
}

// Issue 36: the history's time axis in 24-hour UTC at every span, with the
// date where the ticks cross midnight and at least two ticks, in a browser
// whose local time is not UTC.
TEST_F(ReportCliTest, ChromiumLabelsTheHistoryIn24HourUtcAtEverySpan) {
  if (chromium().empty()) GTEST_SKIP() << "no Chromium on this machine (scripts/dev installs it)";
  const auto started = [](std::int64_t trial, const std::string& first, const std::string& second) {
    return "UPDATE runs SET started_at = CASE repeat_index WHEN 0 THEN '" + first + "' ELSE '" +
           second + "' END WHERE trial_id = " + std::to_string(trial) + ";\n";
  };
  const fs::path db = changed_copy(
      "spans.db",
      // Under a second across midnight; two and a half hours across midnight;
      // a week; a single run.
      started(trial_of("sweep", "0.01"), "2026-11-27T23:59:59.100Z", "2026-11-28T00:00:00.400Z") +
          started(trial_of("sweep", "0.05"), "2026-11-27T22:50:00.000Z", "2026-11-28T01:20:00.000Z") +
          started(trial_of("kernel"), "2026-11-20T08:00:00.000Z", "2026-11-27T17:00:00.000Z") +
          started(trial_of("profiled"), "2026-11-27T12:34:56.570Z", "2026-11-27T12:34:56.570Z"));
  page("experiment:sweep experiment:kernel experiment:profiled", "spans.html", db);
  const nlohmann::json drawn = probe(dir_.path() / "spans.html", dir_.path(), 1400);
  ASSERT_TRUE(drawn.is_object());
  const std::vector<std::tuple<std::string, std::string, std::vector<std::string>>> expected = {
      {"sweep (optimizer.lr=0.01):", "started (UTC, 2026)",
       {"27 Nov 23:59:59", "28 Nov 00:00:00", "28 Nov 00:00:01"}},
      {"sweep (optimizer.lr=0.05):", "started (UTC, 2026)",
       {"27 Nov 22:00", "27 Nov 23:00", "28 Nov 00:00", "28 Nov 01:00", "28 Nov 02:00"}},
      {"kernel:", "started (UTC)",
       {"2026-11-19", "2026-11-21", "2026-11-23", "2026-11-25", "2026-11-27", "2026-11-29"}},
      {"profiled:", "started (UTC, 2026-11-27)", {"12:34:56", "12:34:57"}}};
  for (const auto& [title, axis_title, labels] : expected) {
    const nlohmann::json* chart = chart_titled(drawn, title + std::string(" "));
    ASSERT_NE(chart, nullptr) << title;
    bool found = false;
    for (const auto& axis : (*chart)["axes"]) {
      if (axis["title"].get<std::string>().find("started") == std::string::npos) continue;
      found = true;
      EXPECT_EQ(axis["title"], axis_title) << title;
      EXPECT_EQ(axis["labels"].get<std::vector<std::string>>(), labels) << title;
    }
    EXPECT_TRUE(found) << title;
  }
}

// Issue 30 (a newcomer's tour): runs close in time, on one date, are labelled
// with clock times, never fractions of a second (".540", Vega's default for a
// sub-second span): within one second, within a minute, within minutes.
TEST_F(ReportCliTest, ChromiumLabelsRunsSecondsApartWithClockTimesNotFractions) {
  if (chromium().empty()) GTEST_SKIP() << "no Chromium on this machine (scripts/dev installs it)";
  const auto started = [](std::int64_t trial, const std::string& first, const std::string& second) {
    return "UPDATE runs SET started_at = CASE repeat_index WHEN 0 THEN '" + first + "' ELSE '" +
           second + "' END WHERE trial_id = " + std::to_string(trial) + ";\n";
  };
  const fs::path db = changed_copy(
      "close.db",
      started(trial_of("sweep", "0.01"), "2026-11-27T12:34:56.100Z", "2026-11-27T12:34:56.640Z") +
          started(trial_of("sweep", "0.05"), "2026-11-27T12:34:10.540Z", "2026-11-27T12:34:52.020Z") +
          started(trial_of("kernel"), "2026-11-27T12:30:05.540Z", "2026-11-27T12:33:41.100Z"));
  page("experiment:sweep experiment:kernel", "close.html", db);
  const nlohmann::json drawn = probe(dir_.path() / "close.html", dir_.path(), 1400);
  ASSERT_TRUE(drawn.is_object());
  const std::vector<std::pair<std::string, std::vector<std::string>>> expected = {
      {"sweep (optimizer.lr=0.01):", {"12:34:56", "12:34:57"}},
      {"sweep (optimizer.lr=0.05):",
       {"12:34:10", "12:34:20", "12:34:30", "12:34:40", "12:34:50", "12:35:00"}},
      {"kernel:", {"12:30", "12:31", "12:32", "12:33", "12:34"}}};
  const std::regex clock("[0-2][0-9]:[0-5][0-9](:[0-5][0-9])?");
  for (const auto& [title, labels] : expected) {
    const nlohmann::json* chart = chart_titled(drawn, title + std::string(" "));
    ASSERT_NE(chart, nullptr) << title;
    bool found = false;
    for (const auto& axis : (*chart)["axes"]) {
      if (axis["title"].get<std::string>().find("started") == std::string::npos) continue;
      found = true;
      EXPECT_EQ(axis["title"], "started (UTC, 2026-11-27)") << title;
      const auto drawn_labels = axis["labels"].get<std::vector<std::string>>();
      EXPECT_EQ(drawn_labels, labels) << title;
      for (const std::string& label : drawn_labels)
        EXPECT_TRUE(std::regex_match(label, clock)) << title << ": " << label;
    }
    EXPECT_TRUE(found) << title;
  }
}

// Issue 36: a comparison of trials that differ in more than the compared key
// lists the other keys, above the verdicts; --by a key that alone differs says so.
TEST_F(ReportCliTest, TheComparisonListsOtherConfigurationDifferencesAboveTheVerdicts) {
  const std::int64_t a = trial_of("sweep", "0.01"), b = trial_of("profiled");
  const std::string html =
      page("trial:" + std::to_string(a) + " trial:" + std::to_string(b), "differs.html");
  const auto table = html.find("<table id=\"config-diff\">");
  ASSERT_NE(table, std::string::npos);
  EXPECT_LT(table, html.find("<h3>Verdicts</h3>"));
  EXPECT_NE(html.find("The sides' configurations differ in the "), std::string::npos);
  EXPECT_NE(html.find("<tr><td><code>train.steps</code></td><td>30</td><td>10</td></tr>", table),
            std::string::npos);
  EXPECT_NE(html.find("<tr><td><code>optimizer.lr</code></td><td>0.01</td><td>0.05</td></tr>", table),
            std::string::npos);
  const std::string by = page("experiment:sweep --by optimizer.lr", "by.html");
  EXPECT_NE(by.find("<p>The sides' configurations differ only in <code>optimizer.lr</code>.</p>"),
            std::string::npos);
  EXPECT_EQ(by.find("config-diff"), std::string::npos);

  if (chromium().empty()) GTEST_SKIP() << "no Chromium on this machine (scripts/dev installs it)";
  const nlohmann::json drawn = probe(dir_.path() / "differs.html", dir_.path(), 1400);
  ASSERT_TRUE(drawn.is_object());
  const auto rows = table_rows(drawn, "config-diff");
  EXPECT_NE(std::find(rows.begin(), rows.end(), std::vector<std::string>{"train.steps", "30", "10"}),
            rows.end());
  const nlohmann::json* forest = chart_titled(drawn, "B / A per metric");
  ASSERT_NE(forest, nullptr);
  for (const auto& t : drawn["tables"]) {
    if (t["id"] != "config-diff") continue;
    EXPECT_LT(t["top"].get<double>(), (*forest)["top"].get<double>());
  }
}

// Issue 35: a metric with the same value in every run of each side has no
// interval and no p: a point without a line in a colour of its own ("differs"
// or "same"), never a significant one, and "-" in the table.
TEST_F(ReportCliTest, ChromiumDrawsMetricsWithoutSpreadAsPointsWithoutIntervals) {
  const std::int64_t a = trial_of("sweep", "0.01"), b = trial_of("sweep", "0.05");
  const auto set = [](const std::string& metric, std::int64_t trial, const std::string& value) {
    return "UPDATE metrics SET value = " + value + " WHERE name = '" + metric +
           "' AND run_id IN (SELECT id FROM runs WHERE trial_id = " + std::to_string(trial) + ");\n";
  };
  const fs::path db = changed_copy("spread.db", set("samples_per_s", a, "1000") +
                                                    set("samples_per_s", b, "2000") +
                                                    set("loader_samples_per_s", a, "500") +
                                                    set("loader_samples_per_s", b, "500") +
                                                    // A spread in a metric after them in the table.
                                                    set("peak_cpu_alloc_bytes", a, "1000 + run_id") +
                                                    set("peak_cpu_alloc_bytes", b, "2000 + run_id"));
  const std::string html = page("trial:" + std::to_string(a) + " trial:" + std::to_string(b),
                                "spread.html", db);
  for (const auto& [metric, verdict] :
       {std::pair{std::string("samples_per_s"), std::string("differs (the same value in every run)")},
        {std::string("loader_samples_per_s"), std::string("same (the same value in every run)")}}) {
    const auto row = html.find("<tr><td>" + metric + "</td>");
    ASSERT_NE(row, std::string::npos) << metric;
    const std::string line = html.substr(row, html.find("</tr>", row) - row);
    EXPECT_NE(line.find("<td class=\"num\">-</td><td class=\"num\">-</td>"), std::string::npos) << line;
    EXPECT_NE(line.find(">" + verdict + "</td>"), std::string::npos) << line;
  }

  if (chromium().empty()) GTEST_SKIP() << "no Chromium on this machine (scripts/dev installs it)";
  const nlohmann::json drawn = probe(dir_.path() / "spread.html", dir_.path(), 1400);
  ASSERT_TRUE(drawn.is_object());
  const nlohmann::json* forest = chart_titled(drawn, "B / A per metric");
  ASSERT_NE(forest, nullptr);
  std::map<std::string, std::string> fill;
  std::set<std::string> with_interval;
  for (const auto& mark : (*forest)["marks"]) {
    const std::string name = mark["name"];
    for (const auto& item : mark["items"]) {
      const std::string metric = field_of(item, "metric");
      if (name.find("mark-symbol") != std::string::npos) fill[metric] = item["fill"];
      if (name.find("mark-rule") != std::string::npos && !metric.empty()) with_interval.insert(metric);
      if (metric == "samples_per_s" || metric == "loader_samples_per_s") {
        if (name.find("mark-symbol") == std::string::npos) continue;
        EXPECT_EQ(field_of(item, "95% CI"), "-") << item;
        EXPECT_EQ(field_of(item, "p"), "-") << item;
      }
    }
  }
  EXPECT_EQ(fill["samples_per_s"], "#8250df");
  EXPECT_EQ(fill["loader_samples_per_s"], "#1b7c83");
  EXPECT_EQ(with_interval.count("samples_per_s"), 0u);
  EXPECT_EQ(with_interval.count("loader_samples_per_s"), 0u);
  EXPECT_EQ(with_interval.count("step_time"), 1u);
  // In the table's order, though the interval layer has only the rows with spread.
  std::vector<std::string> table_order, plot_order;
  for (const auto& row : table_rows(drawn, "verdicts")) table_order.push_back(row.front());
  for (const auto& axis : (*forest)["axes"])
    if (axis["description"].get<std::string>().rfind("Y-axis", 0) == 0 && !axis["labels"].empty())
      plot_order = axis["labels"].get<std::vector<std::string>>();
  EXPECT_EQ(plot_order, table_order);
  // The legend names the verdicts drawn and no other.
  std::set<std::string> calls;
  for (const auto& row : table_rows(drawn, "verdicts")) calls.insert(row.back().substr(0, row.back().find(' ')));
  std::set<std::string> legend;
  for (const std::string entry : (*forest)["legend"])
    if (entry != "per-run values" && entry != "none: the same value in every run") legend.insert(entry);
  EXPECT_EQ(legend, calls);
}

TEST_F(ReportCliTest, BadInputIsRefusedAndNothingIsWritten) {
  const fs::path dir = dir_.path();
  const fs::path kept = runner::test::write_file(dir / "kept.html", "earlier report\n");
  const auto expect_refused = [&](const std::string& args, const std::string& message) {
    const auto before = files_in(dir);
    const Result r = report(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_EQ(r.err.substr(0, r.err.find('\n')), "error: " + message) << args;
    auto after = files_in(dir);
    after.erase("out");
    after.erase("err");
    auto expected = before;
    expected.erase("out");
    expected.erase("err");
    EXPECT_EQ(after, expected) << args;
    EXPECT_EQ(slurp(kept), "earlier report\n");
  };
  const std::string out = " --out " + kept.string();
  expect_refused("trial:99" + out, "'trial:99' matches no run in the database");
  expect_refused("experiment:nope" + out, "no experiment named 'nope' in the database");
  expect_refused("bogus:1" + out,
                 "cannot read the selector 'bogus:1': expected RUN_ID, run:ID[,ID...], "
                 "trial:ID[,ID...], experiment:NAME or label:KEY=VALUE");
  expect_refused("run:999" + out, "run 999 is not in the database");
  expect_refused("experiment:sweep --out /nonexistent-dir/r.html",
                 "cannot write /nonexistent-dir/r.html: No such file or directory");
  expect_refused("experiment:sweep --out " + dir.string(),
                 "cannot write " + dir.string() + ": it is a directory");
  expect_refused("experiment:sweep --by no.such.key" + out,
                 "--by no.such.key: no trial of 'sweep' has such a key");
  expect_refused("experiment:sweep --margin -1" + out, "--margin must be a percentage in [0, 100), found '-1'");
  const Result none = report("");
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("error: runner report: missing SELECTOR"), std::string::npos) << none.err;
  if (::geteuid() != 0) {
    const fs::path locked = dir / "locked";
    fs::create_directory(locked);
    fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
    expect_refused("experiment:sweep --out " + (locked / "r.html").string(),
                   "cannot write " + (locked / "r.html").string() + ": Permission denied");
    fs::permissions(locked, fs::perms::owner_all);
  }
  // A good report replaces the earlier file whole.
  const Result r = report("experiment:sweep" + out);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(kept).rfind("<!DOCTYPE html>", 0), 0u);
}

// Issue 32: an experiment with [[expect]] gets a claims section: per claim its
// verdict, claim and source, and a chart of the ratio with its interval
// against the claimed bound, which Chromium draws without an error.
TEST_F(ReportCliTest, ClaimsAreDrawnAgainstTheirBound) {
  const fs::path db = dir_.path() / "claims.db";
  const fs::path file = dir_.path() / "sizes.toml";
  runner::test::write_file(
      file,
      "[experiment]\nname = \"sizes\"\nkind = \"kernel\"\nrepeats = 4\n"
      "[kernel]\nplugin = \"good_scale\"\ncalls = 10\nwarmup = 1\nbuffers = 2\n"
      "[sweep]\n\"kernel.shape\" = [[64, 8], [512, 512]]\n"
      "[[expect]]\nclaim = \"a 512x larger input takes longer a call\"\nsource = \"arithmetic\"\n"
      "metric = \"call_time\"\nby = \"kernel.shape\"\nbaseline = [64, 8]\nversus = [512, 512]\n"
      "ratio_above = 5\n"
      "[[expect]]\nclaim = \"the larger input is as fast\"\nmetric = \"call_time\"\n"
      "by = \"kernel.shape\"\nbaseline = [64, 8]\nversus = [512, 512]\nequivalent_within = 0.1\n");
  const Result ran = runner::test::run_runner("run " + file.string(), dir_.path(),
                                              {db, runner::test::test_plugins("kernels")});
  ASSERT_EQ(ran.code, 0) << ran.err;
  const std::string html = page("experiment:sizes", "claims.html", db);
  const std::string markup = markup_of(html);
  EXPECT_NE(markup.find("<h2 id=\"claims\">Claims</h2>"), std::string::npos);
  EXPECT_NE(markup.find("<a href=\"#claims\">claims</a>"), std::string::npos);
  EXPECT_NE(markup.find("a 512x larger input takes longer a call"), std::string::npos);
  EXPECT_NE(markup.find("<td>arithmetic</td>"), std::string::npos);
  EXPECT_NE(markup.find("verdict-holds\">holds"), std::string::npos);
  EXPECT_NE(markup.find("verdict-refuted\">refuted"), std::string::npos);
  // The bounds are drawn: 5, and 0.9 and 1.1 for +-10 %.
  EXPECT_NE(html.find("\"edge\":5.0"), std::string::npos);
  EXPECT_NE(html.find("\"edge\":0.9"), std::string::npos);
  EXPECT_NE(html.find("\"edge\":1.1"), std::string::npos);
  // A report of an experiment without claims has no such section.
  EXPECT_EQ(page("experiment:sweep", "no_claims.html").find("id=\"claims\""), std::string::npos);
  if (chromium().empty()) GTEST_SKIP() << "no Chromium on this machine (scripts/dev installs it)";
  const Rendered r = render(dir_.path() / "claims.html", "report-claims", dir_.path());
  EXPECT_NE(r.html_tag.find("data-errors=\"0\""), std::string::npos) << r.html_tag;
  EXPECT_NE(r.html_tag.find("data-charts=\"rendered " +
                            std::to_string(count_of(html, "<div class=\"chart\" data-spec=")) + "\""),
            std::string::npos)
      << r.html_tag;
}

}  // namespace
