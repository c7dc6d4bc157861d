// deploy_gemm: how a deployment uses a tunefarm bundle, end to end.
//
//   deploy_gemm --bundle gemm.tfb --key farm.pub --op gemm_sm90 --ops-dir ops
//               --M 4096 --N 4096 --K 4096 [--dtype f16|bf16] [--device 0] [--arch-specific]
//   deploy_gemm --print-gpu-model [--device 0]
//
// 1. load the bundle and verify its signature (tune::runtime::Bundle::Load);
// 2. name the GPU the way the farm keys its results (NormaliseGpuModel);
// 3. prepare a lookup for (op, dtype, model) and ask for the shape: the
//    answer is the tuned config, the nearest tuned shape's, a sibling model's
//    or the op default, and says which;
// 4. compile the op's CUDA source with NVRTC, the config's params as -D
//    macros, exactly as the farm's workers compiled what they measured;
// 5. launch it on random inputs, check sampled outputs against a host dot
//    product, and time it.
//
// Only tune/runtime.h comes from tunefarm. The op folder (op.toml + .cu) is
// read as the farm reads it, so the same folder that was tuned is deployed.
// Long on purpose: a self-contained example a deployment copies from, with
// no dependency on the farm's sources.
#include <cuda.h>
#include <dlfcn.h>
#include <nvrtc.h>
#include <tune/runtime.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace fs = std::filesystem;

namespace {

[[noreturn]] void Die(const std::string& message) {
  std::fflush(stdout);  // keep the error after what was printed before it
  std::fprintf(stderr, "deploy_gemm: %s\n", message.c_str());
  std::exit(1);
}

void CheckCu(CUresult r, const char* call, const char* file, int line) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  cuGetErrorName(r, &name);
  cuGetErrorString(r, &text);
  // The driver names its errors; a libcuda without a driver behind it (the
  // toolkit's link-time library) or a damaged one may not.
  Die(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " +
      (name ? std::string(name) + " (" + (text ? text : "") + ")" : "CUresult " + std::to_string(r)));
}
#define CU_CHECK(call) CheckCu((call), #call, __FILE__, __LINE__)

void CheckNvrtc(nvrtcResult r, const char* call, const char* file, int line) {
  if (r == NVRTC_SUCCESS) return;
  Die(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " + nvrtcGetErrorString(r));
}
#define NVRTC_CHECK(call) CheckNvrtc((call), #call, __FILE__, __LINE__)

// ---------------------------------------------------------------------------
// Command line.

struct Args {
  std::string bundle, key, op = "gemm_sm90", ops_dir, dtype = "f16";
  int64_t M = 0, N = 0, K = 0;
  int device = 0;
  bool arch_specific = false;  // forces sm_XYa; otherwise op.toml decides
  bool print_gpu_model = false;
};

void Usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s --bundle FILE.tfb --key PUBKEY --op OP --ops-dir DIR --M M --N N --K K\n"
               "          [--dtype f16|bf16] [--device N] [--arch-specific]\n"
               "       %s --print-gpu-model [--device N]\n"
               "PUBKEY is a public key file or its 64 hex digits. OP is gemm_sm90 (Hopper) or gemm.\n",
               argv0, argv0);
}

int64_t ParseInt(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0') Die(flag + ": not an integer: \"" + text + "\"");
  return v;
}

