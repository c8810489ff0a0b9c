// torch.save files written by Python exactly as users write them: state dicts
// read tensor for tensor like the safetensors copy written beside them,
// shared storages stay shared, the weights compute what Python computed, and
// what is not a state dict is refused with a message naming the file and
// what it holds. (Hostile and damaged archives: torch_pickle_test.cpp.)
#include "runner/weights/torch_file.hpp"

#include <gtest/gtest.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include "runner/common/error.hpp"
#include "runner/weights/state.hpp"
#include "support/cli_harness.hpp"
#include "support/expect_throw_msg.hpp"
#include "support/python_oracle.hpp"

namespace {

namespace fs = std::filesystem;
using runner::weights::read_torch_state;
using runner::weights::read_weights;
using Tensors = std::map<std::string, torch::Tensor>;

class TorchFileTest : public ::testing::Test {
 protected:
  /// Runs `torch_files.py command dir_`.
  void python_writes(const std::string& command) {
    const auto r = runner::test::run_oracle("torch_files.py", {command, dir_.string()});
    ASSERT_EQ(r.code, 0) << r.output;
  }
  fs::path file(const std::string& name) const { return dir_ / name; }
  static std::string prefix(const fs::path& path) {
    return "cannot read weights from '" + path.string() + "': ";
  }

  /// Every name of `want` in `got` with the same dtype, shape and bytes.
  static void expect_same(const Tensors& got, const Tensors& want) {
    std::vector<std::string> got_names, want_names;
    for (const auto& entry : got) got_names.push_back(entry.first);
    for (const auto& entry : want) want_names.push_back(entry.first);
    ASSERT_EQ(got_names, want_names);
    for (const auto& [name, tensor] : want) {
      const torch::Tensor& g = got.at(name);
      EXPECT_EQ(g.scalar_type(), tensor.scalar_type()) << name;
      EXPECT_EQ(g.sizes(), tensor.sizes()) << name;
      EXPECT_TRUE(g.equal(tensor)) << name;  // exact: both hold Python's values
      EXPECT_FALSE(g.requires_grad()) << name;
    }
  }

