// The built-in plugins state their option rules before any model is built:
// the experiment layer refuses a bad combination at the option's
// file:line:col (OptionBinder::check), and the host's model data check
// (PluginHost::check_model_data, which the pre-run check calls) refuses an
// option that does not fit the loader's data, or data the model cannot take.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <runner/sdk.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "runner/experiment/experiment.hpp"
#include "runner/host/host.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

namespace fs = std::filesystem;
using Values = std::map<std::string, runner::OptionValue>;

const fs::path kBuiltins = fs::path(RUNNER_BINARY_DIR) / "lib" / "runner" / "plugins";

class OptionRules : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    host_ = new runner::PluginHost();
    host_->load(kBuiltins);
  }
  static void TearDownTestSuite() { delete host_; }
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("runner_option_rules_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The error of an experiment whose [model] or [optimizer] holds `section`.
  std::string error_of(const std::string& section) const {
    const fs::path file = dir_ / "exp.toml";
    std::ofstream(file) << section
                        << "\n[data]\nplugin = \"synthetic\"\n"
                        << (section.rfind("[model]", 0) == 0
                                ? "[optimizer]\nplugin = \"sgd\"\n"
                                : "[model]\nplugin = \"mlp\"\n");
    try {
      (void)runner::load_experiment(file, *host_);
    } catch (const runner::Error& e) {
      EXPECT_EQ(e.exit_code(), 2);
      return e.what();
    }
    return "(no error)";
  }
  std::string at(int line, int column) const {
    return (dir_ / "exp.toml").string() + ":" + std::to_string(line) + ":" +
           std::to_string(column) + ": ";
  }

  // The message of the data check of model `name` over `options` and `context`.
  static std::string data_error(const std::string& name, Values options,
                                const runner::ModelContext& context, std::string* option) {
    try {
      host_->check_model_data(name, runner::Options(std::move(options)), context);
    } catch (const runner::PluginOptionError& e) {
      *option = e.option();
      return e.detail();
    } catch (const runner::PluginDataError& e) {
      *option = "";
      EXPECT_EQ(e.exit_code(), 2);
      return e.what();
    }
    return "(no error)";
  }

  static runner::PluginHost* host_;
  fs::path dir_;
};
runner::PluginHost* OptionRules::host_ = nullptr;

runner::ModelContext images(std::int64_t channels, std::int64_t side, std::int64_t classes) {
  runner::ModelContext c;
  c.input_shape = {channels, side, side};
  c.num_classes = classes;
  return c;
}

runner::ModelContext tokens(std::int64_t seq_len, std::int64_t vocab) {
  runner::ModelContext c;
  if (seq_len > 0) c.input_shape = {seq_len};
  c.num_classes = vocab;
  return c;
}

TEST_F(OptionRules, TransformerLmCombinationsAreRefusedAtTheOption) {
  const std::string lm = "[model]\nplugin = \"transformer_lm\"\n";
  const std::string p = "of model plugin 'transformer_lm': ";
  EXPECT_EQ(error_of(lm + "width = 250\nheads = 4\n"),
            at(3, 9) + "'model.width' " + p +
                "width = 250 is not divisible by heads = 4; each head takes width / heads "
                "dimensions, so make width a multiple of heads");
  EXPECT_EQ(error_of(lm + "flavour = \"llama\"\nheads = 4\nkv_heads = 3\n"),
            at(5, 12) + "'model.kv_heads' " + p +
                "kv_heads = 3 does not divide heads = 4; each key/value head serves heads / "
                "kv_heads query heads, so pick a divisor of heads (0 = heads)");
  EXPECT_EQ(error_of(lm + "kv_heads = 2\n"),
            at(3, 12) + "'model.kv_heads' " + p +
                "kv_heads = 2 asks for grouped-query attention, which only the llama flavour "
                "has; for gpt2 leave kv_heads at 0 (one key/value head per head)");
  EXPECT_EQ(error_of(lm + "flavour = \"llama\"\nwidth = 36\nheads = 4\n"),
            at(4, 9) + "'model.width' " + p +
                "rotary position embeddings need an even head dimension, but width / heads = 36 "
                "/ 4 = 9; change width or heads");
  EXPECT_EQ(error_of(lm + "seq_len = 256\nmax_seq_len = 128\n"),
            at(4, 15) + "'model.max_seq_len' " + p +
                "seq_len = 256 is longer than max_seq_len = 128 (the positions the model has); "
                "raise max_seq_len or shorten the sequences");
  EXPECT_EQ(error_of(lm + "flavour = \"llama\"\nactivation_op = \"runner::bias_gelu\"\n"),
            at(4, 17) + "'model.activation_op' " + p +
                "the llama flavour's MLP is SwiGLU (silu(gate_proj(x)) * up_proj(x), no bias): "
                "it has no GELU for activation_op = \"runner::bias_gelu\" to replace; leave "
                "activation_op empty");
}

