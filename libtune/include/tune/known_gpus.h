// The limits of GPU models the farm knows without a device at hand: what
// `tunefarm op check` counts legal configs against, and what the sim
// backend's models are built on. Figures from the vendors' specifications
// (shared memory per block opt-in, SMs, L2), keyed as workers key their
// devices (NormaliseGpuModel of the driver's name).
#pragma once

#include <string_view>
#include <vector>

#include "tune/types.h"

namespace tune {

const std::vector<DeviceInfo>& KnownGpus();
// The entry of `model`, or nullptr.
const DeviceInfo* FindKnownGpu(std::string_view model);

}  // namespace tune
