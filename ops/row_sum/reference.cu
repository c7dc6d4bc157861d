// Reference for ops/row_sum: one thread per row, summed in double. Slow on
// purpose: obviously right beats fast here.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

typedef TUNE_T T;

__device__ __forceinline__ double to_double(float v) { return v; }
__device__ __forceinline__ double to_double(__half v) { return __half2float(v); }
__device__ __forceinline__ double to_double(__nv_bfloat16 v) { return __bfloat162float(v); }

extern "C" __global__ void row_sum_ref(const T* x, float* y, int ROWS, int N) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= ROWS) return;
  double s = 0.0;
  for (int i = 0; i < N; ++i) s += to_double(x[(size_t)r * N + i]);
  y[r] = (float)s;
}
