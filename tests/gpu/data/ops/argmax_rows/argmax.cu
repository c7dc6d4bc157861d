// Row argmax of x + bias (the first column of the maximum), one block per
// row; hits[row] counts the rows' writes (it must end at 1).
extern "C" __global__ void argmax_rows(const float* x, const float* bias, int* idx, int* hits, int ROWS, int N) {
  __shared__ float best_v[THREADS];
  __shared__ int best_i[THREADS];
  const int row = blockIdx.x;
  float v = -3.0e38f;
  int at = 0;
  for (int c = threadIdx.x; c < N; c += THREADS) {
    const float y = x[(size_t)row * N + c] + bias[c];
    if (y > v) {
      v = y;
      at = c;
    }
  }
  best_v[threadIdx.x] = v;
  best_i[threadIdx.x] = at;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const float o = best_v[threadIdx.x + s];
      const int oi = best_i[threadIdx.x + s];
      if (o > best_v[threadIdx.x] || (o == best_v[threadIdx.x] && oi < best_i[threadIdx.x])) {
        best_v[threadIdx.x] = o;
        best_i[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    idx[row] = (best_i[0] + BUG) % N;
    hits[row] += 1;
  }
}
