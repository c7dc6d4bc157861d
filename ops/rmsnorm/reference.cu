// Reference for ops/rmsnorm: one thread per row, the sum of squares in
// double, the rest in fp32. Slow on purpose: obviously right beats fast here.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef TUNE_T T;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

extern "C" __global__ void rmsnorm_ref(const T* x, const T* w, float* y, int ROWS, int N,
                                       float eps) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= ROWS) return;
  const T* xr = x + (size_t)r * N;
  double ss = 0.0;
  for (int i = 0; i < N; ++i) {
    const double v = to_float(xr[i]);
    ss += v * v;
  }
  const float scale = (float)(1.0 / sqrt(ss / N + (double)eps));
  for (int i = 0; i < N; ++i) y[(size_t)r * N + i] = to_float(xr[i]) * scale * to_float(w[i]);
}
