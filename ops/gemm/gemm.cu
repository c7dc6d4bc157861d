// GEMM for tensor cores of sm_80 and later: C[M,N] = A[M,K] * B[N,K]^T.
//
// Layout ("TN", like a linear layer y = x W^T): A is M x K row-major, B is
// N x K row-major, C is M x N row-major; all three densely packed. Inputs and
// output are TUNE_T (__half or __nv_bfloat16); products accumulate in fp32.
//
// Requirements: M, N and K are multiples of 8 and the pointers are 16-byte
// aligned. Loads move 16-byte chunks (8 elements) that are either wholly
// inside the matrix or zero-filled, and stores write 8-element chunks, so any
// such shape is safe, including ones that are not multiples of the tile.
//
// Structure: a block computes a BM x BN tile of C with WM x WN warps, each
// owning a (BM/WM) x (BN/WN) warp tile of m16n8k16 mma.sync fragments fed by
// ldmatrix. K advances in steps of BK through a STAGES-deep ring of cp.async
// buffers in dynamic shared memory. Shared rows are XOR-swizzled at 16-byte
// granularity so that both the cp.async writes and the ldmatrix reads of
// eight consecutive rows hit eight distinct bank groups without padding.
// GROUP_M > 1 walks blocks in column-major groups of GROUP_M tile rows, so
// that blocks running together share A and B tiles in L2.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#if !defined(BM) || !defined(BN) || !defined(BK) || !defined(WM) || !defined(WN) || \
    !defined(STAGES) || !defined(GROUP_M)
#error "gemm.cu needs -DBM -DBN -DBK -DWM -DWN -DSTAGES -DGROUP_M"
#endif
#if !defined(TUNE_DTYPE_F16) && !defined(TUNE_DTYPE_BF16)
#error "gemm.cu supports f16 and bf16 only"
#endif

typedef TUNE_T T;

#define GEMM_THREADS (WM * WN * 32)
#define WTM (BM / WM)      // warp tile rows
#define WTN (BN / WN)      // warp tile columns
#define MI (WTM / 16)      // m16 fragments per warp
#define NI (WTN / 8)       // n8 fragments per warp
#define KCH (BK / 8)       // 16-byte chunks per shared-memory row
#define C_LD (BN + 8)      // epilogue staging row: +16 bytes keeps fragment writes conflict-free

static_assert(BM % (16 * WM) == 0, "warp tile rows must be a multiple of 16");
static_assert(BN % (16 * WN) == 0, "warp tile columns must be a multiple of 16");
static_assert(BK == 32 || BK == 64, "the swizzle covers 64- and 128-byte rows");
static_assert(STAGES >= 2, "the pipeline needs at least two buffers");

namespace {

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  unsigned r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}

// Byte offset of 16-byte chunk `ch` of row `row` in a swizzled tile. With
// 128-byte rows the chunk index is XORed with row%8; with 64-byte rows two
// rows share a 128-byte line, so the key is (row/2)%4.
__device__ __forceinline__ unsigned swz(int row, int ch) {
#if KCH == 8
  return (unsigned)(row * 8 + (ch ^ (row & 7))) * 16u;
#else
  return (unsigned)(row * 4 + (ch ^ ((row >> 1) & 3))) * 16u;
#endif
}

