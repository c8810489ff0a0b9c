#include "runner/weights/state.hpp"

#include <torch/types.h>

#include <algorithm>

#include <array>
#include <utility>

#include "runner/common/error.hpp"
#include "runner/common/strings.hpp"
#include "runner/weights/safetensors.hpp"

namespace runner::weights {
namespace {

constexpr std::array<std::pair<DType, c10::ScalarType>, 10> kTypes{{
    {DType::f64, torch::kDouble},
    {DType::f32, torch::kFloat},
    {DType::f16, torch::kHalf},
    {DType::bf16, torch::kBFloat16},
    {DType::i64, torch::kLong},
    {DType::i32, torch::kInt},
    {DType::i16, torch::kShort},
    {DType::i8, torch::kChar},
    {DType::u8, torch::kByte},
    {DType::boolean, torch::kBool},
}};

/// "a, b, c" for at most 10 names, then "and N more".
std::string listed(const std::vector<std::string>& names) {
  constexpr std::size_t kShown = 10;
  std::vector<std::string> shown(names.begin(),
                                 names.begin() + static_cast<std::ptrdiff_t>(std::min(kShown, names.size())));
  std::string text = join(shown, ", ");
  if (names.size() > kShown) text += " and " + std::to_string(names.size() - kShown) + " more";
  return text;
}

std::map<std::string, torch::Tensor> module_state(torch::nn::Module& module) {
  std::map<std::string, torch::Tensor> state;
  for (const auto& p : module.named_parameters()) state[p.key()] = p.value();
  for (const auto& b : module.named_buffers()) state[b.key()] = b.value();
  return state;
}

}  // namespace

std::map<std::string, torch::Tensor> read_safetensors_tensors(const std::filesystem::path& path) {
  const SafetensorsFile file(path);
  std::map<std::string, torch::Tensor> out;
  for (const TensorEntry& entry : file.tensors()) {
    c10::ScalarType type = torch::kFloat;
    for (const auto& [dtype, scalar] : kTypes)
      if (dtype == entry.dtype) type = scalar;
    const auto bytes = file.bytes(entry);
    // from_blob does not take ownership; clone() copies out of the mapping.
    out[entry.name] = torch::from_blob(const_cast<std::byte*>(bytes.data()), entry.shape,
                                       torch::TensorOptions().dtype(type))
                          .clone();
  }
  return out;
}

void save_safetensors(const std::filesystem::path& path, torch::nn::Module& module,
                      const std::map<std::string, std::string>& metadata,
                      const std::map<std::string, std::string>& tied) {
  std::vector<torch::Tensor> keep;
  std::vector<TensorView> views;
  std::map<std::string, torch::Tensor> state = module_state(module);
  // Safetensors holds no shared tensors: each alias gets its own copy.
  for (const auto& [alias, parameter] : tied)
    if (const auto it = state.find(parameter); it != state.end() && state.count(alias) == 0)
      state.emplace(alias, it->second);
  for (const auto& [name, tensor] : state) {
    const torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
    const auto found = std::find_if(kTypes.begin(), kTypes.end(),
                                    [&](const auto& pair) { return pair.second == t.scalar_type(); });
    if (found == kTypes.end())
      throw Error("cannot write weights to '" + path.string() + "': tensor '" + name +
                  "' has dtype " + std::string(c10::toString(t.scalar_type())) +
                  ", which safetensors files do not hold");
    keep.push_back(t);
    views.push_back(TensorView{name, found->first, t.sizes().vec(),
                               {static_cast<const std::byte*>(t.data_ptr()), t.nbytes()}});
  }
  write_safetensors(path, views, metadata);
}

StateLoad load_state(torch::nn::Module& module, const std::map<std::string, torch::Tensor>& file,
                     bool strict, const std::string& source,
                     const std::map<std::string, std::string>& tied) {
  const std::map<std::string, torch::Tensor> targets = module_state(module);
  // A tied alias is the same tensor as its parameter in Python: drop it, or
  // let it stand in for the parameter when the file has only the alias.
  std::map<std::string, torch::Tensor> state = file;
  for (const auto& [alias, parameter] : tied) {
    const auto it = state.find(alias);
    if (it == state.end() || targets.count(alias) != 0) continue;
    if (state.count(parameter) == 0) state.emplace(parameter, it->second);
    state.erase(alias);
  }
  StateLoad result;
  std::vector<std::string> misshaped;
  for (const auto& [name, target] : targets) {
    const auto it = state.find(name);
    if (it == state.end()) {
      result.missing.push_back(name);
    } else if (it->second.sizes() != target.sizes()) {
      misshaped.push_back(name + " " + shape_text(it->second.sizes()) + " in the file, " +
                          shape_text(target.sizes()) + " in the model");
    }
  }
  for (const auto& [name, tensor] : state)
    if (targets.find(name) == targets.end()) result.unexpected.push_back(name);

  if (!misshaped.empty() || (strict && (!result.missing.empty() || !result.unexpected.empty()))) {
    std::vector<std::string> parts;
    if (strict && !result.missing.empty()) parts.push_back("missing " + listed(result.missing));
    if (strict && !result.unexpected.empty())
      parts.push_back("unexpected " + listed(result.unexpected));
    if (!misshaped.empty()) parts.push_back("wrong shape: " + listed(misshaped));
    throw Error("the weights in '" + source + "' do not match the model: " + join(parts, "; "),
                "weights load by parameter name; strict = false allows missing and unexpected "
                "names, never a wrong shape");
  }
  torch::NoGradGuard no_grad;
  for (const auto& [name, target] : targets) {
    const auto it = state.find(name);
    if (it == state.end()) continue;
    torch::Tensor destination = target;
    destination.copy_(it->second.to(target.device(), target.scalar_type()));
    result.loaded.push_back(name);
  }
  return result;
}

}  // namespace runner::weights
