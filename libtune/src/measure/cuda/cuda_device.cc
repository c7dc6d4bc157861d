// The device layer over CUDA (cuda_device.h) and the CUDA runner's entry.
#include "measure/cuda/cuda_device.h"

#include <cstdio>

#include "measure/cuda/builtin_kernels.h"
#include "measure/cuda/cublaslt.h"
#include "measure/cuda/cuda_backend.h"
#include "measure/cuda/device_discovery.h"
#include "measure/cuda/nvrtc_compile.h"
#include "measure/cuda/nvrtc_library.h"
#include "measure/runner/runner.h"
#include "base/target.h"

namespace tune::cuda {

using device::DevicePtr;
using device::DeviceStatus;

device::DeviceStatus ToDeviceStatus(CUresult r, const char* call, const char* file, int line) {
  if (r == CUDA_SUCCESS) return {};
  device::DeviceError e = device::DeviceError::kFailed;
  if (IsStickyError(r)) e = device::DeviceError::kContextLost;
  else if (r == CUDA_ERROR_OUT_OF_MEMORY) e = device::DeviceError::kOutOfMemory;
  else if (r == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES) e = device::DeviceError::kOutOfResources;
  return device::DeviceFailed(e, CuErrorText(r, call, file, line));
}

namespace {

CUstream S(device::Stream s) { return reinterpret_cast<CUstream>(s); }
CUfunction F(device::Function f) { return reinterpret_cast<CUfunction>(f); }

// cuBLASLt as the device layer's baseline library.
class CublasLtBaseline final : public device::BaselineLibrary {
 public:
  explicit CublasLtBaseline(std::unique_ptr<CublasLt> lib) : lib_(std::move(lib)) {}
  std::string Version() const override { return lib_->Version(); }
  Status Plan(const std::string& dtype, int64_t m, int64_t n, int64_t k, size_t workspace_bytes) override {
    return lib_->Plan(dtype, m, n, k, workspace_bytes);
  }
  Status Run(DevicePtr a, DevicePtr b, DevicePtr c, DevicePtr workspace, device::Stream stream) override {
    return lib_->Run(a, b, c, workspace, S(stream));
  }

 private:
  std::unique_ptr<CublasLt> lib_;
};

}  // namespace

Result<std::unique_ptr<CudaDevice>> CudaDevice::Open(const Driver& d, int ordinal) {
  auto info = DescribeDevice(d, ordinal);
  if (!info.ok()) return info.status();
  std::unique_ptr<CudaDevice> dev(new CudaDevice(d));
  dev->info_ = *info;
  auto check = [](const DeviceStatus& st) { return st.ok() ? Status::OK() : Status::Error(st.message); };
  TUNE_RETURN_IF_ERROR(check(TUNE_DEV(d.cuDeviceGet(&dev->dev_, ordinal))));
  TUNE_RETURN_IF_ERROR(check(TUNE_DEV(d.cuDevicePrimaryCtxRetain(&dev->ctx_, dev->dev_))));
  TUNE_RETURN_IF_ERROR(check(TUNE_DEV(d.cuCtxSetCurrent(dev->ctx_))));
  TUNE_RETURN_IF_ERROR(check(TUNE_DEV(d.cuDeviceGetAttribute(
      &dev->max_threads_per_sm_, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, dev->dev_))));
  std::string why;
  dev->nvml_ = Nvml::Open(PciBusId(d, ordinal), &why);
  if (!dev->nvml_) fprintf(stderr, "tunefarm runner[%d]: no clock readings: %s\n", ordinal, why.c_str());
  return dev;
}

CudaDevice::~CudaDevice() {
  // The process exits after its runner; a lost context refuses these calls,
  // which is harmless.
  for (CUevent e : events_) d_.cuEventDestroy(e);
  for (CUstream s : streams_) d_.cuStreamDestroy(s);
  if (ctx_) d_.cuDevicePrimaryCtxRelease(dev_);
}

DeviceStatus CudaDevice::MemoryInfo(size_t* free_bytes, size_t* total_bytes) {
  return TUNE_DEV(d_.cuMemGetInfo(free_bytes, total_bytes));
}

DeviceStatus CudaDevice::Alloc(size_t bytes, DevicePtr* out) {
  CUdeviceptr p = 0;
  DeviceStatus st = TUNE_DEV(d_.cuMemAlloc(&p, std::max<size_t>(bytes, 1)));
  *out = st.ok() ? DevicePtr(p) : 0;
  return st;
}

void CudaDevice::Free(DevicePtr p) {
  if (p) d_.cuMemFree(CUdeviceptr(p));
}

DeviceStatus CudaDevice::CopyToDevice(DevicePtr dst, const void* src, size_t bytes) {
  return TUNE_DEV(d_.cuMemcpyHtoD(CUdeviceptr(dst), src, bytes));
}

DeviceStatus CudaDevice::CopyToHost(void* dst, DevicePtr src, size_t bytes) {
  return TUNE_DEV(d_.cuMemcpyDtoH(dst, CUdeviceptr(src), bytes));
}

DeviceStatus CudaDevice::CopyOnDevice(DevicePtr dst, DevicePtr src, size_t bytes) {
  return TUNE_DEV(d_.cuMemcpyDtoD(CUdeviceptr(dst), CUdeviceptr(src), bytes));
}

DeviceStatus CudaDevice::Fill(DevicePtr dst, uint8_t value, size_t bytes, device::Stream stream) {
  if (stream) return TUNE_DEV(d_.cuMemsetD8Async(CUdeviceptr(dst), value, bytes, S(stream)));
  return TUNE_DEV(d_.cuMemsetD8(CUdeviceptr(dst), value, bytes));
}

DeviceStatus CudaDevice::LoadImage(const std::string& image, device::Image* out) {
  CUmodule m = nullptr;
  DeviceStatus st = TUNE_DEV(d_.cuModuleLoadData(&m, image.data()));
  *out = st.ok() ? reinterpret_cast<device::Image>(m) : nullptr;
  return st;
}

void CudaDevice::UnloadImage(device::Image image) {
  if (image) d_.cuModuleUnload(reinterpret_cast<CUmodule>(image));
}

DeviceStatus CudaDevice::GetFunction(device::Image image, const std::string& name, device::Function* out) {
  CUfunction f = nullptr;
  DeviceStatus st = TUNE_DEV(d_.cuModuleGetFunction(&f, reinterpret_cast<CUmodule>(image), name.c_str()));
  *out = st.ok() ? reinterpret_cast<device::Function>(f) : nullptr;
  return st;
}

device::FunctionAttributes CudaDevice::Attributes(device::Function f) {
  device::FunctionAttributes a;
  int v = 0;
  if (d_.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, F(f)) == CUDA_SUCCESS) a.registers = v;
  if (d_.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, F(f)) == CUDA_SUCCESS) a.static_smem_bytes = v;
  if (d_.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, F(f)) == CUDA_SUCCESS) a.local_bytes = v;
  if (d_.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, F(f)) == CUDA_SUCCESS)
    a.max_threads_per_block = v;
  return a;
}

