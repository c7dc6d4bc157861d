// What the runner's parts share (private to measure/cuda): the outcome of a
// failed step, kernel parameter slots, and RunnerDevice, the one place that
// launches on the runner's context and classifies what goes wrong there.
// The parts:
//   runner.h/.cc        Runner: the request loop and a measurement's steps
//   runner_timing.cc    its sampling loop (the stopping rule: measure/sampling.h)
//   problem_cache.h/.cc inputs, references and buffer placements per problem
//   checker.h/.cc       the builtin kernels, input fills and the output check
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "base/clock.h"
#include "base/tensor_map.h"
#include "measure/cuda/cuda_driver.h"
#include "measure/cuda/cuda_backend.h"

namespace tune::cuda::runner {

// Seconds since `since`, a reading of NowSeconds (base/clock.h).
inline double Seconds(double since) { return NowSeconds() - since; }

constexpr int kExitSticky = 3;
constexpr int kExitProtocol = 2;
constexpr int kExitOrphaned = 4;

// A failed step of a measurement: its class, its line, and whether the
// context is gone (the runner must exit after replying).
struct Failure {
  FailureClass cls = FailureClass::kNone;
  std::string message;
  bool fatal = false;
  bool failed() const { return cls != FailureClass::kNone; }
};

inline Failure Fail(FailureClass c, std::string message, bool fatal = false) { return Failure{c, std::move(message), fatal}; }

// One kernel parameter as the driver reads it: kernelParams[i] points at the
// start of the slot, which holds whichever type the kernel declares.
union ParamSlot {
  CUdeviceptr ptr;
  int32_t i32;
  int64_t i64;
  float f32;
  CUtensorMap map;  // 128 bytes, 64-byte aligned
};

// Encodes `layout` (base/tensor_map.h) for the buffer at `address`.
CuStatus EncodeTensorMap(const Driver& d, const TensorMapLayout& layout, CUdeviceptr address, CUtensorMap* map);

// One run of what a request measures, on `stream` (nullptr: the context's
// default) with the parameter set `params`: a config's kernel, or a baseline
// library's call on the same buffers.
using MeasuredLaunch = std::function<CuStatus(CUstream stream, void** params)>;

// The runner's device and context. Every launch goes through Launch (which
// refuses geometry the driver would misread) and every failed driver call
// through FromCu, which tells a sticky error (the context is lost) from a
// resource or launch error.
class RunnerDevice {
 public:
  // `probe` is a device buffer of at least one byte that health checks write.
  RunnerDevice(const Driver& d, const DeviceInfo& info, CUdeviceptr probe) : d_(d), info_(info), probe_(probe) {}

  const Driver& driver() const { return d_; }
  const DeviceInfo& info() const { return info_; }

  Failure FromCu(const CuStatus& st, const std::string& what);
  CuStatus Launch(CUfunction f, const int64_t grid[3], const int64_t block[3], int64_t smem, CUstream s,
                  void** params);

 private:
  bool ContextHealthy();

  const Driver& d_;
  DeviceInfo info_;
  CUdeviceptr probe_;
};

}  // namespace tune::cuda::runner
