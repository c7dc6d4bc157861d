// acc = scale*acc + x (in place); bucket = floor(4*x) as an int.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef TUNE_T T;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ T from_float(float v) { return (T)v; }

extern "C" __global__ void blend_bucket(const T* __restrict__ x, T* __restrict__ acc, int* __restrict__ bucket,
                                        long long n, float scale) {
  const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (i >= n) return;
  const float xv = to_float(x[i]);
  acc[i] = from_float(scale * to_float(acc[i]) + xv);
  bucket[i] = (int)floorf(4.0f * xv);
}
