// Model `aoti`: runs an AOTInductor package (.pt2, made by
// torch._inductor.aoti_compile_and_package; python/runner_export.py writes
// one) for inference, on the CPU or, in a CUDA build, on CUDA, through
// LibTorch's AOTIModelPackageLoader: compiled kernels, no Python.
//
// The package's metadata (runner_export stores its runner.* keys in it, and
// AOTInductor its own AOTI_* keys) is checked before the package's code is
// loaded: the torch version that made it, its device, the CPU instruction set
// it was compiled for (-march=native: an AVX-512 package dies of an illegal
// instruction on a CPU without AVX-512), the sample shape against the data
// and the batch size unless the batch dimension is dynamic. Every input is
// checked before the call, since compiled code reads whatever it is given.
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include "../common/exported.hpp"

#include <memory>
#include <stdexcept>
#include <string>

namespace {

using runner_models::exported::ExportMeta;

struct AotiOptions {
  std::string package;
  std::string model_name = "model";
};

/// Refuses a package compiled for vector instructions this CPU lacks.
void check_cpu_isa(const ExportMeta& meta, const std::string& what) {
  const auto it = meta.raw.find("AOTI_CPU_ISA");
  if (it == meta.raw.end()) return;
  const std::string& isa = it->second;
  const char* missing = nullptr;
  if (isa.find("AVX512") != std::string::npos && !__builtin_cpu_supports("avx512f"))
    missing = "AVX-512";
  else if (isa.find("AVX2") != std::string::npos && !__builtin_cpu_supports("avx2"))
    missing = "AVX2";
  if (missing != nullptr)
    throw runner::OptionError("package", what + " was compiled for " + isa + " and this CPU has no " +
                                             missing +
                                             " (running it would stop on an illegal instruction). "
                                             "Export it again on this machine");
}

class Aoti final : public runner::Model {
 public:
  Aoti(const AotiOptions& o, const runner::ModelContext& context) : device_(context.device) {
    const std::string what = "the package '" + o.package + "'";
    // The package's directory and metadata are read and checked by runner's
    // own reader (fuzzed) before LibTorch sees the file.
    (void)runner_models::exported::read_archive_metadata(
        o.package, runner_models::exported::ArchiveKind::aoti, o.model_name, "package", what);
    std::unordered_map<std::string, std::string> stored;
    try {
      stored = torch::inductor::AOTIModelPackageLoader::load_metadata_from_package(o.package,
                                                                                  o.model_name);
    } catch (const c10::Error& e) {
      throw runner::OptionError(
          "model_name", what + " has no AOTInductor model '" + o.model_name +
                            "', or is not an AOTInductor package (" +
                            runner_models::exported::first_line(e.what_without_backtrace()) +
                            "). runner-export names its model \"model\"");
    }
    meta_ = runner_models::exported::parse_meta(stored, "package");
    if (context.training)
      throw runner::OptionError("package", what +
                                               " runs inference only (AOTInductor compiles the "
                                               "forward pass); set experiment.kind = \"infer\", or "
                                               "train its model with the torchscript plugin");
    runner_models::exported::check_meta(meta_, context, "package", what);
    if (!device_.is_cuda()) check_cpu_isa(meta_, what);
    try {
      loader_ = std::make_unique<torch::inductor::AOTIModelPackageLoader>(
          o.package, o.model_name, /*run_single_threaded=*/false, /*num_runners=*/1,
          device_.has_index() ? device_.index() : static_cast<c10::DeviceIndex>(-1));
    } catch (const c10::Error& e) {
      throw runner::OptionError("package", what + " cannot be loaded: " +
                                               runner_models::exported::first_line(e.what_without_backtrace()));
    }
    provenance_ = runner_models::exported::provenance(meta_);
    provenance_["format"] = "aoti";
    provenance_["model_name"] = o.model_name;
  }

  torch::nn::Module& module() override { return holder_; }

  torch::Tensor forward(const runner::Batch& batch) override {
    runner_models::exported::check_inputs(meta_, batch.inputs);
    std::vector<torch::Tensor> outputs = loader_->run({batch.inputs.contiguous()});
    if (outputs.empty()) throw std::runtime_error("the package's model returned no output");
    return outputs.front();
  }

  torch::Tensor loss(const torch::Tensor& output, const runner::Batch& batch) override {
    return runner_models::exported::logits_loss(output, batch);
  }

  runner::Batch example_batch(std::int64_t batch_size, torch::Device device) override {
    return runner_models::exported::example_batch(meta_, batch_size, device);
  }

  std::int64_t parameter_count() override { return meta_.parameters < 0 ? 0 : meta_.parameters; }

  std::map<std::string, std::string> provenance() override { return provenance_; }

 private:
  torch::Device device_;
  ExportMeta meta_;
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader_;
  torch::nn::Module holder_;  // no parameters: the weights live in the package
  std::map<std::string, std::string> provenance_;
};

void register_plugins(runner::Registrar& registrar) {
  runner::OptionBinder<AotiOptions> options;
  options.field("package", &AotiOptions::package,
                "the AOTInductor package (.pt2) to run; its bytes identify the trial")
      .required()
      .content();
  options.field("model_name", &AotiOptions::model_name,
                "the model inside the package (runner-export writes \"model\")");
  registrar.add_model("aoti", "an AOTInductor package (.pt2) run for inference", options,
                      [](const AotiOptions& o, const runner::ModelContext& context) {
                        return std::make_unique<Aoti>(o, context);
                      });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
