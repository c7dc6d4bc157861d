// Planted fault: every thread stores 2^40 elements past the end of y, which is an illegal
// address and poisons the context.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef TUNE_T T;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ T from_float(float v) { return (T)v; }

extern "C" __global__ void scale_shift(const T* __restrict__ x, T* __restrict__ y, int n) {
  const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) y[i + (1LL << 40)] = from_float(2.0f * to_float(x[i]) + 1.0f);
}
