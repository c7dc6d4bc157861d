#include "measure/runner/runner_device.h"

namespace tune::runner {

bool RunnerDevice::Healthy() {
  if (!api_.Synchronize().ok()) return false;
  return api_.Fill(probe_, 0, 1).ok() && api_.Synchronize().ok();
}

Failure RunnerDevice::FromDevice(const DeviceStatus& st, const std::string& what) {
  if (st.error == DeviceError::kContextLost || !Healthy())
    return Fail(FailureClass::kCrash, what + ": " + st.message + " (context lost; runner restarts)", true);
  if (st.error == DeviceError::kOutOfResources || st.error == DeviceError::kOutOfMemory)
    return Fail(FailureClass::kResources, what + ": " + st.message);
  return Fail(FailureClass::kLaunchError, what + ": " + st.message);
}

DeviceStatus RunnerDevice::Launch(Function f, const int64_t grid[3], const int64_t block[3], int64_t smem, Stream s,
                                  void** params) {
  for (int i = 0; i < 3; ++i) {
    if (grid[i] <= 0 || grid[i] > 0x7FFFFFFF || block[i] <= 0 || block[i] > 1024) {
      return device::DeviceFailed(DeviceError::kFailed,
                                  "launch geometry out of range: grid (" + std::to_string(grid[0]) + "," +
                                      std::to_string(grid[1]) + "," + std::to_string(grid[2]) + ") block (" +
                                      std::to_string(block[0]) + "," + std::to_string(block[1]) + "," +
                                      std::to_string(block[2]) + ")");
    }
  }
  return api_.Launch(f, grid, block, smem, s, params);
}

}  // namespace tune::runner
