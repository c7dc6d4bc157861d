// Reference for ops/gemm_hopper (the contract of ops/gemm): C[M,N] =
// A[M,K] * B[N,K]^T, products and sums in fp32, k summed in order for every output.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef TUNE_T T;

__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// A block computes a 128x128 tile of C with 16x16 threads, 8x8 outputs per
// thread (rows ty + 16*i, columns tx + 16*j: a warp's B reads are 16
// consecutive floats and its A reads two broadcasts, so no bank conflicts).
// K is staged 16 at a time; every output still sums k = 0, 1, ..., K-1 in
// order with one fused multiply-add per k, so the figures are bit for bit
// those of a one-thread-per-output loop. Eight outputs per operand load keep
// the reference to tens of milliseconds at 8192^3 where one output per
// thread took 0.18 s, paid by every runner for every (shape, dtype).
// Launched with 16x16 threads per block ([check] grid/block in op.toml).
// W, the kernel's workspace, is left as it is: the kernel must leave it so.
constexpr int kTile = 128, kStep = 16, kThreads = 256, kPer = kTile / 16;

__device__ __forceinline__ void stage(const T* X, int rows, int K, int r0, int k0, float (*Xs)[kTile + 1],
                                      int t) {
  // 2048 elements per tile, 8 per thread; a row's 16 k values are adjacent in memory.
#pragma unroll
  for (int l = 0; l < kTile * kStep / kThreads; ++l) {
    const int idx = t + kThreads * l, row = idx / kStep, k = idx % kStep;
    Xs[k][row] = (r0 + row < rows && k0 + k < K) ? to_float(X[(size_t)(r0 + row) * K + k0 + k]) : 0.f;
  }
}

extern "C" __global__ void __launch_bounds__(kThreads) gemm_ref(const T* A, const T* B, float* C, float* W, int M, int N,
                                                                int K, int /*a_rows: the kernel's load geometry*/) {
  __shared__ float As[kStep][kTile + 1], Bs[kStep][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y, t = ty * 16 + tx;
  const int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
  float acc[kPer][kPer] = {};
  for (int k0 = 0; k0 < K; k0 += kStep) {
    stage(A, M, K, m0, k0, As, t);
    stage(B, N, K, n0, k0, Bs, t);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kStep; ++kk) {
      float a[kPer], b[kPer];
#pragma unroll
      for (int i = 0; i < kPer; ++i) a[i] = As[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < kPer; ++j) b[j] = Bs[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < kPer; ++i)
#pragma unroll
        for (int j = 0; j < kPer; ++j) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int m = m0 + ty + 16 * i;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int n = n0 + tx + 16 * j;
      if (m < M && n < N) C[(size_t)m * N + n] = acc[i][j];
    }
  }
}
