#if defined(TUNE_DTYPE_F16)
#include <cuda_fp16.h>
#endif

// y = 2x; TILE/UNROLL shape the grid, SPLIT and PAD only widen the space.
extern "C" __global__ void synthetic(const TUNE_T* x, TUNE_T* y, int n) {
  const int base = (blockIdx.x * TILE * UNROLL) + threadIdx.x;
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    const int i = base + u * TILE;
    if (i < n) y[i] = static_cast<TUNE_T>(2.0f * static_cast<float>(x[i]) + 0.0f * (SPLIT + PAD));
  }
}
