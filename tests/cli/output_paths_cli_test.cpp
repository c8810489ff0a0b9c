// The output-path rule end to end (issue 30 item 1, docs/cli.md "Output
// files"): `export --out`, `report --out`, `merge --into` and train.save_to
// write only a new path or a regular file (replaced whole), "-" and
// /dev/stdout mean standard output, and a device, FIFO, directory or symbolic
// link is refused with exit 2 before any work and left exactly as it was.
// Before the rule, each of these was renamed over (a character device became
// a regular file, a symbolic link a file beside its untouched target).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>
#include <string>

#include "support/cli_harness.hpp"

namespace fs = std::filesystem;

namespace {

using runner::test::Result;
using runner::test::slurp;

const fs::path kGood = runner::test::test_plugins("good");
const std::string kRule =
    "hint: runner writes only to a new path or a regular file, and leaves anything else as it "
    "is: ";

// What stands at a path, not following a link: type, mode, device number,
// inode, and a link's target or a file's bytes. Equal before and after means
// "left exactly as it was".
std::string snapshot(const fs::path& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return "absent";
  std::ostringstream out;
  out << "mode " << std::oct << info.st_mode << std::dec << " rdev " << major(info.st_rdev) << ","
      << minor(info.st_rdev) << " inode " << info.st_ino;
  if (S_ISLNK(info.st_mode)) out << " -> " << fs::read_symlink(path).string();
  if (S_ISREG(info.st_mode)) out << " bytes " << slurp(path);
  return out.str();
}

class OutputPathsCliTest : public runner::test::CliTestBase {
 protected:
  OutputPathsCliTest() : CliTestBase("runner-output-paths-") {}

  // The runner in dir_ (so a file named "-" would land there), stopped after
  // 60 s: a command that opened a FIFO would wait for a reader forever.
  Result runner(const std::string& args) const {
    const fs::path out = dir_ / "out", err = dir_ / "err";
    const std::string cmd = "cd " + dir_.string() + " && timeout 60 " +
                            runner::test::runner_command(args, {db_, kGood}) + " >" +
                            out.string() + " 2>" + err.string();
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  }
  void record_a_run() const {
    const fs::path file =
        write("tiny.toml", runner::test::tiny_experiment(
                               {.steps = 3, .rest = "[experiment]\nname = \"tiny\"\n"}));
    const Result r = runner("run " + file.string());
    ASSERT_EQ(r.code, 0) << r.err;
  }
  std::set<std::string> names_in(const fs::path& folder) const {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(folder)) names.insert(entry.path().filename());
    names.erase("out");
    names.erase("err");
    return names;
  }
  // `command` exits 2 with `err`, writes nothing to stdout, and leaves
  // `target` and the folder around it as they were (no temporary behind).
  void expect_refused(const std::string& command, const fs::path& target,
                      const std::string& err) const {
    const std::string before = snapshot(target);
    const std::set<std::string> names = names_in(target.parent_path());
    const Result r = runner(command);
    EXPECT_EQ(r.code, 2) << command << "\n" << r.err;
    EXPECT_EQ(r.err, err) << command;
    EXPECT_EQ(r.out, "") << command;
    EXPECT_EQ(snapshot(target), before) << command;
    EXPECT_EQ(names_in(target.parent_path()), names) << command;
  }
  // Every kind that is not runner's to replace, refused for `command
  // --option PATH` (--option's hint names it; `stdout_hint` ends it).
  void expect_each_kind_refused(const std::string& command, const std::string& option,
                                const std::string& stdout_hint) const {
    const fs::path fifo = dir_ / "fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
    expect_refused(command + " " + option + " " + fifo.string(), fifo,
                   "error: cannot write " + fifo.string() + ": it is a FIFO\n" + kRule +
                       "give another " + option + stdout_hint + "\n");
    const fs::path target = write("target", "the target's bytes\n");
    const fs::path link = dir_ / "link";
    fs::create_symlink(target, link);
    expect_refused(command + " " + option + " " + link.string(), link,
                   "error: cannot write " + link.string() + ": it is a symbolic link (to " +
                       target.string() + ")\n" + kRule + "give another " + option +
                       ", or the path it points to" + stdout_hint + "\n");
    EXPECT_EQ(slurp(target), "the target's bytes\n");
  }
  // A character device made for the test, then the system's /dev/null: type,
  // mode and device number unchanged. The made one goes first: if it were
  // replaced, /dev/null is not tried.
  void expect_devices_refused(const std::string& command, const std::string& option,
                              const std::string& stdout_hint) const {
    if (::geteuid() != 0) {
      std::cout << "[ SKIPPED  ] character devices: mknod needs root, and as another user "
                   "/dev cannot be written anyway\n";
      return;
    }
    const fs::path device = dir_ / "null-device";
    ASSERT_EQ(::mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
    const auto refusal = [&](const fs::path& path) {
      return "error: cannot write " + path.string() + ": it is a character device\n" + kRule +
             "give another " + option + stdout_hint + "\n";
    };
    expect_refused(command + " " + option + " " + device.string(), device, refusal(device));
    ASSERT_TRUE(fs::is_character_file(fs::symlink_status(device)));
    const std::string before = snapshot("/dev/null");
    const Result r = runner(command + " " + option + " /dev/null");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, refusal("/dev/null"));
    EXPECT_EQ(snapshot("/dev/null"), before);
  }
};

