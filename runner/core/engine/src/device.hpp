// A rank's own device (device.cpp; the rest of the device set-up is public,
// in engine.hpp).
#pragma once

#include <string>

#include <torch/types.h>

#include "workload.hpp"

namespace runner {

/// The device of this rank: with NCCL, local rank r uses CUDA device r (and
/// it becomes the current CUDA device).
torch::Device rank_device(const std::string& device_name, const RankInfo& rank);

}  // namespace runner
