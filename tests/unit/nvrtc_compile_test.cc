// NVRTC compiles and the cubin cache, plus the runner-process plumbing that
// works without a GPU. Needs the CUDA toolkit (NVRTC), not a device.
#include <gtest/gtest.h>

#ifndef TUNEFARM_WITH_CUDA

TEST(NvrtcCompile, NeedsTheCudaToolkit) { GTEST_SKIP() << "built without the CUDA toolkit"; }

#else

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "measure/confine.h"     // internal: whether this kernel confines compiles
#include "measure/runner/host_data.h"  // internal: the checker's host-side data
#include "support/temp_dir.h"
#include "opspec/config_space.h"
#include "measure/cuda/cuda_backend.h"
#include "opspec/op_definition.h"

namespace tune {
namespace {

namespace fs = std::filesystem;

constexpr char kRunnerFlag[] = "--tunefarm-test-runner";

std::string SourceDir() { return TUNEFARM_SOURCE_DIR; }

// tests/data/ops/tiny when it is there; the GPU tests' control op otherwise.
OpSpec LoadTestOp() {
  for (const char* dir : {"/tests/data/ops/tiny", "/tests/gpu/data/ops/good"}) {
    auto spec = LoadOpSpec(SourceDir() + dir);
    if (spec.ok()) return *spec;
  }
  ADD_FAILURE() << "no loadable test op";
  return OpSpec{};
}

using tune::testing::TempDir;

std::vector<fs::path> CacheFiles(const std::string& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".cubin") out.push_back(e.path());
  return out;
}

bool IsElf(const std::string& image) { return image.size() > 4 && image.compare(0, 4, "\x7f" "ELF") == 0; }

// A config other than the default, so that cache keys differ.
Config OtherConfig(const OpSpec& spec) {
  Config c = spec.default_config;
  for (auto& [name, value] : c.params) {
    const Axis* axis = spec.FindAxis(name);
    if (!axis) continue;
    for (const ParamValue& v : axis->values) {
      if (v != value) {
        value = v;
        return c;
      }
    }
  }
  return c;
}

TEST(NvrtcCompile, VersionLooksLikeMajorDotMinor) {
  EXPECT_TRUE(std::regex_match(NvrtcVersionString(), std::regex(R"(\d+\.\d+)"))) << NvrtcVersionString();
}

TEST(NvrtcCompile, CompilesForSm80AndSm90AndHitsTheCacheSecondTime) {
  OpSpec spec = LoadTestOp();
  TempDir cache;
  for (const std::string arch : {"sm_80", "sm_90"}) {
    for (const std::string& dtype : spec.dtypes) {
      SCOPED_TRACE(arch + " " + dtype);
      CompiledKernel first = CompileConfig(spec, dtype, spec.default_config, arch, cache.path());
      ASSERT_EQ(first.failure, FailureClass::kNone) << first.failure_message << "\n" << first.log;
      EXPECT_FALSE(first.from_cache);
      EXPECT_TRUE(IsElf(first.image));
      EXPECT_EQ(first.arch, arch);
      EXPECT_EQ(first.config_id, spec.default_config.Id());
      EXPECT_EQ(first.kernel_hash, KernelHash(spec, NvrtcVersionString()));
      EXPECT_GT(first.resources.registers, 0);
      EXPECT_GT(first.compile_seconds, 0);

      CompiledKernel second = CompileConfig(spec, dtype, spec.default_config, arch, cache.path());
      ASSERT_EQ(second.failure, FailureClass::kNone);
      EXPECT_TRUE(second.from_cache);
      EXPECT_EQ(second.image, first.image);
      EXPECT_EQ(second.resources.registers, first.resources.registers);
      EXPECT_EQ(second.resources.static_smem_bytes, first.resources.static_smem_bytes);
      EXPECT_EQ(second.resources.local_bytes, first.resources.local_bytes);
    }
  }
  EXPECT_EQ(CacheFiles(cache.path()).size(), 2 * spec.dtypes.size());

  // A different config is a different entry.
  CompiledKernel other = CompileConfig(spec, spec.dtypes[0], OtherConfig(spec), "sm_90", cache.path());
  ASSERT_EQ(other.failure, FailureClass::kNone) << other.failure_message;
  EXPECT_FALSE(other.from_cache);
}

TEST(NvrtcCompile, WithoutCacheDirNothingIsCached) {
  OpSpec spec = LoadTestOp();
  CompiledKernel a = CompileConfig(spec, spec.dtypes[0], spec.default_config, "sm_80", "");
  CompiledKernel b = CompileConfig(spec, spec.dtypes[0], spec.default_config, "sm_80", "");
  ASSERT_EQ(a.failure, FailureClass::kNone) << a.failure_message;
  EXPECT_FALSE(a.from_cache);
  EXPECT_FALSE(b.from_cache);
}

TEST(NvrtcCompile, TornCacheEntryIsRecompiled) {
  OpSpec spec = LoadTestOp();
  TempDir cache;
  CompiledKernel a = CompileConfig(spec, spec.dtypes[0], spec.default_config, "sm_90", cache.path());
  ASSERT_EQ(a.failure, FailureClass::kNone);
  auto files = CacheFiles(cache.path());
  ASSERT_EQ(files.size(), 1u);
  fs::resize_file(files[0], fs::file_size(files[0]) / 2);
  CompiledKernel b = CompileConfig(spec, spec.dtypes[0], spec.default_config, "sm_90", cache.path());
  ASSERT_EQ(b.failure, FailureClass::kNone);
  EXPECT_FALSE(b.from_cache);
  EXPECT_EQ(b.image, a.image);
  EXPECT_TRUE(CompileConfig(spec, spec.dtypes[0], spec.default_config, "sm_90", cache.path()).from_cache);
}

TEST(NvrtcCompile, CompileErrorCarriesTheLogAndIsNotCached) {
  OpSpec spec = LoadTestOp();
  spec.package[spec.source_file] += "\nthis_is_not_cuda x y z;\n";
  TempDir cache;
  for (int round = 0; round < 2; ++round) {
    CompiledKernel k = CompileConfig(spec, spec.dtypes[0], spec.default_config, "sm_90", cache.path());
    EXPECT_EQ(k.failure, FailureClass::kCompileError);
    EXPECT_FALSE(k.from_cache);
    EXPECT_TRUE(k.image.empty());
    EXPECT_NE(k.log.find("error"), std::string::npos) << k.log;
    EXPECT_NE(k.log.find("this_is_not_cuda"), std::string::npos) << k.log;
    EXPECT_NE(k.failure_message.find(spec.source_file), std::string::npos) << k.failure_message;
  }
  EXPECT_TRUE(CacheFiles(cache.path()).empty());
}

// The compile itself reads nothing of the host outside the package, the
// toolkit and the include roots, whatever spelling reaches NVRTC (the
// package checks are bypassed here: the package is changed after parsing).
TEST(NvrtcCompile, CompilesCannotReadHostFilesWhateverTheSpelling) {
  if (confine::LandlockAbi() < 1) GTEST_SKIP() << "no Landlock in this kernel: compiles run unconfined";
  TempDir host;
  host.Write("secret.h", "__device__ int tunefarm_host_secret_line = 7;\n");
  const std::string secret = host.path() + "/secret.h";
  for (const std::string& spelling :
       {"#include \"" + secret + "\"\n", "%:include \"" + secret + "\"\n", "%:  include <" + secret + ">\n",
        "%:define H <" + secret + ">\n%:include H\n", "#define Q(x) #x\n#define S(x) Q(x)\n#include S(" + secret + ")\n"}) {
    OpSpec spec = LoadTestOp();
    spec.package[spec.source_file] = spelling + spec.package[spec.source_file];
    CompiledKernel k = CompileConfig(spec, spec.dtypes[0], spec.default_config, "sm_90", "");
    EXPECT_EQ(k.failure, FailureClass::kCompileError) << spelling;
    EXPECT_TRUE(k.image.empty()) << spelling;
    EXPECT_NE(k.log.find("cannot open source file"), std::string::npos) << spelling << k.log;
  }
  // The same file copied into the package compiles: the failures above are
  // the confinement's, not the spelling's.
  OpSpec spec = LoadTestOp();
  spec.package["secret.h"] = "__device__ int tunefarm_host_secret_line = 7;\n";
  spec.package[spec.source_file] = "%:include \"secret.h\"\n" + spec.package[spec.source_file];
  CompiledKernel ok = CompileConfig(spec, spec.dtypes[0], spec.default_config, "sm_90", "");
  EXPECT_EQ(ok.failure, FailureClass::kNone) << ok.failure_message << ok.log;
}

// The op's kernel (and its reference) must be in what NVRTC produced: a
// misspelt name is a compile error that names it, not a launch error later.
TEST(NvrtcCompile, AKernelNameNotInTheCubinIsACompileErrorNamingIt) {
  OpSpec spec = LoadTestOp();
  spec.kernel += "_misspelt";
  CompiledKernel k = CompileConfig(spec, spec.dtypes[0], spec.default_config, "sm_90", "");
  EXPECT_EQ(k.failure, FailureClass::kCompileError);
  EXPECT_NE(k.failure_message.find("without the kernel '" + spec.kernel + "'"), std::string::npos) << k.failure_message;
  spec = LoadTestOp();
  spec.check.reference_kernel += "_misspelt";
  CompiledKernel ref = CompileReference(spec, spec.dtypes[0], "sm_90", "");
  EXPECT_EQ(ref.failure, FailureClass::kCompileError);
  EXPECT_NE(ref.failure_message.find(spec.check.reference_kernel), std::string::npos) << ref.failure_message;
}

// The kernel must take the parameters [[args]] declares: one too few, or a
// scalar of another size, is a compile error listing both; the op as
// shipped passes.
TEST(NvrtcCompile, AKernelWhoseParametersDifferFromItsArgsIsACompileErrorListingBoth) {
  OpSpec spec = LoadTestOp();
  CompiledKernel ok = CompileConfig(spec, spec.dtypes[0], spec.default_config, "sm_90", "");
  ASSERT_EQ(ok.failure, FailureClass::kNone) << ok.failure_message << ok.log;
  auto sizes = CubinKernelParamSizes(ok.image, spec.kernel);
  ASSERT_TRUE(sizes.ok()) << sizes.status().message();
  EXPECT_EQ(sizes->size(), spec.args.size());
  OpSpec fewer = spec;
  fewer.args.pop_back();
  CompiledKernel k = CompileConfig(fewer, fewer.dtypes[0], fewer.default_config, "sm_90", "");
  EXPECT_EQ(k.failure, FailureClass::kCompileError);
  EXPECT_NE(k.failure_message.find("kernel '" + spec.kernel + "' takes " + std::to_string(spec.args.size()) +
                                   " parameters"), std::string::npos) << k.failure_message;
  EXPECT_NE(k.failure_message.find("[[args]] declares " + std::to_string(fewer.args.size())), std::string::npos)
      << k.failure_message;
  OpSpec wider = spec;
  bool widened = false;
  for (ArgSpec& a : wider.args) {
    if (widened || a.kind != ArgSpec::Kind::kScalar || a.scalar_type == "i64") continue;
    a.scalar_type = "i64";
    widened = true;
  }
  ASSERT_TRUE(widened) << "the test op has a 4-byte scalar";
  EXPECT_EQ(CompileConfig(wider, wider.dtypes[0], wider.default_config, "sm_90", "").failure,
            FailureClass::kCompileError);
}

// CUB, Thrust and libcu++ are found wherever the toolkit keeps them
// (include/cccl/ on CUDA 13, include/ before).
TEST(NvrtcCompile, OpsMayUseTheToolkitsCccl) {
  OpSpec spec = LoadTestOp();
  std::string& source = spec.package[spec.source_file];
  source = "#include <cub/block/block_reduce.cuh>\n" + source +
           "\n__device__ float tunefarm_cub_sum(float v) {\n"
           "  using Reduce = cub::BlockReduce<float, 128>;\n"
           "  __shared__ typename Reduce::TempStorage storage;\n"
           "  return Reduce(storage).Sum(v);\n}\n";
  CompiledKernel k = CompileConfig(spec, spec.dtypes[0], spec.default_config, "sm_90", "");
  EXPECT_EQ(k.failure, FailureClass::kNone) << k.failure_message << "\n" << k.log;
}

// An op whose headers come from an include folder of its package (including
// each other by relative paths) and from an include root of this host.
TEST(NvrtcCompile, IncludeFoldersAndRootsReachNvrtcAndRootsReachTheKernelHash) {
  auto spec = LoadOpSpec(SourceDir() + "/tests/data/ops/include_paths");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  TempDir cache;
  SetIncludeRoots({});
  CompiledKernel unset = CompileConfig(*spec, "f32", spec->default_config, "sm_90", cache.path());
  EXPECT_EQ(unset.failure, FailureClass::kCompileError);
  EXPECT_NE(unset.failure_message.find("include root 'shiftlib' is not configured"), std::string::npos)
      << unset.failure_message;
  auto roots = ParseIncludeRoots({"shiftlib=" + SourceDir() + "/tests/data/include_root"});
  ASSERT_TRUE(roots.ok()) << roots.status().message();
  SetIncludeRoots(*roots);
  for (const std::string& dir : {std::string(), cache.path()}) {
    CompiledKernel k = CompileConfig(*spec, "f32", spec->default_config, "sm_90", dir);
    EXPECT_EQ(k.failure, FailureClass::kNone) << k.failure_message << "\n" << k.log;
    EXPECT_FALSE(k.image.empty());
    const auto digest = IncludeRootsDigest(*spec, *roots);
    ASSERT_TRUE(digest.ok());
    EXPECT_EQ(k.include_digest, *digest);
    EXPECT_EQ(k.kernel_hash, KernelHashWithIncludes(KernelHash(*spec, NvrtcVersionString()), *digest));
  }
  CompiledKernel ref = CompileReference(*spec, "f32", "sm_90", cache.path());
  EXPECT_EQ(ref.failure, FailureClass::kNone) << ref.failure_message << "\n" << ref.log;
  SetIncludeRoots({});
}

TEST(NvrtcCompile, PlantedCompileErrorOp) {
  auto spec = LoadOpSpec(SourceDir() + "/tests/gpu/data/ops/compile_error");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  CompiledKernel k = CompileConfig(*spec, "f16", spec->default_config, "sm_80", "");
  EXPECT_EQ(k.failure, FailureClass::kCompileError);
  EXPECT_NE(k.log.find("kernel.cu"), std::string::npos) << k.log;
}

TEST(NvrtcCompile, StaticSharedMemoryBeyondTheLimitIsAResourceFailure) {
  OpSpec spec = LoadTestOp();
  spec.package[spec.source_file] +=
      "\nextern \"C\" __global__ void tunefarm_hog(float* p) {\n"
      "  __shared__ float big[1 << 20];\n"
      "  big[threadIdx.x] = p[threadIdx.x];\n"
      "  __syncthreads();\n"
      "  p[threadIdx.x] = big[(threadIdx.x * 7) & 1023];\n"
      "}\n";
  CompiledKernel k = CompileConfig(spec, spec.dtypes[0], spec.default_config, "sm_90", "");
  EXPECT_EQ(k.failure, FailureClass::kResources) << k.failure_message << "\n" << k.log;
}

TEST(NvrtcCompile, ArchSpecificOpsGetTheASuffixFromSm90On) {
  OpSpec spec = LoadTestOp();
  DeviceInfo h100;
  h100.cc_major = 9;
  DeviceInfo a100;
  a100.cc_major = 8;
  EXPECT_EQ(CudaArchFor(spec, h100), "sm_90");
  spec.arch_specific = true;
  EXPECT_EQ(CudaArchFor(spec, h100), "sm_90a");
  EXPECT_EQ(CudaArchFor(spec, a100), "sm_80");
  CompiledKernel k = CompileConfig(spec, spec.dtypes[0], spec.default_config, "sm_90a", "");
  EXPECT_EQ(k.failure, FailureClass::kNone) << k.failure_message;
  EXPECT_TRUE(IsElf(k.image));
}

TEST(NvrtcCompile, ParamsReachTheKernelAsMacros) {
  OpSpec spec = LoadTestOp();
  // An #error fires unless every param arrives with its value.
  std::string probe;
  for (const auto& [name, value] : spec.default_config.params)
    probe += "#if " + name + " != " + value.ToString() + "\n#error wrong " + name + "\n#endif\n";
  probe += "#if !defined(TUNE_DTYPE_F32) && !defined(TUNE_DTYPE_F16) && !defined(TUNE_DTYPE_BF16)\n#error no dtype\n#endif\n";
  probe += "static_assert(sizeof(TUNE_T) == 2 || sizeof(TUNE_T) == 4, \"TUNE_T\");\n";
  spec.package[spec.source_file] = probe + spec.package[spec.source_file];
  for (const std::string& dtype : spec.dtypes) {
    CompiledKernel k = CompileConfig(spec, dtype, spec.default_config, "sm_80", "");
    EXPECT_EQ(k.failure, FailureClass::kNone) << dtype << ": " << k.failure_message << "\n" << k.log;
  }
}

TEST(NvrtcCompile, ConcurrentCompilesShareOneCache) {
  OpSpec spec = LoadTestOp();
  DeviceInfo dev;
  dev.cc_major = 9;
  dev.smem_per_block_optin = 227 * 1024;
  dev.max_threads_per_block = 1024;
  dev.num_sms = 132;
  dev.l2_bytes = 50 << 20;
  auto configs = EnumerateConfigs(spec, dev);
  ASSERT_TRUE(configs.ok()) << configs.status().message();
  std::vector<Config> some(configs->begin(), configs->begin() + std::min<size_t>(6, configs->size()));
  TempDir cache;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = 0; i < some.size(); ++i) {
        const Config& c = some[(i + t) % some.size()];
        CompiledKernel k = CompileConfig(spec, spec.dtypes[0], c, "sm_90", cache.path());
        if (k.failure != FailureClass::kNone || !IsElf(k.image)) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(CacheFiles(cache.path()).size(), some.size());
  for (const Config& c : some)
    EXPECT_TRUE(CompileConfig(spec, spec.dtypes[0], c, "sm_90", cache.path()).from_cache) << c.Canonical();
  for (auto& e : fs::recursive_directory_iterator(cache.path()))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
}

TEST(CudaDiscovery, FailsCleanlyWithoutADriverOrDevice) {
  auto devices = DiscoverCudaDevices();
  if (devices.ok()) {
    ASSERT_FALSE(devices->empty());
    for (const DeviceInfo& d : *devices) {
      EXPECT_EQ(d.backend, "cuda");
      EXPECT_GT(d.cc_major, 0);
      EXPECT_FALSE(d.model.empty());
    }
    GTEST_SKIP() << "this host has a GPU: " << (*devices)[0].name;
  }
  EXPECT_FALSE(devices.status().message().empty());
}

TEST(CheckerData, InputsAreDeterministicPerElementAndNeverAllZero) {
  using runner::MakeInput;
  auto small = MakeInput("f32", "normal(0,2)", 1000, 42);
  auto big = MakeInput("f32", "normal(0,2)", 3 << 20, 42);  // filled by several threads
  ASSERT_TRUE(small.ok() && big.ok());
  EXPECT_EQ(big->compare(0, small->size(), *small), 0);
  EXPECT_NE(*MakeInput("f32", "normal(0,2)", 1000, 43), *small);

  std::vector<float> v = runner::DecodeToFloat("f32", *big);
  double sum = 0, sq = 0;
  for (float x : v) {
    sum += x;
    sq += double(x) * x;
  }
  double mean = sum / v.size(), sd = std::sqrt(sq / v.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(sd, 2.0, 0.01);

  for (const std::string dtype : {"f16", "bf16", "f32"}) {
    auto u = MakeInput(dtype, "uniform(-1,1)", 100000, 7);
    ASSERT_TRUE(u.ok());
    std::vector<float> f = runner::DecodeToFloat(dtype, *u);
    EXPECT_EQ(f.size(), 100000u);
    EXPECT_LE(*std::max_element(f.begin(), f.end()), 1.0f);
    EXPECT_GE(*std::min_element(f.begin(), f.end()), -1.0f);
    EXPECT_GT(std::count_if(f.begin(), f.end(), [](float x) { return x != 0; }), 99000);
    for (float x : runner::DecodeToFloat(dtype, *MakeInput(dtype, "ones", 100, 7))) EXPECT_EQ(x, 1.0f);
  }
  std::vector<float> ints = runner::DecodeToFloat("i32", *MakeInput("i32", "uniform(0,3)", 10000, 1));
  for (int k = 0; k <= 3; ++k) EXPECT_GT(std::count(ints.begin(), ints.end(), float(k)), 2000) << k;
  EXPECT_EQ(std::count_if(ints.begin(), ints.end(), [](float x) { return x < 0 || x > 3; }), 0);

  EXPECT_FALSE(MakeInput("f32", "uniform(0,0)", 100, 1).ok());
  // Zeros and integer draws are asked for by name: they may be all zeros.
  for (float x : runner::DecodeToFloat("f16", *MakeInput("f16", "zeros", 100, 1))) EXPECT_EQ(x, 0.0f);
  EXPECT_TRUE(MakeInput("i32", "int(0,0)", 100, 1).ok());
  EXPECT_FALSE(MakeInput("f64", "ones", 100, 1).ok());
}

TEST(CheckerData, IntDrawsAreIntegersInTheirRangeInEveryDtype) {
  for (const char* dtype : {"f32", "f16", "bf16", "i32"}) {
    std::vector<float> v = runner::DecodeToFloat(dtype, *runner::MakeInput(dtype, "int(-5, 7)", 20000, 3));
    std::set<float> seen(v.begin(), v.end());
    EXPECT_EQ(seen.size(), 13u) << dtype;
    for (float x : v) {
      EXPECT_EQ(x, std::floor(x)) << dtype;
      EXPECT_GE(x, -5.0f);
      EXPECT_LE(x, 7.0f);
    }
  }
  EXPECT_FALSE(runner::ParseInit("int(3,1)").ok());
  EXPECT_FALSE(runner::ParseInit("int(1.5,2)").ok());
}

// The bytes of a version-1 .npy file of `descr` with `shape` and `data`.
std::string Npy(const std::string& descr, const std::string& shape, const std::string& data, bool fortran = false) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                       ", 'shape': " + shape + ", }";
  header += std::string(64 - (10 + header.size() + 1) % 64, ' ') + "\n";
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += char(header.size() & 0xFF);
  out += char(header.size() >> 8);
  return out + header + data;
}

TEST(CheckerData, NpyFilesFeedBuffersOfTheirDtypeAndSizeOnly) {
  std::string f32(16, '\0');
  const float values[4] = {1.5f, -2.0f, 0.25f, 3.0f};
  std::memcpy(f32.data(), values, 16);
  auto ok = runner::NpyToBuffer(Npy("<f4", "(2, 2)", f32), "f32", 4);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(*ok, f32);
  auto bf = runner::NpyToBuffer(Npy("<f4", "(4,)", f32), "bf16", 4);
  ASSERT_TRUE(bf.ok()) << bf.status().message();
  EXPECT_EQ(runner::DecodeToFloat("bf16", *bf), std::vector<float>(values, values + 4));
  struct Bad {
    std::string npy, dtype, message;
    int64_t elems;
  };
  const std::vector<Bad> bad = {
      {Npy("<f4", "(4,)", f32), "f32", "holds 4 elements; the buffer has 5", 5},
      {Npy("<f4", "(4,)", f32), "f16", "holds '<f4'; a f16 buffer reads '<f2'", 4},
      {Npy("<f8", "(2,)", f32), "f32", "holds '<f8'", 2},
      {Npy(">f4", "(4,)", f32), "f32", "holds '>f4'", 4},
      {Npy("<f4", "(4,)", f32.substr(0, 12)), "f32", "bytes of data", 4},
      {Npy("<f4", "(2, 2)", f32, true), "f32", "Fortran order", 4},
      {"PK\x03\x04 not numpy", "f32", "not a .npy file", 4},
      {Npy("<f4", "(4,)", f32).substr(0, 9), "f32", "not a .npy file", 4},
  };
  for (const Bad& b : bad) {
    auto r = runner::NpyToBuffer(b.npy, b.dtype, b.elems);
    ASSERT_FALSE(r.ok()) << b.message;
    EXPECT_NE(r.status().message().find(b.message), std::string::npos) << r.status().message();
  }
}

TEST(CheckerData, HalfAndBf16ConversionsRoundToNearestEven) {
  for (float x : {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f, 0.333251953125f})
    EXPECT_EQ(runner::HalfToFloat(runner::FloatToHalf(x)), x) << x;
  EXPECT_EQ(runner::FloatToHalf(1.0f + 1.0f / 2048), runner::FloatToHalf(1.0f));        // tie, even stays
  EXPECT_EQ(runner::FloatToHalf(1.0f + 3.0f / 2048), runner::FloatToHalf(1.0f + 4.0f / 2048));  // tie, rounds up to even
  EXPECT_TRUE(std::isinf(runner::HalfToFloat(runner::FloatToHalf(70000.0f))));
  EXPECT_TRUE(std::isnan(runner::HalfToFloat(runner::FloatToHalf(std::nanf("")))));
  EXPECT_TRUE(std::isnan(runner::HalfToFloat(0xFFFF)));  // the poison pattern
  EXPECT_TRUE(std::isnan(runner::Bf16ToFloat(0xFFFF)));
  for (float x : {0.0f, 1.0f, -3.0f, 1.5f, 256.0f}) EXPECT_EQ(runner::Bf16ToFloat(runner::FloatToBf16(x)), x);
  EXPECT_EQ(runner::Bf16ToFloat(runner::FloatToBf16(1.0f + 1.0f / 256)), 1.0f);  // tie to even
  EXPECT_TRUE(std::isnan(runner::Bf16ToFloat(runner::FloatToBf16(std::nanf("")))));
}

TEST(CheckerData, CompareAppliesToleranceAndNeverPassesNaN) {
  runner::Comparison c;
  runner::Compare({1.0f, 2.0f, 3.0f, std::nanf(""), 10.5f}, {1.0f, 2.01f, 3.5f, 4.0f, 10.0f}, 0.01, 0.01, &c);
  EXPECT_EQ(c.elements, 5);
  EXPECT_EQ(c.nans, 1);
  EXPECT_EQ(c.mismatches, 3);  // 3 vs 3.5, NaN, 10.5 vs 10 (tolerance 0.11)
  EXPECT_EQ(c.first_bad, 2);
  EXPECT_NEAR(c.max_abs_error, 0.5, 1e-6);
  EXPECT_NEAR(c.MismatchRatio(), 0.6, 1e-12);
  runner::Comparison inf;
  runner::Compare({INFINITY}, {INFINITY}, 0, 0, &inf);
  EXPECT_EQ(inf.mismatches, 0);
}

// The process plumbing of the backend, exercised with runners that cannot
// work: it must turn each into a kCrash result with a reason, quickly.
class RunnerPlumbing : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_ = LoadTestOp();
    device_.name = "Fake GPU";
    device_.model = "fake-gpu";
    device_.cc_major = 8;
    device_.cc_minor = 0;
    kernel_ = CompileConfig(spec_, spec_.dtypes[0], spec_.default_config, "sm_80", "");
    ASSERT_EQ(kernel_.failure, FailureClass::kNone);
    shape_.dims = {};
    for (const auto& d : spec_.dims) shape_.dims.emplace_back(d, 1024);
    policy_.timeout_seconds = 5;
  }
  Measurement MeasureWith(const CudaBackendOptions& opts, CudaRunnerStats* stats) {
    auto backend = MakeCudaBackend(device_, opts);
    Measurement m = backend->Measure(spec_, spec_.dtypes[0], kernel_, shape_, policy_, 0);
    *stats = GetCudaRunnerStats(*backend);
    return m;
  }
  OpSpec spec_;
  DeviceInfo device_;
  CompiledKernel kernel_;
  Shape shape_;
  TimingPolicy policy_;
};

