typedef TUNE_T T;
extern "C" __global__ void copy(const T* x, T* y, int N) {
  const int i = blockIdx.x * THREADS + threadIdx.x;
  if (i < N) y[i] = x[i];
}
