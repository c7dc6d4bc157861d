// Yardsticks for tunefarm reports on the local GPU: cuBLAS GEMM throughput in
// the layout of ops/gemm, and device-to-device copy bandwidth, so that a
// tuned kernel can be quoted as "x% of cuBLAS" or "x% of copy bandwidth".
//
// GEMM: C[M,N] = A[M,K] * B[N,K]^T, all row-major (ops/gemm's "TN" layout),
// fp16 and bf16 inputs and output, fp32 accumulation (CUBLAS_COMPUTE_32F),
// square sizes 1024, 4096 and 8192. Inputs are uniform(-1,1), never zeros
// (zeros run faster than real data). Copy: cudaMemcpyAsync of a 1 GiB buffer;
// bandwidth counts bytes read plus bytes written.
//
// Timing: CUDA events around each launch, warm-up first, median of many
// samples. Prints a table, then one JSON line (prefixed "JSON ") with every
// figure.
//
// Usage: tunefarm_baselines [--device N] [--samples N]
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

#define CHECK_CUDA(x)                                                                      \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,                      \
                   cudaGetErrorString(e_));                                                \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)
#define CHECK_CUBLAS(x)                                                                    \
  do {                                                                                     \
    cublasStatus_t e_ = (x);                                                               \
    if (e_ != CUBLAS_STATUS_SUCCESS) {                                                     \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,                      \
                   cublasGetStatusString(e_));                                             \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

// Median of `samples` event-timed runs of `fn`, in milliseconds.
double MedianMs(const std::function<void()>& fn, int warmup, int samples) {
  for (int i = 0; i < warmup; ++i) fn();
  CHECK_CUDA(cudaDeviceSynchronize());
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  std::vector<double> ms;
  for (int i = 0; i < samples; ++i) {
    CHECK_CUDA(cudaEventRecord(start));
    fn();
    CHECK_CUDA(cudaEventRecord(stop));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Uniform(-1,1) 16-bit values from a fixed-seed generator (reproducible).
std::vector<uint16_t> RandomMatrix(size_t n, bool bf16, uint64_t seed) {
  std::vector<uint16_t> out(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    float v = (float)((s >> 40) * (1.0 / 16777216.0)) * 2.f - 1.f;
    if (bf16) {
      __nv_bfloat16 b = __float2bfloat16(v);
      std::memcpy(&out[i], &b, 2);
    } else {
      __half h = __float2half(v);
      std::memcpy(&out[i], &h, 2);
    }
  }
  return out;
}

struct GemmFigure {
  std::string dtype;
  int n = 0;
  double ms = 0, tflops = 0;
};

}  // namespace

int main(int argc, char** argv) {
  int device = 0, samples = 50;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--device" && i + 1 < argc) {
      device = std::atoi(argv[++i]);
    } else if (a == "--samples" && i + 1 < argc) {
      samples = std::max(3, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--device N] [--samples N]\n", argv[0]);
      return 2;
    }
  }
  CHECK_CUDA(cudaSetDevice(device));
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  int driver = 0, runtime = 0, blas_version = 0;
  CHECK_CUDA(cudaDriverGetVersion(&driver));
  CHECK_CUDA(cudaRuntimeGetVersion(&runtime));

  cublasHandle_t handle;
  CHECK_CUBLAS(cublasCreate(&handle));
  CHECK_CUBLAS(cublasGetVersion(handle, &blas_version));

  const std::vector<int> sizes = {1024, 4096, 8192};
  const size_t max_elems = (size_t)sizes.back() * sizes.back();
  void *a = nullptr, *b = nullptr, *c = nullptr;
  CHECK_CUDA(cudaMalloc(&a, max_elems * 2));
  CHECK_CUDA(cudaMalloc(&b, max_elems * 2));
  CHECK_CUDA(cudaMalloc(&c, max_elems * 2));

  std::vector<GemmFigure> gemms;
  for (const char* dtype : {"f16", "bf16"}) {
    const bool bf16 = std::string(dtype) == "bf16";
    const cudaDataType t = bf16 ? CUDA_R_16BF : CUDA_R_16F;
    std::vector<uint16_t> ha = RandomMatrix(max_elems, bf16, 1), hb = RandomMatrix(max_elems, bf16, 2);
    CHECK_CUDA(cudaMemcpy(a, ha.data(), max_elems * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(b, hb.data(), max_elems * 2, cudaMemcpyHostToDevice));
    for (int n : sizes) {
      const float alpha = 1.f, beta = 0.f;
      // Row-major C = A * B^T is column-major C^T = B^T' * A where B (N x K
      // row-major) is a K x N column-major matrix used transposed.
      auto run = [&] {
        CHECK_CUBLAS(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &alpha, b, t, n, a, t,
                                  n, &beta, c, t, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      };
      GemmFigure f;
      f.dtype = dtype;
      f.n = n;
      f.ms = MedianMs(run, 10, samples);
      f.tflops = 2.0 * n * n * (double)n / (f.ms * 1e-3) / 1e12;
      gemms.push_back(f);
    }
  }
  CHECK_CUDA(cudaFree(a));
  CHECK_CUDA(cudaFree(b));
  CHECK_CUDA(cudaFree(c));

  const size_t copy_bytes = size_t(1) << 30;
  void *src = nullptr, *dst = nullptr;
  CHECK_CUDA(cudaMalloc(&src, copy_bytes));
  CHECK_CUDA(cudaMalloc(&dst, copy_bytes));
  CHECK_CUDA(cudaMemset(src, 0x5A, copy_bytes));
  const double copy_ms = MedianMs(
      [&] { CHECK_CUDA(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice)); }, 5,
      samples);
  const double copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;
  CHECK_CUDA(cudaFree(src));
  CHECK_CUDA(cudaFree(dst));
  CHECK_CUBLAS(cublasDestroy(handle));

  std::printf("device: %s (sm_%d%d, %d SMs), driver %d, runtime %d, cuBLAS %d, %d samples\n",
              prop.name, prop.major, prop.minor, prop.multiProcessorCount, driver, runtime,
              blas_version, samples);
  std::printf("%-28s %10s %12s\n", "baseline", "median ms", "figure");
  for (const auto& g : gemms) {
    char name[64];
    std::snprintf(name, sizeof name, "cublas %s TN %d^3", g.dtype.c_str(), g.n);
    std::printf("%-28s %10.4f %8.1f TFLOP/s\n", name, g.ms, g.tflops);
  }
  std::printf("%-28s %10.4f %8.0f GB/s (read + write)\n", "copy d2d 1 GiB", copy_ms, copy_gbs);

  std::printf("JSON {\"device\":\"%s\",\"sm\":%d,\"num_sms\":%d,\"driver\":%d,\"runtime\":%d,"
              "\"cublas\":%d,\"samples\":%d,\"gemm\":[",
              prop.name, prop.major * 10 + prop.minor, prop.multiProcessorCount, driver, runtime,
              blas_version, samples);
  for (size_t i = 0; i < gemms.size(); ++i)
    std::printf("%s{\"dtype\":\"%s\",\"layout\":\"TN\",\"M\":%d,\"N\":%d,\"K\":%d,\"ms\":%.5f,"
                "\"tflops\":%.2f}",
                i ? "," : "", gemms[i].dtype.c_str(), gemms[i].n, gemms[i].n, gemms[i].n,
                gemms[i].ms, gemms[i].tflops);
  std::printf("],\"copy\":{\"bytes\":%zu,\"ms\":%.5f,\"gbs\":%.1f}}\n", copy_bytes, copy_ms,
              copy_gbs);
  return 0;
}
