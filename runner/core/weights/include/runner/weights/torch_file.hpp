// Weights saved from Python with torch.save, and the one entry point for
// every weights file runner reads.
//
// torch.save(model.state_dict(), path) writes a zip archive: data.pkl (a
// pickle of the collections.OrderedDict of name -> tensor) and one record
// data/<key> per tensor storage. LibTorch's torch::pickle_load cannot read
// that OrderedDict; read_torch_state can (see src/state_pickle.hpp for how).
#pragma once

#include <torch/types.h>

#include <filesystem>
#include <map>
#include <string>

namespace runner::weights {

/// The tensors of a file written by torch.save(model.state_dict(), path) or
/// torch.save(a dict of name -> tensor, path), on the CPU. Tensors that
/// shared a storage in Python (tied weights, views) share it here. The
/// `_metadata` Python attaches to a state dict is ignored. Refuses, naming the
/// file and what is wrong: anything but a torch.save zip archive (the pre-1.6
/// format included), a cut or damaged archive, a pickle that is not a dict
/// of name -> tensor (a checkpoint holding a state dict one level down is
/// named as such), a tensor outside its storage. Throws runner::Error.
[[nodiscard]] std::map<std::string, torch::Tensor> read_torch_state(
    const std::filesystem::path& path);

/// The tensors of any weights file runner reads, told apart by content: a
/// safetensors file (an 8-byte little-endian header length, then '{') or a
/// torch.save file (a zip archive: "PK\x03\x04"). Throws runner::Error.
[[nodiscard]] std::map<std::string, torch::Tensor> read_weights(const std::filesystem::path& path);

}  // namespace runner::weights
