// DiscoverCudaDevices: what a worker reports about its GPUs.
#include "measure/cuda/device_discovery.h"

#include "measure/cuda/cuda_device.h"
#include "measure/cuda/cuda_driver.h"
#include "measure/cuda/cuda_backend.h"

namespace tune {
namespace cuda {

Result<DeviceInfo> DescribeDevice(const Driver& d, int ordinal) {
  CUdevice dev = 0;
  device::DeviceStatus st = TUNE_DEV(d.cuDeviceGet(&dev, ordinal));
  if (!st.ok()) return Status::Error(st.message);

  DeviceInfo info;
  info.index = ordinal;
  info.backend = "cuda";
  char name[256] = {};
  st = TUNE_DEV(d.cuDeviceGetName(name, sizeof(name) - 1, dev));
  if (!st.ok()) return Status::Error(st.message);
  info.name = name;
  info.model = NormaliseGpuModel(info.name);

  size_t total = 0;
  st = TUNE_DEV(d.cuDeviceTotalMem(&total, dev));
  if (!st.ok()) return Status::Error(st.message);
  info.total_mem_bytes = int64_t(total);

  struct Attr {
    CUdevice_attribute attr;
    const char* what;
    int value = 0;
  };
  Attr attrs[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cc major"},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cc minor"},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count"},
      {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 size"},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "smem opt-in"},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max threads"},
      {CU_DEVICE_ATTRIBUTE_CLOCK_RATE, "SM clock"},
      {CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, "memory clock"},
  };
  for (Attr& a : attrs) {
    st = TUNE_DEV(d.cuDeviceGetAttribute(&a.value, a.attr, dev));
    if (!st.ok()) return Status::Error(std::string(a.what) + ": " + st.message);
  }
  info.cc_major = attrs[0].value;
  info.cc_minor = attrs[1].value;
  info.num_sms = attrs[2].value;
  info.l2_bytes = attrs[3].value;
  info.smem_per_block_optin = attrs[4].value;
  info.max_threads_per_block = attrs[5].value;
  info.sm_clock_mhz = attrs[6].value / 1000;   // kHz
  info.mem_clock_mhz = attrs[7].value / 1000;

  int drv = 0;
  st = TUNE_DEV(d.cuDriverGetVersion(&drv));
  if (!st.ok()) return Status::Error(st.message);
  info.driver_version = std::to_string(drv / 1000) + "." + std::to_string((drv % 1000) / 10);
  info.nvrtc_version = NvrtcVersionString();
  // The power limit labels its energy figures; NVML may be absent.
  std::string why;
  if (auto nvml = Nvml::Open(PciBusId(d, ordinal), &why)) info.power_limit_w = nvml->PowerLimitW();
  return info;
}

std::string PciBusId(const Driver& d, int ordinal) {
  CUdevice dev = 0;
  char bus[64] = {};
  if (d.cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS) return {};
  if (d.cuDeviceGetPCIBusId(bus, sizeof(bus) - 1, dev) != CUDA_SUCCESS) return {};
  return bus;
}

}  // namespace cuda

Result<std::vector<DeviceInfo>> DiscoverCudaDevices() {
  auto drv = cuda::LoadDriver();
  if (!drv.ok()) return drv.status();
  const cuda::Driver& d = **drv;
  int count = 0;
  device::DeviceStatus st = TUNE_DEV(d.cuDeviceGetCount(&count));
  if (!st.ok()) return Status::Error(st.message);
  if (count == 0) return Status::Error("no CUDA device (cuDeviceGetCount = 0)");
  std::vector<DeviceInfo> out;
  for (int i = 0; i < count; ++i) {
    auto info = cuda::DescribeDevice(d, i);
    if (!info.ok()) return Status::Error("CUDA device " + std::to_string(i) + ": " + info.status().message());
    out.push_back(std::move(*info));
  }
  return out;
}

}  // namespace tune
