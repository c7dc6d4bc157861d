// Standalone self-check of the ops under ops/ on a real GPU, outside the farm.
//
// Compiles every legal config of each op with NVRTC (the farm's path: params
// as -D macros, dtype as TUNE_DTYPE_* / TUNE_T), checks each against the op's
// reference.cu on odd shapes, times every config on a large shape, then
// re-times the fastest with more samples next to cuBLAS (GEMM) or a
// device-to-device copy (memory-bound ops). Prints a short table last and
// writes JSON lines to --json.
//
// The config spaces below mirror the [constraints] of each op.toml; the
// harness prints the counts so they can be compared with EnumerateConfigs.
//
// Not part of the CMake build. On a GPU host:
//   nvcc -O2 -std=c++17 -arch=native bench/ops_selfcheck.cu -o selfcheck \
//        -lnvrtc -lcuda -lcublas
//   ./selfcheck --ops-dir ops [--only gemm,rmsnorm] [--json out.jsonl]
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <nvrtc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#define CK_RT(x)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)
#define CK_DRV(x)                                                                             \
  do {                                                                                        \
    CUresult e_ = (x);                                                                        \
    if (e_ != CUDA_SUCCESS) {                                                                 \
      const char* s_ = nullptr;                                                               \
      cuGetErrorString(e_, &s_);                                                              \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, s_ ? s_ : "?");              \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)
#define CK_BLAS(x)                                                                            \
  do {                                                                                        \
    cublasStatus_t e_ = (x);                                                                  \
    if (e_ != CUBLAS_STATUS_SUCCESS) {                                                        \
      fprintf(stderr, "%s:%d: %s: cublas status %d\n", __FILE__, __LINE__, #x, (int)e_);      \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)

namespace {

using Config = std::vector<std::pair<std::string, int>>;

int P(const Config& c, const char* name) {
  for (auto& kv : c)
    if (kv.first == name) return kv.second;
  fprintf(stderr, "config has no %s\n", name);
  exit(1);
}

std::string ConfigText(const Config& c) {
  std::string s;
  for (auto& kv : c) s += (s.empty() ? "" : ",") + kv.first + "=" + std::to_string(kv.second);
  return s;
}

// Odometer over named axes, last axis fastest (the farm's order).
std::vector<Config> Enumerate(const std::vector<std::pair<std::string, std::vector<int>>>& axes,
                              const std::function<bool(const Config&)>& legal) {
  std::vector<Config> out;
  std::vector<size_t> idx(axes.size(), 0);
  while (true) {
    Config c;
    for (size_t i = 0; i < axes.size(); ++i) c.push_back({axes[i].first, axes[i].second[idx[i]]});
    if (legal(c)) out.push_back(c);
    int i = (int)axes.size() - 1;
    while (i >= 0 && ++idx[i] == axes[i].second.size()) idx[i--] = 0;
    if (i < 0) break;
  }
  return out;
}

struct Device {
  int sm = 0, num_sms = 0, max_threads = 0;
  long smem_optin = 0, l2 = 0;
  std::string name;
};

int DSize(const std::string& dt) { return dt == "f32" ? 4 : 2; }
std::string TypeName(const std::string& dt) {
  return dt == "f16" ? "__half" : dt == "bf16" ? "__nv_bfloat16" : "float";
}
std::string DtypeMacro(const std::string& dt) {
  return dt == "f16" ? "TUNE_DTYPE_F16" : dt == "bf16" ? "TUNE_DTYPE_BF16" : "TUNE_DTYPE_F32";
}

// ---- config spaces: keep in step with ops/*/op.toml [constraints] ----

std::vector<Config> GemmSpace(const Device& d, const std::string& dt) {
  return Enumerate({{"BM", {64, 128, 256}},
                    {"BN", {64, 128, 256}},
                    {"BK", {32, 64}},
                    {"WM", {1, 2, 4}},
                    {"WN", {1, 2, 4}},
                    {"STAGES", {2, 3, 4, 5}},
                    {"GROUP_M", {1, 8}}},
                   [&](const Config& c) {
                     double BM = P(c, "BM"), BN = P(c, "BN"), BK = P(c, "BK"), WM = P(c, "WM"),
                            WN = P(c, "WN"), S = P(c, "STAGES"), ds = DSize(dt);
                     if (d.sm < 80) return false;
                     if (fmod(BM, 16 * WM) != 0 || fmod(BN, 16 * WN) != 0) return false;
                     if (!((BM / WM) * (BN / WN) >= 2048 && BM / WM <= 64 && BN / WN <= 64))
                       return false;
                     if (!(WM * WN >= 2 && WM * WN * 32 <= d.max_threads)) return false;
                     if ((BM / WM) * (BN / WN) / 32 + (BM / WM) / 4 + (BN / WN) / 4 + 40 >
                         std::min(255.0, 65536 / (WM * WN * 32)))
                       return false;
                     return std::max(S * (BM + BN) * BK * ds, BM * (BN + 8) * ds) <= d.smem_optin;
                   });
}

std::vector<Config> RmsnormSpace(const Device& d, const std::string& dt) {
  return Enumerate({{"VEC", {1, 2, 4, 8}},
                    {"TPR", {16, 32, 64, 128, 256, 512, 1024}},
                    {"RPB", {1, 2, 4, 8}},
                    {"ITEMS", {1, 2, 4, 8}}},
                   [&](const Config& c) {
                     int V = P(c, "VEC"), T = P(c, "TPR"), R = P(c, "RPB"), I = P(c, "ITEMS");
                     (void)dt;
                     return T * R >= 64 && T * R <= d.max_threads && (R == 1 || T <= 128) &&
                            V * I <= 32 && V * I * T * R <= 16384;
                   });
}

std::vector<Config> ElementwiseSpace(const Device& d, const std::string& dt) {
  return Enumerate(
      {{"VEC", {1, 2, 4, 8}}, {"BLOCK", {64, 128, 256, 512, 1024}}, {"ITEMS", {1, 2, 4, 8}}},
      [&](const Config& c) {
        (void)dt;
        int V = P(c, "VEC"), B = P(c, "BLOCK"), I = P(c, "ITEMS");
        return B <= d.max_threads && V * I <= 32 && V * I * B <= 16384;
      });
}

std::vector<Config> GemmSm90Space(const Device& d, const std::string& dt) {
  return Enumerate({{"BN", {64, 128, 192, 256}},
                    {"WG", {1, 2}},
                    {"MT", {1, 2}},
                    {"STAGES", {3, 4, 5, 6}},
                    {"GROUP_M", {1, 8}},
                    {"MINB", {1, 2}}},
                   [&](const Config& c) {
                     double BN = P(c, "BN"), WG = P(c, "WG"), MT = P(c, "MT"), S = P(c, "STAGES"),
                            MB = P(c, "MINB"), ds = DSize(dt);
                     if (d.sm != 90) return false;
                     if (MT * BN / 2 + 48 > std::min(255.0, 65536 / (WG * 128 * MB))) return false;
                     return MB * (std::max(S * (64 * WG * MT + BN) * 64 * ds,
                                           64 * WG * MT * (BN + 8) * ds) + 2048) <=
                            d.smem_optin + 1024;
                   });
}

// ---- NVRTC ----

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    fprintf(stderr, "cannot read %s\n", path.c_str());
    exit(1);
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct CompileJob {
  std::string dir, file, arch, dtype;
  Config config;
  std::string cubin, log;
  bool ok = false;
  double seconds = 0;
};

void Compile(CompileJob* j) {
  auto t0 = std::chrono::steady_clock::now();
  std::string path = j->dir + "/" + j->file;
  std::string src = ReadFile(path);
  std::vector<std::string> opts = {"-arch=" + j->arch, "-std=c++17", "-I" + j->dir,
                                   "-I/usr/local/cuda/include", "-D" + DtypeMacro(j->dtype),
                                   "-DTUNE_T=" + TypeName(j->dtype)};
  for (auto& kv : j->config) opts.push_back("-D" + kv.first + "=" + std::to_string(kv.second));
  std::vector<const char*> o;
  for (auto& s : opts) o.push_back(s.c_str());
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, src.c_str(), path.c_str(), 0, nullptr, nullptr) != NVRTC_SUCCESS) {
    j->log = "nvrtcCreateProgram failed";
    return;
  }
  nvrtcResult r = nvrtcCompileProgram(prog, (int)o.size(), o.data());
  size_t n = 0;
  nvrtcGetProgramLogSize(prog, &n);
  j->log.assign(n, '\0');
  if (n) nvrtcGetProgramLog(prog, j->log.data());
  if (r == NVRTC_SUCCESS) {
    nvrtcGetCUBINSize(prog, &n);
    j->cubin.assign(n, '\0');
    nvrtcGetCUBIN(prog, j->cubin.data());
    j->ok = n > 0;
  }
  nvrtcDestroyProgram(&prog);
  j->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void CompileAll(std::vector<CompileJob>* jobs) {
  std::atomic<size_t> next{0};
  unsigned n = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < n; ++t)
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < jobs->size();) Compile(&(*jobs)[i]);
    });
  for (auto& t : pool) t.join();
}

