// y = 2*x + 1; WRONG = 1 adds 0.5 (a config that is wrong, which only the
// check against the default config can catch: the op has no reference).
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef TUNE_T T;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ T from_float(float v) { return (T)v; }

extern "C" __global__ void scale_shift(const T* __restrict__ x, T* __restrict__ y, int n) {
  const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) y[i] = from_float(2.0f * to_float(x[i]) + (WRONG ? 1.5f : 1.0f));
}
