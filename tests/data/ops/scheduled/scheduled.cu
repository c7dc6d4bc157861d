// y = a*x + b, walked three ways (SCHEDULE) with or without a shared-memory
// tile (STAGE_IN_SMEM): the farm's macros for string and boolean params.
#include "scheduled_common.h"

#if !defined(SCHEDULE_direct) || !defined(SCHEDULE_grid_stride) || !defined(SCHEDULE_blocked)
#error "the farm defines SCHEDULE_<value> for every value of SCHEDULE"
#endif
#if SCHEDULE_direct + SCHEDULE_grid_stride + SCHEDULE_blocked != 1
#error "exactly one SCHEDULE_<value> is 1"
#endif

extern "C" __global__ void scheduled_axpb(const TUNE_T* __restrict__ x, TUNE_T* __restrict__ y, float a, float b,
                                          int n) {
#if SCHEDULE_grid_stride
  for (long long i = static_cast<long long>(blockIdx.x) * BLOCK + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * BLOCK)
    y[i] = scheduled_from_float(a * scheduled_to_float(x[i]) + b);
#elif SCHEDULE_blocked
  // Four elements a thread, in a tile of 4*BLOCK.
  const long long base = static_cast<long long>(blockIdx.x) * (4 * BLOCK);
#if STAGE_IN_SMEM
  extern __shared__ float tile[];
  for (int v = 0; v < 4; ++v) {
    const long long i = base + v * BLOCK + threadIdx.x;
    tile[v * BLOCK + threadIdx.x] = i < n ? scheduled_to_float(x[i]) : 0.0f;
  }
  __syncthreads();
#endif
  for (int v = 0; v < 4; ++v) {
    const long long i = base + v * BLOCK + threadIdx.x;
#if STAGE_IN_SMEM
    const float xv = tile[v * BLOCK + threadIdx.x];
#else
    const float xv = i < n ? scheduled_to_float(x[i]) : 0.0f;
#endif
    if (i < n) y[i] = scheduled_from_float(a * xv + b);
  }
#else
  const long long i = static_cast<long long>(blockIdx.x) * BLOCK + threadIdx.x;
  if (i < n) y[i] = scheduled_from_float(a * scheduled_to_float(x[i]) + b);
#endif
}
