// How long a GPU at its power limit takes to settle after the kernel it runs
// changes: the figure behind the settle time of windows timed together
// (TimingPolicy::settle_seconds, MeasureTogether).
//
// A probe GEMM (fp16, 4096^3 by default, an L2 flush before each sample) is
// timed sample by sample for --probe-ms after each of three preludes:
//   heavy: a larger GEMM (8192^3) back to back for --prelude-ms, which holds
//          the GPU at its power limit with clocks lower than the probe's;
//   idle:  the GPU left idle for --prelude-ms;
//   same:  the probe itself back to back for --prelude-ms (the steady state).
// Each prelude is repeated --trials times, in turn; the table gives, per
// 10 ms of probe time, the median sample of every trial against the steady
// state's last 100 ms.
//
// Not part of the CMake build. On a GPU host:
//   nvcc -O2 -std=c++17 bench/clock_transient.cu -o clock_transient -lcublas
//   ./clock_transient [--n 4096] [--heavy-n 8192] [--prelude-ms 400] [--probe-ms 600] [--trials 5]
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#define CHECK(x)                                                                   \
  do {                                                                             \
    auto e = (x);                                                                  \
    if (e != 0) {                                                                  \
      fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #x, int(e)); \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

namespace {

struct Gemm {
  int n = 0;
  __half *a = nullptr, *b = nullptr, *c = nullptr;
};

__global__ void Fill(__half* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned x = unsigned(i) * 2654435761u ^ seed;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    p[i] = __float2half(float(x & 0xffff) / 32768.0f - 1.0f);
  }
}

Gemm MakeGemm(int n) {
  Gemm g;
  g.n = n;
  size_t elems = size_t(n) * n;
  CHECK(cudaMalloc(&g.a, elems * sizeof(__half)));
  CHECK(cudaMalloc(&g.b, elems * sizeof(__half)));
  CHECK(cudaMalloc(&g.c, elems * sizeof(__half)));
  Fill<<<1024, 256>>>(g.a, elems, 1);
  Fill<<<1024, 256>>>(g.b, elems, 2);
  CHECK(cudaDeviceSynchronize());
  return g;
}

void Run(cublasHandle_t h, const Gemm& g) {
  const float one = 1, zero = 0;
  // C = A * B^T with A, B row-major n x n: column-major C^T = B * A^T.
  CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, g.n, g.n, g.n, &one, g.b, CUDA_R_16F, g.n, g.a, CUDA_R_16F, g.n,
                     &zero, g.c, CUDA_R_16F, g.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

double Ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Back-to-back launches of g for `ms` of wall time.
void Hold(cublasHandle_t h, const Gemm& g, double ms) {
  auto t0 = std::chrono::steady_clock::now();
  while (Ms(t0) < ms) {
    for (int i = 0; i < 8; ++i) Run(h, g);
    CHECK(cudaStreamSynchronize(0));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int n = 4096, heavy_n = 8192, trials = 5;
  double prelude_ms = 400, probe_ms = 600;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--n") n = atoi(argv[i + 1]);
    else if (k == "--heavy-n") heavy_n = atoi(argv[i + 1]);
    else if (k == "--prelude-ms") prelude_ms = atof(argv[i + 1]);
    else if (k == "--probe-ms") probe_ms = atof(argv[i + 1]);
    else if (k == "--trials") trials = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "clock_transient: unknown flag %s\n", k.c_str());
      return 2;
    }
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  cublasHandle_t h;
  CHECK(cublasCreate(&h));
  Gemm probe = MakeGemm(n), heavy = MakeGemm(heavy_n);
  const size_t flush_bytes = std::max<size_t>(2 * size_t(prop.l2CacheSize), 64 << 20);
  void* flush = nullptr;
  CHECK(cudaMalloc(&flush, flush_bytes));
  const int max_samples = 20000;
  std::vector<cudaEvent_t> start(max_samples), stop(max_samples);
  for (int i = 0; i < max_samples; ++i) {
    CHECK(cudaEventCreate(&start[i]));
    CHECK(cudaEventCreate(&stop[i]));
  }
  Hold(h, probe, 200);  // first-launch costs
  // Per prelude: trial -> (probe time at the sample's end, sample us).
  std::map<std::string, std::vector<std::vector<std::pair<double, double>>>> runs;
  const char* preludes[] = {"heavy", "idle", "same"};
  for (int t = 0; t < trials; ++t) {
    for (const char* p : preludes) {
      if (!strcmp(p, "heavy")) Hold(h, heavy, prelude_ms);
      else if (!strcmp(p, "same")) Hold(h, probe, prelude_ms);
      else std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(prelude_ms));
      std::vector<std::pair<double, double>> trial;
      double at = 0;
      while (at < probe_ms) {
        // Batches of 64 keep the stream full without running far past probe_ms.
        int count = 64;
        for (int b = 0; b < count; ++b) {
          CHECK(cudaMemsetAsync(flush, b & 0xff, flush_bytes));
          CHECK(cudaEventRecord(start[b]));
          Run(h, probe);
          CHECK(cudaEventRecord(stop[b]));
        }
        CHECK(cudaEventSynchronize(stop[count - 1]));
        for (int b = 0; b < count; ++b) {
          float ms = 0;
          CHECK(cudaEventElapsedTime(&ms, start[b], stop[b]));
          at += ms;
          trial.emplace_back(at, ms * 1000.0);
        }
      }
      runs[p].push_back(std::move(trial));
    }
  }
  auto median = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  // Steady reference: the last 100 ms of every "same" trial.
  std::vector<double> tail;
  for (auto& trial : runs["same"])
    for (auto& [at, us] : trial)
      if (at > probe_ms - 100) tail.push_back(us);
  const double steady = median(tail);
  printf("device %s; probe %d^3 fp16 (cuBLAS), steady median %.2f us (last 100 ms after 'same')\n", prop.name, n,
         steady);
  printf("probe time is kernel time since the prelude ended; each cell: median sample of a trial in that 10 ms,\n"
         "%% against steady\n");
  for (const char* p : preludes) {
    printf("after %-5s:", p);
    for (int i = 0; i < trials; ++i) printf("   trial %d", i + 1);
    printf("\n");
    for (double lo = 0; lo < probe_ms; lo += 10) {
      if (lo >= 100 && int(lo) % 50 != 0) continue;  // every 10 ms for the first 100, then every 50
      printf("  %4.0f ms   ", lo);
      for (auto& trial : runs[p]) {
        std::vector<double> bin;
        for (auto& [at, us] : trial)
          if (at >= lo && at < lo + 10) bin.push_back(us);
        printf("  %+7.2f%%", bin.empty() ? 0.0 : (median(bin) / steady - 1) * 100);
      }
      printf("\n");
    }
  }
  return 0;
}
