// y = 2*x + 1, through a header of the package's include folder, which
// takes its shift from the include root "shiftlib".
#include <affine/affine.cuh>

extern "C" __global__ void affine_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
  const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) y[i] = affine::apply(x[i]);
}
