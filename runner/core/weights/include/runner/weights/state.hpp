// Loading named tensors into a module by name: the step between a weights
// file and a model (init_from). Nothing is copied unless every name and
// shape checks out, so a mismatch never leaves a half-loaded model.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace runner::weights {

/// What a load did: with strict = false, the names it skipped.
struct StateLoad {
  std::vector<std::string> loaded;      ///< parameters and buffers set from the file
  std::vector<std::string> missing;     ///< the module's names the file lacks (strict = false)
  std::vector<std::string> unexpected;  ///< the file's names the module lacks (strict = false)
};

/// The tensors of a safetensors file, by name (copied out of the mapping).
[[nodiscard]] std::map<std::string, torch::Tensor> read_safetensors_tensors(
    const std::filesystem::path& path);

/// Writes every parameter and buffer of `module` (contiguous, on the CPU) to
/// a safetensors file, with `metadata`; each alias of `tied` (alias ->
/// parameter, Model::tied_parameters()) as a copy of its parameter.
void save_safetensors(const std::filesystem::path& path, torch::nn::Module& module,
                      const std::map<std::string, std::string>& metadata = {},
                      const std::map<std::string, std::string>& tied = {});

/// Copies `state` into the module's parameters and buffers by name (each
/// converted to the module tensor's dtype and device). A name whose shape
/// differs is always an error; a missing or unexpected name is one unless
/// `strict` is false. The error lists every missing, unexpected and
/// mis-shaped name (with both shapes) and names `source` (the file). An
/// alias of `tied` (alias -> parameter) in `state` is the same tensor as its
/// parameter: it is not unexpected, and it sets the parameter when `state`
/// lacks the parameter's own name.
StateLoad load_state(torch::nn::Module& module, const std::map<std::string, torch::Tensor>& state,
                     bool strict, const std::string& source,
                     const std::map<std::string, std::string>& tied = {});

}  // namespace runner::weights