DeviceStatus CudaDevice::SetMaxDynamicSmem(device::Function f, int64_t bytes) {
  return TUNE_DEV(d_.cuFuncSetAttribute(F(f), CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(bytes)));
}

DeviceStatus CudaDevice::Occupancy(device::Function f, int threads, int64_t smem, int* blocks) {
  return TUNE_DEV(d_.cuOccupancyMaxActiveBlocksPerMultiprocessor(blocks, F(f), threads, size_t(smem)));
}

DeviceStatus CudaDevice::Launch(device::Function f, const int64_t grid[3], const int64_t block[3], int64_t smem,
                                device::Stream stream, void** params) {
  return TUNE_DEV(d_.cuLaunchKernel(F(f), unsigned(grid[0]), unsigned(grid[1]), unsigned(grid[2]),
                                    unsigned(block[0]), unsigned(block[1]), unsigned(block[2]), unsigned(smem),
                                    S(stream), params, nullptr));
}

DeviceStatus CudaDevice::CreateStream(device::Stream* out) {
  CUstream s = nullptr;
  DeviceStatus st = TUNE_DEV(d_.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  if (st.ok()) streams_.push_back(s);
  *out = st.ok() ? reinterpret_cast<device::Stream>(s) : nullptr;
  return st;
}

DeviceStatus CudaDevice::CreateEvent(device::Event* out) {
  CUevent e = nullptr;
  DeviceStatus st = TUNE_DEV(d_.cuEventCreate(&e, CU_EVENT_DEFAULT));
  if (st.ok()) events_.push_back(e);
  *out = st.ok() ? reinterpret_cast<device::Event>(e) : nullptr;
  return st;
}

DeviceStatus CudaDevice::Record(device::Event e, device::Stream stream) {
  return TUNE_DEV(d_.cuEventRecord(reinterpret_cast<CUevent>(e), S(stream)));
}

DeviceStatus CudaDevice::ElapsedMs(device::Event start, device::Event stop, float* ms) {
  return TUNE_DEV(d_.cuEventElapsedTime(ms, reinterpret_cast<CUevent>(start), reinterpret_cast<CUevent>(stop)));
}

DeviceStatus CudaDevice::SynchronizeStream(device::Stream stream) { return TUNE_DEV(d_.cuStreamSynchronize(S(stream))); }

DeviceStatus CudaDevice::Synchronize() { return TUNE_DEV(d_.cuCtxSynchronize()); }

// base/tensor_map.h speaks the driver ABI without cuda.h; these hold it to it.
static_assert(TensorMapLayout::kF16 == CU_TENSOR_MAP_DATA_TYPE_FLOAT16 &&
              TensorMapLayout::kBF16 == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 &&
              TensorMapLayout::kF32 == CU_TENSOR_MAP_DATA_TYPE_FLOAT32 &&
              TensorMapLayout::kI32 == CU_TENSOR_MAP_DATA_TYPE_INT32);
static_assert(CU_TENSOR_MAP_SWIZZLE_128B == 3 && CU_TENSOR_MAP_SWIZZLE_64B == 2 && CU_TENSOR_MAP_SWIZZLE_32B == 1);
static_assert(TensorMapLayout::kInterleaveNone == CU_TENSOR_MAP_INTERLEAVE_NONE &&
              TensorMapLayout::kL2Promotion256B == CU_TENSOR_MAP_L2_PROMOTION_L2_256B &&
              TensorMapLayout::kOobFillZeros == CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
static_assert(sizeof(CUtensorMap) == sizeof(runner::ParamSlot::map) && alignof(CUtensorMap) <= alignof(runner::ParamSlot));

DeviceStatus CudaDevice::EncodeTensorMap(const TensorMapLayout& l, DevicePtr address, void* map) {
  if (!d_.cuTensorMapEncodeTiled)
    return device::DeviceFailed(device::DeviceError::kFailed,
                                "this CUDA driver cannot encode tensor maps (CUDA 12 and later)");
  return TUNE_DEV(d_.cuTensorMapEncodeTiled(
      static_cast<CUtensorMap*>(map), CUtensorMapDataType(l.dtype), l.rank, reinterpret_cast<void*>(address), l.dims,
      l.strides, l.box, l.element_strides, CUtensorMapInterleave(l.kInterleaveNone), CUtensorMapSwizzle(l.swizzle),
      CUtensorMapL2promotion(l.kL2Promotion256B), CUtensorMapFloatOOBfill(l.kOobFillZeros)));
}

Result<std::unique_ptr<device::BaselineLibrary>> CudaDevice::OpenBaseline(const std::string& library) {
  if (library != "cublaslt") return Status::Error("baseline " + library + ": not a library of the CUDA backend");
  auto lib = CublasLt::Open();
  if (!lib.ok()) return lib.status();
  return std::unique_ptr<device::BaselineLibrary>(new CublasLtBaseline(std::move(lib).value()));
}

device::ClockReading CudaDevice::Clocks() {
  if (!nvml_) return {};
  const ClockSample s = nvml_->Sample();
  return device::ClockReading{s.valid, s.sm_clock_mhz, s.Throttled()};
}

device::EnergyReading CudaDevice::Energy() {
  if (!nvml_) return {};
  const Nvml::Energy e = nvml_->ReadEnergy();
  return device::EnergyReading{e.valid, e.joules, e.power_limit_w};
}

std::string NvrtcToolchain::Version() const { return "nvrtc " + NvrtcVersionString(); }

std::vector<std::string> NvrtcToolchain::Targets() const {
  std::vector<std::string> out;
  auto nvrtc = LoadNvrtc();
  int n = 0;
  if (!nvrtc.ok() || (*nvrtc)->nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) return out;
  std::vector<int> archs(size_t(n), 0);
  if ((*nvrtc)->nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) return out;
  for (int a : archs) out.push_back("sm_" + std::to_string(a));
  return out;
}

void NvrtcToolchain::SetIncludeRoots(IncludeRoots roots) { tune::SetIncludeRoots(std::move(roots)); }

namespace {
device::CompiledImage ImageOf(const CompiledKernel& ck) {
  if (ck.failure != FailureClass::kNone) return device::CompiledImage{"", ck.failure_message, ck.log};
  return device::CompiledImage{ck.image, "", ck.log};
}
}  // namespace

device::CompiledImage NvrtcToolchain::CompileReference(const OpSpec& spec, const std::string& dtype,
                                                       const DeviceInfo& device, const std::string& cache_dir) {
  return ImageOf(tune::CompileReference(spec, dtype, CudaArchFor(spec, device), cache_dir));
}

device::CompiledImage NvrtcToolchain::CompileBuiltins(const std::string& dtype, const DeviceInfo& device,
                                                      const std::string& cache_dir) {
  const std::string arch = TargetOf(device).arch;
  return ImageOf(CompileBuiltin(kBuiltinSource, "tunefarm_compare", dtype, arch, cache_dir));
}

}  // namespace tune::cuda

namespace tune {

int RunnerMain(int device_index, int in_fd, int out_fd) {
  const int out = runner::FramesOut(out_fd);
  if (out < 0) return runner::kExitProtocol;
  auto driver = cuda::LoadDriver();
  Result<std::unique_ptr<cuda::CudaDevice>> device =
      driver.ok() ? cuda::CudaDevice::Open(**driver, device_index) : driver.status();
  if (!device.ok()) {
    // Answer the backend's init so that it learns why, then stop.
    fprintf(stderr, "tunefarm runner[%d]: %s\n", device_index, device.status().message().c_str());
    return runner::AnswerUnopened(in_fd, out, device.status().message());
  }
  runner::WatchParent();
  cuda::NvrtcToolchain toolchain;
  runner::Runner r(**device, toolchain, device_index, in_fd, out);
  return r.Serve();
}

}  // namespace tune