TEST_F(OptionRules, ResnetDepthVitPatchAndSgdNesterovAreRefusedAtTheOption) {
  EXPECT_EQ(error_of("[model]\nplugin = \"resnet\"\ndepth = 20\n"),
            at(3, 9) + "'model.depth' must be one of 18, 34, 50, 101, 152, found 20");
  EXPECT_EQ(error_of("[model]\nplugin = \"vit\"\nimage_size = 40\npatch_size = 16\n"),
            at(4, 14) + "'model.patch_size' of model plugin 'vit': image size 40 is not "
                        "divisible by patch_size = 16; choose a patch size that divides it or "
                        "resize the loader's images");
  EXPECT_EQ(error_of("[optimizer]\nplugin = \"sgd\"\nnesterov = true\n"),
            at(3, 12) + "'optimizer.nesterov' of optimizer plugin 'sgd': nesterov = true needs "
                        "momentum > 0");
}

TEST_F(OptionRules, ModelDataChecksNameTheOptionThatDoesNotFitTheData) {
  std::string option;
  EXPECT_EQ(data_error("resnet", {{"num_classes", std::int64_t{5}}}, images(3, 32, 10), &option),
            "num_classes = 5 is fewer than the loader's 10 classes; raise it or leave it at 0 "
            "(the loader's)");
  EXPECT_EQ(option, "num_classes");
  EXPECT_EQ(data_error("vit", {{"image_size", std::int64_t{224}}}, images(3, 32, 10), &option),
            "image_size = 224 differs from the loader's 32x32 images; leave it at 0 (the "
            "loader's) or set the loader's shape to [3, 224, 224]");
  EXPECT_EQ(option, "image_size");
  EXPECT_EQ(data_error("vit", {{"patch_size", std::int64_t{12}}}, images(3, 32, 10), &option),
            "image size 32 is not divisible by patch_size = 12; choose a patch size that "
            "divides it or resize the loader's images");
  EXPECT_EQ(option, "patch_size");
  EXPECT_EQ(data_error("transformer_lm", {{"vocab", std::int64_t{40}}}, tokens(16, 50), &option),
            "vocab = 40 is smaller than the loader's 50 tokens; raise it or leave it at 0 (the "
            "loader's)");
  EXPECT_EQ(option, "vocab");
  EXPECT_EQ(data_error("transformer_lm", {{"seq_len", std::int64_t{32}}}, tokens(16, 50), &option),
            "seq_len = 32 differs from the loader's sequences of 16 tokens; leave it at 0 (the "
            "loader's) or change the loader's");
  EXPECT_EQ(option, "seq_len");
  EXPECT_EQ(data_error("transformer_lm", {{"max_seq_len", std::int64_t{8}}}, tokens(16, 50),
                       &option),
            "seq_len = 16 is longer than max_seq_len = 8 (the positions the model has); raise "
            "max_seq_len or shorten the sequences");
  EXPECT_EQ(option, "max_seq_len");
}

TEST_F(OptionRules, ModelDataChecksRefuseDataTheModelCannotTake) {
  std::string option = "?";
  EXPECT_EQ(data_error("resnet", {}, images(1, 32, 10), &option),
            "model plugin 'resnet' cannot take this data: needs RGB image samples [3, height, "
            "width]; set the loader's shape, e.g. shape = [3, 32, 32]");
  EXPECT_EQ(option, "");
  EXPECT_EQ(data_error("convnet", {}, images(3, 2, 10), &option),
            "model plugin 'convnet' cannot take this data: needs image samples [channels, "
            "height, width] of at least 4x4; set the loader's shape, e.g. shape = [3, 32, 32]");
  EXPECT_EQ(data_error("vit", {}, runner::ModelContext{}, &option),
            "model plugin 'vit' cannot take this data: a classification model needs the sample "
            "shape from the loader; add a [data] section whose loader declares its input shape");
  EXPECT_EQ(data_error("transformer_lm", {}, images(3, 32, 10), &option),
            "model plugin 'transformer_lm' cannot take this data: needs token sequences from the "
            "loader (input_shape [seq_len]), but it declares [3, 32, 32]; use a token loader "
            "such as synthetic_tokens");
  // Data that fit: no error, and no model is built.
  EXPECT_EQ(data_error("resnet", {}, images(3, 32, 10), &option), "(no error)");
  EXPECT_EQ(data_error("transformer_lm", {}, tokens(16, 50), &option), "(no error)");
  EXPECT_EQ(data_error("mlp", {}, tokens(16, 1), &option),
            "model plugin 'mlp' cannot take this data: a classification model needs a loader "
            "with at least 2 classes; the loader declares 1");
  // A model without a data check (a compiled one checks its file when built) passes.
  EXPECT_EQ(data_error("torchscript", {}, runner::ModelContext{}, &option), "(no error)");
}

}  // namespace