Args ParseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    std::string value;
    bool has_value = false;
    if (const size_t eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag.resize(eq);
      has_value = true;
    }
    auto next = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= argc) Die(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--bundle") a.bundle = next();
    else if (flag == "--key") a.key = next();
    else if (flag == "--op") a.op = next();
    else if (flag == "--ops-dir") a.ops_dir = next();
    else if (flag == "--dtype") a.dtype = next();
    else if (flag == "--M") a.M = ParseInt(flag, next());
    else if (flag == "--N") a.N = ParseInt(flag, next());
    else if (flag == "--K") a.K = ParseInt(flag, next());
    else if (flag == "--device") a.device = static_cast<int>(ParseInt(flag, next()));
    else if (flag == "--arch-specific") a.arch_specific = true;
    else if (flag == "--print-gpu-model") a.print_gpu_model = true;
    else if (flag == "-h" || flag == "--help") {
      Usage(argv[0]);
      std::exit(0);
    } else {
      Usage(argv[0]);
      Die("unknown argument \"" + flag + "\"");
    }
  }
  if (a.print_gpu_model) return a;
  if (a.bundle.empty() || a.key.empty() || a.ops_dir.empty() || a.M <= 0 || a.N <= 0 || a.K <= 0) {
    Usage(argv[0]);
    Die("--bundle, --key, --ops-dir and positive --M, --N, --K are required");
  }
  if (a.dtype != "f16" && a.dtype != "bf16") Die("--dtype: f16 or bf16, not \"" + a.dtype + "\"");
  // Both ops load 16-byte chunks of rows; other shapes are outside their contract.
  if (a.M % 8 || a.N % 8 || a.K % 8) Die("M, N and K must be multiples of 8 (the ops' contract)");
  return a;
}

// ---------------------------------------------------------------------------
// The GPU, named as the farm names it.

// Must stay identical to tune::NormaliseGpuModel (libtune/src/base/types.cc): the
// bundle's keys are made by it, and a model string that differs by one
// character silently misses every tuned entry. It is not part of the
// installed runtime header, hence the copy.
std::string NormaliseGpuModel(const std::string& device_name) {
  std::string out;
  bool pending_dash = false;
  for (unsigned char ch : device_name) {
    if (std::isalnum(ch)) {
      if (pending_dash && !out.empty()) out += '-';
      pending_dash = false;
      out += static_cast<char>(std::tolower(ch));
    } else {
      pending_dash = true;
    }
  }
  static const std::string kVendor = "nvidia-";
  if (out.size() > kVendor.size() && out.compare(0, kVendor.size(), kVendor) == 0) out.erase(0, kVendor.size());
  return out;
}

struct Gpu {
  CUdevice dev = 0;
  std::string name, model;
  int cc_major = 0, cc_minor = 0, num_sms = 0, smem_optin = 0;
};

Gpu OpenGpu(int ordinal) {
  Gpu g;
  CU_CHECK(cuInit(0));
  int count = 0;
  CU_CHECK(cuDeviceGetCount(&count));
  if (ordinal < 0 || ordinal >= count)
    Die("--device " + std::to_string(ordinal) + ": this host has " + std::to_string(count) + " GPU(s)");
  CU_CHECK(cuDeviceGet(&g.dev, ordinal));
  char name[256] = {};
  CU_CHECK(cuDeviceGetName(name, sizeof(name), g.dev));
  g.name = name;
  g.model = NormaliseGpuModel(g.name);
  CU_CHECK(cuDeviceGetAttribute(&g.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, g.dev));
  CU_CHECK(cuDeviceGetAttribute(&g.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, g.dev));
  CU_CHECK(cuDeviceGetAttribute(&g.num_sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, g.dev));
  CU_CHECK(cuDeviceGetAttribute(&g.smem_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, g.dev));
  return g;
}

// ---------------------------------------------------------------------------
// The op folder. Only the few [op] keys a deployment needs are read, with a
// line parser rather than a TOML library: a deployment should not need the
// farm's dependencies to run what the farm tuned.

struct OpFiles {
  fs::path dir;
  std::string source, kernel;
  bool arch_specific = false;
  std::vector<std::pair<std::string, int64_t>> default_config;  // the spec's own, for a bundle without one
};

std::string Trim(std::string s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

std::string StripComment(const std::string& line) {
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '"') quoted = !quoted;
    if (line[i] == '#' && !quoted) return line.substr(0, i);
  }
  return line;
}

std::string Unquote(const std::string& v) {
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') return v.substr(1, v.size() - 2);
  return v;
}

