// Held-out evaluation and the weights a run starts from, checks and saves (evaluation.hpp).
#include "evaluation.hpp"

#include "training_setup.hpp"
#include "runner/engine/pipeline.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "runner/common/sha256.hpp"
#include "runner/common/strings.hpp"
#include "runner/weights/state.hpp"
#include "runner/weights/torch_file.hpp"

namespace runner {

Evaluator::Evaluator(const Experiment& experiment, const PluginHost& host, std::uint64_t seed,
                     torch::Device device)
    : device_(device) {
  if (!experiment.data)
    throw Error("[eval] needs a [data] section: evaluation reads the loader's eval split", "",
                ErrorKind::run);
  LoaderContext context;
  context.seed = seed;
  context.split = Split::eval;
  context.skip_bad_samples = experiment.data_settings.on_error == "skip";
  loader_ = host.make_loader(experiment.data->plugin, experiment.data->options, context);
  augment_ = std::make_unique<Augmenter>(experiment.data_settings.augment, seed, /*train=*/false);
  const std::int64_t batch = experiment.data_settings.batch_size;
  // In order, the last batch possibly short: every evaluation sees the same samples.
  if (loader_->streaming()) {
    const std::unique_ptr<SampleStream> stream = loader_->open(0);
    for (std::int64_t b = 0; b < experiment.eval.batches; ++b) {
      std::vector<Example> samples;
      while (static_cast<std::int64_t>(samples.size()) < batch) {
        std::optional<Example> sample = stream->next();
        if (!sample) break;
        samples.push_back(std::move(*sample));
      }
      if (samples.empty()) break;
      streamed_.push_back(collate(std::move(samples)));
    }
  } else {
    const std::int64_t size = loader_->size();
    for (std::int64_t b = 0; b < experiment.eval.batches && b * batch < size; ++b) {
      std::vector<std::int64_t> indices;
      for (std::int64_t i = b * batch; i < std::min(size, (b + 1) * batch); ++i) indices.push_back(i);
      batches_.push_back(std::move(indices));
    }
  }
  if (batches_.empty() && streamed_.empty())
    throw Error("the eval split of loader '" + experiment.data->plugin + "' has no samples", "",
                ErrorKind::run);
}

Evaluator::~Evaluator() = default;

std::map<std::string, double> Evaluator::evaluate(Model& model, const TrainingSetup& setup,
                                                  std::int64_t step,
                                                  std::vector<store::Evaluation>& out) {
  torch::nn::Module& module = model.module();
  const bool was_training = module.is_training();
  module.eval();
  std::map<std::string, double> sums;
  double count = 0;
  {
    torch::NoGradGuard no_grad;
    const std::size_t batches = streamed_.empty() ? batches_.size() : streamed_.size();
    for (std::size_t i = 0; i < batches; ++i) {
      Batch batch = streamed_.empty() ? loader_->get_batch(batches_[i]) : streamed_[i];
      // No random choices in evaluation: the ids do not matter.
      const std::vector<std::int64_t> ids(static_cast<std::size_t>(batch.size), 0);
      batch.inputs = augment_->apply(batch.inputs, ids, 0);
      if (!device_.is_cpu()) {
        batch.inputs = batch.inputs.to(device_);
        if (batch.targets.defined()) batch.targets = batch.targets.to(device_);
      }
      setup.prepare_batch(batch);
      const auto autocast = setup.autocast();
      const EvalTally tally = model.evaluate(model.forward(batch), batch);
      for (const auto& [metric, sum] : tally.sums) sums[metric] += sum;
      count += tally.count;
    }
  }
  if (was_training) module.train();
  std::map<std::string, double> means;
  for (const auto& [metric, sum] : sums) means[metric] = count > 0 ? sum / count : std::nan("");
  for (const auto& [metric, value] : model.finish_evaluation(means)) means[metric] = value;
  for (const auto& [metric, value] : means) out.push_back({step, metric, value});
  return means;
}

namespace {

store::RunFile file_record(const std::string& role, const std::filesystem::path& path) {
  store::RunFile file;
  file.role = role;
  file.path = path.string();
  file.sha256 = sha256_file_hex(path);
  file.bytes = static_cast<std::int64_t>(std::filesystem::file_size(path));
  return file;
}

// The file validated with these bytes; another file now would be another trial.
void check_unchanged(const store::RunFile& record, const std::string& validated) {
  if (record.sha256 != validated)
    throw Error("'" + record.path + "' changed since the experiment was validated (SHA-256 " +
                    record.sha256.substr(0, 16) + "..., was " + validated.substr(0, 16) + "...)",
                "run the experiment again: the new file is a new trial");
}

// 3 significant digits: 2.41e-07, 0.0312, nan.
std::string sci(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}

std::string shape_of(const torch::Tensor& t) {
  std::string text = "[";
  for (std::int64_t d = 0; d < t.dim(); ++d) text += (d ? ", " : "") + std::to_string(t.size(d));
  return text + "]";
}

}  // namespace

std::vector<store::RunFile> model_files(const Experiment& experiment) {
  std::vector<store::RunFile> files;
  for (const auto& [option, sha] : experiment.model.content_sha256) {
    files.push_back(file_record("model." + option, experiment.model.options.string(option)));
    check_unchanged(files.back(), sha);
  }
  return files;
}

store::RunFile check_outputs(const Experiment& experiment, Model& model, const TrainingSetup& setup,
                             torch::Device device, std::vector<store::Metric>& metrics) {
  const ModelSettings& settings = experiment.model_settings;
  const std::string source = settings.check_against.string();
  store::RunFile record = file_record("check_against", settings.check_against);
  check_unchanged(record, settings.check_against_sha256);
  const auto tensors = weights::read_safetensors_tensors(settings.check_against);
  const auto input = tensors.find("input");
  const auto expected = tensors.find("output");
  if (input == tensors.end() || expected == tensors.end())
    throw Error("model.check_against: '" + source + "' has no tensor '" +
                    (input == tensors.end() ? "input" : "output") +
                    "'; give the .reference.safetensors file runner-export writes",
                "", ErrorKind::run);
  torch::nn::Module& module = model.module();
  const bool was_training = module.is_training();
  module.eval();
  torch::Tensor output;
  {
    torch::NoGradGuard no_grad;
    Batch batch{input->second.to(device), torch::Tensor(), input->second.size(0)};
    setup.prepare_batch(batch);
    const auto start = std::chrono::steady_clock::now();
    {
      const auto autocast = setup.autocast();
      output = model.forward(batch);
    }
    output = output.to(torch::kCPU, torch::kDouble);  // waits for a device's kernels
    metrics.push_back({"first_call_s",
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                       "s"});
  }
  module.train(was_training);
  const torch::Tensor reference = expected->second.to(torch::kDouble);
  if (output.sizes() != reference.sizes())
    throw Error("model.check_against: the model's output has shape " + shape_of(output) +
                    " and the reference output in '" + source + "' has shape " +
                    shape_of(reference) + ": the model computes something else",
                "", ErrorKind::run);
  const double abs_error = (output - reference).abs().max().item<double>();
  const double scale = reference.abs().max().item<double>();
  const double rel_error = scale > 0 ? abs_error / scale : abs_error;
  metrics.push_back({"output_max_abs_error", abs_error, ""});
  metrics.push_back({"output_max_rel_error", rel_error, ""});
  if (!(rel_error <= settings.check_tolerance))  // NaN fails
    throw Error("model.check_against: the model's output differs from the reference in '" +
                    source + "' by " + sci(rel_error) +
                    " (max |y - ref| / max |ref|; max |y - ref| = " + sci(abs_error) +
                    "), more than check_tolerance = " + sci(settings.check_tolerance) +
                    ": a path that computes something else is not timed",
                "", ErrorKind::run);
  return record;
}

store::RunFile load_initial_weights(const Experiment& experiment, Model& model,
                                    std::vector<std::string>& skipped) {
  const ModelSettings& settings = experiment.model_settings;
  const std::string source = settings.init_from.string();
  store::RunFile record = file_record("init_from", settings.init_from);
  check_unchanged(record, settings.init_from_sha256);
  const auto state = weights::read_weights(settings.init_from);
  const weights::StateLoad load =
      weights::load_state(model.module(), state, settings.strict, source, model.tied_parameters());
  for (const auto& name : load.missing) skipped.push_back("missing " + name);
  for (const auto& name : load.unexpected) skipped.push_back("unexpected " + name);
  record.skipped = join(skipped, "\n");
  return record;
}

store::RunFile save_weights(const std::filesystem::path& path, const Experiment& experiment,
                            Model& model, std::int64_t repeat_index, std::int64_t steps) {
  std::error_code ignored;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ignored);
  weights::save_safetensors(path, model.module(),
                            {{"producer", "runner"},
                             {"experiment", experiment.name},
                             {"config_hash", experiment.config_hash()},
                             {"model", experiment.model.plugin},
                             {"repeat", std::to_string(repeat_index)},
                             {"steps", std::to_string(steps)}},
                            model.tied_parameters());
  return file_record("save_to", path);
}

}  // namespace runner
