// Target: what a kernel image is built for and by. One home for the rules
// about architecture names, which device info, kernel images, the op hash,
// builders and op specs all read:
//
//   vendor     the device family a backend drives ("cuda"; the sim backend
//              models CUDA devices); a second vendor (HIP) is a second value
//   arch       the device's base architecture, "sm_90": what its images are
//              stored and fetched under (an op built for the architecture-
//              specific features compiles "sm_90a" for it: CudaArchOf in
//              opspec/op_definition.h)
//   toolchain  the compiler's version, "13.0" (NVRTC), "sim": part of the
//              op hash, so that rows and images of two toolchains never mix
//
// Stored keys keep their forms: an image's key names its arch, a row's op
// hash folds in the toolchain, as before Target had a name.
#pragma once

#include <string>
#include <string_view>

#include "base/types.h"

namespace tune {

struct Target {
  std::string vendor, arch, toolchain;

  bool operator==(const Target&) const = default;
  // "cuda sm_90, toolchain 13.0".
  std::string Text() const;
};

// The vendor of CUDA devices (the cuda and sim backends).
inline constexpr const char* kCudaVendor = "cuda";

// A device's target: its vendor, base architecture and toolchain.
Target TargetOf(const DeviceInfo& device);

// "sm_90" of compute capability 9.0.
std::string CudaArch(int cc_major, int cc_minor);
// The SM number of a CUDA architecture name: "sm_", two or three digits,
// then optionally "a" (architecture-specific) or "f" (family); 0 when
// `arch` is none.
int ArchSm(std::string_view arch);
// Whether `arch` names an architecture as op specs, builders and images
// give them: ArchSm's form with no suffix or "a" ("sm_90", "sm_90a").
bool IsCudaArch(std::string_view arch);
// An architecture without its "a": "sm_90a" -> "sm_90", the devices an
// image of it runs on.
std::string_view ArchCapability(std::string_view arch);

}  // namespace tune
