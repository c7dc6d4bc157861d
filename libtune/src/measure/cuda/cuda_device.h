// The device layer's CUDA implementation (device/device_api.h): CudaDevice
// over the Driver API table (cuda_driver.h), with cuBLASLt as its baseline
// library and NVML as its clock reader, and NvrtcToolchain over NVRTC
// (nvrtc_compile.h). RunnerMain (cuda_backend.h) opens one of each and
// serves a runner (measure/runner/runner.h) with them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "device/device_api.h"
#include "measure/cuda/cuda_driver.h"
#include "measure/cuda/nvml.h"

namespace tune::cuda {

// A driver result as the device layer's status: the class the runner
// branches on (a sticky error loses the context) and CuErrorText's line.
device::DeviceStatus ToDeviceStatus(CUresult r, const char* call, const char* file, int line);

class CudaDevice final : public device::DeviceApi {
 public:
  // Retains `ordinal`'s primary context and makes it current on the calling
  // thread. Errors name the driver call.
  static Result<std::unique_ptr<CudaDevice>> Open(const Driver& d, int ordinal);
  ~CudaDevice() override;

  const DeviceInfo& Info() const override { return info_; }
  int MaxThreadsPerMultiprocessor() const override { return max_threads_per_sm_; }
  device::DeviceStatus MemoryInfo(size_t* free_bytes, size_t* total_bytes) override;
  device::DeviceStatus Alloc(size_t bytes, device::DevicePtr* out) override;
  void Free(device::DevicePtr p) override;
  device::DeviceStatus CopyToDevice(device::DevicePtr dst, const void* src, size_t bytes) override;
  device::DeviceStatus CopyToHost(void* dst, device::DevicePtr src, size_t bytes) override;
  device::DeviceStatus CopyOnDevice(device::DevicePtr dst, device::DevicePtr src, size_t bytes) override;
  device::DeviceStatus Fill(device::DevicePtr dst, uint8_t value, size_t bytes, device::Stream stream) override;
  device::DeviceStatus LoadImage(const std::string& image, device::Image* out) override;
  void UnloadImage(device::Image image) override;
  device::DeviceStatus GetFunction(device::Image image, const std::string& name, device::Function* out) override;
  device::FunctionAttributes Attributes(device::Function f) override;
  device::DeviceStatus SetMaxDynamicSmem(device::Function f, int64_t bytes) override;
  device::DeviceStatus Occupancy(device::Function f, int threads, int64_t smem, int* blocks) override;
  device::DeviceStatus Launch(device::Function f, const int64_t grid[3], const int64_t block[3], int64_t smem,
                              device::Stream stream, void** params) override;
  device::DeviceStatus CreateStream(device::Stream* out) override;
  device::DeviceStatus CreateEvent(device::Event* out) override;
  device::DeviceStatus Record(device::Event e, device::Stream stream) override;
  device::DeviceStatus ElapsedMs(device::Event start, device::Event stop, float* ms) override;
  device::DeviceStatus SynchronizeStream(device::Stream stream) override;
  device::DeviceStatus Synchronize() override;
  device::DeviceStatus EncodeTensorMap(const TensorMapLayout& layout, device::DevicePtr address, void* map) override;
  Result<std::unique_ptr<device::BaselineLibrary>> OpenBaseline(const std::string& library) override;
  device::ClockReading Clocks() override;
  device::EnergyReading Energy() override;

 private:
  explicit CudaDevice(const Driver& d) : d_(d) {}

  const Driver& d_;
  DeviceInfo info_;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  int max_threads_per_sm_ = 2048;
  std::unique_ptr<Nvml> nvml_;
  std::vector<CUstream> streams_;
  std::vector<CUevent> events_;
};

class NvrtcToolchain final : public device::Toolchain {
 public:
  std::string Version() const override;
  std::vector<std::string> Targets() const override;
  void SetIncludeRoots(IncludeRoots roots) override;
  device::CompiledImage CompileReference(const OpSpec& spec, const std::string& dtype, const DeviceInfo& device,
                                         const std::string& cache_dir) override;
  device::CompiledImage CompileBuiltins(const std::string& dtype, const DeviceInfo& device,
                                        const std::string& cache_dir) override;
};

}  // namespace tune::cuda

// Evaluates a driver call as a DeviceStatus naming the call, file and line.
#define TUNE_DEV(call) ::tune::cuda::ToDeviceStatus((call), #call, __FILE__, __LINE__)
