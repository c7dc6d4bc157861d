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

// The least time, in microseconds, in which any kernel could do `flops`
// and move `bytes` on device `d`: the figures of an op's [metrics] at
// bounds far above every NVIDIA GPU's peak (32768 flops per SM per clock,
// past sparse FP4 tensor cores; 1024 bytes per SM per clock, past any L2 or
// memory). A measured median below it is no measurement. 0 when `d` lacks
// its SM count or clock.
double PhysicalFloorUs(double flops, double bytes, const DeviceInfo& d);

}  // namespace tune
