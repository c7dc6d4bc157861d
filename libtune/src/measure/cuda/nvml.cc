#include "measure/cuda/nvml.h"

#include <dlfcn.h>

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

}  // namespace

bool ClockSample::Throttled() const { return valid && (throttle_reasons & kThrottleMask) != 0; }

struct Nvml::Impl {
  void* lib = nullptr;
  ShutdownFn shutdown = nullptr;
  ClockFn clock = nullptr;
  ReasonsFn reasons = nullptr;
  nvmlDevice_t device = nullptr;
};

std::unique_ptr<Nvml> Nvml::Open(const std::string& pci_bus_id, std::string* why) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    if (why) *why = "libnvidia-ml.so.1 not available";
    return nullptr;
  }
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
  auto by_pci = reinterpret_cast<ByPciFn>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
  auto shutdown = reinterpret_cast<ShutdownFn>(dlsym(lib, "nvmlShutdown"));
  auto clock = reinterpret_cast<ClockFn>(dlsym(lib, "nvmlDeviceGetClockInfo"));
  // Renamed "event reasons" in newer drivers; the old name stays exported.
  auto reasons = reinterpret_cast<ReasonsFn>(dlsym(lib, "nvmlDeviceGetCurrentClocksEventReasons"));
  if (!reasons) reasons = reinterpret_cast<ReasonsFn>(dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons"));
  if (!init || !by_pci || !shutdown || !clock) {
    if (why) *why = "libnvidia-ml.so.1 lacks nvmlInit_v2/nvmlDeviceGetHandleByPciBusId_v2/nvmlDeviceGetClockInfo";
    dlclose(lib);
    return nullptr;
  }
  if (init() != kNvmlSuccess) {
    if (why) *why = "nvmlInit_v2 failed";
    dlclose(lib);
    return nullptr;
  }
  nvmlDevice_t dev = nullptr;
  if (by_pci(pci_bus_id.c_str(), &dev) != kNvmlSuccess) {
    if (why) *why = "NVML does not know PCI bus id " + pci_bus_id;
    shutdown();
    dlclose(lib);
    return nullptr;
  }
  std::unique_ptr<Nvml> n(new Nvml());
  n->impl_ = std::make_unique<Impl>();
  n->impl_->lib = lib;
  n->impl_->shutdown = shutdown;
  n->impl_->clock = clock;
  n->impl_->reasons = reasons;
  n->impl_->device = dev;
  return n;
}

Nvml::~Nvml() {
  if (impl_ && impl_->lib) {
    impl_->shutdown();
    dlclose(impl_->lib);
  }
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

}  // namespace tune::cuda
