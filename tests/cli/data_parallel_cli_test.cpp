// Data-parallel training computes what one process computes on the whole
// batch: 2 and 3 ranks with the allreduce hook, each on its slice of every
// global batch, end 10 SGD-with-momentum steps at the parameters of one
// process trained on the global batches (the weights each run saves with
// [train] save_to), within float tolerance. 3 ranks: no power-of-two
// assumption anywhere (buckets, slices, the mean).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <map>
#include <string>

#include "runner/weights/state.hpp"
#include "support/cli_harness.hpp"

namespace {

namespace fs = std::filesystem;
using runner::test::run_runner;

class DataParallelCliTest : public runner::test::CliTestBase {
 protected:
  DataParallelCliTest() : CliTestBase("runner-dp-") {}

  // Trains `world` ranks of `per_rank` samples each (a global batch of 12)
  // and returns the saved parameters.
  std::map<std::string, torch::Tensor> train(int world, int per_rank) {
    const std::string name = "dp" + std::to_string(world);
    std::string text = "[experiment]\nname = \"" + name +
                       "\"\nseed = 3\n[device]\ntype = \"cpu\"\nthreads = 1\n"
                       "[model]\nplugin = \"mlp\"\nhidden = [32, 32]\n"
                       "[data]\nplugin = \"synthetic\"\nshape = [16]\nclasses = 5\nsize = 480\n"
                       "batch_size = " + std::to_string(per_rank) + "\n"
                       "[optimizer]\nplugin = \"sgd\"\nlr = 0.1\nmomentum = 0.9\n"
                       "[train]\nsteps = 10\nwarmup = 0\nsave_to = \"" + name + ".safetensors\"\n";
    if (world > 1) text += "[distributed]\nworld_size = " + std::to_string(world) + "\n";
    const fs::path file = write(name + ".toml", text);
    const auto r = run_runner("run " + file.string(), dir_, {db_, {}});
    EXPECT_EQ(r.code, 0) << r.err;
    return runner::weights::read_safetensors_tensors(dir_ / (name + ".safetensors"));
  }

  static void expect_close(const std::map<std::string, torch::Tensor>& a,
                           const std::map<std::string, torch::Tensor>& b, const std::string& what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (const auto& [name, tensor] : a) {
      ASSERT_EQ(b.count(name), 1u) << what << ": " << name;
      const double error = (tensor - b.at(name)).abs().max().item<double>();
      const double scale = tensor.abs().max().item<double>();
      EXPECT_LE(error, 1e-5 * std::max(1.0, scale)) << what << ": " << name;
    }
  }
};

TEST_F(DataParallelCliTest, RanksOnSlicesReachTheParametersOfOneProcessOnTheWholeBatch) {
  const auto one = train(1, 12);
  const auto two = train(2, 6);
  const auto three = train(3, 4);
  expect_close(one, two, "2 ranks");
  expect_close(one, three, "3 ranks");
  // The comparison can fail: the start (before any step) is far from the end.
  const auto untrained = [&] {
    std::string text = "[experiment]\nname = \"start\"\nseed = 3\n[device]\ntype = \"cpu\"\n"
                       "threads = 1\n[model]\nplugin = \"mlp\"\nhidden = [32, 32]\n"
                       "[data]\nplugin = \"synthetic\"\nshape = [16]\nclasses = 5\nsize = 480\n"
                       "batch_size = 12\n[optimizer]\nplugin = \"sgd\"\nlr = 0.0\n"
                       "[train]\nsteps = 1\nwarmup = 0\nsave_to = \"start.safetensors\"\n";
    const fs::path file = write("start.toml", text);
    EXPECT_EQ(run_runner("run " + file.string(), dir_, {db_, {}}).code, 0);
    return runner::weights::read_safetensors_tensors(dir_ / "start.safetensors");
  }();
  double moved = 0;
  for (const auto& [name, tensor] : one)
    moved = std::max(moved, (tensor - untrained.at(name)).abs().max().item<double>());
  EXPECT_GT(moved, 1e-2) << "10 steps did not move the parameters: the test would prove nothing";
}

}  // namespace
