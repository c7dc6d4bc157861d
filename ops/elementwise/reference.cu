// Reference for ops/elementwise: y = gelu(x + r), exact erf form, fp32.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef TUNE_T T;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

extern "C" __global__ void add_gelu_ref(const T* x, const T* r, float* y, int N) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N) return;
  const float v = to_float(x[i]) + to_float(r[i]);
  y[i] = 0.5f * v * (1.f + erff(v / sqrtf(2.f)));
}
