// y = 2*x + 1 written out: the reference shares no header with the kernel.
extern "C" __global__ void affine_ref(const float* x, float* y, int n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i] + 1.0f;
}
