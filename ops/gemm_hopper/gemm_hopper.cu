// GEMM family for Hopper (sm_90a): C[M,N] = A[M,K] * B[N,K]^T.
//
// Same contract as ops/gemm and ops/gemm_sm90 (A M x K and B N x K
// row-major, C M x N row-major, f16 or bf16 in and out, fp32 accumulation;
// N and K multiples of 8, any M), so results compare directly.
//
// Roles (warp specialization): warpgroup 0 is the producer, one thread of
// which drives the copy engine (cp.async.bulk.tensor through the tensor maps
// tmA and tmB) into a STAGES-deep ring of 128-byte-swizzled tiles; CWG
// consumer warpgroups run wgmma on them. Full and empty mbarriers per stage
// hand the ring back and forth, so loads never wait for a block-wide
// barrier. With REALLOC the producer gives registers back (setmaxnreg) and
// the consumers take them, which lets larger accumulator tiles fit.
//
// Tile: BN columns by BM rows, K advancing 64 (one swizzled 128-byte row)
// per stage. A shape of fewer rows than a tile loads only its rows of A
// (rounded up to 8: a_rows). WARPGROUPS says how the consumers share the
// work:
//   cooperative  they split one tile's rows: BM = 64*MT*CWG;
//   pingpong     (two consumers) each takes every other unit, a tile of
//                BM = 64*MT rows, so that one warpgroup's epilogue runs
//                while the other's wgmma keeps the tensor cores busy.
//
// Clusters: CM x CN blocks (a cluster rank r is block (r % CM, r / CM) of
// the cluster's tile patch). Blocks in one cluster row share A's tile and
// blocks in one column share B's: each loads a 1/CN slice of A and a 1/CM
// slice of B and multicasts it to the peers that need it, which cuts L2
// traffic. A block's empty barrier hears from the consumers of every peer
// it writes into, so no peer's stage is overwritten before it is read.
//
// Schedules (SCHEDULE), all over a 1-D grid of clusters:
//   data_parallel  one cluster tile patch per cluster, all of K;
//   persistent     as many clusters as fit the SMs, looping over patches;
//   split_k        patches x SPLIT units, each a slice of K, persistent;
//   stream_k       persistent: whole waves of patches as above, then the
//                  K iterations of the last, partial wave dealt out evenly
//                  to all clusters, which cross tile boundaries (so no
//                  cluster idles while the last patches finish).
// A unit that covers part of a tile's K adds its partial sums to the fp32
// workspace W (vector atomics) and counts its K iterations on the tile's
// counter (after W's M*N floats); the unit that completes the count reads
// the sum back, clears W and the counter for the next launch, and writes
// C. No unit waits for another, so a grid larger than what is resident
// cannot deadlock.
//
// Raster (RASTER, GROUP): patches are walked in bands of GROUP patch rows
// (along_n: down a band's rows first, then across) or GROUP patch columns
// (along_m), so that blocks running together share operands in L2.
//
// Epilogue: TMA_STORE stages each 64 x 32 piece of a consumer's tile in
// shared memory (64-byte swizzle, two buffers per warpgroup) and stores it
// with the copy engine through tmC; otherwise threads store their fragment
// pairs directly.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#if !defined(BN) || !defined(CWG) || !defined(MT) || !defined(STAGES) || !defined(CM) || !defined(CN) || \
    !defined(SPLIT) || !defined(GROUP) || !defined(TMA_STORE) || !defined(REALLOC) ||                  \
    !defined(SCHEDULE_stream_k) || !defined(RASTER_along_m) || !defined(WARPGROUPS_pingpong)
#error "gemm_hopper.cu needs the op's params as macros (op.toml)"
#endif
#if defined(TUNE_DTYPE_F16)
#define WGMMA_AB "f16"
#elif defined(TUNE_DTYPE_BF16)
#define WGMMA_AB "bf16"
#else
#error "gemm_hopper.cu supports f16 and bf16 only"
#endif

#include "wgmma.cuh"

typedef TUNE_T T;

#define PINGPONG WARPGROUPS_pingpong
#define TILE_WGS (PINGPONG ? 1 : CWG)  // consumer warpgroups sharing one tile
#define BM (64 * MT * TILE_WGS)
#define BK 64
#define CS (CM * CN)
#define THREADS ((CWG + 1) * 128)
#define CONSUMERS (CWG * 128)

