// Every command the project tells a user to run runs (issue 36 item 1): the
// shell lines of README.md's ```sh blocks, in order, then the command lines
// of each shipped experiment's header, in order, all in one scratch folder
// and database (each header's own `runner run` comes before the commands
// that read its runs). The commands are read from the files when the test runs,
// so a new one is tested without touching this file; any exit other than 0
// fails, with the command's file, line and stderr.
//
// The scratch folder mirrors the source tree's root, where the commands are
// written to run: a copy of experiments/ (whose files name ../data and
// ../models), scripts/ and python/ linked, and models/ holding links to the
// exports scripts/make_models.py wrote for the fixture compared_models.make
// (so `make_models.py models` finds them up to date instead of compiling for
// minutes; runner-export itself runs in the README's own line).
//
// What the test changes in a command, and nothing else:
//   - `runner` is this build's executable, with RUNNER_DB and
//     RUNNER_PLUGIN_PATH unset: the database is the scratch folder's
//     ./runner.db (a command's own --db names a file there);
//   - `python`, `python3` and the set-up's venv python are the build's
//     RUNNER_PYTHON; the venv's runner-export (a wrapper scripts/dev writes
//     for the checkout that set the venv up) is RUNNER_PYTHON running this
//     checkout's python/runner_export.py;
//   - RUN_ID, and 3 as the run of `runner show 3` / `runner rerun 3`, is the
//     newest run in ./runner.db (the run the command before it recorded);
//   - `runner run` gets the --set values of kQuick below, each only where the
//     experiment's kind has the key, no trial sweeps it and the command does
//     not set it itself.
// Files the README names as the user's own are written here (kUserFiles):
// exp.toml, a.toml, b.toml, kernel.toml, claim.toml, and resnet18.safetensors (saved by
// runner from experiments/resnet18_cifar.toml with train.save_to).
// Not run, each for the reason kNotRun gives: the set-up and the suite itself
// (scripts/dev), a job of two machines (torchrun ... --master-addr HOST), and
// CUDA runs where no CUDA device is present.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runner/experiment/experiment.hpp"
#include "runner/host/host.hpp"
#include "support/cli_harness.hpp"
#include "support/python_oracle.hpp"
#include "support/shipped_commands.hpp"

namespace runner {
namespace {

namespace fs = std::filesystem;
using test::ShippedCommand;

const fs::path kSource = RUNNER_SOURCE_DIR;

// The --set values that keep `runner run` quick, with why each is enough.
struct Quick {
  const char* key;
  const char* value;
  const char* why;
};
const Quick kQuick[] = {
    {"experiment.repeats", "1", "the test is each command's exit status, not a verdict"},
    {"train.steps", "2", "two measured steps reach every phase, metric and summary"},
    {"train.warmup", "1", "a shipped warm-up is longer than the two steps"},
    {"eval.batches", "1", "one held-out batch reaches every evaluation metric"},
    {"infer.batches", "2", "as train.steps"},
    {"infer.warmup", "1", "as train.warmup"},
    {"kernel.calls", "3", "as train.steps: the op is still checked before it is timed"},
    {"kernel.warmup", "1", "as train.warmup"},
};

// Commands that are not run, by their first word, and why.
const std::map<std::string, std::string> kNotRun = {
    {"scripts/dev", "the set-up and this test suite itself (CI runs them)"},
    {"torchrun", "a job of two machines (--master-addr HOST); LaunchCliTest runs torchrun on "
                 "loopback"},
};

// The files the README's lines name as the user's own: the quickstart under
// another name and seed (a trial's identity leaves the name out, so the same
// configuration under two names would be one trial, recorded once).
std::string quickstart_named(const std::string& name, int seed) {
  std::string text = test::slurp(kSource / "experiments" / "quickstart.toml");
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"name = \"quickstart\"",
                                                                     "name = \"" + name + "\""},
                                 {"seed = 0", "seed = " + std::to_string(seed)}})
    text.replace(text.find(from), from.size(), to);
  return text;
}

struct UserFile {
  const char* name;
  std::string text;
};
const std::vector<UserFile>& user_files() {
  static const std::vector<UserFile> files = {
      // A sweep of two trials, so that each of two shards has a run.
      {"exp.toml", quickstart_named("exp", 3) + "\n[sweep]\n\"optimizer.lr\" = [0.05, 0.1]\n"},
      {"a.toml", quickstart_named("a", 1)},
      {"b.toml", quickstart_named("b", 2)},
      {"kernel.toml",
       "[experiment]\nname = \"kernel\"\nkind = \"kernel\"\n\n[device]\ntype = \"cpu\"\n\n"
       "[kernel]\nplugin = \"scale\"\nshape = [1024, 1024]\ndtype = \"float32\"\n"},
      // One claim whose answer is certain (a 2048x larger input), so `runner
      // check` decides it in the runs it makes: exit 0.
      {"claim.toml",
       "[experiment]\nname = \"claim\"\nkind = \"kernel\"\nrepeats = 5\n\n[device]\ntype = \"cpu\"\n\n"
       "[kernel]\nplugin = \"scale\"\ndtype = \"float32\"\n\n"
       "[sweep]\n\"kernel.shape\" = [[32, 16], [1024, 1024]]\n\n"
       "[[expect]]\nclaim = \"a 2048x larger input takes over 5x longer a call\"\n"
       "metric = \"call_time\"\nby = \"kernel.shape\"\nbaseline = [32, 16]\n"
       "versus = [1024, 1024]\nratio_above = 5\n"},
  };
  return files;
}

