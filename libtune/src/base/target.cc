#include "base/target.h"

#include <cctype>

namespace tune {

std::string Target::Text() const { return vendor + " " + arch + ", toolchain " + toolchain; }

Target TargetOf(const DeviceInfo& device) {
  return Target{kCudaVendor, CudaArch(device.cc_major, device.cc_minor), device.nvrtc_version};
}

std::string CudaArch(int cc_major, int cc_minor) { return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor); }

int ArchSm(std::string_view arch) {
  if (!arch.starts_with("sm_")) return 0;
  int sm = 0;
  size_t i = 3;
  for (; i < arch.size() && i < 6 && std::isdigit(static_cast<unsigned char>(arch[i])); ++i) sm = sm * 10 + (arch[i] - '0');
  if (i < 5) return 0;  // fewer than two digits
  if (i == arch.size()) return sm;
  return i + 1 == arch.size() && (arch[i] == 'a' || arch[i] == 'f') ? sm : 0;
}

bool IsCudaArch(std::string_view arch) { return ArchSm(arch) != 0 && arch.back() != 'f'; }

std::string_view ArchCapability(std::string_view arch) {
  if (!arch.empty() && arch.back() == 'a') arch.remove_suffix(1);
  return arch;
}

}  // namespace tune
