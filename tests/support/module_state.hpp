// Every parameter and buffer of a LibTorch module by name, as Python's
// state_dict() names them: what the model tests compare.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <map>
#include <string>

namespace runner::test {

inline std::map<std::string, torch::Tensor> state_of(torch::nn::Module& module) {
  std::map<std::string, torch::Tensor> state;
  for (const auto& p : module.named_parameters()) state[p.key()] = p.value();
  for (const auto& b : module.named_buffers()) state[b.key()] = b.value();
  return state;
}

}  // namespace runner::test