bool is_python(const std::string& word) {
  for (const char* name : {"python", "python3"})
    if (word == name || word.ends_with(std::string("/") + name)) return true;
  return false;
}

std::string quoted(const std::string& word) {
  std::string out = "'";
  for (const char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string where(const ShippedCommand& c) {
  return c.file.filename().string() + ":" + std::to_string(c.line) + ": " + c.text;
}

class ShippedCommandsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    host_ = new PluginHost;
    host_->load(fs::path(RUNNER_BINARY_DIR) / "lib" / "runner" / "plugins");
  }
  static void TearDownTestSuite() {
    delete host_;
    host_ = nullptr;
  }

  void SetUp() override {
    RUNNER_REQUIRE_ORACLE("torch,torchvision,numpy,PIL");
    fs::copy(kSource / "experiments", dir_ / "experiments", fs::copy_options::recursive);
    fs::create_directory_symlink(kSource / "scripts", dir_ / "scripts");
    fs::create_directory_symlink(kSource / "python", dir_ / "python");
    fs::create_directory(dir_ / "models");
    ASSERT_TRUE(fs::exists(fs::path(RUNNER_COMPARED_MODELS) / "gpt2-b32.pt2"))
        << "the fixture compared_models.make writes " << RUNNER_COMPARED_MODELS;
    for (const auto& entry : fs::directory_iterator(RUNNER_COMPARED_MODELS))
      fs::create_symlink(entry.path(), dir_ / "models" / entry.path().filename());
    fs::create_directory(captures_);
  }

  // The newest run of ./runner.db, as text; "1" before any.
  std::string newest_run() const {
    if (!fs::exists(dir_ / "runner.db")) return "1";
    const auto id = test::query_int(dir_ / "runner.db", "SELECT max(id) FROM runs");
    return std::to_string(id > 0 ? id : 1);
  }

  // The kind and the swept keys of an experiment file, read as runner reads it.
  struct FileFacts {
    RunKind kind = RunKind::train;
    bool eval = false;
    std::set<std::string> varied;
  };
  FileFacts facts(const fs::path& file) {
    FileFacts out;
    const std::vector<Trial> trials = expand_trials(*parse_experiment_file(file), *host_);
    out.kind = trials.front().experiment.kind;
    out.eval = trials.front().experiment.eval.enabled;
    for (const Trial& t : trials)
      for (const auto& [key, value] : t.varied) out.varied.insert(key);
    return out;
  }

  // The --set values kQuick adds to `runner run ARGS`.
  std::vector<std::string> quick_sets(const std::vector<std::string>& words) {
    std::set<std::string> own;
    std::vector<fs::path> files;
    for (std::size_t i = 2; i < words.size(); ++i) {
      if (words[i] == "--set" && i + 1 < words.size()) {
        own.insert(words[i + 1].substr(0, words[i + 1].find('=')));
        ++i;
      } else if (words[i].ends_with(".toml")) {
        files.push_back(dir_ / words[i]);
      }
    }
    std::vector<std::string> sets;
    for (const Quick& q : kQuick) {
      const std::string key = q.key;
      const std::string section = key.substr(0, key.find('.'));
      bool applies = !own.count(key);
      for (const fs::path& file : files) {
        const FileFacts f = facts(file);
        applies = applies && !f.varied.count(key);
        if (section == "train") applies = applies && f.kind == RunKind::train;
        if (section == "infer") applies = applies && f.kind == RunKind::infer;
        if (section == "kernel") applies = applies && f.kind == RunKind::kernel;
        if (section == "eval") applies = applies && f.eval;
      }
      if (applies) {
        sets.push_back("--set");
        sets.push_back(key + "=" + q.value);
      }
    }
    return sets;
  }

  // The shell line that runs `c` as described at the top, or why it is not run.
  std::string shell_line(const ShippedCommand& c, std::string& not_run) {
    std::vector<std::string> words = test::shell_words(c.text);
    if (words.empty()) return "";
    if (const auto it = kNotRun.find(words[0]); it != kNotRun.end()) {
      not_run = it->second;
      return "";
    }
    for (const std::string& w : words)
      if (w == "device.type=cuda" && !fs::exists("/dev/nvidia0")) {
        not_run = "a CUDA run, and this machine has no CUDA device";
        return "";
      }
    const fs::path python = test::oracle_python();
    if (words[0] == "runner") {
      words[0] = test::runner_executable().string();
      const std::string sub = words.size() > 1 ? words[1] : "";
      for (std::size_t i = 1; i < words.size(); ++i)
        if (words[i] == "RUN_ID" || (i == 2 && words[i] == "3" && (sub == "show" || sub == "rerun")))
          words[i] = newest_run();
      if (sub == "run")
        for (std::string& s : quick_sets(words)) words.push_back(std::move(s));
    } else if (is_python(words[0])) {
      words[0] = python.string();
    } else if (words[0].ends_with("/runner-export") || words[0] == "runner-export") {
      // The venv's runner-export is a wrapper scripts/dev writes for the
      // checkout that last set the venv up; this checkout's exporter is what
      // the wrapper runs for this checkout.
      words[0] = (kSource / "python" / "runner_export.py").string();
      words.insert(words.begin(), python.string());
    } else {
      ADD_FAILURE() << where(c) << ": a command of an unknown program; teach this test "
                                   "how to run it, or list it in kNotRun with why";
      return "";
    }
    std::string line = "cd " + quoted(dir_.string()) + " && env -u RUNNER_DB -u RUNNER_PLUGIN_PATH";
    for (const std::string& w : words) line += " " + quoted(w);
    return line;
  }

  // Runs `c`; a failure names the command and shows its stderr's end.
  void expect_runs(const ShippedCommand& c) {
    std::string not_run;
    const std::string line = shell_line(c, not_run);
    if (line.empty()) {
      if (!not_run.empty()) std::cout << "[ not run ] " << where(c) << ": " << not_run << "\n";
      return;
    }
    const std::string n = std::to_string(++count_);
    const fs::path out = captures_ / (n + ".out"), err = captures_ / (n + ".err");
    std::cout << "[ command ] " << where(c) << std::endl;
    const int status =
        std::system((line + " > " + quoted(out.string()) + " 2> " + quoted(err.string())).c_str());
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::string tail = test::slurp(err);
    if (tail.size() > 3000) tail = "..." + tail.substr(tail.size() - 3000);
    EXPECT_EQ(code, 0) << where(c) << "\nran as: " << line << "\nstderr:\n" << tail;
  }

  // The files the README names as a user's own, in the scratch folder.
  void write_user_files() {
    for (const UserFile& f : user_files()) tmp_.write(f.name, f.text);
    // Weights a run of experiments/resnet18_cifar.toml saved (train.save_to),
    // recorded in a database of their own.
    const std::string save =
        "cd " + quoted(dir_.string()) + " && " +
        test::runner_command("run experiments/resnet18_cifar.toml --set "
                             "train.save_to=resnet18.safetensors --set experiment.repeats=1 "
                             "--set train.steps=1 --set train.warmup=0 --set eval.batches=1",
                             {dir_ / "weights.db", {}}) +
        " > /dev/null 2>&1";
    ASSERT_EQ(std::system(save.c_str()), 0) << save;
    ASSERT_TRUE(fs::exists(dir_ / "resnet18.safetensors"));
  }

  static PluginHost* host_;
  test::TempDir tmp_{"runner-commands-"};
  fs::path dir_ = tmp_.path();
  fs::path captures_ = dir_ / "captures";
  int count_ = 0;
};
PluginHost* ShippedCommandsTest::host_ = nullptr;

