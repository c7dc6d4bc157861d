// GEMM for Hopper (sm_90a): C[M,N] = A[M,K] * B[N,K]^T with wgmma.
//
// Same contract as ops/gemm: A is M x K row-major, B is N x K row-major, C is
// M x N row-major (the "TN" layout of a linear layer), f16 or bf16 inputs and
// output, fp32 accumulation. M, N and K must be multiples of 8 and the
// pointers 16-byte aligned; any such shape works (edge tiles are zero-filled
// on load and guarded on store).
//
// Structure: WG warpgroups each own MT m64 x BN accumulator tiles, so a block
// computes BM = 64*WG*MT rows by BN columns. K advances 64 elements at a time
// (one 128-byte row per operand row), which is exactly the width of the
// 128-byte swizzle that wgmma reads: shared tiles are stored with the 16-byte
// chunk index XORed with row%8, in 1024-byte aligned 8-row atoms.
//
// Operands arrive through a STAGES-deep cp.async ring filled by all threads.
// Run-time pointers are all a kernel gets here (no host-built tensor maps),
// and a 1-D bulk copy cannot scatter a row into the swizzled layout, so the
// copy engine is not used. cp.async writes belong to the generic proxy while
// wgmma reads through the async proxy: every thread fences its own copies
// (fence.proxy.async) before the barrier that publishes a stage.
//
// MINB = 2 asks for registers (and the op's constraints for shared memory)
// that let two blocks share an SM, so that one block's barrier stalls are
// covered by the other's tensor-core work.
//
// Pipelining: wgmma groups are asynchronous and one group stays in flight
// while the next is issued, so the stage read two iterations ago is the one
// refilled; loads run STAGES-2 k-steps ahead.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#if !defined(BN) || !defined(WG) || !defined(MT) || !defined(STAGES) || !defined(GROUP_M) || \
    !defined(MINB)
#error "gemm_sm90.cu needs -DBN -DWG -DMT -DSTAGES -DGROUP_M -DMINB"
#endif
#if defined(TUNE_DTYPE_F16)
#define WGMMA_AB "f16"
#elif defined(TUNE_DTYPE_BF16)
#define WGMMA_AB "bf16"
#else
#error "gemm_sm90.cu supports f16 and bf16 only"
#endif

#include "wgmma.cuh"

typedef TUNE_T T;

#define BM (64 * WG * MT)
#define BK 64
#define THREADS (WG * 128)
#define C_LD (BN + 8)  // epilogue staging row: +16 bytes keeps fragment writes conflict-free

static_assert(BN == 64 || BN == 128 || BN == 192 || BN == 256, "wgmma wrappers exist for these N");
static_assert(STAGES >= 3, "one stage in flight in wgmma, one being read, one or more loading");


namespace {

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  unsigned r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}

