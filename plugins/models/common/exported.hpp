// What the `aoti` and `torchscript` model plugins share: the metadata that
// python/runner_export.py stores with a model (runner.* keys, strings), its
// checks against the run before anything is timed, the inputs it expects,
// and the loss of a model that returns logits.
#pragma once

#include <torch/nn/functional/loss.h>
#include <torch/types.h>
#include <torch/version.h>

#include <runner/sdk.hpp>

#include <charconv>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "formats/export_meta.hpp"

namespace runner_models::exported {

/// A model's inputs and provenance, from the exporter's runner.* keys (or
/// from the plugin's options for a file the exporter did not write).
struct ExportMeta {
  std::vector<std::int64_t> input_shape;   ///< with the batch dimension
  torch::Dtype input_dtype = torch::kFloat;
  std::int64_t input_high = 0;             ///< integer inputs: exclusive upper bound (0: unknown)
  std::vector<std::int64_t> dynamic_dims;  ///< dimensions of input_shape that may vary
  std::string torch_version;               ///< the torch that made the file ("" unknown)
  std::string device;                      ///< "cpu" or "cuda" ("" unknown)
  std::int64_t parameters = -1;            ///< parameter count (-1 unknown)
  std::map<std::string, std::string> raw;  ///< every key, as stored
  /// True when the input shape is known (the exporter wrote it, or options gave it).
  [[nodiscard]] bool has_shape() const { return !input_shape.empty(); }
  [[nodiscard]] bool dynamic(std::size_t dim) const {
    for (const auto d : dynamic_dims)
      if (static_cast<std::size_t>(d) == dim) return true;
    return false;
  }
};

/// The first line of a LibTorch error's text (its reason, before any context).
inline std::string first_line(const std::string& text) {
  const auto end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

inline std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

using runner_models::exported::parse_sizes;

/// torch dtype of a name the exporter writes ("float32", "int64", ...).
inline std::optional<torch::Dtype> dtype_of(const std::string& name) {
  static const std::map<std::string, torch::Dtype> known = {
      {"float32", torch::kFloat}, {"float64", torch::kDouble}, {"float16", torch::kHalf},
      {"bfloat16", torch::kBFloat16}, {"int64", torch::kLong}, {"int32", torch::kInt},
      {"uint8", torch::kByte}};
  const auto it = known.find(name);
  if (it == known.end()) return std::nullopt;
  return it->second;
}

/// The exporter's keys out of a file's metadata map, checked
/// (parse_meta_text). Keys it does not know are kept in raw.
template <typename Map>
ExportMeta parse_meta(const Map& stored, const std::string& option) {
  const ExportMetaText text =
      parse_meta_text(std::map<std::string, std::string>(stored.begin(), stored.end()), option);
  ExportMeta meta;
  meta.raw = text.raw;
  meta.input_shape = text.input_shape;
  meta.dynamic_dims = text.dynamic_dims;
  if (!text.input_dtype.empty()) meta.input_dtype = *dtype_of(text.input_dtype);
  meta.input_high = text.input_high;
  meta.parameters = text.parameters;
  meta.torch_version = text.torch_version;
  meta.device = text.device;
  return meta;
}

/// "2.14.1+cu130" -> "2.14.1".
inline std::string base_version(const std::string& version) {
  return version.substr(0, version.find('+'));
}

/// The checks every exported model passes before a run: made by this
/// LibTorch's torch version, for this run's device, for the loader's sample
/// shape and the run's batch size. `what` names the file ("the package
/// 'x.pt2'"); errors are OptionError(option) so the host reports them at the
/// option's file:line:col.
inline void check_meta(const ExportMeta& meta, const runner::ModelContext& context,
                       const std::string& option, const std::string& what) {
  if (!meta.torch_version.empty() &&
      base_version(meta.torch_version) != base_version(TORCH_VERSION))
    throw runner::OptionError(
        option, what + " was made by torch " + meta.torch_version + "; runner runs LibTorch " +
                    TORCH_VERSION + ". Export it again with torch " + base_version(TORCH_VERSION) +
                    " (the set-up's virtual environment has it)");
  const std::string run_device = context.device.is_cuda() ? "cuda" : "cpu";
  if (!meta.device.empty() && meta.device != run_device)
    throw runner::OptionError(option, what + " was compiled for " + meta.device +
                                          "; this run's device is " + run_device +
                                          ". Export it with --device " + run_device +
                                          ", or set device.type = \"" + meta.device + "\"");
  if (!meta.has_shape()) return;
  const std::vector<std::int64_t>& shape = meta.input_shape;
  if (!context.input_shape.empty()) {
    bool same = context.input_shape.size() + 1 == shape.size();
    for (std::size_t i = 0; same && i < context.input_shape.size(); ++i)
      same = meta.dynamic(i + 1) || context.input_shape[i] == shape[i + 1];
    if (!same)
      throw runner::OptionError(
          option, what + " was exported for samples of shape " +
                      shape_text(std::vector<std::int64_t>(shape.begin() + 1, shape.end())) +
                      "; the data gives " + shape_text(context.input_shape) +
                      ". Export it with the data's sample shape, or change [data]");
  }
  if (context.batch_size > 0 && !meta.dynamic(0) && context.batch_size != shape[0])
    throw runner::OptionError(
        option, what + " was compiled for batch " + std::to_string(shape[0]) +
                    " and this run's batch is " + std::to_string(context.batch_size) +
                    ". Set data.batch_size = " + std::to_string(shape[0]) +
                    ", or export with --dynamic-batch");
}

/// Throws std::invalid_argument unless `inputs` fit the model (a compiled
/// model reads whatever memory it is given: a wrong shape or dtype must stop
/// before the call).
inline void check_inputs(const ExportMeta& meta, const torch::Tensor& inputs) {
  if (!meta.has_shape()) return;
  bool same = inputs.dim() == static_cast<std::int64_t>(meta.input_shape.size());
  for (std::size_t i = 0; same && i < meta.input_shape.size(); ++i)
    same = meta.dynamic(i) || inputs.size(static_cast<std::int64_t>(i)) == meta.input_shape[i];
  if (!same)
    throw std::invalid_argument("the model was compiled for inputs of shape " +
                                shape_text(meta.input_shape) + ", given " +
                                shape_text(inputs.sizes().vec()));
  if (inputs.scalar_type() != meta.input_dtype)
    throw std::invalid_argument(std::string("the model takes ") + c10::toString(meta.input_dtype) +
                                " inputs, given " + c10::toString(inputs.scalar_type()));
}

/// Seeded example inputs of the exported shape with `batch` samples: normal
/// floats, or integers below input_high.
inline runner::Batch example_batch(const ExportMeta& meta, std::int64_t batch, torch::Device device) {
  if (!meta.has_shape())
    throw std::invalid_argument(
        "the model's input shape is unknown: add a [data] section, or give the plugin's "
        "input_shape option");
  std::vector<std::int64_t> shape = meta.input_shape;
  shape[0] = batch;
  const auto options = torch::TensorOptions().dtype(meta.input_dtype).device(device);
  runner::Batch out;
  if (torch::isIntegralType(meta.input_dtype, /*includeBool=*/false))
    out.inputs = torch::randint(meta.input_high > 0 ? meta.input_high : 2, shape, options);
  else
    out.inputs = torch::randn(shape, options);
  out.size = batch;
  return out;
}

/// Cross-entropy of logits: [batch, classes] against [batch] class indices,
/// or [batch, seq, vocab] against [batch, seq] next tokens.
inline torch::Tensor logits_loss(const torch::Tensor& output, const runner::Batch& batch) {
  if (!batch.targets.defined())
    throw std::invalid_argument("the loss needs targets; this batch has none (inference data?)");
  if (output.dim() == batch.targets.dim() + 1)
    return torch::nn::functional::cross_entropy(output.reshape({-1, output.size(-1)}),
                                                batch.targets.reshape({-1}));
  throw std::invalid_argument("the model's output " + shape_text(output.sizes().vec()) +
                              " is not logits for targets " +
                              shape_text(batch.targets.sizes().vec()) +
                              ": runner trains models that return [batch, classes] or "
                              "[batch, seq, vocab] logits");
}

/// The metadata recorded with a run (provenance), under short names.
inline std::map<std::string, std::string> provenance(const ExportMeta& meta) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : meta.raw) {
    if (key.rfind("runner.", 0) == 0)
      out[key.substr(7)] = value;
    else if (key.rfind("AOTI_", 0) == 0)
      out["aoti." + key.substr(5)] = value;
  }
  return out;
}

}  // namespace runner_models::exported