std::vector<std::string> shipped_files() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(kSource / "experiments"))
    if (entry.path().extension() == ".toml") names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// One scratch folder and database for all: the README's commands in order,
// then each header's. A header's `runner run` of its own file finds the runs
// the README's line recorded (same file, same --set values) and resumes
// them, so each experiment runs once and every header command still comes
// after the experiment it belongs to.
TEST_F(ShippedCommandsTest, EveryCommandOfTheReadmeAndOfEveryExperimentHeaderRuns) {
  write_user_files();
  const auto readme = test::readme_commands(kSource / "README.md");
  ASSERT_GE(readme.size(), 30u);  // a parser that finds nothing must not pass
  for (const ShippedCommand& c : readme) expect_runs(c);

  for (const std::string& name : shipped_files()) {
    SCOPED_TRACE(name);
    const auto commands = test::header_commands(kSource / "experiments" / name);
    ASSERT_FALSE(commands.empty()) << name << " prints no command to run it";
    bool ran = false;
    for (const ShippedCommand& c : commands) {
      const auto words = test::shell_words(c.text);
      ran = ran || (words.size() > 2 && words[1] == "run" && words[2] == "experiments/" + name);
      if (!ran && words.size() > 1 && words[0] == "runner" && words[1] != "run")
        ADD_FAILURE() << where(c) << ": comes before the header's `runner run experiments/" << name
                      << "`";
      expect_runs(c);
    }
    EXPECT_TRUE(ran) << name << " does not print `runner run experiments/" << name << "`";
  }
}

}  // namespace
}  // namespace runner
