// Reference for ops/gemm_sm90 (the contract of ops/gemm): C[M,N] =
// A[M,K] * B[N,K]^T, products and sums in fp32, one thread per output.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef TUNE_T T;

__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

extern "C" __global__ void gemm_ref(const T* A, const T* B, float* C, int M, int N, int K) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  const int m = blockIdx.y * blockDim.y + threadIdx.y;
  if (m >= M || n >= N) return;
  const T* a = A + (size_t)m * K;
  const T* b = B + (size_t)n * K;
  float sum = 0.f;
  for (int k = 0; k < K; ++k) sum += to_float(a[k]) * to_float(b[k]);
  C[(size_t)m * N + n] = sum;
}
