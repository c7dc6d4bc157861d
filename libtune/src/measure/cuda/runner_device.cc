#include "measure/cuda/runner_device.h"

namespace tune::cuda::runner {

bool RunnerDevice::ContextHealthy() {
  if (d_.cuCtxSynchronize() != CUDA_SUCCESS) return false;
  return d_.cuMemsetD8(probe_, 0, 1) == CUDA_SUCCESS && d_.cuCtxSynchronize() == CUDA_SUCCESS;
}

Failure RunnerDevice::FromCu(const CuStatus& st, const std::string& what) {
  if (IsStickyError(st.code) || !ContextHealthy()) {
    return Fail(FailureClass::kCrash, what + ": " + st.message + " (context lost; runner restarts)", true);
  }
  if (st.code == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES || st.code == CUDA_ERROR_OUT_OF_MEMORY) {
    return Fail(FailureClass::kResources, what + ": " + st.message);
  }
  return Fail(FailureClass::kLaunchError, what + ": " + st.message);
}

CuStatus RunnerDevice::Launch(CUfunction f, const int64_t grid[3], const int64_t block[3], int64_t smem,
                              CUstream s, void** params) {
  for (int i = 0; i < 3; ++i) {
    if (grid[i] <= 0 || grid[i] > 0x7FFFFFFF || block[i] <= 0 || block[i] > 1024) {
      return CuStatus{CUDA_ERROR_INVALID_VALUE,
                      "launch geometry out of range: grid (" + std::to_string(grid[0]) + "," +
                          std::to_string(grid[1]) + "," + std::to_string(grid[2]) + ") block (" +
                          std::to_string(block[0]) + "," + std::to_string(block[1]) + "," +
                          std::to_string(block[2]) + ")"};
    }
  }
  return TUNE_CU(d_.cuLaunchKernel(f, unsigned(grid[0]), unsigned(grid[1]), unsigned(grid[2]), unsigned(block[0]),
                                   unsigned(block[1]), unsigned(block[2]), unsigned(smem), s, params, nullptr));
}

// base/tensor_map.h speaks the driver ABI without cuda.h; these hold it to it.
static_assert(TensorMapLayout::kF16 == CU_TENSOR_MAP_DATA_TYPE_FLOAT16 &&
              TensorMapLayout::kBF16 == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 &&
              TensorMapLayout::kF32 == CU_TENSOR_MAP_DATA_TYPE_FLOAT32 &&
              TensorMapLayout::kI32 == CU_TENSOR_MAP_DATA_TYPE_INT32);
static_assert(CU_TENSOR_MAP_SWIZZLE_128B == 3 && CU_TENSOR_MAP_SWIZZLE_64B == 2 && CU_TENSOR_MAP_SWIZZLE_32B == 1);
static_assert(TensorMapLayout::kInterleaveNone == CU_TENSOR_MAP_INTERLEAVE_NONE &&
              TensorMapLayout::kL2Promotion256B == CU_TENSOR_MAP_L2_PROMOTION_L2_256B &&
              TensorMapLayout::kOobFillZeros == CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);

CuStatus EncodeTensorMap(const Driver& d, const TensorMapLayout& l, CUdeviceptr address, CUtensorMap* map) {
  return TUNE_CU(d.cuTensorMapEncodeTiled(
      map, CUtensorMapDataType(l.dtype), l.rank, reinterpret_cast<void*>(address), l.dims, l.strides, l.box,
      l.element_strides, CUtensorMapInterleave(l.kInterleaveNone), CUtensorMapSwizzle(l.swizzle),
      CUtensorMapL2promotion(l.kL2Promotion256B), CUtensorMapFloatOOBfill(l.kOobFillZeros)));
}

}  // namespace tune::cuda::runner
