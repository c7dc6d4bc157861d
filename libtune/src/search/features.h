// Features of a key for the search's model: what lets rows measured on
// other shapes and other GPU models inform a new key (warm start). Configs
// have their own features (model_guided.cc); these are the key's: each dim
// of the shape as log2, and the GPU's SMs, shared memory a block may opt
// into (KiB), L2 (MiB), compute capability and memory (GiB), from the known
// GPUs by model name (base/known_gpus.h), so that the features of a model
// are the same whether a device or a stored row names it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/types.h"
#include "search/strategy.h"

namespace tune {

// `device` stands in for a model the farm does not know (null: zeros).
std::vector<float> KeyFeatures(const Shape& shape, const std::string& gpu_model, const DeviceInfo* device = nullptr);

// A neighbour key's valid figures as priors: each config's figure over the
// key's best, with the key's features. At most `cap` of them: the best
// half of the cap, then every other row spread evenly (the model learns
// what is slow there too).
std::vector<PriorTrial> PriorsOfKey(std::vector<std::pair<Config, double>> valid, const std::vector<float>& features,
                                    size_t cap = 600);

}  // namespace tune