__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, bool valid) {
  // src-size 0 zero-fills the destination without reading global memory.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Copies a ROWS x 64 tile (rows row0.., columns k0..) of a row-major matrix
// with `rows` rows and K columns into the swizzled layout. A thread moves
// chunk tid%8 of rows tid/8, tid/8 + THREADS/8, ...: rows step by a multiple
// of 8, so the chunk's swizzled place in its row stays the same.
template <int ROWS>
__device__ __forceinline__ void load_tile(unsigned dst, const T* __restrict__ g, int row0,
                                          int rows, int k0, int K, int tid) {
  constexpr int kChunks = ROWS * 8;
  constexpr int kRowStep = THREADS / 8;
  constexpr int kIters = (kChunks + THREADS - 1) / THREADS;
  static_assert(kRowStep % 8 == 0, "rows a thread copies must keep their swizzle key");
  const int r = tid / 8;
  const int ch = tid % 8;
  const bool k_ok = k0 + ch * 8 < K;
  const unsigned d = dst + r * 128 + ((ch ^ (r & 7)) << 4);
  const T* p = g + (size_t)(row0 + r) * K + k0 + ch * 8;
  const size_t step = (size_t)kRowStep * K;
#pragma unroll
  for (int i = 0; i < kIters; ++i) {
    if (kChunks % THREADS == 0 || r + i * kRowStep < ROWS) {
      const bool valid = k_ok && row0 + r + i * kRowStep < rows;
      cp_async16(d + i * kRowStep * 128, valid ? p : g, valid);
    }
    p += step;
  }
}

__device__ __forceinline__ unsigned pack2(float lo, float hi) {
#if defined(TUNE_DTYPE_F16)
  __half2 v = __floats2half2_rn(lo, hi);
#else
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
#endif
  return *reinterpret_cast<unsigned*>(&v);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(THREADS, MINB)
gemm_sm90(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M, int N,
          int K) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  constexpr unsigned kTileA = BM * BK * sizeof(T);
  constexpr unsigned kStage = (BM + BN) * BK * sizeof(T);
  // The swizzle pattern is anchored to 1024-byte boundaries; the launch
  // reserves 1024 extra bytes for this round-up.
  const unsigned raw = smem_addr(smem_raw);
  const unsigned s_base = (raw + 1023u) & ~1023u;
  unsigned char* smem = smem_raw + (s_base - raw);

  // Block order: groups of GROUP_M tile rows, column-major inside a group.
  const int grid_n = gridDim.x;
  const int grid_m = gridDim.y;
  const int pid = blockIdx.y * grid_n + blockIdx.x;
  const int per_group = GROUP_M * grid_n;
  const int first_m = (pid / per_group) * GROUP_M;
  const int group_rows = min(grid_m - first_m, GROUP_M);
  const int m0 = (first_m + (pid % per_group) % group_rows) * BM;
  const int n0 = ((pid % per_group) / group_rows) * BN;

  const int tid = threadIdx.x;
  const int wg = tid / 128;

  float acc[MT][BN / 2];
#pragma unroll
  for (int t = 0; t < MT; ++t)
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[t][i] = 0.f;

  const int KT = (K + BK - 1) / BK;
#pragma unroll
  for (int s = 0; s < STAGES - 2; ++s) {
    if (s < KT) {
      load_tile<BM>(s_base + s * kStage, A, m0, M, s * BK, K, tid);
      load_tile<BN>(s_base + s * kStage + kTileA, B, n0, N, s * BK, K, tid);
    }
    cp_async_commit();
  }

  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<STAGES - 3>();
    fence_proxy_async();
    // Publishes stage kt to every warpgroup, and tells every thread that the
    // wgmma group of step kt-2 (waited for at the end of step kt-1) is done
    // with the stage refilled below.
    __syncthreads();
    const unsigned sa = s_base + (kt % STAGES) * kStage + wg * MT * 64 * 128;
    const unsigned sb = s_base + (kt % STAGES) * kStage + kTileA;
    const unsigned long long da = make_desc(sa);
    const unsigned long long db = make_desc(sb);
#pragma unroll
    for (int t = 0; t < MT; ++t) fence_regs(acc[t]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
#pragma unroll
      for (int t = 0; t < MT; ++t) {
        // +32 bytes per k16 step inside the swizzled row; the m64 tiles of
        // one warpgroup are 64 rows (8 KiB) apart. Both land in the
        // descriptor's address field (bytes / 16).
        wgmma(acc[t], da + (unsigned long long)(kk * 2 + t * 512), db + (unsigned long long)(kk * 2));
      }
    }
    wgmma_commit();
    // Refill while the tensor cores work through steps kt-1 and kt.
    {
      const int nk = kt + STAGES - 2;
      if (nk < KT) {
        const unsigned st = s_base + (nk % STAGES) * kStage;
        load_tile<BM>(st, A, m0, M, nk * BK, K, tid);
        load_tile<BN>(st + kTileA, B, n0, N, nk * BK, K, tid);
      }
      cp_async_commit();
    }
    wgmma_wait<1>();
#pragma unroll
    for (int t = 0; t < MT; ++t) fence_regs(acc[t]);
  }
  wgmma_wait<0>();
#pragma unroll
  for (int t = 0; t < MT; ++t) fence_regs(acc[t]);

  // Epilogue: stage the tile in shared memory (reusing the pipeline buffers,
  // which no copy or wgmma touches any more) so that global stores are whole
  // 16-byte chunks of consecutive columns.
  cp_async_wait<0>();
  __syncthreads();
  unsigned* sc = reinterpret_cast<unsigned*>(smem);
  {
    // Accumulator layout of wgmma m64nN: warp w of the warpgroup holds rows
    // 16w + lane/4 (+8); element 4j+q sits in column 8j + 2*(lane%4) + q%2,
    // the lower row for q < 2.
    const int warp_in_wg = (tid % 128) / 32;
    const int lane = tid % 32;
#pragma unroll
    for (int t = 0; t < MT; ++t) {
      const int r = (wg * MT + t) * 64 + warp_in_wg * 16 + lane / 4;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int c = j * 8 + (lane % 4) * 2;
        sc[(r * C_LD + c) / 2] = pack2(acc[t][4 * j], acc[t][4 * j + 1]);
        sc[((r + 8) * C_LD + c) / 2] = pack2(acc[t][4 * j + 2], acc[t][4 * j + 3]);
      }
    }
  }
  __syncthreads();
  constexpr int kOutChunks = BM * BN / 8;
#pragma unroll 4
  for (int idx = tid; idx < kOutChunks; idx += THREADS) {
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