static_assert(BN % 32 == 0 && BN >= 32 && BN <= 256, "wgmma wrappers exist for N = 32..256 step 32");
static_assert(!PINGPONG || CWG == 2, "pingpong alternates two consumer warpgroups");
static_assert(!REALLOC || CWG == 2, "40 + 2 x 232 registers per thread fill the file for 384 threads");
static_assert(STAGES >= 2, "a stage being read and one being filled");
static_assert((BM / CN) % 8 == 0 && (BN / CM) % 8 == 0, "multicast slices are whole 8-row swizzle atoms");

// A tensor map as the kernel receives it (CUtensorMap: 128 opaque bytes).
struct __align__(64) TensorMap {
  unsigned long long v[16];
};

namespace {

constexpr unsigned kTileA = BM * BK * sizeof(T);
constexpr unsigned kTileB = BN * BK * sizeof(T);
constexpr unsigned kStage = kTileA + kTileB;
constexpr unsigned kEpiPiece = 64 * 32 * sizeof(T);  // one 64 x 32 piece of C
constexpr unsigned kEpiBytes = TMA_STORE ? CWG * 2 * kEpiPiece : 0;

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// --- mbarriers -------------------------------------------------------------
__device__ __forceinline__ void bar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void bar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bar_wait(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void bar_arrive_local(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Arrives on the barrier at the same offset in cluster block `rank`. No
// cluster-scope release: it would wait for the wgmma still in flight, and
// the stage it frees is only read by that wgmma's predecessors.
__device__ __forceinline__ void bar_arrive_cluster(unsigned bar, unsigned rank) {
  if (CS == 1) return bar_arrive_local(bar);
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(bar),
      "r"(rank)
      : "memory");
}
__device__ __forceinline__ void cluster_sync() {
  // Not .aligned: the producer warp reaches the end diverged.
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void named_sync(unsigned id, unsigned threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// --- copy engine ------------------------------------------------------------
__device__ __forceinline__ void tma_load(unsigned dst, const TensorMap* map, int c0, int c1, unsigned bar,
                                         unsigned short mask) {
  const unsigned long long m = reinterpret_cast<unsigned long long>(map);
  if (mask == 0) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::
            "r"(dst),
        "l"(m), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
        "l"(m), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
        : "memory");
  }
}
#if TMA_STORE
__device__ __forceinline__ void tma_store(const TensorMap* map, unsigned src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                   reinterpret_cast<unsigned long long>(map)),
               "r"(src), "r"(c0), "r"(c1)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
// Until at most N stores still read shared memory.
template <int N>
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
#endif

// --- split-K and stream-K partial sums ---------------------------------------
// Fire-and-forget vector add in L2.
__device__ __forceinline__ void red_add2(float* p, float x, float y) {
  asm volatile("red.relaxed.gpu.global.add.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(x), "f"(y) : "memory");
}
// The counter's add releases the partial sums this block's consumers added
// before their barrier, and acquires those of the units counted before it.
__device__ __forceinline__ int count_add(int* p, int v) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

__device__ __forceinline__ unsigned pack2(float lo, float hi) {
#if defined(TUNE_DTYPE_F16)
  __half2 v = __floats2half2_rn(lo, hi);
#else
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
#endif
  return *reinterpret_cast<unsigned*>(&v);
}

// --- work -------------------------------------------------------------------
// One unit of a cluster's work: this block's tile and a range of its K
// iterations. Producer and consumers walk the same sequence independently.
struct Unit {
  int tm, tn;    // tile coordinates (may lie past the matrix at its edges)
  int kb, ke;    // K iterations [kb, ke)
};

struct Schedule {
  int tiles_m, tiles_n, pm, pn, patches, kt;  // patches of CM x CN tiles; kt K iterations per tile
  int cid, clusters;                          // this cluster, and how many there are
  int cm, cn;                                 // this block's place in its cluster
  int next;                                   // next whole unit's number
  int whole;                                  // units taken whole (stream_k: the full waves' patches)
  long long it, end;                          // stream_k: next and last K iteration (exclusive) of the rest

  __device__ Schedule(int M, int N, int K, unsigned rank) {
    tiles_m = (M + BM - 1) / BM;
    tiles_n = (N + BN - 1) / BN;
    pm = (tiles_m + CM - 1) / CM;
    pn = (tiles_n + CN - 1) / CN;
    patches = pm * pn;
    kt = (K + BK - 1) / BK;
    cid = blockIdx.x / CS;
    clusters = gridDim.x / CS;
    cm = rank % CM;
    cn = rank / CM;
    next = cid;
    whole = SCHEDULE_stream_k ? patches - patches % clusters : patches;
    const long long total = (long long)(patches - whole) * kt;
    it = (long long)whole * kt + total * cid / clusters;
    end = (long long)whole * kt + total * (cid + 1) / clusters;
  }

  __device__ void place(int patch, Unit* u) const {
    int qm, qn;
    if (RASTER_along_m) {  // bands of GROUP patch columns, across a band first
      const int per_band = GROUP * pm;
      const int first = patch / per_band * GROUP;
      const int width = min(pn - first, GROUP);
      qn = first + (patch % per_band) % width;
      qm = (patch % per_band) / width;
    } else {  // bands of GROUP patch rows, down a band first
      const int per_band = GROUP * pn;
      const int first = patch / per_band * GROUP;
      const int height = min(pm - first, GROUP);
      qm = first + (patch % per_band) % height;
      qn = (patch % per_band) / height;
    }
    u->tm = qm * CM + cm;
    u->tn = qn * CN + cn;
  }

  __device__ bool take(Unit* u) {
#if SCHEDULE_stream_k
    if (next < whole) {
      u->kb = 0;
      u->ke = kt;
      place(next, u);
      next += clusters;
      return true;
    }
    if (it >= end) return false;
    const int patch = int(it / kt);
    u->kb = int(it % kt);
    u->ke = int(min((long long)kt, u->kb + (end - it)));
    it += u->ke - u->kb;
    place(patch, u);
    return true;
#else
    for (;;) {
      const int n = next;
      next += clusters;
      if (SCHEDULE_split_k) {
        if (n >= patches * SPLIT) return false;
        const int s = n % SPLIT;
        u->kb = kt * s / SPLIT;
        u->ke = kt * (s + 1) / SPLIT;
        if (u->kb == u->ke) continue;  // fewer K iterations than splits
        place(n / SPLIT, u);
        return true;
      }
      if (n >= patches || (SCHEDULE_data_parallel && n != cid)) return false;
      u->kb = 0;
      u->ke = kt;
      place(n, u);
      return true;
    }
#endif
  }
};

}  // namespace

extern "C" __global__ void __launch_bounds__(THREADS, 1)
#if CS > 1
    __cluster_dims__(CS, 1, 1)
#endif
gemm_hopper(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, float* __restrict__ W,
            const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
            const __grid_constant__ TensorMap tmC, int M, int N, int K, int a_rows) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // Swizzle patterns are anchored to 1024-byte boundaries; the launch
  // reserves 1024 bytes for this round-up and 1024 for the barriers.
  const unsigned raw = smem_addr(smem_raw);
  const unsigned base = (raw + 1023u) & ~1023u;
  unsigned char* smem = smem_raw + (base - raw);
  const unsigned epi = base + STAGES * kStage;
  const unsigned bars = epi + kEpiBytes;  // full[STAGES], empty[STAGES], turn[2]
  int* last_flag = reinterpret_cast<int*>(smem + STAGES * kStage + kEpiBytes + (2 * STAGES + 2) * 8);  // per warpgroup
  auto full = [&](int s) { return bars + 8u * s; };
  auto empty = [&](int s) { return bars + 8u * (STAGES + s); };
  auto turn = [&](int wg) { return bars + 8u * (2 * STAGES + wg); };

  const int tid = threadIdx.x;
  const unsigned rank = CS > 1 ? cluster_rank() : 0;
  const int cm = rank % CM, cn = rank / CM;
  // Peers: blocks sharing this block's cluster row (A) or column (B).
  unsigned short mask_a = 0, mask_b = 0;
#pragma unroll
  for (int j = 0; j < CN; ++j) mask_a |= 1u << (cm + CM * j);
#pragma unroll
  for (int i = 0; i < CM; ++i) mask_b |= 1u << (i + CM * cn);
  const unsigned short peers = mask_a | mask_b;

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      bar_init(full(s), 1);
      bar_init(empty(s), TILE_WGS * 4 * (CM + CN - 1));
    }
    bar_init(turn(0), 1);
    bar_init(turn(1), 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  cluster_sync();

  if (tid < 128) {
    // ---- producer ----
#if REALLOC
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
#endif
    if (tid == 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<unsigned long long>(&tmA)) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<unsigned long long>(&tmB)) : "memory");
      Schedule sched(M, N, K, rank);
      // A stage's bytes: CN slices of tmA's box, a_rows rows each (op.toml
      // says how tall the box is), and B's tile. With fewer rows than a
      // tile (a decode step) and no peer sharing A, the box is only M rows
      // rounded up to 8: the A tile's other rows keep whatever they held and
      // reach only accumulator rows past M, which are never stored.
      const unsigned stage_bytes = unsigned(a_rows) * CN * BK * sizeof(T) + kTileB;
      Unit u;
      int s = 0;
      unsigned phase = 0;
      while (sched.take(&u)) {
        for (int k = u.kb; k < u.ke; ++k) {
          bar_wait(empty(s), phase ^ 1);
          bar_expect_tx(full(s), stage_bytes);
          const unsigned st = base + s * kStage;
          // A slice no peer shares is an ordinary load.
          tma_load(st + cn * (kTileA / CN), &tmA, k * BK, u.tm * BM + cn * (BM / CN), full(s), CN > 1 ? mask_a : 0);
          tma_load(st + kTileA + cm * (kTileB / CM), &tmB, k * BK, u.tn * BN + cm * (BN / CM), full(s),
                   CM > 1 ? mask_b : 0);
          if (++s == STAGES) s = 0, phase ^= 1;
        }
      }
    }
  } else {
    // ---- consumers ----
#if REALLOC
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
#endif
    const int ctid = tid - 128;      // 0 .. CONSUMERS-1
    const int wg = ctid / 128;       // consumer warpgroup
    const int warp = (ctid % 128) / 32;
    const int lane = tid % 32;
    // Pingpong: the warpgroups take alternate units, each reading its own
    // stages of the ring and passing over the other's.
    const int row_wg = PINGPONG ? 0 : wg;             // m64 tiles of the block tile before this warpgroup's
    const unsigned sync_id = PINGPONG ? 2 + wg : 1;   // the threads that share a tile
    const unsigned sync_threads = PINGPONG ? 128 : CONSUMERS;
    const bool leader = (PINGPONG ? ctid % 128 : ctid) == 0;
    Schedule sched(M, N, K, rank);
    Unit u;
    int s = 0;
    unsigned phase = 0;
    float acc[MT][BN / 2];
#if TMA_STORE
    int piece = 0;  // pieces this warpgroup has stored (buffer = piece % 2)
#endif
    // Their main loops take turns (turn[w] completes a phase when the other
    // warpgroup's main loop has waited for all its stages): a warpgroup
    // that passed over the other's stages must not wait on a stage whose
    // earlier fill is still pending, which a barrier's phase parity alone
    // cannot tell from the fill it wants.
    int loops = 0;  // main loops this warpgroup has run
    for (int taken = 0; sched.take(&u); ++taken) {
      if (PINGPONG && taken % 2 != wg) {
        for (int k = u.kb; k < u.ke; ++k)
          if (++s == STAGES) s = 0, phase ^= 1;
        continue;
      }
      if (PINGPONG && (wg == 1 || loops > 0)) bar_wait(turn(wg), (wg == 1 ? loops : loops - 1) & 1);
#pragma unroll
      for (int t = 0; t < MT; ++t)
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[t][i] = 0.f;
      int prev = -1;
      for (int k = u.kb; k < u.ke; ++k) {
        bar_wait(full(s), phase);
        const unsigned sa = base + s * kStage + row_wg * MT * 64 * 128;
        const unsigned long long da = make_desc(sa);
        const unsigned long long db = make_desc(base + s * kStage + kTileA);
#pragma unroll
        for (int t = 0; t < MT; ++t) fence_regs(acc[t]);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
#pragma unroll
          for (int t = 0; t < MT; ++t)
            wgmma(acc[t], da + (unsigned long long)(kk * 2 + t * 512), db + (unsigned long long)(kk * 2));
        }
        wgmma_commit();
        // One group stays in flight: the stage before this one is now read.
        wgmma_wait<1>();
#pragma unroll
        for (int t = 0; t < MT; ++t) fence_regs(acc[t]);
        if (prev >= 0 && lane < CS && (peers >> lane) & 1) bar_arrive_cluster(empty(prev), lane);
        prev = s;
        if (++s == STAGES) s = 0, phase ^= 1;
      }
      if (PINGPONG && ctid % 128 == 0) bar_arrive_local(turn(1 - wg));
      ++loops;
      wgmma_wait<0>();
#pragma unroll
      for (int t = 0; t < MT; ++t) fence_regs(acc[t]);
      if (prev >= 0 && lane < CS && (peers >> lane) & 1) bar_arrive_cluster(empty(prev), lane);

      const bool inside = u.tm < sched.tiles_m && u.tn < sched.tiles_n;
      const int m0 = u.tm * BM, n0 = u.tn * BN;
      // Accumulator layout of wgmma m64nN: warp w of the warpgroup holds
      // rows 16w + lane/4 (+8); element 4j+q sits in column 8j + 2*(lane%4)
      // + q%2, the lower row for q < 2.
      const int row_in = warp * 16 + lane / 4;
      const int col_in = (lane % 4) * 2;
      if (u.ke - u.kb < sched.kt && inside) {
        // Part of the tile's K: add to W, count, and finish if last.
        int* counters = reinterpret_cast<int*>(W + (size_t)M * N);
#pragma unroll
        for (int t = 0; t < MT; ++t) {
          const int r = m0 + (row_wg * MT + t) * 64 + row_in;
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) {
            const int c = n0 + j * 8 + col_in;
            if (c < N) {
              if (r < M) red_add2(W + (size_t)r * N + c, acc[t][4 * j], acc[t][4 * j + 1]);
              if (r + 8 < M) red_add2(W + (size_t)(r + 8) * N + c, acc[t][4 * j + 2], acc[t][4 * j + 3]);
            }
          }
        }
        named_sync(sync_id, sync_threads);
        if (leader) {
          const int tile = u.tm * sched.tiles_n + u.tn;
          const int mine = u.ke - u.kb;
          const int before = count_add(counters + tile, mine);
          const int last = before + mine == sched.kt;
          if (last) counters[tile] = 0;  // for the next launch
          last_flag[wg] = last;
        }
        named_sync(sync_id, sync_threads);
        const bool last = last_flag[PINGPONG ? wg : 0];
        if (!last) continue;
#pragma unroll
        for (int t = 0; t < MT; ++t) {
          const int r = m0 + (row_wg * MT + t) * 64 + row_in;
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) {
            const int c = n0 + j * 8 + col_in;
            if (c < N) {
              if (r < M) {
                float2* p = reinterpret_cast<float2*>(W + (size_t)r * N + c);
                const float2 v = __ldcg(p);
                acc[t][4 * j] = v.x, acc[t][4 * j + 1] = v.y;
                __stcg(p, make_float2(0.f, 0.f));
              }
              if (r + 8 < M) {
                float2* p = reinterpret_cast<float2*>(W + (size_t)(r + 8) * N + c);
                const float2 v = __ldcg(p);
                acc[t][4 * j + 2] = v.x, acc[t][4 * j + 3] = v.y;
                __stcg(p, make_float2(0.f, 0.f));
              }
            }
          }
        }
      }
      if (!inside) continue;