struct Kernel {
  CUmodule mod = nullptr;
  CUfunction fn = nullptr;
  int regs = 0, local = 0;
};

Kernel Load(const std::string& cubin, const char* name, int smem) {
  Kernel k;
  CK_DRV(cuModuleLoadData(&k.mod, cubin.data()));
  CK_DRV(cuModuleGetFunction(&k.fn, k.mod, name));
  CK_DRV(cuFuncGetAttribute(&k.regs, CU_FUNC_ATTRIBUTE_NUM_REGS, k.fn));
  CK_DRV(cuFuncGetAttribute(&k.local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, k.fn));
  if (smem > 48 * 1024)
    CK_DRV(cuFuncSetAttribute(k.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem));
  return k;
}

struct Launch {
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  unsigned smem = 0;
};

void Run(const Kernel& k, const Launch& l, std::vector<void*> args) {
  CK_DRV(cuLaunchKernel(k.fn, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2],
                        l.smem, nullptr, args.data(), nullptr));
}

// A launch that the driver refuses (resources) is a result, not a reason to stop.
std::string TryRun(const Kernel& k, const Launch& l, std::vector<void*> args) {
  CUresult e = cuLaunchKernel(k.fn, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1],
                              l.block[2], l.smem, nullptr, args.data(), nullptr);
  if (e == CUDA_SUCCESS) return "";
  const char* s = nullptr;
  cuGetErrorString(e, &s);
  return s ? s : "launch failed";
}

// ---- device helpers: seeded inputs, comparison ----

__device__ float HashUniform(unsigned long long i, unsigned seed) {
  unsigned long long z = i * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (float)((z >> 40) + 0.5) * (1.0f / 16777216.0f);
}

