#include "measure/cuda/nvml.h"

#include "base/shared_library.h"

namespace tune::cuda {
namespace {

// The few NVML declarations needed; nvml.h is not part of the toolkit here.
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr int kNvmlClockSm = 1;

// nvmlClocksEventReason* / nvmlClocksThrottleReason* bits.
constexpr uint64_t kSwPowerCap = 0x4;
constexpr uint64_t kHwSlowdown = 0x8;
constexpr uint64_t kSwThermalSlowdown = 0x20;
constexpr uint64_t kHwThermalSlowdown = 0x40;
constexpr uint64_t kHwPowerBrakeSlowdown = 0x80;
constexpr uint64_t kThrottleMask =
    kSwPowerCap | kHwSlowdown | kSwThermalSlowdown | kHwThermalSlowdown | kHwPowerBrakeSlowdown;

using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using ByPciFn = nvmlReturn_t (*)(const char*, nvmlDevice_t*);
using ClockFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned int*);
using ReasonsFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);
using EnergyFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);  // millijoules
using LimitFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);          // milliwatts

}  // namespace

bool ClockSample::Throttled() const { return valid && (throttle_reasons & kThrottleMask) != 0; }

struct Nvml::Impl {
  ShutdownFn shutdown = nullptr;
  ClockFn clock = nullptr;
  ReasonsFn reasons = nullptr;
  EnergyFn energy = nullptr;
  LimitFn limit = nullptr;
  nvmlDevice_t device = nullptr;
};

std::unique_ptr<Nvml> Nvml::Open(const std::string& pci_bus_id, std::string* why) {
  auto lib = OpenSharedLibrary("NVML", {"libnvidia-ml.so.1"});
  if (!lib.ok()) {
    if (why) *why = lib.status().message();
    return nullptr;
  }
  InitFn init;
  ByPciFn by_pci;
  ShutdownFn shutdown;
  ClockFn clock;
  ReasonsFn reasons;
  const bool found = lib->Resolve(init, "nvmlInit_v2") && lib->Resolve(by_pci, "nvmlDeviceGetHandleByPciBusId_v2") &&
                     lib->Resolve(shutdown, "nvmlShutdown") && lib->Resolve(clock, "nvmlDeviceGetClockInfo");
  // Renamed "event reasons" in newer drivers; the old name stays exported.
  if (!lib->Resolve(reasons, "nvmlDeviceGetCurrentClocksEventReasons"))
    lib->Resolve(reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  EnergyFn energy = nullptr;
  LimitFn limit = nullptr;
  lib->Resolve(energy, "nvmlDeviceGetTotalEnergyConsumption");
  lib->Resolve(limit, "nvmlDeviceGetEnforcedPowerLimit");
  if (!found) {
    if (why) *why = lib->name + " lacks nvmlInit_v2/nvmlDeviceGetHandleByPciBusId_v2/nvmlDeviceGetClockInfo";
    return nullptr;
  }
  if (init() != kNvmlSuccess) {
    if (why) *why = "nvmlInit_v2 failed";
    return nullptr;
  }
  nvmlDevice_t dev = nullptr;
  if (by_pci(pci_bus_id.c_str(), &dev) != kNvmlSuccess) {
    if (why) *why = "NVML does not know PCI bus id " + pci_bus_id;
    shutdown();
    return nullptr;
  }
  std::unique_ptr<Nvml> n(new Nvml());
  n->impl_ = std::make_unique<Impl>();
  n->impl_->shutdown = shutdown;
  n->impl_->clock = clock;
  n->impl_->reasons = reasons;
  n->impl_->energy = energy;
  n->impl_->limit = limit;
  n->impl_->device = dev;
  return n;
}

Nvml::~Nvml() {
  if (impl_) impl_->shutdown();
}

ClockSample Nvml::Sample() const {
  ClockSample s;
  unsigned int mhz = 0;
  if (impl_->clock(impl_->device, kNvmlClockSm, &mhz) != kNvmlSuccess) return s;
  s.valid = true;
  s.sm_clock_mhz = static_cast<int>(mhz);
  unsigned long long r = 0;
  if (impl_->reasons && impl_->reasons(impl_->device, &r) == kNvmlSuccess) s.throttle_reasons = r;
  return s;
}

Nvml::Energy Nvml::ReadEnergy() const {
  Energy e;
  unsigned long long mj = 0;
  if (!impl_->energy || impl_->energy(impl_->device, &mj) != kNvmlSuccess) return e;
  e.valid = true;
  e.joules = double(mj) / 1e3;
  e.power_limit_w = PowerLimitW();
  return e;
}

double Nvml::PowerLimitW() const {
  unsigned int mw = 0;
  return impl_->limit && impl_->limit(impl_->device, &mw) == kNvmlSuccess ? double(mw) / 1e3 : 0;
}

}  // namespace tune::cuda
