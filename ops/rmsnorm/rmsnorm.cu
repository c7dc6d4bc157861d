// RMSNorm over the rows of a ROWS x N row-major matrix:
//   y[r, i] = x[r, i] / sqrt(mean_i(x[r, i]^2) + eps) * w[i]
// x, w and y are TUNE_T (__half, __nv_bfloat16 or float); all arithmetic is
// fp32. Memory-bound: the figure of merit is bytes moved per second.
//
// A row is handled by TPR threads (a sub-warp, a warp or several warps) and a
// block holds RPB rows. Each thread moves VEC elements per access: one load
// of VEC*sizeof(T) bytes, split into 16-byte pieces when wider. When a row
// fits in the registers of its threads (N <= TPR*VEC*ITEMS) it is read once
// and kept there; otherwise it is streamed twice, the second pass mostly from
// L2. Vector accesses need N to be a multiple of VEC; other N take a scalar
// path (correct, slower). Pointers must be 16-byte aligned.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#if !defined(VEC) || !defined(TPR) || !defined(RPB) || !defined(ITEMS)
#error "rmsnorm.cu needs -DVEC -DTPR -DRPB -DITEMS"
#endif

typedef TUNE_T T;

static_assert(TPR >= 1 && (TPR & (TPR - 1)) == 0, "TPR is a power of two");
static_assert(TPR <= 32 || TPR % 32 == 0, "rows span whole warps or part of one");

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void from_float(float v, float* out) { *out = v; }
__device__ __forceinline__ void from_float(float v, __half* out) { *out = __float2half_rn(v); }
__device__ __forceinline__ void from_float(float v, __nv_bfloat16* out) { *out = __float2bfloat16_rn(v); }

template <int V>
struct alignas(V * sizeof(T)) Pack {
  T v[V];
};

template <int V>
__device__ __forceinline__ void load(const T* p, float (&f)[V]) {
  const Pack<V> pk = *reinterpret_cast<const Pack<V>*>(p);
#pragma unroll
  for (int e = 0; e < V; ++e) f[e] = to_float(pk.v[e]);
}

template <int V>
__device__ __forceinline__ void store(T* p, const float (&f)[V]) {
  Pack<V> pk;
#pragma unroll
  for (int e = 0; e < V; ++e) from_float(f[e], &pk.v[e]);
  *reinterpret_cast<Pack<V>*>(p) = pk;
}

// Sum over the TPR threads of a row; every thread of the row gets the total.
// `red` holds one slot per warp of the block. Called by every thread of the
// block (the __syncthreads inside), rows out of range included.
__device__ __forceinline__ float row_sum(float s, float* red) {
#pragma unroll
  for (int o = (TPR < 32 ? TPR : 32) / 2; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
#if TPR > 32
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) red[warp] = s;
  __syncthreads();
  const int first = (warp / (TPR / 32)) * (TPR / 32);
  s = 0.f;
#pragma unroll
  for (int i = 0; i < TPR / 32; ++i) s += red[first + i];
#endif
  return s;
}

// One row per TPR threads, V elements per access.
template <int V>
__device__ __forceinline__ void norm_rows(const T* __restrict__ x, const T* __restrict__ w,
                                          T* __restrict__ y, int rows, int n, float eps,
                                          float* red) {
  const int row = blockIdx.x * RPB + threadIdx.x / TPR;
  const int t = threadIdx.x % TPR;
  const bool live = row < rows;
  const int nvec = n / V;
  const T* xr = x + (size_t)(live ? row : 0) * n;
  T* yr = y + (size_t)(live ? row : 0) * n;
  const float inv_n = 1.f / (float)n;

  if (nvec <= TPR * ITEMS) {
    // The row stays in registers between the two passes.
    float v[ITEMS][V];
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int j = t + i * TPR;
      if (live && j < nvec) {
        load<V>(xr + j * V, v[i]);
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e) v[i][e] = 0.f;
      }
#pragma unroll
      for (int e = 0; e < V; ++e) s += v[i][e] * v[i][e];
    }
    const float scale = rsqrtf(row_sum(s, red) * inv_n + eps);
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int j = t + i * TPR;
      if (live && j < nvec) {
        float wv[V];
        load<V>(w + j * V, wv);
#pragma unroll
        for (int e = 0; e < V; ++e) v[i][e] = v[i][e] * scale * wv[e];
        store<V>(yr + j * V, v[i]);
      }
    }
  } else {
    // Long rows: ITEMS accesses in flight per round, two passes.
    float s = 0.f;
    for (int j0 = 0; j0 < nvec; j0 += TPR * ITEMS) {
      float v[ITEMS][V];
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        const int j = j0 + t + i * TPR;
        if (live && j < nvec) {
          load<V>(xr + j * V, v[i]);
        } else {
#pragma unroll
          for (int e = 0; e < V; ++e) v[i][e] = 0.f;
        }
      }
#pragma unroll
      for (int i = 0; i < ITEMS; ++i)
#pragma unroll
        for (int e = 0; e < V; ++e) s += v[i][e] * v[i][e];
    }
    const float scale = rsqrtf(row_sum(s, red) * inv_n + eps);
    if (!live) return;
    for (int j0 = 0; j0 < nvec; j0 += TPR * ITEMS) {
      float v[ITEMS][V], wv[ITEMS][V];
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        const int j = j0 + t + i * TPR;
        if (j < nvec) {
          load<V>(xr + j * V, v[i]);
          load<V>(w + j * V, wv[i]);
        }
      }
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        const int j = j0 + t + i * TPR;
        if (j < nvec) {
#pragma unroll
          for (int e = 0; e < V; ++e) v[i][e] = v[i][e] * scale * wv[i][e];
          store<V>(yr + j * V, v[i]);
        }
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(TPR * RPB)
rmsnorm(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, int ROWS, int N,
        float eps) {
  __shared__ float red[(TPR * RPB + 31) / 32];
  if (N % VEC == 0) {
    norm_rows<VEC>(x, w, y, ROWS, N, eps, red);
  } else {
    norm_rows<1>(x, w, y, ROWS, N, eps, red);
  }
}