OpFiles ReadOp(const std::string& ops_dir, const std::string& op) {
  OpFiles f;
  f.dir = fs::path(ops_dir) / op;
  const fs::path spec = f.dir / "op.toml";
  std::ifstream in(spec);
  if (!in) Die(spec.string() + ": cannot open (is --ops-dir the folder that holds the op folders?)");
  std::string section;
  for (std::string line; std::getline(in, line);) {
    line = Trim(StripComment(line));
    if (line.empty()) continue;
    if (line.front() == '[') {
      section = line;
      continue;
    }
    if (section != "[op]") continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = Trim(line.substr(0, eq));
    const std::string value = Trim(line.substr(eq + 1));
    if (key == "source") f.source = Unquote(value);
    else if (key == "kernel") f.kernel = Unquote(value);
    else if (key == "arch_specific") f.arch_specific = value == "true";
    else if (key == "default") {
      // An inline table on one line: { BN = 256, WG = 2, ... }.
      std::string body = value;
      body.erase(std::remove(body.begin(), body.end(), '{'), body.end());
      body.erase(std::remove(body.begin(), body.end(), '}'), body.end());
      std::istringstream items(body);
      for (std::string item; std::getline(items, item, ',');) {
        const size_t ieq = item.find('=');
        if (ieq == std::string::npos) continue;
        f.default_config.emplace_back(Trim(item.substr(0, ieq)), ParseInt("op.toml default", Trim(item.substr(ieq + 1))));
      }
    }
  }
  if (f.source.empty() || f.kernel.empty()) Die(spec.string() + ": [op] needs source and kernel");
  return f;
}

// ---------------------------------------------------------------------------
// Launch geometry. These mirror the [launch] expressions of ops/gemm_sm90 and
// ops/gemm (dsize = 2 for f16/bf16); if an op.toml changes, change them too.
// A deployment of many ops would evaluate the expressions instead.

struct Geometry {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  int64_t smem = 0;
};

int64_t Cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

Geometry LaunchGeometry(const std::string& op, const tune::runtime::NamedInts& c, int64_t M, int64_t N) {
  auto param = [&](const char* name) {
    if (c.index(name) < 0) Die("config " + c.ToString() + " lacks " + name + ", which " + op + " needs");
    const int64_t v = c.get(name);
    if (v <= 0) Die("config " + c.ToString() + ": " + name + " must be positive");
    return v;
  };
  constexpr int64_t dsize = 2;
  Geometry g;
  if (op == "gemm_sm90") {
    // grid  = [cdiv(N, BN), cdiv(M, 64*WG*MT), 1];  block = [WG*128, 1, 1]
    // smem  = max(STAGES*(64*WG*MT + BN)*64*dsize, 64*WG*MT*(BN+8)*dsize) + 1024
    const int64_t BN = param("BN"), WG = param("WG"), MT = param("MT"), STAGES = param("STAGES");
    g.grid[0] = static_cast<unsigned>(Cdiv(N, BN));
    g.grid[1] = static_cast<unsigned>(Cdiv(M, 64 * WG * MT));
    g.block[0] = static_cast<unsigned>(WG * 128);
    g.smem = std::max(STAGES * (64 * WG * MT + BN) * 64 * dsize, 64 * WG * MT * (BN + 8) * dsize) + 1024;
  } else if (op == "gemm") {
    // grid  = [cdiv(N, BN), cdiv(M, BM), 1];  block = [WM*WN*32, 1, 1]
    // smem  = max(STAGES*(BM+BN)*BK*dsize, BM*(BN+8)*dsize)
    const int64_t BM = param("BM"), BN = param("BN"), BK = param("BK"), WM = param("WM"), WN = param("WN"),
                  STAGES = param("STAGES");
    g.grid[0] = static_cast<unsigned>(Cdiv(N, BN));
    g.grid[1] = static_cast<unsigned>(Cdiv(M, BM));
    g.block[0] = static_cast<unsigned>(WM * WN * 32);
    g.smem = std::max(STAGES * (BM + BN) * BK * dsize, BM * (BN + 8) * dsize);
  } else {
    Die("no launch geometry for op \"" + op + "\" (this example knows gemm_sm90 and gemm)");
  }
  if (g.grid[1] > 65535) Die("M = " + std::to_string(M) + " needs more than 65535 block rows");
  return g;
}

