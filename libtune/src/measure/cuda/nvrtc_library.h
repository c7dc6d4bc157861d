// NVRTC, opened at run time, as the driver is (cuda_driver.h).
//
// Linking libnvrtc would stop the one tunefarm binary from starting on a
// host without the CUDA toolkit: a coordinator's, a builder-less client's,
// a deployment's. Its functions are resolved into a table on the first
// compile instead; a host without it gets a one-line compile error naming
// what was tried, and every other command works.
#pragma once

#include <nvrtc.h>

#include <string>

#include "tune/status.h"

namespace tune::cuda {

#define TUNE_NVRTC_FUNCTIONS(X) \
  X(nvrtcVersion)               \
  X(nvrtcGetErrorString)        \
  X(nvrtcCreateProgram)         \
  X(nvrtcCompileProgram)        \
  X(nvrtcDestroyProgram)        \
  X(nvrtcGetProgramLogSize)     \
  X(nvrtcGetProgramLog)         \
  X(nvrtcGetCUBINSize)          \
  X(nvrtcGetCUBIN)              \
  X(nvrtcGetNumSupportedArchs)  \
  X(nvrtcGetSupportedArchs)

struct Nvrtc {
#define TUNE_NVRTC_MEMBER(name) decltype(&::name) name = nullptr;
  TUNE_NVRTC_FUNCTIONS(TUNE_NVRTC_MEMBER)
#undef TUNE_NVRTC_MEMBER
  std::string path;  // the file the loader opened (its folder holds libnvrtc-builtins)
};

// The process-wide table, loaded once. Tries $TUNEFARM_NVRTC alone where
// set; else libnvrtc.so.13, .12, .11.2 and libnvrtc.so on the loader's
// path, then under $CUDA_HOME/lib64 and /usr/local/cuda/lib64. Error: what
// was tried and the loader's last reason, or the missing function.
// Thread-safe.
Result<const Nvrtc*> LoadNvrtc();

}  // namespace tune::cuda