TEST_F(RunnerPlumbing, ExecFailureIsACrashWithAReason) {
  CudaBackendOptions opts;
  opts.runner_exe = "/nonexistent/tunefarm";
  opts.runner_args = {};
  CudaRunnerStats stats;
  Measurement m = MeasureWith(opts, &stats);
  EXPECT_EQ(m.failure, FailureClass::kCrash);
  EXPECT_NE(m.failure_message.find("exec of the runner failed"), std::string::npos) << m.failure_message;
  EXPECT_EQ(m.backend, "cuda");
  EXPECT_EQ(m.config_id, kernel_.config_id);
  EXPECT_FALSE(m.Valid());
}

TEST_F(RunnerPlumbing, SilentRunnerIsKilledAtTheStartupLimit) {
  CudaBackendOptions opts;
  opts.runner_exe = "/bin/sh";
  opts.runner_args = {"-c", "exec sleep 60"};  // "--device 0" land in $0 and $1
  opts.startup_timeout_seconds = 0.5;
  CudaRunnerStats stats;
  Measurement m = MeasureWith(opts, &stats);
  EXPECT_EQ(m.failure, FailureClass::kCrash);
  // Killed at the limit, which the message names, not after the runner's 60 s.
  EXPECT_NE(m.failure_message.find("did not start within 0.5"), std::string::npos) << m.failure_message;
  EXPECT_EQ(stats.spawns, 1);
  EXPECT_EQ(stats.pid, 0);
}

