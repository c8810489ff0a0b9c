// runner report end to end: one database with finished, failed and
// interrupted runs, a sweep, a kernel experiment and a comparison; the page
// holds what the store holds, loads nothing, and renders in headless Chromium
// without an error or warning (a screenshot of each page is saved under the
// build folder, report-screenshots/); bad input leaves nothing behind.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
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

  Result report(const std::string& args) const {
    return runner::test::run_runner("report " + args, dir_.path(), {db_, {}});
  }
  // Writes a report of `selectors` to OUT in this test's folder; returns the page.
  std::string page(const std::string& selectors, const std::string& name) const {
    const fs::path out = dir_.path() / name;
    const Result r = report(selectors + " --out " + out.string());
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("wrote " + out.string()), std::string::npos) << r.out;
    return slurp(out);
  }
  std::string status_of(const std::string& experiment) const {
    return query_text(db_, "SELECT r.status FROM runs r JOIN trials t ON t.id = r.trial_id JOIN "
                           "experiments e ON e.id = t.experiment_id WHERE e.name = '" +
                               experiment + "'");
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

Rendered render(const fs::path& page, const std::string& name, const fs::path& work) {
  Rendered out;
  const std::string browser = chromium();
  const std::string flags =
      " --headless --no-sandbox --disable-gpu --hide-scrollbars --virtual-time-budget=20000 "
      "--user-data-dir=" + (work / ("chromium-" + name)).string();
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
                 "trial:ID[,ID...] or experiment:NAME");
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

}  // namespace