template <class T>
__global__ void FillKernel(T* p, size_t n, int normal, float a, float b, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float v;
    if (normal) {
      float u1 = HashUniform(2 * i, seed), u2 = HashUniform(2 * i + 1, seed);
      v = a + b * sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
    } else {
      v = a + (b - a) * HashUniform(i, seed);
    }
    p[i] = (T)v;
  }
}

__device__ float ToF(float v) { return v; }
__device__ float ToF(__half v) { return __half2float(v); }
__device__ float ToF(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T>
__global__ void CompareKernel(const T* out, const float* ref, size_t n, float rtol, float atol,
                              unsigned long long* bad, unsigned* max_err_bits) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float o = ToF(out[i]), r = ref[i];
    float err = fabsf(o - r);
    if (!(err <= atol + rtol * fabsf(r))) atomicAdd(bad, 1ull);
    if (err == err) atomicMax(max_err_bits, __float_as_uint(err));
  }
}

void Fill(const std::string& dt, void* p, size_t n, bool normal, float a, float b, unsigned seed) {
  if (dt == "f16")
    FillKernel<__half><<<1024, 256>>>((__half*)p, n, normal, a, b, seed);
  else if (dt == "bf16")
    FillKernel<__nv_bfloat16><<<1024, 256>>>((__nv_bfloat16*)p, n, normal, a, b, seed);
  else
    FillKernel<float><<<1024, 256>>>((float*)p, n, normal, a, b, seed);
  CK_RT(cudaGetLastError());
}

struct CheckResult {
  unsigned long long bad = 0;
  float max_err = 0;
  bool pass() const { return bad == 0; }
};

CheckResult Compare(const std::string& dt, const void* out, const float* ref, size_t n, float rtol,
                    float atol) {
  static unsigned long long* d_bad = nullptr;
  static unsigned* d_max = nullptr;
  if (!d_bad) {
    CK_RT(cudaMalloc(&d_bad, sizeof(*d_bad)));
    CK_RT(cudaMalloc(&d_max, sizeof(*d_max)));
  }
  CK_RT(cudaMemset(d_bad, 0, sizeof(*d_bad)));
  CK_RT(cudaMemset(d_max, 0, sizeof(*d_max)));
  if (dt == "f16")
    CompareKernel<<<1024, 256>>>((const __half*)out, ref, n, rtol, atol, d_bad, d_max);
  else if (dt == "bf16")
    CompareKernel<<<1024, 256>>>((const __nv_bfloat16*)out, ref, n, rtol, atol, d_bad, d_max);
  else
    CompareKernel<<<1024, 256>>>((const float*)out, ref, n, rtol, atol, d_bad, d_max);
  CK_RT(cudaGetLastError());
  CheckResult r;
  unsigned bits;
  CK_RT(cudaMemcpy(&r.bad, d_bad, sizeof(r.bad), cudaMemcpyDeviceToHost));
  CK_RT(cudaMemcpy(&bits, d_max, sizeof(bits), cudaMemcpyDeviceToHost));
  memcpy(&r.max_err, &bits, 4);
  return r;
}

float HostF(const std::string& dt, const void* p, size_t i) {
  if (dt == "f16") return __half2float(((const __half*)p)[i]);
  if (dt == "bf16") return __bfloat162float(((const __nv_bfloat16*)p)[i]);
  return ((const float*)p)[i];
}