TEST_F(RunnerPlumbing, RunnerWithoutDriverSaysWhy) {
  if (DiscoverCudaDevices().ok()) GTEST_SKIP() << "this host has a GPU";
  CudaBackendOptions opts;
  opts.runner_exe = "/proc/self/exe";
  opts.runner_args = {kRunnerFlag};
  CudaRunnerStats stats;
  Measurement m = MeasureWith(opts, &stats);
  EXPECT_EQ(m.failure, FailureClass::kCrash);
  EXPECT_NE(m.failure_message.find("could not start"), std::string::npos) << m.failure_message;
  EXPECT_EQ(stats.spawns, 1);
}

TEST_F(RunnerPlumbing, CompileFailuresPassThroughWithoutARunner) {
  CompiledKernel bad = kernel_;
  bad.failure = FailureClass::kCompileError;
  bad.failure_message = "kernel.cu: NVRTC_ERROR_COMPILATION";
  bad.log = "kernel.cu(3): error: expected a \";\"";
  CudaBackendOptions opts;
  opts.runner_exe = "/nonexistent/tunefarm";
  auto backend = MakeCudaBackend(device_, opts);
  Measurement m = backend->Measure(spec_, spec_.dtypes[0], bad, shape_, policy_, 0);
  EXPECT_EQ(m.failure, FailureClass::kCompileError);
  EXPECT_NE(m.failure_message.find("expected a"), std::string::npos);
  EXPECT_EQ(GetCudaRunnerStats(*backend).spawns, 0);
}

}  // namespace
}  // namespace tune

#endif  // TUNEFARM_WITH_CUDA

// A main of its own: the test binary doubles as the runner for the plumbing
// tests (argv[1] == --tunefarm-test-runner).
int main(int argc, char** argv) {
#ifdef TUNEFARM_WITH_CUDA
  if (argc >= 2 && std::string(argv[1]) == "--tunefarm-test-runner") {
    int device = 0;
    for (int i = 2; i + 1 < argc; ++i)
      if (std::string(argv[i]) == "--device") device = std::atoi(argv[i + 1]);
    return tune::RunnerMain(device, 0, 1);
  }
#endif
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