// ---------------------------------------------------------------------------
// NVRTC.

// Where cuda_fp16.h lives. Deployment hosts often have the toolkit's
// libnvrtc without /usr/local/cuda, so look beside libnvrtc too, as the
// farm's workers do.
std::string CudaIncludeDir() {
  std::vector<fs::path> candidates;
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(env); v && *v) candidates.emplace_back(fs::path(v) / "include");
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) && info.dli_fname) {
    const fs::path lib = fs::path(info.dli_fname).parent_path();
    candidates.push_back(lib.parent_path() / "include");
    candidates.push_back(lib.parent_path().parent_path() / "include");
  }
  candidates.emplace_back("/usr/local/cuda/include");
  for (const auto& c : candidates) {
    std::error_code ec;
    if (fs::exists(c / "cuda_fp16.h", ec)) return c.string();
  }
  return "";
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Die(path.string() + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Compile(const OpFiles& op, const std::string& dtype, const tune::runtime::NamedInts& config,
                    const std::string& arch) {
  const fs::path src_path = op.dir / op.source;
  const std::string source = ReadFile(src_path);
  // The options the farm's workers compile with (libtune/src/measure/cuda/nvrtc_compile.cc),
  // so the deployed machine code is the measured one.
  std::vector<std::string> options = {"-arch=" + arch, "-std=c++17"};
  options.push_back(dtype == "f16" ? "-DTUNE_DTYPE_F16" : "-DTUNE_DTYPE_BF16");
  options.push_back(dtype == "f16" ? "-DTUNE_T=__half" : "-DTUNE_T=__nv_bfloat16");
  if (const std::string inc = CudaIncludeDir(); !inc.empty()) options.push_back("-I" + inc);
  else std::fprintf(stderr, "deploy_gemm: no cuda_fp16.h found (set CUDA_HOME); trying NVRTC's built-in headers\n");
  options.push_back("-I" + op.dir.string());  // the op's own headers (wgmma.cuh)
  for (size_t i = 0; i < config.size(); ++i)
    options.push_back("-D" + config.name(i) + "=" + std::to_string(config.value(i)));

  nvrtcProgram prog = nullptr;
  NVRTC_CHECK(nvrtcCreateProgram(&prog, source.c_str(), op.source.c_str(), 0, nullptr, nullptr));
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  const nvrtcResult compiled = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (compiled != NVRTC_SUCCESS) {
    size_t log_size = 0;
    nvrtcGetProgramLogSize(prog, &log_size);
    std::string log(log_size, '\0');
    if (log_size) nvrtcGetProgramLog(prog, log.data());
    std::string cmd;
    for (const auto& o : options) cmd += " " + o;
    Die(src_path.string() + ": " + nvrtcGetErrorString(compiled) + "\noptions:" + cmd + "\n" + log);
  }
  size_t size = 0;
  NVRTC_CHECK(nvrtcGetCUBINSize(prog, &size));
  std::string cubin(size, '\0');
  NVRTC_CHECK(nvrtcGetCUBIN(prog, cubin.data()));
  NVRTC_CHECK(nvrtcDestroyProgram(&prog));
  if (size == 0) Die(src_path.string() + ": NVRTC produced no cubin for " + arch);
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  std::printf("compile: %s for %s with NVRTC %d.%d in %.2f s (%zu-byte cubin)\n", src_path.string().c_str(),
              arch.c_str(), major, minor, seconds, size);
  return cubin;
}

// ---------------------------------------------------------------------------
// Host side of 16-bit floats, so that the example needs no CUDA runtime.

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xffu) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  const int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {  // subnormal half: units of 2^-24
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;  // a carry into the exponent is still right
  return static_cast<uint16_t>(sign | h);
}

