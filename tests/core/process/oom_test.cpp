// Out of memory is said of a killed run only when the kernel's count of OOM
// kills in its cgroup rose: the decision, and finding the count from
// /proc/self/cgroup and /proc/self/mountinfo (v1, v2, hybrid, namespaced).
#include "runner/process/oom.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;
using runner::oom_kill_counter_file;

// One mountinfo line of a cgroup mount.
std::string mount(const std::string& root, const std::string& point, const std::string& type,
                  const std::string& options) {
  return "35 31 0:32 " + root + " " + point + " rw,relatime - " + type + " " + type + " " +
         options + "\n";
}

const std::string kTmpfs = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n";

TEST(OomKillCounter, OnCgroupV1ItIsTheMemoryHierarchysOomControl) {
  const std::string cgroup = "9:name=systemd:/\n4:memory:/process_api/599c\n1:cpu:/\n0::/\n";
  const std::string mounts = kTmpfs + mount("/", "/sys/fs/cgroup/cpu", "cgroup", "rw,cpu") +
                             mount("/", "/sys/fs/cgroup/memory", "cgroup", "rw,memory") +
                             mount("/", "/sys/fs/cgroup/unified", "cgroup2", "rw");
  EXPECT_EQ(oom_kill_counter_file(cgroup, mounts),
            fs::path("/sys/fs/cgroup/memory/process_api/599c/memory.oom_control"));
}

TEST(OomKillCounter, OnCgroupV2ItIsMemoryEventsAndANamespacedRootIsFollowed) {
  EXPECT_EQ(oom_kill_counter_file("0::/user.slice/run.scope\n",
                                  mount("/", "/sys/fs/cgroup", "cgroup2", "rw,nsdelegate")),
            fs::path("/sys/fs/cgroup/user.slice/run.scope/memory.events"));
  // A container sees only its part of the hierarchy, mounted at its root.
  const std::string inside = mount("/docker/abc", "/sys/fs/cgroup", "cgroup2", "rw");
  EXPECT_EQ(oom_kill_counter_file("0::/docker/abc/job\n", inside),
            fs::path("/sys/fs/cgroup/job/memory.events"));
  EXPECT_EQ(oom_kill_counter_file("0::/docker/abc\n", inside),
            fs::path("/sys/fs/cgroup/memory.events"));
  EXPECT_EQ(oom_kill_counter_file("0::/docker/abcd\n", inside), fs::path());
  // mountinfo writes a space in a path as \040.
  EXPECT_EQ(oom_kill_counter_file("0::/a\n", mount("/", "/mnt/c\\040g", "cgroup2", "rw")),
            fs::path("/mnt/c g/a/memory.events"));
}

TEST(OomKillCounter, WithoutAMountedMemoryHierarchyThereIsNone) {
  // Memory on v1 but only v2 mounted: the v2 folder has no memory count.
  EXPECT_EQ(oom_kill_counter_file("4:memory:/a\n0::/a\n",
                                  mount("/", "/sys/fs/cgroup", "cgroup2", "rw")),
            fs::path());
  EXPECT_EQ(oom_kill_counter_file("0::/a\n", kTmpfs), fs::path());
  EXPECT_EQ(oom_kill_counter_file("", ""), fs::path());
}

class OomDecision : public ::testing::Test {
 protected:
  OomDecision()
      : file_(fs::temp_directory_path() / ("runner_oom_test_" + std::to_string(::getpid()) + "_" +
                                           ::testing::UnitTest::GetInstance()
                                               ->current_test_info()
                                               ->name())) {}
  ~OomDecision() override { fs::remove(file_); }
  // A cgroup v2 memory.events with `kills` OOM kills (oom_group_kill must not be read).
  void write_count(int kills) const {
    std::ofstream(file_) << "low 0\nhigh 0\nmax 12\noom 3\noom_kill " << kills
                         << "\noom_group_kill 9\n";
  }
  fs::path file_;
};

TEST_F(OomDecision, TheCountIsReadFromV1AndV2Files) {
  write_count(4);
  EXPECT_EQ(runner::read_oom_kills(file_), 4);
  std::ofstream(file_) << "oom_kill_disable 0\nunder_oom 0\noom_kill 7\n";
  EXPECT_EQ(runner::read_oom_kills(file_), 7);
  std::ofstream(file_) << "oom_kill_disable 0\n";
  EXPECT_EQ(runner::read_oom_kills(file_), std::nullopt);
  EXPECT_EQ(runner::read_oom_kills(file_.string() + ".absent"), std::nullopt);
  EXPECT_EQ(runner::read_oom_kills(fs::path()), std::nullopt);
}

TEST_F(OomDecision, OutOfMemoryIsSaidOnlyWhenTheKernelsCountRose) {
  const std::string who = "rank 0 of 2 (host h, pid 7)";
  write_count(1);
  const runner::OomKillBaseline before = runner::OomKillBaseline::take(file_);
  EXPECT_EQ(runner::describe_kill(who, SIGKILL, before),
            who + " was killed by signal 9 (Killed) from outside runner (not the kernel's OOM "
                  "killer: oom_kill stayed at 1 in " + file_.string() + ")");
  write_count(2);
  EXPECT_EQ(runner::describe_kill(who, SIGKILL, before),
            who + " was killed by signal 9 (Killed): out of memory (the kernel's OOM killer: "
                  "oom_kill went from 1 to 2 in " + file_.string() + ")");
  EXPECT_EQ(runner::describe_kill("", SIGKILL, before),
            "killed by signal 9 (Killed): out of memory (the kernel's OOM killer: oom_kill went "
            "from 1 to 2 in " + file_.string() + ")");
  // Only SIGKILL is the OOM killer's: a crash stays a crash.
  EXPECT_EQ(runner::describe_kill("", SIGSEGV, before), "killed by signal 11 (Segmentation fault)");
}

TEST_F(OomDecision, WithoutACountNeitherCauseIsClaimed) {
  const std::string either =
      "killed by signal 9 (Killed) from outside runner, or by the kernel's OOM killer (this "
      "machine has no cgroup count of OOM kills to tell which)";
  EXPECT_EQ(runner::describe_kill("", SIGKILL, runner::OomKillBaseline::take(fs::path())), either);
  // A count that appears or vanishes meanwhile proves nothing either.
  const runner::OomKillBaseline missing = runner::OomKillBaseline::take(file_);
  write_count(5);
  EXPECT_EQ(runner::describe_kill("", SIGKILL, missing), either);
  const runner::OomKillBaseline present = runner::OomKillBaseline::take(file_);
  fs::remove(file_);
  EXPECT_EQ(runner::describe_kill("", SIGKILL, present), either);
}

TEST(OomKillCounter, ThisProcesssCountIsReadableWhereverItIsFound) {
  const fs::path file = oom_kill_counter_file();
  if (file.empty() || !fs::exists(file)) GTEST_SKIP() << "no memory cgroup count here";
  EXPECT_TRUE(runner::read_oom_kills(file).has_value()) << file;
}

}  // namespace
