// y = a*x + b. Each block owns a tile of BLOCK*VEC elements: loads are
// coalesced into shared memory, then each thread computes VEC neighbours, so
// BLOCK and VEC trade occupancy against work per thread.
#include "tiny_common.h"

#ifndef BLOCK
#error "BLOCK must be defined by the farm (-DBLOCK=...)"
#endif
#ifndef VEC
#error "VEC must be defined by the farm (-DVEC=...)"
#endif

extern "C" __global__ void tiny_axpb(const TUNE_T* __restrict__ x, TUNE_T* __restrict__ y, float a,
                                     float b, int n) {
  extern __shared__ float tile[];
  const long long base = static_cast<long long>(blockIdx.x) * (BLOCK * VEC);
#pragma unroll
  for (int v = 0; v < VEC; ++v) {
    const int local = v * BLOCK + static_cast<int>(threadIdx.x);
    const long long i = base + local;
    tile[local] = i < n ? tiny_to_float(x[i]) : 0.0f;
  }
  __syncthreads();
#pragma unroll
  for (int v = 0; v < VEC; ++v) {
    const int local = static_cast<int>(threadIdx.x) * VEC + v;
    const long long i = base + local;
    if (i < n) y[i] = tiny_from_float(a * tile[local] + b);
  }
}