#if TMA_STORE
      // 64 x 32 pieces through two swizzled buffers per warpgroup; thread 0
      // of the warpgroup issues the stores.
      const unsigned my_epi = epi + wg * 2 * kEpiPiece;
#pragma unroll
      for (int t = 0; t < MT; ++t) {
#pragma unroll
        for (int cj = 0; cj < BN / 32; ++cj, ++piece) {
          const unsigned buf = my_epi + (piece & 1) * kEpiPiece;
          if (ctid % 128 == 0) tma_store_wait_read<1>();  // the store that last read this buffer is done
          named_sync(2 + wg, 128);
          unsigned char* p = smem + (buf - base);
#pragma unroll
          for (int jj = 0; jj < 4; ++jj) {
            const int j = cj * 4 + jj;
            // Row r's 16-byte chunk jj lands at chunk jj ^ ((r >> 1) & 3) (64-byte swizzle).
            const int r0 = row_in, r1 = row_in + 8;
            const unsigned o0 = r0 * 64 + ((jj ^ ((r0 >> 1) & 3)) << 4) + (lane % 4) * 4;
            const unsigned o1 = r1 * 64 + ((jj ^ ((r1 >> 1) & 3)) << 4) + (lane % 4) * 4;
            *reinterpret_cast<unsigned*>(p + o0) = pack2(acc[t][4 * j], acc[t][4 * j + 1]);
            *reinterpret_cast<unsigned*>(p + o1) = pack2(acc[t][4 * j + 2], acc[t][4 * j + 3]);
          }
          fence_proxy_async();
          named_sync(2 + wg, 128);
          if (ctid % 128 == 0) tma_store(&tmC, buf, n0 + cj * 32, m0 + (row_wg * MT + t) * 64);
        }
      }
#else
#pragma unroll
      for (int t = 0; t < MT; ++t) {
        const int r = m0 + (row_wg * MT + t) * 64 + row_in;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          const int c = n0 + j * 8 + col_in;
          if (c < N) {
            if (r < M) *reinterpret_cast<unsigned*>(C + (size_t)r * N + c) = pack2(acc[t][4 * j], acc[t][4 * j + 1]);
            if (r + 8 < M)
              *reinterpret_cast<unsigned*>(C + (size_t)(r + 8) * N + c) = pack2(acc[t][4 * j + 2], acc[t][4 * j + 3]);
          }
        }
      }
#endif
    }
#if TMA_STORE
    if (ctid % 128 == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
  }
  // No block leaves while a peer may still write into its shared memory or
  // arrive on its barriers.
  cluster_sync();
  (void)A, (void)B, (void)C;
}
