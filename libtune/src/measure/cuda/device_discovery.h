#pragma once

#include <string>

#include "measure/cuda/cuda_driver.h"
#include "tune/status.h"
#include "base/types.h"

namespace tune::cuda {

// DeviceInfo of one ordinal; the driver must be loaded.
Result<DeviceInfo> DescribeDevice(const Driver& d, int ordinal);

// "0000:3B:00.0", empty when unknown; NVML finds the same GPU by it.
std::string PciBusId(const Driver& d, int ordinal);

}  // namespace tune::cuda
