// The limits of GPU models the farm knows without a device at hand: what
// `tunefarm op check` counts legal configs against, and what the sim
// backend's models are built on. Figures from the vendors' specifications
// (shared memory per block opt-in, SMs, L2), keyed as workers key their
// devices (NormaliseGpuModel of the driver's name); and the peaks of the sim
// backend's models, which reports read too.
#pragma once

#include <string_view>
#include <vector>

#include "base/types.h"

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
// A clock above every NVIDIA GPU's boost clock: the floor of a model whose
// device is not at hand (KnownGpus() carry no clock) is taken at it.
inline constexpr int kMaxSmClockMhz = 3000;

// A GPU model of the sim backend: the limits of a known GPU and the peaks its
// cost model reaches. One table for the backend that simulates the model and
// the reports that put its figures against a roofline, so the two agree.
struct SimGpu {
  const char* model;  // "h100": the device is "sim-h100"
  const char* name;   // the device name it reports
  const char* known;  // the KnownGpus() model whose limits it has
  double tflops;      // dense fp16 tensor-core peak the cost model reaches
  double gbps;        // device memory bandwidth the cost model reaches
  double power_limit_w;  // board power limit (the sim's energy model)
};

// The sim models that have a name of their own, in a fixed order.
const std::vector<SimGpu>& SimGpus();
// The sim model `model` (without the "sim-" prefix): its entry in SimGpus(),
// or, for any other name, the generic mid-range GPU that every unknown
// simulated model runs as. Never fails. Thread-safe, like the rest of this
// header (the tables are constant).
const SimGpu& FindSimGpu(std::string_view model);

}  // namespace tune
