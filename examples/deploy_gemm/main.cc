// deploy_gemm: a deployment launching the kernel the farm measured.
//
//   deploy_gemm --bundle gemm.tfb --key farm.pub --M 4096 --N 4096 --K 4096
//               [--op gemm_sm90] [--dtype f16] [--device 0] [--runs 50]
//
// 1. load the bundle and verify its signature (tune::runtime::Bundle::Load);
// 2. open the GPU and prepare (op, dtype) once (tune::launcher);
// 3. launch on device buffers: the launcher looks the shape up for this GPU,
//    loads the cubin the farm measured and evaluates the bundle's launch
//    plan, so this program holds no geometry, no NVRTC and no op source;
// 4. check sampled outputs against a host dot product, and time the kernel
//    with CUDA events (an L2 flush before each run, as the farm times).
#include <cuda.h>
#include <tune/launcher.h>
#include <tune/runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "deploy_gemm: %s\n", message.c_str());
  std::exit(1);
}

void Check(CUresult r, const char* call) {
  if (r == CUDA_SUCCESS) return;
  const char* text = nullptr;
  cuGetErrorString(r, &text);
  Die(std::string(call) + ": " + (text ? text : "CUDA error " + std::to_string(r)));
}
#define CU(call) Check((call), #call)

// IEEE half from float, round to nearest even (normal range; the inputs are in [-1, 1]).
uint16_t ToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = int32_t((x >> 23) & 0xFF) - 127 + 15;
  uint32_t mant = x & 0x7FFFFFu;
  if (exp <= 0) return uint16_t(sign);  // tiny values flush to zero
  uint32_t h = sign | (uint32_t(exp) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return uint16_t(h);
}

float FromHalf(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
  uint32_t x;
  if (exp == 0) x = sign | (mant ? 0 : 0);  // zero (subnormals do not occur here)
  else if (exp == 31) x = sign | 0x7F800000u | (mant << 13);
  else x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

struct Args {
  std::string bundle, key, op = "gemm_sm90", dtype = "f16";
  int64_t M = 0, N = 0, K = 0;
  int device = 0, runs = 50;
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) Die("missing value after " + flag);
    const std::string v = argv[++i];
    if (flag == "--bundle") a.bundle = v;
    else if (flag == "--key") a.key = v;
    else if (flag == "--op") a.op = v;
    else if (flag == "--dtype") a.dtype = v;
    else if (flag == "--M") a.M = std::atoll(v.c_str());
    else if (flag == "--N") a.N = std::atoll(v.c_str());
    else if (flag == "--K") a.K = std::atoll(v.c_str());
    else if (flag == "--device") a.device = std::atoi(v.c_str());
    else if (flag == "--runs") a.runs = std::atoi(v.c_str());
    else Die("unknown flag " + flag);
  }
  if (a.bundle.empty() || a.key.empty() || a.M <= 0 || a.N <= 0 || a.K <= 0)
    Die("usage: deploy_gemm --bundle B.tfb --key farm.pub --M m --N n --K k [--op gemm_sm90] [--device 0]");
  if (a.dtype != "f16") Die("this example fills and checks f16 buffers only");
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  auto bundle = tune::runtime::Bundle::Load(args.bundle, {args.key});
  if (!bundle.ok()) Die(bundle.status().message());
  auto launcher = tune::launcher::Launcher::Open(*bundle, args.device);
  if (!launcher.ok()) Die(launcher.status().message());
  auto gemm = launcher->prepare(args.op, args.dtype);
  if (!gemm.ok()) Die(gemm.status().message());
  std::printf("device %s (%s, %s)\n", launcher->device().name.c_str(), launcher->device().model.c_str(),
              launcher->arch().c_str());

  // C[M,N] = A[M,K] * B[N,K]^T on random inputs.
  const int64_t M = args.M, N = args.N, K = args.K;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uni(-1, 1);
  std::vector<uint16_t> a(size_t(M * K)), b(size_t(N * K)), c(size_t(M * N));
  for (auto& v : a) v = ToHalf(uni(rng));
  for (auto& v : b) v = ToHalf(uni(rng));
  CUdeviceptr da, db, dc, flush;
  const size_t flush_bytes = size_t(256) << 20;
  CU(cuMemAlloc(&da, a.size() * 2));
  CU(cuMemAlloc(&db, b.size() * 2));
  CU(cuMemAlloc(&dc, c.size() * 2));
  CU(cuMemAlloc(&flush, flush_bytes));
  CU(cuMemcpyHtoD(da, a.data(), a.size() * 2));
  CU(cuMemcpyHtoD(db, b.data(), b.size() * 2));

  auto launch = [&] {
    tune::Status st = gemm->launch({M, N, K}, {uint64_t(da), uint64_t(db), uint64_t(dc)});
    if (!st.ok()) Die(st.message());
  };
  launch();
  CU(cuCtxSynchronize());
  const tune::launcher::Choice& ch = gemm->last();
  std::printf("%s %s M=%lld N=%lld K=%lld: level %s, config %s, cubin %s, grid (%lld,%lld,%lld) block %lld smem %lld\n",
              args.op.c_str(), args.dtype.c_str(), (long long)M, (long long)N, (long long)K,
              tune::runtime::LevelName(ch.level), ch.config->ToString().c_str(), ch.arch.c_str(),
              (long long)ch.grid[0], (long long)ch.grid[1], (long long)ch.grid[2], (long long)ch.block[0],
              (long long)ch.smem_bytes);

  CU(cuMemcpyDtoH(c.data(), dc, c.size() * 2));
  double worst = 0;
  for (int s = 0; s < 256; ++s) {
    const int64_t i = int64_t(rng() % uint64_t(M)), j = int64_t(rng() % uint64_t(N));
    double want = 0;
    for (int64_t x = 0; x < K; ++x) want += double(FromHalf(a[size_t(i * K + x)])) * FromHalf(b[size_t(j * K + x)]);
    const double got = FromHalf(c[size_t(i * N + j)]);
    worst = std::max(worst, std::isfinite(got) ? std::fabs(got - want) / (1 + std::fabs(want)) : 1e9);
  }
  std::printf("check: 256 sampled outputs, worst relative error %.2e (%s)\n", worst, worst < 2e-2 ? "pass" : "FAIL");

  CUevent start, stop;
  CU(cuEventCreate(&start, CU_EVENT_DEFAULT));
  CU(cuEventCreate(&stop, CU_EVENT_DEFAULT));
  std::vector<double> us;
  for (int r = 0; r < args.runs; ++r) {
    CU(cuMemsetD8(flush, uint8_t(r), flush_bytes));  // evict what the last run left in L2
    CU(cuEventRecord(start, nullptr));
    launch();
    CU(cuEventRecord(stop, nullptr));
    CU(cuEventSynchronize(stop));
    float ms = 0;
    CU(cuEventElapsedTime(&ms, start, stop));
    us.push_back(ms * 1e3);
  }
  std::sort(us.begin(), us.end());
  const double median = us[us.size() / 2];
  std::printf("time: median %.2f us over %d runs (%.1f TFLOP/s)", median, args.runs, 2.0 * M * N * K / median / 1e6);
  if (ch.entry && ch.level == tune::runtime::Level::kExact)
    std::printf("; the bundle's median %.2f us (%+.1f%%)", ch.entry->median_us, 100 * (median / ch.entry->median_us - 1));
  std::printf("\n");
  return worst < 2e-2 ? 0 : 1;
}
