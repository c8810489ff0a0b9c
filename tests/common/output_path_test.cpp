// The output-path rule (runner/common/output_path.hpp, issue 30 item 1): what
// counts as standard output, what stands at a path, and that neither the
// check nor the atomic writer replaces anything but a regular file.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "runner/common/error.hpp"
#include "runner/common/files.hpp"
#include "runner/common/output_path.hpp"
#include "support/cli_harness.hpp"
#include "support/expect_throw_msg.hpp"

namespace runner {
namespace {

namespace fs = std::filesystem;

using runner::test::slurp;
using runner::test::write_file;

const std::string kRule =
    "runner writes only to a new path or a regular file, and leaves anything else as it is: ";

class OutputPathTest : public ::testing::Test {
 protected:
  runner::test::TempDir tmp_{"runner-output-path-"};
  const fs::path& dir_ = tmp_.path();

  fs::path fifo(const std::string& name) const {
    const fs::path path = dir_ / name;
    EXPECT_EQ(::mkfifo(path.c_str(), 0644), 0);
    return path;
  }
  static OutputUse out_option() {
    OutputUse use;
    use.option = "--out";
    return use;
  }
  // The Error check_output throws for `path`, as "message\nhint"; "no error" if none.
  static std::string refusal(const fs::path& path, const OutputUse& use) {
    try {
      (void)check_output(path, use);
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2);
      return std::string(e.what()) + "\n" + e.hint();
    }
    return "no error";
  }
};

TEST_F(OutputPathTest, StandardOutputByItsNamesOnly) {
  for (const char* name : {"-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1", "/dev//stdout"})
    EXPECT_TRUE(names_standard_output(name)) << name;
  EXPECT_TRUE(names_standard_output("/proc/" + std::to_string(::getpid()) + "/fd/1"));
  // "./-" is the way to name a file called "-".
  for (const char* name : {"./-", "--", "/dev/stderr", "/dev/fd/2", "/proc/self/fd/10", "stdout"})
    EXPECT_FALSE(names_standard_output(name)) << name;
  EXPECT_EQ(check_output("-", out_option()), OutputTarget::standard_output);
  EXPECT_EQ(check_output("/dev/stdout", out_option()), OutputTarget::standard_output);
}

TEST_F(OutputPathTest, NamesWhatStandsAtAPathWithoutFollowingALink) {
  const fs::path file = write_file(dir_ / "file", "x");
  EXPECT_EQ(non_regular_kind(dir_ / "new"), "");
  EXPECT_EQ(non_regular_kind(dir_ / "no-folder" / "new"), "");
  EXPECT_EQ(non_regular_kind(file), "");
  EXPECT_EQ(non_regular_kind(dir_), "a directory");
  EXPECT_EQ(non_regular_kind(fifo("fifo")), "a FIFO");
  EXPECT_EQ(non_regular_kind("/dev/null"), "a character device");
  fs::create_symlink(file, dir_ / "link");
  EXPECT_EQ(non_regular_kind(dir_ / "link"), "a symbolic link");
  fs::create_symlink(dir_ / "nowhere", dir_ / "dangling");
  EXPECT_EQ(non_regular_kind(dir_ / "dangling"), "a symbolic link");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string socket_path = (dir_ / "socket").string();
  ASSERT_LT(socket_path.size(), sizeof(address.sun_path));
  socket_path.copy(address.sun_path, socket_path.size());
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  EXPECT_EQ(non_regular_kind(socket_path), "a socket");
  ::close(fd);
}

TEST_F(OutputPathTest, ANewPathOrARegularFileIsAFile) {
  EXPECT_EQ(check_output(dir_ / "new.csv", out_option()), OutputTarget::file);
  EXPECT_EQ(check_output(write_file(dir_ / "old.csv", "old"), out_option()), OutputTarget::file);
  EXPECT_EQ(slurp(dir_ / "old.csv"), "old");
  EXPECT_FALSE(fs::exists(dir_ / "new.csv"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(OutputPathTest, EverythingElseIsRefusedWithWhatItIsAndLeftAsItIs) {
  const fs::path pipe = fifo("fifo");
  EXPECT_EQ(refusal(pipe, out_option()),
            "cannot write " + pipe.string() + ": it is a FIFO\n" + kRule +
                "give another --out, or - for standard output");
  EXPECT_EQ(refusal("/dev/null", out_option()),
            "cannot write /dev/null: it is a character device\n" + kRule +
                "give another --out, or - for standard output");
  const fs::path target = write_file(dir_ / "target", "kept");
  fs::create_symlink(target, dir_ / "link");
  EXPECT_EQ(refusal(dir_ / "link", out_option()),
            "cannot write " + (dir_ / "link").string() + ": it is a symbolic link (to " +
                target.string() + ")\n" + kRule +
                "give another --out, or the path it points to, or - for standard output");
  EXPECT_EQ(refusal(dir_, out_option()),
            "cannot write " + dir_.string() + ": it is a directory\n" +
                "give the path of a file inside it, e.g. " + (dir_ / "out.csv").string());
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(pipe)));
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir_ / "link")));
  EXPECT_EQ(fs::read_symlink(dir_ / "link"), target);
  EXPECT_EQ(slurp(target), "kept");
}

TEST_F(OutputPathTest, AnOutputThatTakesNoStandardOutputRefusesItAtItsKey) {
  OutputUse use;
  use.option = "train.save_to";
  use.example = "weights.safetensors";
  use.what = "weights";
  use.standard_output = false;
  use.where = SourceLocation{"exp.toml", 7, 11};
  EXPECT_EQ(refusal("/dev/stdout", use),
            "exp.toml:7:11: cannot write weights to standard output (train.save_to "
            "/dev/stdout)\ngive a file, e.g. train.save_to weights.safetensors");
  const fs::path pipe = fifo("fifo");
  EXPECT_EQ(refusal(pipe, use), "exp.toml:7:11: cannot write " + pipe.string() +
                                    ": it is a FIFO\n" + kRule + "give another train.save_to");
}

// The last moment counts too: a FIFO (or link) that appears between the
// check and the rename is not renamed over, and the temporary goes.
TEST_F(OutputPathTest, TheAtomicWriterRefusesWhatAppearedAfterTheCheck) {
  const fs::path path = dir_ / "out.csv";
  EXPECT_EQ(check_output(path, out_option()), OutputTarget::file);
  {
    TemporaryFile file(path);
    write_file(file.path(), "new");
    ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
    EXPECT_THROW_MSG(file.commit(), Error, "cannot write " + path.string() + ": it is a FIFO");
  }
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(path)));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);

  const fs::path target = write_file(dir_ / "target", "kept");
  fs::create_symlink(target, dir_ / "link");
  EXPECT_THROW_MSG(write_file_atomically(dir_ / "link", "new"), Error,
                   "cannot write " + (dir_ / "link").string() + ": it is a symbolic link (to " +
                       target.string() + ")");
  EXPECT_EQ(fs::read_symlink(dir_ / "link"), target);
  EXPECT_EQ(slurp(target), "kept");
  // A regular file is still replaced whole.
  write_file_atomically(target, "replaced");
  EXPECT_EQ(slurp(target), "replaced");
}

}  // namespace
}  // namespace runner
