// dtype conversions shared by the kernel and its reference. TUNE_T and the
// TUNE_DTYPE_* macro come from the farm's compile options.
#pragma once

#if defined(TUNE_DTYPE_F16)
#include <cuda_fp16.h>
__device__ __forceinline__ float scheduled_to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ __half scheduled_from_float(float v) { return __float2half_rn(v); }
#elif defined(TUNE_DTYPE_BF16)
#include <cuda_bf16.h>
__device__ __forceinline__ float scheduled_to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ __nv_bfloat16 scheduled_from_float(float v) { return __float2bfloat16_rn(v); }
#else
__device__ __forceinline__ float scheduled_to_float(float v) { return v; }
__device__ __forceinline__ float scheduled_from_float(float v) { return v; }
#endif