TEST_F(OutputPathsCliTest, ExportWritesANewPathARegularFileOrStandardOutputAndNothingElse) {
  record_a_run();
  const Result table = runner("export 1");
  ASSERT_EQ(table.code, 0) << table.err;
  ASSERT_EQ(table.out.rfind("run_id,", 0), 0u) << table.out;

  const fs::path fresh = dir_ / "new.csv";
  Result r = runner("export 1 --out " + fresh.string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(fresh), table.out);
  const fs::path old = write("old.csv", "old\n");
  r = runner("export 1 --out " + old.string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(old), table.out);
  for (const char* name : {"-", "/dev/stdout"}) {
    r = runner(std::string("export 1 --out ") + name);
    EXPECT_EQ(r.code, 0) << name << "\n" << r.err;
    EXPECT_EQ(r.out, table.out) << name;
  }
  EXPECT_FALSE(fs::exists(dir_ / "-"));

  expect_each_kind_refused("export 1", "--out", ", or - for standard output");
  const fs::path folder = dir_ / "folder";
  fs::create_directory(folder);
  expect_refused("export 1 --out " + folder.string(), folder,
                 "error: cannot write " + folder.string() + ": it is a directory\n"
                 "hint: give the path of a file inside it, e.g. " + (folder / "out.csv").string() +
                     "\n");
  expect_refused("export 1 --format parquet --out -", dir_ / "-",
                 "error: cannot write parquet to standard output (--out -)\n"
                 "hint: give a file, e.g. --out out.parquet\n");
  expect_devices_refused("export 1", "--out", ", or - for standard output");
}

TEST_F(OutputPathsCliTest, ReportWritesANewPathARegularFileOrStandardOutputAndNothingElse) {
  record_a_run();
  const fs::path fresh = dir_ / "new.html";
  Result r = runner("report 1 --out " + fresh.string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(fresh).rfind("<!DOCTYPE html>", 0), 0u);
  const fs::path old = write("old.html", "old\n");
  r = runner("report 1 --out " + old.string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(old).rfind("<!DOCTYPE html>", 0), 0u);
  for (const char* name : {"-", "/dev/stdout"}) {
    r = runner(std::string("report 1 --out ") + name);
    EXPECT_EQ(r.code, 0) << name << "\n" << r.err;
    EXPECT_EQ(r.out.rfind("<!DOCTYPE html>", 0), 0u) << name;  // the page alone
    EXPECT_EQ(r.out.find("wrote "), std::string::npos) << name;
  }
  EXPECT_FALSE(fs::exists(dir_ / "-"));

  expect_each_kind_refused("report 1", "--out", ", or - for standard output");
  const fs::path folder = dir_ / "folder";
  fs::create_directory(folder);
  expect_refused("report 1 --out " + folder.string(), folder,
                 "error: cannot write " + folder.string() + ": it is a directory\n"
                 "hint: give the path of a file inside it, e.g. " +
                     (folder / "report.html").string() + "\n");
  expect_devices_refused("report 1", "--out", ", or - for standard output");
}