__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, bool valid) {
  // src-size 0 zero-fills the destination without reading global memory.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
#if defined(TUNE_DTYPE_F16)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

__device__ __forceinline__ unsigned pack2(float lo, float hi) {
#if defined(TUNE_DTYPE_F16)
  __half2 v = __floats2half2_rn(lo, hi);
#else
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
#endif
  return *reinterpret_cast<unsigned*>(&v);
}

// Copies one ROWS x BK tile (rows row0.., columns k0..) of a row-major
// matrix with `rows` rows and K columns into swizzled shared memory. A thread
// moves chunk tid%KCH of rows tid/KCH, tid/KCH + THREADS/KCH, ...: the rows
// step by a multiple of 8, so the swizzle key, and with it the chunk's place
// in a row, stays the same, and both addresses advance by constants.
template <int ROWS>
__device__ __forceinline__ void load_tile(unsigned dst, const T* __restrict__ g, int row0,
                                          int rows, int k0, int K, int tid) {
  constexpr int kChunks = ROWS * KCH;
  constexpr int kRowStep = GEMM_THREADS / KCH;
  constexpr int kIters = (kChunks + GEMM_THREADS - 1) / GEMM_THREADS;
  static_assert(kRowStep % 8 == 0, "rows a thread copies must keep their swizzle key");
  const int r = tid / KCH;
  const int ch = tid % KCH;
  const bool k_ok = k0 + ch * 8 < K;
  const unsigned d = dst + swz(r, ch);
  const T* p = g + (size_t)(row0 + r) * K + k0 + ch * 8;
  const size_t step = (size_t)kRowStep * K;
#pragma unroll
  for (int i = 0; i < kIters; ++i) {
    if (kChunks % GEMM_THREADS == 0 || r + i * kRowStep < ROWS) {
      const bool valid = k_ok && row0 + r + i * kRowStep < rows;
      cp_async16(d + i * GEMM_THREADS * 16, valid ? p : g, valid);
    }
    p += step;
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(GEMM_THREADS)
gemm(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M, int N, int K) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr unsigned kTileA = BM * BK * sizeof(T);
  constexpr unsigned kStage = (BM + BN) * BK * sizeof(T);

  // Block order: groups of GROUP_M tile rows, column-major inside a group.
  const int grid_n = gridDim.x;
  const int grid_m = gridDim.y;
  const int pid = blockIdx.y * grid_n + blockIdx.x;
  const int per_group = GROUP_M * grid_n;
  const int first_m = (pid / per_group) * GROUP_M;
  const int group_rows = min(grid_m - first_m, GROUP_M);
  const int tile_m = first_m + (pid % per_group) % group_rows;
  const int tile_n = (pid % per_group) / group_rows;
  const int m0 = tile_m * BM;
  const int n0 = tile_n * BN;

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int wm = warp / WN;
  const int wn = warp % WN;

  const unsigned s_base = smem_addr(smem);

  float acc[MI][NI][4];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.f;

  const int KT = (K + BK - 1) / BK;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) {
      load_tile<BM>(s_base + s * kStage, A, m0, M, s * BK, K, tid);
      load_tile<BN>(s_base + s * kStage + kTileA, B, n0, N, s * BK, K, tid);
    }
    cp_async_commit();
  }

  // Per-lane parts of the ldmatrix addresses. A: lanes 0-15 give rows 0-15 at
  // k 0-7, lanes 16-31 the same rows at k 8-15 (a0..a3 of the mma). B: matrices
  // (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15).
  // Fragment rows step by 16, which leaves a row's swizzle key unchanged, so
  // each fragment's address is one per-lane base plus a constant; the chunk
  // part of k-step kk is the base chunk XOR 2*kk (bit 0 holds the lane's half),
  // which only touches the chunk bits of the byte offset.
  const int key = (KCH == 8) ? (lane & 7) : ((lane >> 1) & 3);
  const unsigned a_off = (unsigned)(wm * WTM + (lane & 15)) * (BK * sizeof(T)) +
                         (unsigned)(((lane >> 4) ^ key) * 16);
  const unsigned b_off = (unsigned)(wn * WTN + (lane & 7) + ((lane >> 4) << 3)) * (BK * sizeof(T)) +
                         (unsigned)((((lane >> 3) & 1) ^ key) * 16);

  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<STAGES - 2>();
    // Also tells every warp that the buffer refilled below is no longer read.
    __syncthreads();
    {
      const int nk = kt + STAGES - 1;
      if (nk < KT) {
        const unsigned st = s_base + (nk % STAGES) * kStage;
        load_tile<BM>(st, A, m0, M, nk * BK, K, tid);
        load_tile<BN>(st + kTileA, B, n0, N, nk * BK, K, tid);
      }
      cp_async_commit();
    }

    const unsigned sa = s_base + (kt % STAGES) * kStage;
    const unsigned sb = sa + kTileA;
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      unsigned af[MI][4];
      unsigned bf[NI / 2][4];
      const unsigned a_k = a_off ^ (kk * 32u);
      const unsigned b_k = b_off ^ (kk * 32u);
#pragma unroll
      for (int i = 0; i < MI; ++i) ldmatrix_x4(af[i], sa + a_k + i * 16 * BK * sizeof(T));
#pragma unroll
      for (int j = 0; j < NI / 2; ++j) ldmatrix_x4(bf[j], sb + b_k + j * 16 * BK * sizeof(T));
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
          mma16816(acc[i][j], af[i], bf[j / 2][(j & 1) * 2], bf[j / 2][(j & 1) * 2 + 1]);
    }
  }

  // Epilogue: stage the tile in shared memory (reusing the pipeline buffers)
  // so that global stores are whole 16-byte chunks of consecutive columns.
  cp_async_wait<0>();
  __syncthreads();
  unsigned* sc = reinterpret_cast<unsigned*>(smem);
  {
    const int r0 = wm * WTM + (lane >> 2);
    const int c0 = wn * WTN + (lane & 3) * 2;
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int j = 0; j < NI; ++j) {
        const int r = r0 + i * 16;
        const int c = c0 + j * 8;
        sc[(r * C_LD + c) / 2] = pack2(acc[i][j][0], acc[i][j][1]);
        sc[((r + 8) * C_LD + c) / 2] = pack2(acc[i][j][2], acc[i][j][3]);
      }
  }
  __syncthreads();
  constexpr int kOutChunks = BM * BN / 8;
#pragma unroll 4
  for (int idx = tid; idx < kOutChunks; idx += GEMM_THREADS) {
    const int r = idx / (BN / 8);
    const int c = (idx % (BN / 8)) * 8;
    const int gr = m0 + r;
    const int gc = n0 + c;
    if (gr < M && gc < N) {
      *reinterpret_cast<uint4*>(C + (size_t)gr * N + gc) =
          *reinterpret_cast<const uint4*>(smem + (r * C_LD + c) * sizeof(T));
    }
  }
}
