// Model `torchscript`: runs a TorchScript module file (torch.jit.save; made
// by python/runner_export.py or by any torch.jit.trace / torch.jit.script)
// for inference, optionally frozen (torch.jit.freeze) and optimized
// (torch.jit.optimize_for_inference), or trains it when it has trainable
// parameters and returns logits (the loss is the cross-entropy of
// [batch, classes] or [batch, seq, vocab] logits).
//
// The module's parameters and buffers are shown to runner as a tree of
// torch::nn::Module mirrors with the same names as the Python state dict
// (layer1.0.conv1.weight, ...) holding the same tensors: the optimizer
// updates the TorchScript module's own weights, and init_from / save_to
// read and write its state by name.
//
// The exporter stores its metadata (sample shape, dtype, torch version) in
// the file's extra file runner.json; for a file without it, the options
// input_shape / input_dtype say what to feed when there is no [data].
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>

#include <nlohmann/json.hpp>

#include "../common/exported.hpp"

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using runner_models::exported::ExportMeta;

struct TorchScriptOptions {
  std::string file;
  bool freeze = false;
  bool optimize_for_inference = false;
  std::vector<std::int64_t> input_shape;
  std::string input_dtype = "float32";
  std::int64_t input_high = 0;
};

/// A torch::nn::Module holding the same parameters and buffers as a
/// TorchScript module, with its children mirrored under the same names.
class Mirror final : public torch::nn::Module {
 public:
  explicit Mirror(torch::jit::Module scripted) : scripted_(std::move(scripted)) {
    for (const auto& p : scripted_.named_parameters(/*recurse=*/false))
      register_parameter(p.name, p.value, p.value.requires_grad());
    for (const auto& b : scripted_.named_buffers(/*recurse=*/false))
      register_buffer(b.name, b.value);
    for (const auto& child : scripted_.named_children())
      register_module(child.name, std::make_shared<Mirror>(child.value));
  }
  /// Train/eval reaches the TorchScript module (dropout, batch norm).
  void train(bool on = true) override {
    scripted_.train(on);
    torch::nn::Module::train(on);
  }

 private:
  torch::jit::Module scripted_;
};

class TorchScript final : public runner::Model {
 public:
  TorchScript(const TorchScriptOptions& o, const runner::ModelContext& context) {
    const std::string what = "the TorchScript file '" + o.file + "'";
    // The archive's directory and runner.json are read and checked by
    // runner's own reader (fuzzed) before LibTorch sees the file.
    const std::map<std::string, std::string> stored = runner_models::exported::read_archive_metadata(
        o.file, runner_models::exported::ArchiveKind::torchscript, "", "file", what);
    try {
      scripted_ = torch::jit::load(o.file, context.device);
    } catch (const c10::Error& e) {
      throw runner::OptionError("file", what + " is not a TorchScript module (" +
                                            runner_models::exported::first_line(e.what_without_backtrace()) +
                                            "); save one with torch.jit.save or runner-export");
    }
    meta_ = runner_models::exported::parse_meta(stored, "file");
    // TorchScript runs any batch size: the batch dimension is always dynamic.
    meta_.dynamic_dims.push_back(0);
    if (!o.input_shape.empty()) {
      meta_.input_shape = o.input_shape;
      meta_.input_shape.insert(meta_.input_shape.begin(), 1);
      const auto dtype = runner_models::exported::dtype_of(o.input_dtype);
      if (!dtype) throw runner::OptionError("input_dtype", "unknown dtype '" + o.input_dtype + "'");
      meta_.input_dtype = *dtype;
      meta_.input_high = o.input_high;
    }
    runner_models::exported::check_meta(meta_, context, "file", what);
    if (context.training && (o.freeze || o.optimize_for_inference))
      throw runner::OptionError(o.freeze ? "freeze" : "optimize_for_inference",
                                "freezing inlines the weights as constants, so a frozen module "
                                "cannot train; use it with experiment.kind = \"infer\"");
    if (o.freeze || o.optimize_for_inference) {
      scripted_.eval();
      try {
        scripted_ = o.optimize_for_inference ? torch::jit::optimize_for_inference(scripted_)
                                             : torch::jit::freeze(scripted_);
      } catch (const c10::Error& e) {
        throw runner::OptionError(o.optimize_for_inference ? "optimize_for_inference" : "freeze",
                                  what + " cannot be frozen: " +
                                      runner_models::exported::first_line(e.what_without_backtrace()));
      }
    }
    mirror_ = std::make_shared<Mirror>(scripted_);
    if (context.training && parameter_count() == 0)
      throw runner::OptionError("file", what +
                                            " has no trainable parameters; train a module saved "
                                            "with its parameters (not frozen), or run inference");
    provenance_ = runner_models::exported::provenance(meta_);
    provenance_["format"] = "torchscript";
    provenance_["frozen"] = o.freeze || o.optimize_for_inference ? "true" : "false";
    provenance_["optimized_for_inference"] = o.optimize_for_inference ? "true" : "false";
  }

  torch::nn::Module& module() override { return *mirror_; }

  torch::Tensor forward(const runner::Batch& batch) override {
    runner_models::exported::check_inputs(meta_, batch.inputs);
    const c10::IValue out = scripted_.forward({batch.inputs});
    if (!out.isTensor())
      throw std::runtime_error("the module returned " + out.tagKind() +
                               ", not a tensor; runner's models return one tensor (logits)");
    return out.toTensor();
  }

  torch::Tensor loss(const torch::Tensor& output, const runner::Batch& batch) override {
    return runner_models::exported::logits_loss(output, batch);
  }

  runner::Batch example_batch(std::int64_t batch_size, torch::Device device) override {
    return runner_models::exported::example_batch(meta_, batch_size, device);
  }

  std::map<std::string, std::string> provenance() override { return provenance_; }

 private:
  torch::jit::Module scripted_;
  std::shared_ptr<Mirror> mirror_;
  ExportMeta meta_;
  std::map<std::string, std::string> provenance_;
};

void register_plugins(runner::Registrar& registrar) {
  runner::OptionBinder<TorchScriptOptions> options;
  options.field("file", &TorchScriptOptions::file,
                "the TorchScript module file (torch.jit.save); its bytes identify the trial")
      .required()
      .content();
  options.field("freeze", &TorchScriptOptions::freeze,
                "torch.jit.freeze before running: weights inlined as constants (inference only)");
  options.field("optimize_for_inference", &TorchScriptOptions::optimize_for_inference,
                "torch.jit.optimize_for_inference (freezes, then folds and fuses; inference only)");
  options.field("input_shape", &TorchScriptOptions::input_shape,
                "one sample's shape, for a file runner-export did not write and a run without [data]");
  options.field("input_dtype", &TorchScriptOptions::input_dtype, "the input's dtype, with input_shape")
      .one_of({"float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8"});
  options.field("input_high", &TorchScriptOptions::input_high,
                "integer inputs: exclusive upper bound of the generated values (a vocabulary size)")
      .range(0, std::nullopt);
  registrar.add_model("torchscript", "a TorchScript module file, run for inference or trained",
                      options, [](const TorchScriptOptions& o, const runner::ModelContext& context) {
                        return std::make_unique<TorchScript>(o, context);
                      });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