float HalfToFloat(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ffu;
  float f;
  if (exp == 0) f = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31) f = mant ? NAN : INFINITY;
  else f = std::ldexp(static_cast<float>(mant | 0x400u), exp - 25);
  return (h & 0x8000u) ? -f : f;
}

uint16_t FloatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f)) return 0x7fc0;
  x += 0x7fffu + ((x >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(x >> 16);
}

float Bf16ToFloat(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// ---------------------------------------------------------------------------

int Main(const Args& args) {
  const Gpu gpu = OpenGpu(args.device);
  if (args.print_gpu_model) {
    std::printf("%s\n", gpu.model.c_str());
    return 0;
  }
  std::printf("gpu %d: %s (sm_%d%d, %d SMs) -> model \"%s\"\n", args.device, gpu.name.c_str(), gpu.cc_major,
              gpu.cc_minor, gpu.num_sms, gpu.model.c_str());

  // 1. The bundle, refused unless a trusted key signed it.
  auto bundle = tune::runtime::Bundle::Load(args.bundle, {args.key});
  if (!bundle.ok()) Die(bundle.status().message());
  std::printf("bundle: %s (\"%s\", farm %s), %zu tuned entries, signed by key %s%s\n", args.bundle.c_str(),
              bundle->name().c_str(), bundle->farm_version().c_str(), bundle->entries().size(),
              bundle->signer_key_id().c_str(),
              bundle->forcing_defaults() ? ", TUNEFARM_FORCE_DEFAULTS set: op defaults only" : "");

  // 2-3. Resolve (op, dtype, model) once, as a server would at start-up, then
  // look up per call. The dim order is given, so the lookup does not depend
  // on the bundle having tuned entries for the op.
  const std::array<std::string_view, 3> dim_order = {"M", "N", "K"};
  tune::runtime::PreparedLookup lookup = bundle->prepare(args.op, args.dtype, gpu.model, dim_order);
  const tune::runtime::Answer answer = lookup.lookup({args.M, args.N, args.K});
  const std::string shape = "M=" + std::to_string(args.M) + ",N=" + std::to_string(args.N) +
                            ",K=" + std::to_string(args.K);
  std::printf("lookup %s/%s on %s at %s: %s\n", args.op.c_str(), args.dtype.c_str(), gpu.model.c_str(),
              shape.c_str(), tune::runtime::LevelName(answer.level));

  const OpFiles op = ReadOp(args.ops_dir, args.op);
  tune::runtime::NamedInts config;
  switch (answer.level) {
    case tune::runtime::Level::kExact:
    case tune::runtime::Level::kNearestShape:
    case tune::runtime::Level::kFamily: {
      const tune::runtime::Entry& e = *answer.entry;
      std::printf("  tuned on %s at %s: %.2f us (%s backend)", e.gpu_model.c_str(), e.shape.ToString().c_str(),
                  e.median_us, e.backend.c_str());
      if (e.default_median_us > 0) std::printf(", op default there %.2f us", e.default_median_us);
      std::printf("\n");
      if (answer.level == tune::runtime::Level::kNearestShape)
        std::printf("  this shape was not tuned: the nearest tuned shape's config\n");
      if (answer.level == tune::runtime::Level::kFamily)
        std::printf("  this GPU model has no tuned entry: a model of its family (%s) answered\n",
                    tune::runtime::GpuFamily(gpu.model).c_str());
      config = *answer.config;
      break;
    }
    case tune::runtime::Level::kDefault:
      std::printf("  no tuned entry for this GPU model or its family: the op default from the bundle\n");
      config = *answer.config;
      break;
    case tune::runtime::Level::kMiss: {
      // A bundle that does not know the op at all must not take the service
      // down: the spec's own default is a config the farm checks on every sweep.
      if (op.default_config.empty()) Die("the bundle has no config for " + args.op + " and op.toml no default");
      std::vector<std::string> names;
      std::vector<int64_t> values;
      for (const auto& [n, v] : op.default_config) {
        names.push_back(n);
        values.push_back(v);
      }
      config = tune::runtime::NamedInts(std::move(names), std::move(values));
      std::printf("  the bundle has no config for %s: the default of its op.toml\n", args.op.c_str());
      break;
    }
  }
  std::printf("  config %s\n", config.ToString().c_str());

  // 4. Compile for this device. sm_XYa code runs on exactly sm_XY.
  if (args.op == "gemm_sm90" && !(gpu.cc_major == 9 && gpu.cc_minor == 0))
    Die("gemm_sm90 needs an sm_90 GPU (Hopper); this one is sm_" + std::to_string(gpu.cc_major) +
        std::to_string(gpu.cc_minor) + ": use --op gemm");
  std::string arch = "sm_" + std::to_string(gpu.cc_major) + std::to_string(gpu.cc_minor);
  if ((op.arch_specific || args.arch_specific) && gpu.cc_major >= 9) arch += "a";
  const Geometry geo = LaunchGeometry(args.op, config, args.M, args.N);
  if (geo.smem > gpu.smem_optin)
    Die("config needs " + std::to_string(geo.smem) + " bytes of shared memory; this GPU allows " +
        std::to_string(gpu.smem_optin));
  const std::string cubin = Compile(op, args.dtype, config, arch);

  CUcontext ctx = nullptr;
  CU_CHECK(cuDevicePrimaryCtxRetain(&ctx, gpu.dev));
  CU_CHECK(cuCtxSetCurrent(ctx));
  CUmodule module = nullptr;
  CU_CHECK(cuModuleLoadData(&module, cubin.data()));
  CUfunction fn = nullptr;
  CU_CHECK(cuModuleGetFunction(&fn, module, op.kernel.c_str()));
  // Above 48 KiB a kernel must opt in to its dynamic shared memory.
  CU_CHECK(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(geo.smem)));
  int regs = 0;
  CU_CHECK(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn));
  std::printf("launch: grid %ux%ux%u, block %u, %lld bytes of dynamic shared memory, %d registers/thread\n",
              geo.grid[0], geo.grid[1], geo.grid[2], geo.block[0], static_cast<long long>(geo.smem), regs);

  // 5. Inputs from a fixed seed, uniform(-1,1) as the op's [args] say.
  const bool f16 = args.dtype == "f16";
  auto to16 = [f16](float f) { return f16 ? FloatToHalf(f) : FloatToBf16(f); };
  auto from16 = [f16](uint16_t h) { return f16 ? HalfToFloat(h) : Bf16ToFloat(h); };
  const size_t M = static_cast<size_t>(args.M), N = static_cast<size_t>(args.N), K = static_cast<size_t>(args.K);
  std::vector<uint16_t> a(M * K), b(N * K), c(M * N);
  std::mt19937_64 rng(20261121);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (auto& v : a) v = to16(uniform(rng));
  for (auto& v : b) v = to16(uniform(rng));

  CUdeviceptr dA = 0, dB = 0, dC = 0;
  CU_CHECK(cuMemAlloc(&dA, a.size() * 2));
  CU_CHECK(cuMemAlloc(&dB, b.size() * 2));
  CU_CHECK(cuMemAlloc(&dC, c.size() * 2));
  CU_CHECK(cuMemcpyHtoD(dA, a.data(), a.size() * 2));
  CU_CHECK(cuMemcpyHtoD(dB, b.data(), b.size() * 2));
  // All-ones bytes are NaN in f16 and bf16: an element the kernel never
  // writes cannot pass for a result.
  CU_CHECK(cuMemsetD8(dC, 0xff, c.size() * 2));

  int m = static_cast<int>(args.M), n = static_cast<int>(args.N), k = static_cast<int>(args.K);
  void* params[] = {&dA, &dB, &dC, &m, &n, &k};  // op.toml [[args]] order: A, B, C, M, N, K
  auto launch = [&] {
    CU_CHECK(cuLaunchKernel(fn, geo.grid[0], geo.grid[1], geo.grid[2], geo.block[0], geo.block[1], geo.block[2],
                            static_cast<unsigned>(geo.smem), nullptr, params, nullptr));
  };
  launch();
  CU_CHECK(cuCtxSynchronize());
  CU_CHECK(cuMemcpyDtoH(c.data(), dC, c.size() * 2));

  // Check: every element written and finite; sampled elements, corners
  // included, against a host dot product of the same 16-bit inputs. The
  // error is relative to max(|ref|, 1), so that a dot product that happens to
  // land near zero is judged on its absolute error.
  size_t not_finite = 0;
  for (uint16_t v : c) not_finite += !std::isfinite(from16(v));
  std::vector<std::pair<size_t, size_t>> samples = {{0, 0}, {0, N - 1}, {M - 1, 0}, {M - 1, N - 1}};
  std::uniform_int_distribution<size_t> row(0, M - 1), col(0, N - 1);
  while (samples.size() < 256) samples.emplace_back(row(rng), col(rng));
  constexpr double kTolerance = 2e-2;
  double worst = 0;
  size_t bad = 0;
  for (const auto& [i, j] : samples) {
    double ref = 0;
    for (size_t kk = 0; kk < K; ++kk)
      ref += static_cast<double>(from16(a[i * K + kk])) * static_cast<double>(from16(b[j * K + kk]));
    const double got = from16(c[i * N + j]);
    const double err = std::fabs(got - ref) / std::max(std::fabs(ref), 1.0);
    worst = std::isnan(err) ? INFINITY : std::max(worst, err);
    if (!(err < kTolerance) && ++bad <= 5)
      std::printf("  mismatch at C[%zu,%zu]: %.5f, host %.5f\n", i, j, got, ref);
  }
  const bool pass = bad == 0 && not_finite == 0;
  std::printf("check: %zu sampled elements, max relative error %.2e (limit %.0e), %zu non-finite of %zu: %s\n",
              samples.size(), worst, kTolerance, not_finite, c.size(), pass ? "PASS" : "FAIL");

  // Time: a few launches to warm clocks and caches, then 20 timed one by one.
  for (int i = 0; i < 3; ++i) launch();
  constexpr int kRuns = 20;
  std::vector<CUevent> ev(2 * kRuns);
  for (auto& e : ev) CU_CHECK(cuEventCreate(&e, CU_EVENT_DEFAULT));
  for (int i = 0; i < kRuns; ++i) {
    CU_CHECK(cuEventRecord(ev[2 * i], nullptr));
    launch();
    CU_CHECK(cuEventRecord(ev[2 * i + 1], nullptr));
  }
  CU_CHECK(cuCtxSynchronize());
  std::vector<double> us(kRuns);
  for (int i = 0; i < kRuns; ++i) {
    float ms = 0;
    CU_CHECK(cuEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
    us[i] = ms * 1e3;
  }
  for (auto& e : ev) CU_CHECK(cuEventDestroy(e));
  double mean = 0;
  for (double u : us) mean += u / kRuns;
  std::sort(us.begin(), us.end());
  const double median = (us[kRuns / 2 - 1] + us[kRuns / 2]) / 2;
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  std::printf("time: %d launches, median %.2f us (mean %.2f, min %.2f, max %.2f) = %.1f TFLOP/s\n", kRuns, median,
              mean, us.front(), us.back(), flops / (median * 1e-6) / 1e12);
  if (answer.entry && answer.entry->median_us > 0)
    std::printf("  the farm measured %.2f us for this config at %s\n", answer.entry->median_us,
                answer.entry->shape.ToString().c_str());

  CU_CHECK(cuMemFree(dA));
  CU_CHECK(cuMemFree(dB));
  CU_CHECK(cuMemFree(dC));
  CU_CHECK(cuModuleUnload(module));
  CU_CHECK(cuDevicePrimaryCtxRelease(gpu.dev));
  return pass ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return Main(ParseArgs(argc, argv)); }
