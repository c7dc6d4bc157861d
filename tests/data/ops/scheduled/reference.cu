// Reference for scheduled_axpb: same parameters, output in fp32.
#include "scheduled_common.h"

extern "C" __global__ void scheduled_axpb_ref(const TUNE_T* __restrict__ x, float* __restrict__ y, float a,
                                         float b, int n) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * scheduled_to_float(x[i]) + b;
}
