// Reference for ops/gemm: C[M,N] = A[M,K] * B[N,K]^T, products and sums in
// fp32, one thread per output element, k summed in order. 16x16 tiles
// staged through shared memory keep the loads coalesced (the plain loop reads
// B with a stride of K and takes seconds at 8192^3, paid once per runner and
// shape); the sums are the same, in the same order.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef TUNE_T T;

__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// Launched with 16x16 threads per block ([check] grid/block in op.toml).
extern "C" __global__ void gemm_ref(const T* A, const T* B, float* C, int M, int N, int K) {
  __shared__ float As[16][17], Bs[16][17];  // +1: no bank conflicts on column reads
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int m0 = blockIdx.y * 16, n0 = blockIdx.x * 16;
  float sum = 0.f;
  for (int k0 = 0; k0 < K; k0 += 16) {
    const int k = k0 + tx;
    As[ty][tx] = (m0 + ty < M && k < K) ? to_float(A[(size_t)(m0 + ty) * K + k]) : 0.f;
    Bs[ty][tx] = (n0 + ty < N && k < K) ? to_float(B[(size_t)(n0 + ty) * K + k]) : 0.f;
    __syncthreads();
    for (int kk = 0; kk < 16; ++kk) sum += As[ty][kk] * Bs[tx][kk];
    __syncthreads();
  }
  if (m0 + ty < M && n0 + tx < N) C[(size_t)(m0 + ty) * N + (n0 + tx)] = sum;
}
