// Fused residual add + GELU: y[i] = gelu(x[i] + r[i]) over N elements,
// gelu(v) = v/2 * (1 + erf(v / sqrt(2))) (the exact form, as in PyTorch's
// default). x, r and y are TUNE_T; the math is fp32. Memory-bound: two
// streams in, one out.
//
// A block covers BLOCK*VEC*ITEMS consecutive elements: each thread issues
// ITEMS independent VEC-wide loads per input before any math, so several
// accesses are in flight, and consecutive threads touch consecutive VEC
// chunks (coalesced). A VEC chunk wider than 16 bytes (f32, VEC=8) is moved
// as 16-byte pieces. Any N works: a chunk that crosses the end falls back to
// element-wise access. Pointers 16-byte aligned.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#if !defined(VEC) || !defined(BLOCK) || !defined(ITEMS)
#error "add_gelu.cu needs -DVEC -DBLOCK -DITEMS"
#endif

typedef TUNE_T T;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ T from_float(float v) { return (T)v; }

struct alignas(VEC * sizeof(T)) Pack {
  T v[VEC];
};

__device__ __forceinline__ float gelu(float v) { return 0.5f * v * (1.f + erff(v * 0.70710678118654752f)); }

extern "C" __global__ void __launch_bounds__(BLOCK)
add_gelu(const T* __restrict__ x, const T* __restrict__ r, T* __restrict__ y, int N) {
  const long long base = (long long)blockIdx.x * (BLOCK * VEC * ITEMS);
  Pack px[ITEMS], pr[ITEMS];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const long long e = base + (long long)(i * BLOCK + threadIdx.x) * VEC;
    if (e + VEC <= N) {
      px[i] = *reinterpret_cast<const Pack*>(x + e);
      pr[i] = *reinterpret_cast<const Pack*>(r + e);
    } else {
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        px[i].v[k] = e + k < N ? x[e + k] : from_float(0.f);
        pr[i].v[k] = e + k < N ? r[e + k] : from_float(0.f);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const long long e = base + (long long)(i * BLOCK + threadIdx.x) * VEC;
    Pack out;
#pragma unroll
    for (int k = 0; k < VEC; ++k) out.v[k] = from_float(gelu(to_float(px[i].v[k]) + to_float(pr[i].v[k])));
    if (e + VEC <= N) {
      *reinterpret_cast<Pack*>(y + e) = out;
    } else {
#pragma unroll
      for (int k = 0; k < VEC; ++k)
        if (e + k < N) y[e + k] = out.v[k];
    }
  }
}
