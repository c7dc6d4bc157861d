// Row sums with CUB's BlockReduce: one block per row, each thread keeping
// ITEMS partial sums (independent loads in flight), then one block-wide sum.
#include <cub/block/block_reduce.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

typedef TUNE_T T;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

extern "C" __global__ void __launch_bounds__(THREADS) row_sum(const T* __restrict__ x, float* __restrict__ y,
                                                             int ROWS, int N) {
  using Reduce = cub::BlockReduce<float, THREADS>;
  __shared__ typename Reduce::TempStorage scratch;
  if (blockIdx.x >= ROWS) return;
  const T* row = x + (size_t)blockIdx.x * N;
  float part[ITEMS];
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) part[j] = 0.f;
  for (int base = threadIdx.x; base < N; base += THREADS * ITEMS) {
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
      const int c = base + j * THREADS;
      if (c < N) part[j] += to_float(row[c]);
    }
  }
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) sum += part[j];
  const float total = Reduce(scratch).Sum(sum);
  if (threadIdx.x == 0) y[blockIdx.x] = total;
}
