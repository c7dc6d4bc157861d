// Checker of argmax_rows: the kernel's arguments, then the counter of
// failing elements. A row passes when its index is in range and holds the
// row's maximum (any of its ties), and hits[row] is 1. Reads indices as
// untrusted: out of range is a failure, never an access.
extern "C" __global__ void argmax_check(const float* x, const float* bias, const int* idx, const int* hits,
                                        int ROWS, int N, unsigned long long* bad) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= ROWS) return;
  float best = -3.0e38f;
  for (int c = 0; c < N; ++c) best = fmaxf(best, x[(size_t)row * N + c] + bias[c]);
  const int i = idx[row];
  const bool ok = i >= 0 && i < N && x[(size_t)row * N + i] + bias[i] == best && hits[row] == 1;
  // Two output elements per row (idx and hits): both fail together.
  if (!ok) atomicAdd(bad, 2ull);
}
