#include "base/known_gpus.h"

#include <algorithm>

namespace tune {
namespace {

DeviceInfo Gpu(const char* name, int major, int minor, int sms, int64_t mem_gib, int64_t l2_mib, int64_t smem_optin) {
  DeviceInfo d;
  d.name = name;
  d.model = NormaliseGpuModel(name);
  d.backend = "cuda";
  d.cc_major = major;
  d.cc_minor = minor;
  d.num_sms = sms;
  d.total_mem_bytes = mem_gib << 30;
  d.l2_bytes = l2_mib << 20;
  d.smem_per_block_optin = smem_optin;
  d.max_threads_per_block = 1024;
  return d;
}

}  // namespace

const std::vector<DeviceInfo>& KnownGpus() {
  static const std::vector<DeviceInfo> kGpus = {
      Gpu("NVIDIA B200", 10, 0, 148, 180, 126, 232448),
      Gpu("NVIDIA H200", 9, 0, 132, 141, 50, 232448),
      Gpu("NVIDIA H100 80GB HBM3", 9, 0, 132, 80, 50, 232448),
      Gpu("NVIDIA H100 PCIe", 9, 0, 114, 80, 50, 232448),
      Gpu("NVIDIA A100-SXM4-80GB", 8, 0, 108, 80, 40, 166912),
      Gpu("NVIDIA L40S", 8, 9, 142, 48, 96, 101376),
      Gpu("NVIDIA GeForce RTX 4090", 8, 9, 128, 24, 72, 101376),
      Gpu("NVIDIA RTX A6000", 8, 6, 84, 48, 6, 101376),
      Gpu("NVIDIA A10", 8, 6, 72, 24, 6, 101376),
      Gpu("Tesla V100-SXM2-32GB", 7, 0, 80, 32, 6, 98304),
  };
  return kGpus;
}

const DeviceInfo* FindKnownGpu(std::string_view model) {
  for (const DeviceInfo& d : KnownGpus())
    if (d.model == model) return &d;
  return nullptr;
}

const std::vector<SimGpu>& SimGpus() {
  // Rough public figures; what matters for the farm is that models differ.
  static const std::vector<SimGpu> kSim = {
      {"h100", "Simulated H100 SXM", "h100-80gb-hbm3", 700, 3000, 700},
      {"h200", "Simulated H200", "h200", 720, 4300, 700},
      {"a100", "Simulated A100 SXM", "a100-sxm4-80gb", 290, 1700, 400},
      {"l40s", "Simulated L40S", "l40s", 330, 800, 350},
  };
  return kSim;
}

const SimGpu& FindSimGpu(std::string_view model) {
  static constexpr SimGpu kGeneric = {"generic", "Simulated generic GPU", "rtx-a6000", 120, 900, 300};
  for (const SimGpu& g : SimGpus())
    if (model == g.model) return g;
  return kGeneric;
}

double PhysicalFloorUs(double flops, double bytes, const DeviceInfo& d) {
  if (d.num_sms <= 0 || d.sm_clock_mhz <= 0) return 0;
  const double sm_cycles_per_us = double(d.num_sms) * d.sm_clock_mhz;  // MHz = cycles per us
  constexpr double kFlopsPerSmCycle = 32768, kBytesPerSmCycle = 1024;
  return std::max({0.0, flops / (sm_cycles_per_us * kFlopsPerSmCycle), bytes / (sm_cycles_per_us * kBytesPerSmCycle)});
}

}  // namespace tune
