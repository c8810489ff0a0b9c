// Weights written under the output-path rule (issue 30 item 1): a FIFO, a
// device or a symbolic link where weights go is left as it was; a regular file
// is replaced whole. Before the rule the temporary was renamed over any of them.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "runner/common/error.hpp"
#include "runner/weights/safetensors.hpp"
#include "support/cli_harness.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

namespace fs = std::filesystem;

using runner::weights::DType;
using runner::weights::TensorView;

const std::vector<float> kValues{1.0F, 2.0F};

void write_weights(const fs::path& path) {
  runner::weights::write_safetensors(
      path, {TensorView{"w", DType::f32, {2}, std::as_bytes(std::span(kValues))}});
}

std::size_t entries(const fs::path& folder) {
  return static_cast<std::size_t>(
      std::distance(fs::directory_iterator(folder), fs::directory_iterator()));
}

TEST(SafetensorsOutput, WhatIsNotARegularFileIsRefusedAndLeftAsItWas) {
  const runner::test::TempDir tmp("runner-safetensors-output-");
  const fs::path fifo = tmp.path() / "w.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_THROW_MSG(write_weights(fifo), runner::Error,
                   "cannot write " + fifo.string() + ": it is a FIFO");
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(fifo)));

  const fs::path target = tmp.write("target.safetensors", "kept\n");
  const fs::path link = tmp.path() / "link.safetensors";
  fs::create_symlink(target, link);
  EXPECT_THROW_MSG(write_weights(link), runner::Error,
                   "cannot write " + link.string() + ": it is a symbolic link (to " +
                       target.string() + ")");
  EXPECT_EQ(fs::read_symlink(link), target);
  EXPECT_EQ(runner::test::slurp(target), "kept\n");
  EXPECT_EQ(entries(tmp.path()), 3u);  // no temporary left behind

  // The rule's other half: a regular file is replaced, a new path created.
  write_weights(target);
  EXPECT_EQ(runner::weights::SafetensorsFile(target).tensors().size(), 1u);
  write_weights(tmp.path() / "new.safetensors");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(tmp.path() / "new.safetensors")));
}

}  // namespace
