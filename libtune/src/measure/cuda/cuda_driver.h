// The CUDA Driver API, opened at run time from libcuda.so.1.
//
// Linking libcuda would stop every binary from starting on a host without the
// driver (the coordinator's hosts, CI), so the functions are resolved with
// dlsym into a table. cuda.h maps many names to versioned symbols
// (cuMemAlloc -> cuMemAlloc_v2); the table's members and the looked-up names
// go through the same macros, so they always agree with the prototypes.
#pragma once

#include <cuda.h>

#include <string>

#include "tune/status.h"

namespace tune::cuda {

// X-macro list of every driver function tunefarm calls.
#define TUNE_CU_FUNCTIONS(X)                      \
  X(cuInit)                                       \
  X(cuDriverGetVersion)                           \
  X(cuGetErrorName)                               \
  X(cuGetErrorString)                             \
  X(cuDeviceGetCount)                             \
  X(cuDeviceGet)                                  \
  X(cuDeviceGetName)                              \
  X(cuDeviceGetAttribute)                         \
  X(cuDeviceTotalMem)                             \
  X(cuDeviceGetPCIBusId)                          \
  X(cuDevicePrimaryCtxRetain)                     \
  X(cuDevicePrimaryCtxRelease)                    \
  X(cuCtxSetCurrent)                              \
  X(cuCtxSynchronize)                             \
  X(cuMemGetInfo)                                 \
  X(cuMemAlloc)                                   \
  X(cuMemFree)                                    \
  X(cuMemcpyHtoD)                                 \
  X(cuMemcpyDtoH)                                 \
  X(cuMemcpyDtoD)                                 \
  X(cuMemsetD8)                                   \
  X(cuMemsetD8Async)                              \
  X(cuModuleLoadData)                             \
  X(cuModuleUnload)                               \
  X(cuModuleGetFunction)                          \
  X(cuFuncGetAttribute)                           \
  X(cuFuncSetAttribute)                           \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor)  \
  X(cuLaunchKernel)                               \
  X(cuStreamCreate)                               \
  X(cuStreamDestroy)                              \
  X(cuStreamSynchronize)                          \
  X(cuEventCreate)                                \
  X(cuEventDestroy)                               \
  X(cuEventRecord)                                \
  X(cuEventElapsedTime)

struct Driver {
#define TUNE_CU_MEMBER(name) decltype(&::name) name = nullptr;
  TUNE_CU_FUNCTIONS(TUNE_CU_MEMBER)
#undef TUNE_CU_MEMBER
  // Optional (drivers before CUDA 12 lack it): only ops that take tensor
  // maps need it, and their launches say so when it is missing.
  decltype(&::cuTensorMapEncodeTiled) cuTensorMapEncodeTiled = nullptr;
};

// The process-wide table, loaded and cuInit'ed once. Error when libcuda.so.1
// is missing, a function is missing, or cuInit fails. Thread-safe.
Result<const Driver*> LoadDriver();

// "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)".
std::string CuResultText(CUresult r);

// "libtune/src/measure/cuda/cuda_device.cc:123: cuLaunchKernel(...) failed: CUDA_ERROR_..."
std::string CuErrorText(CUresult r, const char* call, const char* file, int line);

// Errors after which the context is unusable (DeviceError::kContextLost).
bool IsStickyError(CUresult r);

}  // namespace tune::cuda
