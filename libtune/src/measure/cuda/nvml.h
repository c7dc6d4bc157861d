// Clock and throttle readings from NVML, opened at run time.
//
// NVML ships with the driver but not with the toolkit headers, and is absent
// in some containers; every reading is optional. A timing taken while the
// GPU was power- or thermally-capped is still a figure, but a flagged one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace tune::cuda {

struct ClockSample {
  bool valid = false;
  int sm_clock_mhz = 0;
  uint64_t throttle_reasons = 0;  // NVML bit mask
  // Power cap, HW slowdown, thermal slowdown, power brake: reasons that
  // lower clocks below what the kernel would get otherwise. Idle and
  // application-clock settings do not count.
  bool Throttled() const;
};

class Nvml {
 public:
  // Opens libnvidia-ml.so.1 and finds the device with this PCI bus id
  // ("0000:3B:00.0", as cuDeviceGetPCIBusId reports it). nullptr when NVML or
  // the device is unavailable; `why` says which.
  static std::unique_ptr<Nvml> Open(const std::string& pci_bus_id, std::string* why);
  ~Nvml();

  ClockSample Sample() const;
  // The board's energy counter (nvmlDeviceGetTotalEnergyConsumption, Volta
  // and later) and enforced power limit; invalid where NVML lacks either.
  struct Energy {
    bool valid = false;
    double joules = 0;
    double power_limit_w = 0;
  };
  Energy ReadEnergy() const;
  // The enforced power limit alone (nvmlDeviceGetEnforcedPowerLimit), W;
  // 0 where NVML lacks it.
  double PowerLimitW() const;

 private:
  Nvml() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tune::cuda
