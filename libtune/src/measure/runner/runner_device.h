// What the runner's parts share (private to measure/runner): the outcome of
// a failed step, kernel parameter slots, and RunnerDevice, the one place that
// launches on the runner's device and classifies what goes wrong there.
// The runner is the same for every vendor: it speaks to its device and
// compiler through device/device_api.h only. The parts:
//   runner.h/.cc        Runner: the request loop and a measurement's steps
//   runner_timing.cc    its sampling loop (the stopping rule: measure/sampling.h)
//   problem_cache.h/.cc inputs, references and buffer placements per problem
//   checker.h/.cc       the builtin kernels, input fills and the output check
//   host_data.h/.cc     inputs drawn, decoded and compared on the host
//   runner_protocol.h   the wire between a backend and its runner process
//   runner_process.h    that process, from the backend's side
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/clock.h"
#include "base/tensor_map.h"
#include "device/device_api.h"
#include "measure/backend.h"

namespace tune::runner {

using device::DeviceApi;
using device::DeviceError;
using device::DevicePtr;
using device::DeviceStatus;
using device::Event;
using device::Function;
using device::Image;
using device::Stream;
using device::Toolchain;

// Seconds since `since`, a reading of NowSeconds (base/clock.h).
inline double Seconds(double since) { return NowSeconds() - since; }

constexpr int kExitSticky = 3;
constexpr int kExitProtocol = 2;
constexpr int kExitOrphaned = 4;

// A failed step of a measurement: its class, its line, and whether the
// device is gone (the runner must exit after replying).
struct Failure {
  FailureClass cls = FailureClass::kNone;
  std::string message;
  bool fatal = false;
  bool failed() const { return cls != FailureClass::kNone; }
};

inline Failure Fail(FailureClass c, std::string message, bool fatal = false) { return Failure{c, std::move(message), fatal}; }

// One kernel parameter as a device reads it: params[i] points at the start
// of the slot, which holds whichever type the kernel declares.
union ParamSlot {
  DevicePtr ptr;
  int32_t i32;
  int64_t i64;
  float f32;
  alignas(128) unsigned char map[128];  // a tensor map (DeviceApi::EncodeTensorMap)
};

// One run of what a request measures, on `stream` (nullptr: the device's
// default) with the parameter set `params`: a config's kernel, or a baseline
// library's call on the same buffers.
using MeasuredLaunch = std::function<DeviceStatus(Stream stream, void** params)>;

// The runner's device. Every launch goes through Launch (which refuses
// geometry a device would misread) and every failed device call through
// FromDevice, which tells a lost device (sticky) from a resource or launch
// error.
class RunnerDevice {
 public:
  // `probe` is a device buffer of at least one byte that health checks write.
  RunnerDevice(DeviceApi& api, DevicePtr probe) : api_(api), probe_(probe) {}

  DeviceApi& api() { return api_; }
  const DeviceInfo& info() const { return api_.Info(); }

  Failure FromDevice(const DeviceStatus& st, const std::string& what);
  DeviceStatus Launch(Function f, const int64_t grid[3], const int64_t block[3], int64_t smem, Stream s,
                      void** params);

 private:
  bool Healthy();

  DeviceApi& api_;
  DevicePtr probe_;
};

}  // namespace tune::runner
