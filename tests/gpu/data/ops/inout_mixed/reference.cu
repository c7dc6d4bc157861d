// Reference: the same math in fp32; acc starts from the same values.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef TUNE_T T;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

extern "C" __global__ void blend_bucket_ref(const T* x, float* acc, float* bucket, long long n, float scale) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float xv = to_float(x[i]);
  acc[i] = scale * acc[i] + xv;
  bucket[i] = floorf(4.0f * xv);
}