// Median time in microseconds of `fn` (CUDA events around each sample).
double TimeUs(const std::function<void()>& fn, int warmup, int samples) {
  for (int i = 0; i < warmup; ++i) fn();
  CK_RT(cudaDeviceSynchronize());
  cudaEvent_t a, b;
  CK_RT(cudaEventCreate(&a));
  CK_RT(cudaEventCreate(&b));
  std::vector<double> t;
  for (int i = 0; i < samples; ++i) {
    CK_RT(cudaEventRecord(a));
    fn();
    CK_RT(cudaEventRecord(b));
    CK_RT(cudaEventSynchronize(b));
    float ms;
    CK_RT(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e3);
  }
  CK_RT(cudaEventDestroy(a));
  CK_RT(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct DevBuf {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DevBuf(size_t n) : bytes(n) { CK_RT(cudaMalloc(&p, std::max<size_t>(n, 16))); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

struct Summary {
  std::vector<std::string> lines;   // printed last
  std::vector<std::string> json;
  int failures = 0;
};

std::string Fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string Fmt(const char* f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

struct Options {
  std::string ops_dir = "ops";
  std::string json;
  std::vector<std::string> only;
  bool Want(const std::string& op) const {
    return only.empty() || std::find(only.begin(), only.end(), op) != only.end();
  }
};

// ---- copy bandwidth and cuBLAS, the yardsticks ----

double CopyGBs() {
  size_t bytes = size_t(1) << 30;
  DevBuf a(bytes), b(bytes);
  CK_RT(cudaMemset(a.p, 1, bytes));
  double us = TimeUs([&] { CK_RT(cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice)); },
                     3, 20);
  return 2.0 * bytes / (us * 1e-6) / 1e9;
}

// C[M,N] = A[M,K] * B[N,K]^T, all row-major: column-major C^T = B * A^T.
double CublasUs(cublasHandle_t h, const std::string& dt, int M, int N, int K, void* A, void* B,
                void* C) {
  cudaDataType t = dt == "f16" ? CUDA_R_16F : CUDA_R_16BF;
  float alpha = 1.f, beta = 0.f;
  return TimeUs(
      [&] {
        CK_BLAS(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, B, t, K, A, t, K, &beta,
                             C, t, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      },
      5, 30);
}

// ---- per-op drivers ----

struct Shape3 {
  int M, N, K;
};

Launch GemmLaunch(const Config& c, const Shape3& s, int ds) {
  Launch l;
  int BM = P(c, "BM"), BN = P(c, "BN");
  l.grid[0] = (s.N + BN - 1) / BN;
  l.grid[1] = (s.M + BM - 1) / BM;
  l.block[0] = P(c, "WM") * P(c, "WN") * 32;
  l.smem = std::max(P(c, "STAGES") * (BM + BN) * P(c, "BK") * ds, BM * (BN + 8) * ds);
  return l;
}

Launch GemmSm90Launch(const Config& c, const Shape3& s, int ds) {
  Launch l;
  int WG = P(c, "WG"), MT = P(c, "MT"), BN = P(c, "BN"), BM = 64 * WG * MT;
  l.grid[0] = (s.N + BN - 1) / BN;
  l.grid[1] = (s.M + BM - 1) / BM;
  l.block[0] = WG * 128;
  l.smem = std::max(P(c, "STAGES") * (BM + BN) * 64 * ds, BM * (BN + 8) * ds) + 1024;
  return l;
}

// Runs the GEMM-shaped ops (same args, same reference).
void GemmOp(const Options& opt, const Device& dev, cublasHandle_t blas, Summary* sum,
            const std::string& op, const std::string& file,
            std::vector<Config> (*space)(const Device&, const std::string&),
            Launch (*launch)(const Config&, const Shape3&, int), const std::string& arch) {
  std::string dir = opt.ops_dir + "/" + op;
  const std::vector<std::string> dtypes = {"f16", "bf16"};
  const std::vector<Shape3> checks = {{1000, 1032, 264}, {8, 16, 8}, {264, 136, 1032}, {520, 8, 40}};
  const Shape3 big{4096, 4096, 4096};
  const float rtol = 1e-2f, atol = 1e-2f;

  std::vector<CompileJob> jobs;
  for (auto& dt : dtypes)
    for (auto& c : space(dev, dt)) jobs.push_back({dir, file, arch, dt, c});
  for (auto& dt : dtypes) jobs.push_back({dir, "reference.cu", "sm_" + std::to_string(dev.sm), dt, {}});
  auto t0 = std::chrono::steady_clock::now();
  CompileAll(&jobs);
  double csec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int cfail = 0;
  for (auto& j : jobs)
    if (!j.ok) {
      if (cfail++ < 3) printf("[%s] compile FAILED %s %s\n%s\n", op.c_str(), j.dtype.c_str(),
                               ConfigText(j.config).c_str(), j.log.c_str());
    }
  printf("[%s] %zu compiles in %.1f s (%u threads), %d failed\n", op.c_str(), jobs.size(), csec,
         std::thread::hardware_concurrency(), cfail);
  sum->failures += cfail;

  size_t max_elems = (size_t)big.M * big.K;
  DevBuf A(max_elems * 2), B(max_elems * 2), C(max_elems * 2), R(max_elems * 4);

  for (auto& dt : dtypes) {
    size_t nconf = 0;
    for (auto& j : jobs) nconf += (j.dtype == dt && !j.config.empty());
    const CompileJob* refjob = nullptr;
    for (auto& j : jobs)
      if (j.dtype == dt && j.config.empty()) refjob = &j;
    if (!refjob || !refjob->ok) {
      printf("[%s] reference did not compile\n%s\n", op.c_str(), refjob ? refjob->log.c_str() : "");
      sum->failures++;
      continue;
    }
    Kernel ref = Load(refjob->cubin, "gemm_ref", 0);
    auto run_ref = [&](const Shape3& s) {
      Launch l;
      l.grid[0] = (s.N + 15) / 16;
      l.grid[1] = (s.M + 15) / 16;
      l.block[0] = l.block[1] = 16;
      Run(ref, l, {&A.p, &B.p, &R.p, (void*)&s.M, (void*)&s.N, (void*)&s.K});
      CK_RT(cudaDeviceSynchronize());
    };

    // Per check shape: inputs, reference, a host spot-check of the reference.
    struct Fail { std::string what; };
    std::vector<std::string> fails;
    std::vector<std::pair<std::string, double>> timed;  // config text, us at 4096^3
    int max_local = 0, worst_regs = 0;
    // Check every config on every check shape; inputs are drawn anew per shape.
    std::vector<Kernel> kernels(jobs.size());
    for (size_t ji = 0; ji < jobs.size(); ++ji) {
      auto& j = jobs[ji];
      if (j.dtype != dt || j.config.empty() || !j.ok) continue;
      kernels[ji] = Load(j.cubin, op.c_str(), launch(j.config, big, 2).smem);
      max_local = std::max(max_local, kernels[ji].local);
      worst_regs = std::max(worst_regs, kernels[ji].regs);
    }
    for (size_t si = 0; si < checks.size(); ++si) {
      const Shape3& s = checks[si];
      Fill(dt, A.p, (size_t)s.M * s.K, false, -1, 1, 11 + si);
      Fill(dt, B.p, (size_t)s.N * s.K, false, -1, 1, 101 + si);
      run_ref(s);
      {
        std::vector<char> ha((size_t)s.M * s.K * 2), hb((size_t)s.N * s.K * 2);
        std::vector<float> hr((size_t)s.M * s.N);
        CK_RT(cudaMemcpy(ha.data(), A.p, ha.size(), cudaMemcpyDeviceToHost));
        CK_RT(cudaMemcpy(hb.data(), B.p, hb.size(), cudaMemcpyDeviceToHost));
        CK_RT(cudaMemcpy(hr.data(), R.p, hr.size() * 4, cudaMemcpyDeviceToHost));
        for (int t = 0; t < 64; ++t) {
          int m = (t * 7919) % s.M, n = (t * 104729 + 3) % s.N;
          double acc = 0;
          for (int k = 0; k < s.K; ++k)
            acc += (double)HostF(dt, ha.data(), (size_t)m * s.K + k) *
                   HostF(dt, hb.data(), (size_t)n * s.K + k);
          if (fabs(acc - hr[(size_t)m * s.N + n]) > 1e-3 * (1 + fabs(acc))) {
            fails.push_back(Fmt("reference wrong at %d,%d of %dx%dx%d", m, n, s.M, s.N, s.K));
            break;
          }
        }
      }
      for (size_t ji = 0; ji < jobs.size(); ++ji) {
        auto& j = jobs[ji];
        if (!kernels[ji].fn) continue;
        Launch l = launch(j.config, s, 2);
        CK_RT(cudaMemset(C.p, 0xFF, (size_t)s.M * s.N * 2));  // NaN poison
        std::string le = TryRun(kernels[ji], l, {&A.p, &B.p, &C.p, (void*)&s.M, (void*)&s.N, (void*)&s.K});
        if (!le.empty()) {
          fails.push_back(ConfigText(j.config) + ": launch refused: " + le);
          kernels[ji].fn = nullptr;
          continue;
        }
        cudaError_t e = cudaDeviceSynchronize();
        if (e != cudaSuccess) {
          printf("[%s] %s %s launch error %s (context lost, stopping)\n", op.c_str(), dt.c_str(),
                 ConfigText(j.config).c_str(), cudaGetErrorString(e));
          exit(1);
        }
        CheckResult r = Compare(dt, C.p, (const float*)R.p, (size_t)s.M * s.N, rtol, atol);
        if (!r.pass())
          fails.push_back(Fmt("%s %dx%dx%d: %llu bad, max err %g", ConfigText(j.config).c_str(),
                              s.M, s.N, s.K, r.bad, r.max_err));
      }
    }
    // Time every config at 4096^3 (10 samples), then the best 5 with 50.
    Fill(dt, A.p, (size_t)big.M * big.K, false, -1, 1, 7);
    Fill(dt, B.p, (size_t)big.N * big.K, false, -1, 1, 8);
    std::vector<std::pair<double, size_t>> rank;
    for (size_t ji = 0; ji < jobs.size(); ++ji) {
      if (!kernels[ji].fn) continue;
      Launch l = launch(jobs[ji].config, big, 2);
      double us = TimeUs([&] { Run(kernels[ji], l, {&A.p, &B.p, &C.p, (void*)&big.M, (void*)&big.N, (void*)&big.K}); }, 2, 10);
      rank.push_back({us, ji});
    }
    std::sort(rank.begin(), rank.end());
    double blas_us = CublasUs(blas, dt, big.M, big.N, big.K, A.p, B.p, C.p);
    double flop = 2.0 * big.M * big.N * big.K;
    double blas_tf = flop / blas_us / 1e6;
    run_ref(big);
    for (size_t r = 0; r < std::min<size_t>(5, rank.size()); ++r) {
      size_t ji = rank[r].second;
      Launch l = launch(jobs[ji].config, big, 2);
      auto go = [&] { Run(kernels[ji], l, {&A.p, &B.p, &C.p, (void*)&big.M, (void*)&big.N, (void*)&big.K}); };
      double us = TimeUs(go, 5, 50);
      CK_RT(cudaMemset(C.p, 0xFF, (size_t)big.M * big.N * 2));
      go();
      CK_RT(cudaDeviceSynchronize());
      CheckResult cr = Compare(dt, C.p, (const float*)R.p, (size_t)big.M * big.N, rtol, atol);
      if (!cr.pass()) fails.push_back(Fmt("%s 4096^3: %llu bad", ConfigText(jobs[ji].config).c_str(), cr.bad));
      double tf = flop / us / 1e6;
      sum->lines.push_back(Fmt("%-9s %-4s 4096^3  #%zu %-52s %7.1f TFLOP/s  %5.1f%% of cuBLAS (%.1f)  regs %d  check %s",
                               op.c_str(), dt.c_str(), r + 1, ConfigText(jobs[ji].config).c_str(), tf,
                               100 * tf / blas_tf, blas_tf, kernels[ji].regs, cr.pass() ? "ok" : "FAIL"));
      sum->json.push_back(Fmt("{\"op\":\"%s\",\"dtype\":\"%s\",\"shape\":\"M=4096,N=4096,K=4096\",\"config\":\"%s\",\"us\":%.2f,\"tflops\":%.1f,\"cublas_tflops\":%.1f,\"check\":%s}",
                              op.c_str(), dt.c_str(), ConfigText(jobs[ji].config).c_str(), us, tf, blas_tf, cr.pass() ? "true" : "false"));
    }
    // The winner on the other sizes, next to cuBLAS.
    if (!rank.empty()) {
      size_t ji = rank[0].second;
      for (int n : {1024, 8192}) {
        Shape3 s{n, n, n};
        DevBuf a((size_t)n * n * 2), b((size_t)n * n * 2), c((size_t)n * n * 2);
        Fill(dt, a.p, (size_t)n * n, false, -1, 1, 3);
        Fill(dt, b.p, (size_t)n * n, false, -1, 1, 4);
        Launch l = launch(jobs[ji].config, s, 2);
        double us = TimeUs([&] { Run(kernels[ji], l, {&a.p, &b.p, &c.p, (void*)&s.M, (void*)&s.N, (void*)&s.K}); }, 3, 20);
        double bus = CublasUs(blas, dt, n, n, n, a.p, b.p, c.p);
        double f = 2.0 * n * n * (double)n;
        sum->lines.push_back(Fmt("%-9s %-4s %d^3  best@4096 %-44s %7.1f TFLOP/s  %5.1f%% of cuBLAS (%.1f)",
                                 op.c_str(), dt.c_str(), n, ConfigText(jobs[ji].config).c_str(), f / us / 1e6,
                                 100 * bus / us, f / bus / 1e6));
      }
    }
    printf("[%s] %s: %zu configs, %zu check failures, max regs %d, max local bytes %d\n", op.c_str(),
           dt.c_str(), nconf, fails.size(), worst_regs, max_local);
    for (size_t i = 0; i < std::min<size_t>(fails.size(), 10); ++i) printf("   FAIL %s\n", fails[i].c_str());
    sum->failures += (int)fails.size();
    sum->lines.push_back(Fmt("%-9s %-4s checked %zu configs x %zu shapes: %zu failures", op.c_str(), dt.c_str(),
                             nconf, checks.size(), fails.size()));
    for (auto& k : kernels)
      if (k.mod) cuModuleUnload(k.mod);
    cuModuleUnload(ref.mod);
  }
}

// rmsnorm and elementwise: memory-bound, compared with copy bandwidth.
struct MemOp {
  std::string op, file, kernel, ref_kernel;
  std::vector<Config> (*space)(const Device&, const std::string&);
};

void MemoryOp(const Options& opt, const Device& dev, double copy_gbs, Summary* sum, const MemOp& mo) {
  std::string dir = opt.ops_dir + "/" + mo.op;
  const std::vector<std::string> dtypes = {"f16", "bf16", "f32"};
  std::string arch = "sm_" + std::to_string(dev.sm);
  std::vector<CompileJob> jobs;
  for (auto& dt : dtypes)
    for (auto& c : mo.space(dev, dt)) jobs.push_back({dir, mo.file, arch, dt, c});
  for (auto& dt : dtypes) jobs.push_back({dir, "reference.cu", arch, dt, {}});
  auto t0 = std::chrono::steady_clock::now();
  CompileAll(&jobs);
  double csec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int cfail = 0;
  for (auto& j : jobs)
    if (!j.ok && cfail++ < 3)
      printf("[%s] compile FAILED %s %s\n%s\n", mo.op.c_str(), j.dtype.c_str(), ConfigText(j.config).c_str(),
             j.log.c_str());
  printf("[%s] %zu compiles in %.1f s, %d failed\n", mo.op.c_str(), jobs.size(), csec, cfail);
  sum->failures += cfail;
  const bool rms = mo.op == "rmsnorm";
  // Shapes: (rows, n) for rmsnorm, (n) for elementwise.
  std::vector<std::pair<int, int>> checks =
      rms ? std::vector<std::pair<int, int>>{{37, 1000}, {5, 4100}, {64, 12288}, {3, 6}, {130, 64}}
          : std::vector<std::pair<int, int>>{{1, 1}, {1, 1000003}, {1, 4096}, {1, 77}};
  std::vector<std::pair<int, int>> bigs =
      rms ? std::vector<std::pair<int, int>>{{16384, 8192}, {65536, 1024}}
          : std::vector<std::pair<int, int>>{{1, 1 << 28}};
  size_t max_elems = 0;
  for (auto& s : bigs) max_elems = std::max(max_elems, (size_t)s.first * s.second);
  DevBuf X(max_elems * 4), W(max_elems * 4), Y(max_elems * 4), R(64 << 20);
  const float eps = 1e-5f;

  for (auto& dt : dtypes) {
    const CompileJob* refjob = nullptr;
    for (auto& j : jobs)
      if (j.dtype == dt && j.config.empty()) refjob = &j;
    if (!refjob || !refjob->ok) {
      printf("[%s] reference did not compile\n%s\n", mo.op.c_str(), refjob ? refjob->log.c_str() : "");
      sum->failures++;
      continue;
    }
    Kernel ref = Load(refjob->cubin, mo.ref_kernel.c_str(), 0);
    int ds = DSize(dt);
    auto launch = [&](const Config& c, int rows, int n) {
      Launch l;
      if (rms) {
        l.grid[0] = (rows + P(c, "RPB") - 1) / P(c, "RPB");
        l.block[0] = P(c, "TPR") * P(c, "RPB");
      } else {
        long per = (long)P(c, "BLOCK") * P(c, "VEC") * P(c, "ITEMS");
        l.grid[0] = (unsigned)((n + per - 1) / per);
        l.block[0] = P(c, "BLOCK");
      }
      return l;
    };
    auto args = [&](int& rows, int& n, void** out) -> std::vector<void*> {
      if (rms) return {&X.p, &W.p, out, &rows, &n, (void*)&eps};
      return {&X.p, &W.p, out, &n};
    };
    std::vector<Kernel> kernels(jobs.size());
    size_t nconf = 0;
    int max_regs = 0, max_local = 0;
    for (size_t ji = 0; ji < jobs.size(); ++ji)
      if (jobs[ji].dtype == dt && !jobs[ji].config.empty() && jobs[ji].ok) {
        kernels[ji] = Load(jobs[ji].cubin, mo.kernel.c_str(), 0);
        max_regs = std::max(max_regs, kernels[ji].regs);
        max_local = std::max(max_local, kernels[ji].local);
        ++nconf;
      }
    std::vector<std::string> fails;
    for (size_t si = 0; si < checks.size(); ++si) {
      int rows = checks[si].first, n = checks[si].second;
      size_t total = (size_t)rows * n;
      // rmsnorm: x ~ N(0,1), w ~ U(0.5,1.5). elementwise: x ~ N(0,2), r ~ N(0,1).
      Fill(dt, X.p, total, true, 0, rms ? 1 : 2, 21 + si);
      if (rms) Fill(dt, W.p, n, false, 0.5f, 1.5f, 31 + si);
      else Fill(dt, W.p, total, true, 0, 1, 31 + si);
      {
        Launch l;
        l.block[0] = rms ? 128 : 256;
        l.grid[0] = rms ? (rows + 127) / 128 : (n + 255) / 256;
        void* rp = R.p;
        Run(ref, l, args(rows, n, &rp));
        CK_RT(cudaDeviceSynchronize());
        // Host spot-check of the reference.
        std::vector<char> hx(total * ds), hw((rms ? n : total) * ds);
        std::vector<float> hr(total);
        CK_RT(cudaMemcpy(hx.data(), X.p, hx.size(), cudaMemcpyDeviceToHost));
        CK_RT(cudaMemcpy(hw.data(), W.p, hw.size(), cudaMemcpyDeviceToHost));
        CK_RT(cudaMemcpy(hr.data(), R.p, total * 4, cudaMemcpyDeviceToHost));
        for (int r = 0; r < rows; r += std::max(1, rows / 4)) {
          double ss = 0;
          if (rms)
            for (int i = 0; i < n; ++i) ss += (double)HostF(dt, hx.data(), (size_t)r * n + i) * HostF(dt, hx.data(), (size_t)r * n + i);
          for (int i = 0; i < n; i += std::max(1, n / 16)) {
            size_t e = (size_t)r * n + i;
            double want;
            if (rms) {
              want = HostF(dt, hx.data(), e) / std::sqrt(ss / n + eps) * HostF(dt, hw.data(), i);
            } else {
              double v = (double)HostF(dt, hx.data(), e) + HostF(dt, hw.data(), e);
              want = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
            }
            if (fabs(want - hr[e]) > 1e-4 * (1 + fabs(want))) {
              fails.push_back(Fmt("reference wrong at row %d col %d (%g vs %g)", r, i, hr[e], want));
              r = rows;
              break;
            }
          }
        }
      }
      for (size_t ji = 0; ji < jobs.size(); ++ji) {
        if (!kernels[ji].fn) continue;
        CK_RT(cudaMemset(Y.p, 0xFF, total * ds));
        void* yp = Y.p;
        std::string le = TryRun(kernels[ji], launch(jobs[ji].config, rows, n), args(rows, n, &yp));
        if (!le.empty()) {
          fails.push_back(ConfigText(jobs[ji].config) + ": launch refused: " + le);
          kernels[ji].fn = nullptr;
          continue;
        }
        cudaError_t e = cudaDeviceSynchronize();
        if (e != cudaSuccess) {
          printf("[%s] %s %s launch error %s\n", mo.op.c_str(), dt.c_str(), ConfigText(jobs[ji].config).c_str(),
                 cudaGetErrorString(e));
          exit(1);
        }
        CheckResult r = Compare(dt, Y.p, (const float*)R.p, total, 1e-2f, rms ? 1e-2f : 1e-3f);
        if (!r.pass())
          fails.push_back(Fmt("%s rows=%d n=%d: %llu bad, max err %g", ConfigText(jobs[ji].config).c_str(), rows, n,
                              r.bad, r.max_err));
      }
    }
    printf("[%s] %s: %zu configs, %zu check failures, max regs %d, max local bytes %d\n", mo.op.c_str(),
           dt.c_str(), nconf, fails.size(), max_regs, max_local);
    for (size_t i = 0; i < std::min<size_t>(fails.size(), 10); ++i) printf("   FAIL %s\n", fails[i].c_str());
    sum->failures += (int)fails.size();
    sum->lines.push_back(Fmt("%-11s %-4s checked %zu configs x %zu shapes: %zu failures", mo.op.c_str(), dt.c_str(),
                             nconf, checks.size(), fails.size()));
    for (auto& b : bigs) {
      int rows = b.first, n = b.second;
      size_t total = (size_t)rows * n;
      double bytes = rms ? (double)ds * (2.0 * total + n) : 3.0 * ds * total;
      Fill(dt, X.p, total, true, 0, 1, 5);
      Fill(dt, W.p, rms ? n : total, false, 0.5f, 1.5f, 6);
      std::vector<std::pair<double, size_t>> rank;
      void* yp = Y.p;
      for (size_t ji = 0; ji < jobs.size(); ++ji) {
        if (!kernels[ji].fn) continue;
        Launch l = launch(jobs[ji].config, rows, n);
        auto a = args(rows, n, &yp);
        rank.push_back({TimeUs([&] { Run(kernels[ji], l, a); }, 1, 5), ji});
      }
      std::sort(rank.begin(), rank.end());
      for (size_t r = 0; r < std::min<size_t>(3, rank.size()); ++r) {
        size_t ji = rank[r].second;
        Launch l = launch(jobs[ji].config, rows, n);
        auto a = args(rows, n, &yp);
        double us = TimeUs([&] { Run(kernels[ji], l, a); }, 3, 30);
        double gbs = bytes / us / 1e3;
        std::string shape = rms ? Fmt("ROWS=%d,N=%d", rows, n) : Fmt("N=%d", n);
        sum->lines.push_back(Fmt("%-11s %-4s %-18s #%zu %-30s %8.1f us %7.0f GB/s  %5.1f%% of copy (%.0f)",
                                 mo.op.c_str(), dt.c_str(), shape.c_str(), r + 1, ConfigText(jobs[ji].config).c_str(),
                                 us, gbs, 100 * gbs / copy_gbs, copy_gbs));
        sum->json.push_back(Fmt("{\"op\":\"%s\",\"dtype\":\"%s\",\"shape\":\"%s\",\"config\":\"%s\",\"us\":%.2f,\"gbs\":%.0f,\"copy_gbs\":%.0f}",
                                mo.op.c_str(), dt.c_str(), shape.c_str(), ConfigText(jobs[ji].config).c_str(), us, gbs, copy_gbs));
      }
    }
    for (auto& k : kernels)
      if (k.mod) cuModuleUnload(k.mod);
    cuModuleUnload(ref.mod);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--ops-dir" && i + 1 < argc) opt.ops_dir = argv[++i];
    else if (a == "--json" && i + 1 < argc) opt.json = argv[++i];
    else if (a == "--only" && i + 1 < argc) {
      std::stringstream ss(argv[++i]);
      for (std::string s; std::getline(ss, s, ',');) opt.only.push_back(s);
    } else {
      fprintf(stderr, "usage: %s [--ops-dir ops] [--only op,op] [--json file]\n", argv[0]);
      return 2;
    }
  }
  CK_RT(cudaSetDevice(0));
  CK_RT(cudaFree(nullptr));  // primary context, shared with the Driver API calls
  cudaDeviceProp p;
  CK_RT(cudaGetDeviceProperties(&p, 0));
  Device dev;
  dev.sm = p.major * 10 + p.minor;
  dev.num_sms = p.multiProcessorCount;
  dev.max_threads = p.maxThreadsPerBlock;
  dev.smem_optin = p.sharedMemPerBlockOptin;
  dev.l2 = p.l2CacheSize;
  dev.name = p.name;
  int nvrtc_major = 0, nvrtc_minor = 0;
  nvrtcVersion(&nvrtc_major, &nvrtc_minor);
  printf("device %s sm_%d, %d SMs, smem_optin %ld, L2 %ld, NVRTC %d.%d\n", dev.name.c_str(), dev.sm,
         dev.num_sms, dev.smem_optin, dev.l2, nvrtc_major, nvrtc_minor);
  for (const char* dt : {"f16", "bf16", "f32"})
    printf("space sizes %s: gemm %zu, rmsnorm %zu, elementwise %zu, gemm_sm90 %zu\n", dt,
           std::string(dt) == "f32" ? 0 : GemmSpace(dev, dt).size(), RmsnormSpace(dev, dt).size(),
           ElementwiseSpace(dev, dt).size(), std::string(dt) == "f32" ? 0 : GemmSm90Space(dev, dt).size());

  Summary sum;
  double copy_gbs = CopyGBs();
  sum.lines.push_back(Fmt("copy D2D 1 GiB: %.0f GB/s (read + write)", copy_gbs));
  cublasHandle_t blas;
  CK_BLAS(cublasCreate(&blas));
  std::string arch = "sm_" + std::to_string(dev.sm);
  if (opt.Want("gemm")) GemmOp(opt, dev, blas, &sum, "gemm", "gemm.cu", GemmSpace, GemmLaunch, arch);
  if (opt.Want("gemm_sm90") && dev.sm == 90 && std::ifstream(opt.ops_dir + "/gemm_sm90/op.toml"))
    GemmOp(opt, dev, blas, &sum, "gemm_sm90", "gemm_sm90.cu", GemmSm90Space, GemmSm90Launch, "sm_90a");
  if (opt.Want("rmsnorm"))
    MemoryOp(opt, dev, copy_gbs, &sum, {"rmsnorm", "rmsnorm.cu", "rmsnorm", "rmsnorm_ref", RmsnormSpace});
  if (opt.Want("elementwise"))
    MemoryOp(opt, dev, copy_gbs, &sum,
             {"elementwise", "add_gelu.cu", "add_gelu", "add_gelu_ref", ElementwiseSpace});
  cublasDestroy(blas);

  if (!opt.json.empty()) {
    std::ofstream f(opt.json);
    for (auto& j : sum.json) f << j << "\n";
  }
  printf("\n==== summary (%s) ====\n", dev.name.c_str());
  for (auto& l : sum.lines) printf("%s\n", l.c_str());
  printf("total failures: %d\n", sum.failures);
  return sum.failures ? 1 : 0;
}
