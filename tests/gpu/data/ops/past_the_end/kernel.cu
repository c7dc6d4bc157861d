// Planted fault: y = 2*x + 1, right, and the first 64 threads also write
// the 64 elements after y's end (slack of the allocation: no crash).
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef TUNE_T T;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ T from_float(float v) { return (T)v; }

extern "C" __global__ void scale_shift(const T* __restrict__ x, T* __restrict__ y, int n) {
  const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) y[i] = from_float(2.0f * to_float(x[i]) + 1.0f);
  if (i < 64) y[n + i] = from_float(7.0f);
}