// A store is a regular file: SQLite would write through a link into its
// target, and wait on a FIFO for a writer.
TEST_F(OutputPathsCliTest, MergeIntoAnythingButANewPathOrARegularFileIsRefused) {
  record_a_run();
  const std::string merge = "merge " + db_.string();
  expect_each_kind_refused(merge, "--into", "");
  // A link to a real store: neither it nor its target changes.
  const fs::path store = dir_ / "all.db";
  fs::copy_file(db_, store);
  const fs::path link = dir_ / "all-link.db";
  fs::create_symlink(store, link);
  const std::string bytes = slurp(store);
  expect_refused(merge + " --into " + link.string(), link,
                 "error: cannot write " + link.string() + ": it is a symbolic link (to " +
                     store.string() + ")\n" + kRule + "give another --into, or the path it " +
                     "points to\n");
  EXPECT_EQ(slurp(store), bytes);
  expect_refused(merge + " --into -", dir_ / "-",
                 "error: cannot write a database to standard output (--into -)\n"
                 "hint: give a file, e.g. --into all.db\n");
  const fs::path folder = dir_ / "folder";
  fs::create_directory(folder);
  expect_refused(merge + " --into " + folder.string(), folder,
                 "error: cannot write " + folder.string() + ": it is a directory\n"
                 "hint: give the path of a file inside it, e.g. " + (folder / "all.db").string() +
                     "\n");
  // The rule's other half: a new path is created.
  const Result r = runner(merge + " --into " + (dir_ / "merged.db").string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(runner::test::query_int(dir_ / "merged.db", "SELECT count(*) FROM runs"), 1);
}

// train.save_to is checked when the experiment is validated, at its key:
// no run starts, and what stands there is left as it was.
TEST_F(OutputPathsCliTest, SaveToAnythingButANewPathOrARegularFileIsRefusedBeforeAnyRun) {
  const auto experiment = [&](const std::string& name, const std::string& save_to) {
    return write(name + ".toml", runner::test::tiny_experiment(
                                     {.steps = 3, .rest = "save_to = \"" + save_to + "\"\n"}));
  };
  const fs::path fifo = dir_ / "weights.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const std::string fifo_before = snapshot(fifo);
  CliTestBase::expect_refused(experiment("fifo", "weights.fifo"), "save_to = ",
                              "cannot write " + fifo.string() + ": it is a FIFO", kGood);
  EXPECT_EQ(snapshot(fifo), fifo_before);

  const fs::path target = write("real.safetensors", "not replaced\n");
  const fs::path link = dir_ / "weights.safetensors";
  fs::create_symlink(target, link);
  const std::string link_before = snapshot(link);
  CliTestBase::expect_refused(experiment("link", "weights.safetensors"), "save_to = ",
                              "cannot write " + link.string() + ": it is a symbolic link (to " +
                                  target.string() + ")",
                              kGood);
  EXPECT_EQ(snapshot(link), link_before);
  EXPECT_EQ(slurp(target), "not replaced\n");

  CliTestBase::expect_refused(experiment("stdout", "/dev/stdout"), "save_to = ",
                              "cannot write weights to standard output (train.save_to "
                              "/dev/stdout)",
                              kGood);
  // And a new path is where the weights go.
  const Result r = runner("run " + experiment("fresh", "fresh.safetensors").string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(dir_ / "fresh.safetensors")));
}

}  // namespace