  runner::test::TempDir tmp_{"runner_torch_file"};
  const fs::path& dir_ = tmp_.path();
};

TEST_F(TorchFileTest, StateDictsFromPythonReadAsTheirSafetensorsCopies) {
  RUNNER_REQUIRE_ORACLE("torch,safetensors");
  python_writes("good");
  for (const std::string name : {"small", "half", "tied", "params", "dtypes", "views"}) {
    SCOPED_TRACE(name);
    Tensors want = runner::weights::read_safetensors_tensors(file(name + ".safetensors"));
    want.erase("input");
    want.erase("expected_output");
    expect_same(read_torch_state(file(name + ".pt")), want);
  }
  EXPECT_EQ(read_torch_state(file("half.pt")).at("0.weight").scalar_type(), torch::kHalf);
  EXPECT_EQ(read_torch_state(file("small.pt")).at("1.num_batches_tracked").item<std::int64_t>(), 3);

  // Tied weights: two names, one storage, read once.
  const Tensors tied = read_torch_state(file("tied.pt"));
  EXPECT_EQ(tied.at("embed.weight").data_ptr(), tied.at("head.weight").data_ptr());

  const Tensors dtypes = read_torch_state(file("dtypes.pt"));
  EXPECT_EQ(dtypes.at("f16").scalar_type(), torch::kHalf);
  EXPECT_EQ(dtypes.at("bf16").scalar_type(), torch::kBFloat16);
  EXPECT_EQ(dtypes.at("i64").scalar_type(), torch::kLong);
  EXPECT_EQ(dtypes.at("bool").scalar_type(), torch::kBool);
  EXPECT_EQ(dtypes.at("scalar").dim(), 0);
  EXPECT_EQ(dtypes.at("empty").sizes(), (std::vector<std::int64_t>{0, 3}));

  // Views keep their offsets and strides into the one storage they share.
  const Tensors views = read_torch_state(file("views.pt"));
  EXPECT_FALSE(views.at("t").is_contiguous());
  EXPECT_EQ(views.at("t").strides(), (std::vector<std::int64_t>{1, 6}));
  EXPECT_EQ(views.at("block").storage_offset(), 8);
  EXPECT_EQ(views.at("strided").strides(), (std::vector<std::int64_t>{6, 2}));
  for (const auto& [name, tensor] : views)
    EXPECT_TRUE(tensor.storage().is_alias_of(views.at("base").storage())) << name;

  // read_weights tells the formats apart by content, not by name.
  fs::copy_file(file("small.pt"), dir_ / "weights.bin");
  fs::copy_file(file("dtypes.safetensors"), dir_ / "weights.pt");
  expect_same(read_weights(dir_ / "weights.bin"), read_torch_state(file("small.pt")));
  expect_same(read_weights(dir_ / "weights.pt"),
              runner::weights::read_safetensors_tensors(file("dtypes.safetensors")));
}

TEST_F(TorchFileTest, LoadedIntoTheSameModuleItComputesWhatPythonComputed) {
  RUNNER_REQUIRE_ORACLE("torch,safetensors");
  python_writes("good");
  const Tensors reference = runner::weights::read_safetensors_tensors(file("small.safetensors"));
  torch::nn::Sequential model(torch::nn::Linear(3, 4), torch::nn::BatchNorm1d(4));
  const auto load =
      runner::weights::load_state(*model, read_weights(file("small.pt")), true, "small.pt");
  EXPECT_EQ(load.loaded.size(), 7u);
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor out = model->forward(reference.at("input"));
  // float32, the same operations in the same order: rtol 1e-5, atol 1e-6.
  EXPECT_TRUE(out.allclose(reference.at("expected_output"), 1e-5, 1e-6))
      << (out - reference.at("expected_output")).abs().max().item<double>();
}

TEST_F(TorchFileTest, TorchvisionResNet18ReadsAsItsSafetensorsCopy) {
  RUNNER_REQUIRE_ORACLE("torch,torchvision,safetensors");
  python_writes("resnet");
  const Tensors got = read_torch_state(file("resnet18.pt"));
  expect_same(got, runner::weights::read_safetensors_tensors(file("resnet18.safetensors")));
  EXPECT_EQ(got.at("fc.weight").sizes(), (std::vector<std::int64_t>{1000, 512}));
}

TEST_F(TorchFileTest, WhatIsNotAStateDictIsNamed) {
  RUNNER_REQUIRE_ORACLE("torch,safetensors");
  python_writes("bad");
  const auto expect_error = [this](const std::string& name, const std::string& what) {
    EXPECT_THROW_MSG((void)read_torch_state(file(name)), runner::Error, prefix(file(name)) + what);
  };
  expect_error("checkpoint.pt",
               "it holds a checkpoint with the keys model, optimizer, epoch, seen, delta, not a "
               "state dict: the tensors are one level down, in 'model'");
  expect_error("list.pt", "it holds a list, not a dict of name -> tensor");
  expect_error("entry.pt", "its entry 'step' is an int, not a tensor");
  expect_error("intkey.pt", "its dict has the key 0 (an int), not a parameter name");
  expect_error("namespace.pt",
               "its data.pkl needs Python's argparse.Namespace, which a state dict of tensors "
               "does not");
  expect_error("protocol4.pt",
               "its data.pkl uses pickle protocol 4; runner reads protocol 2, which torch.save "
               "writes by default");
  expect_error("legacy.pt",
               "it is in the format torch.save wrote before PyTorch 1.6, which runner does not "
               "read");
  expect_error("nodatapkl.pt", "its zip archive has no data.pkl, so torch.save did not write it");
  expect_error("nostorage.pt",
               "its data.pkl refers to the tensor data 'data/0', which the zip archive lacks (the "
               "file is damaged)");
  // read_weights sends them all to the same reader.
  EXPECT_THROW_MSG((void)read_weights(file("legacy.pt")), runner::Error,
                   prefix(file("legacy.pt")) + "it is in the format torch.save wrote before "
                                               "PyTorch 1.6, which runner does not read");
  // The hint says what to do.
  try {
    (void)read_torch_state(file("checkpoint.pt"));
  } catch (const runner::Error& e) {
    EXPECT_EQ(e.hint(), "save the state dict alone: torch.save(checkpoint['model'], path), or "
                        "torch.save(model.state_dict(), path)");
  }
  try {
    (void)read_torch_state(file("legacy.pt"));
  } catch (const runner::Error& e) {
    EXPECT_EQ(e.hint(), "save it again with a current torch: torch.save(torch.load(path), path) "
                        "writes the zip format");
  }
}

TEST_F(TorchFileTest, WhatIsNotAWeightsFileIsNamed) {
  EXPECT_THROW_MSG((void)read_weights(dir_ / "absent.pt"), runner::Error,
                   prefix(dir_ / "absent.pt") + "no such file");
  EXPECT_THROW_MSG((void)read_torch_state(dir_), runner::Error,
                   prefix(dir_) + "not a regular file");
  EXPECT_THROW_MSG((void)read_weights(dir_), runner::Error, prefix(dir_) + "not a regular file");
  const fs::path empty = tmp_.write("empty.pt", "");
  EXPECT_THROW_MSG((void)read_weights(empty), runner::Error, prefix(empty) + "the file is empty");
  EXPECT_THROW_MSG((void)read_torch_state(empty), runner::Error,
                   prefix(empty) + "the file is empty");
  const fs::path text = tmp_.write("notes.pt", "weights: see the wiki\n");
  EXPECT_THROW_MSG((void)read_weights(text), runner::Error,
                   prefix(text) + "it is neither a safetensors file (an 8-byte header length, "
                                  "then '{') nor a torch.save file (a zip archive, starting with "
                                  "PK)");
  EXPECT_THROW_MSG((void)read_torch_state(text), runner::Error,
                   prefix(text) + "it is not a zip archive, as torch.save writes");
}

}  // namespace
