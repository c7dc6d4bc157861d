// The ops the farm ships (every folder under ops/): each spec loads, its
// config space is sane on an A100-like and an H100-like device, every legal
// config has a launch plan within the device's limits, and (with the CUDA
// toolkit) every legal config of every dtype compiles with NVRTC for that
// architecture (an even sample of spaces too large to sweep). No GPU is
// needed: NVRTC runs on any host.
//
// A sweep that meets a config which does not compile wastes a worker's time
// and shows up as a failure in every report, so a broken config is caught
// here rather than on the fleet.
//
// Compiling everything takes a while on a small machine (a few thousand NVRTC
// runs); cubins are cached between runs in $TUNEFARM_OPS_COMPILE_CACHE
// (default: <tmp>/tunefarm-ops-compile-cache; set it empty to disable). The
// cache is keyed by kernel hash, so an edited kernel is compiled afresh.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/known_gpus.h"
#include "opspec/config_space.h"
#include "opspec/op_definition.h"
#include "base/types.h"
#ifdef TUNEFARM_WITH_CUDA
#include "measure/cuda/cuda_backend.h"
#endif

namespace tune {
namespace {

namespace fs = std::filesystem;

const std::string kOpsDir = std::string(TUNEFARM_SOURCE_DIR) + "/ops";

DeviceInfo A100() {
  DeviceInfo d;
  d.name = "NVIDIA A100-SXM4-80GB";
  d.model = NormaliseGpuModel(d.name);
  d.backend = "cuda";
  d.cc_major = 8;
  d.cc_minor = 0;
  d.num_sms = 108;
  d.total_mem_bytes = 80LL << 30;
  d.l2_bytes = 40LL << 20;
  d.smem_per_block_optin = 166912;
  d.max_threads_per_block = 1024;
  return d;
}

DeviceInfo H100() {
  DeviceInfo d;
  d.name = "NVIDIA H100 80GB HBM3";
  d.model = NormaliseGpuModel(d.name);
  d.backend = "cuda";
  d.cc_major = 9;
  d.cc_minor = 0;
  d.num_sms = 132;
  d.total_mem_bytes = 80LL << 30;
  d.l2_bytes = 50LL << 20;
  d.smem_per_block_optin = 232448;
  d.max_threads_per_block = 1024;
  return d;
}

std::vector<DeviceInfo> Devices() { return {A100(), H100()}; }

std::string Arch(const DeviceInfo& d) {
  return "sm_" + std::to_string(d.cc_major) + std::to_string(d.cc_minor);
}

// Every folder under ops/ that holds an op.toml, sorted.
std::vector<std::string> OpNames() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kOpsDir, ec))
    if (e.is_directory() && fs::exists(e.path() / "op.toml")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool Contains(const std::vector<Config>& configs, const Config& c) {
  const std::string want = c.Canonical();
  return std::any_of(configs.begin(), configs.end(), [&](const Config& x) { return x.Canonical() == want; });
}

class OpsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto spec = LoadOpSpec(kOpsDir + "/" + GetParam());
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    spec_ = std::move(spec.value());
  }
  OpSpec spec_;
};

TEST(OpsListTest, ShipsTheExpectedOps) {
  std::vector<std::string> names = OpNames();
  for (const char* want : {"gemm", "rmsnorm", "elementwise"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << "ops/" << want << " missing";
}

// The Hopper family is a space to search, not to sweep.
TEST(OpsListTest, TheHopperGemmFamilyHasTenThousandLegalConfigsOnAnH100) {
  auto spec = LoadOpSpec(std::string(TUNEFARM_SOURCE_DIR) + "/ops/gemm_hopper");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  const DeviceInfo* h100 = FindKnownGpu("h100-80gb-hbm3");
  ASSERT_NE(h100, nullptr);
  for (const std::string& dtype : spec->dtypes) {
    auto configs = EnumerateConfigs(*spec, *h100, dtype);
    ASSERT_TRUE(configs.ok()) << configs.status().message();
    EXPECT_GE(configs->size(), 10000u) << dtype;
    EXPECT_TRUE(std::find_if(configs->begin(), configs->end(), [&](const Config& c) {
                  return c.Id() == spec->default_config.Id();
                }) != configs->end());
  }
}

TEST_P(OpsTest, NameMatchesFolderAndDefaultIsLegal) {
  // Sweeps name ops by folder; a mismatch would send one op under another's name.
  EXPECT_EQ(spec_.name, GetParam());
  EXPECT_FALSE(spec_.dtypes.empty());
  for (const DeviceInfo& dev : Devices()) {
    auto shared = EnumerateConfigs(spec_, dev);
    ASSERT_TRUE(shared.ok()) << shared.status().message();
    if (shared->empty()) {
      // Only an arch-specific op may sit out a device (wgmma needs sm_90a).
      EXPECT_TRUE(spec_.arch_specific) << spec_.name << " has no legal config on " << Arch(dev);
      continue;
    }
    // The config set the scheduler hands out must hold the default, so that
    // deployments' fallback config is measured too.
    EXPECT_TRUE(Contains(*shared, spec_.default_config))
        << spec_.name << ": default " << spec_.default_config.Canonical() << " is not legal on " << Arch(dev);
  }
}

TEST_P(OpsTest, SpacesAndLaunchPlansFitTheDevice) {
  for (const DeviceInfo& dev : Devices()) {
    for (const std::string& dtype : spec_.dtypes) {
      SpaceStats stats;
      auto configs = EnumerateConfigs(spec_, dev, dtype, &stats);
      ASSERT_TRUE(configs.ok()) << configs.status().message();
      std::printf("[space] %-12s %-6s %-5s raw %6llu legal %5llu\n", spec_.name.c_str(), Arch(dev).c_str(),
                  dtype.c_str(), (unsigned long long)stats.raw, (unsigned long long)stats.legal);
      if (spec_.name == "gemm" && dev.cc_major == 9) {
        EXPECT_GE(configs->size(), 100u);
      }
      // Odd dims on purpose: launch expressions must round up, not down.
      for (int64_t dim : {1000, 4096}) {
        Shape shape;
        for (const std::string& d : spec_.dims) shape.dims.push_back({d, dim});
        for (const Config& c : *configs) {
          auto plan = PlanLaunch(spec_, dtype, c, shape, dev);
          ASSERT_TRUE(plan.ok()) << c.Canonical() << ": " << plan.status().message();
          const int64_t threads = plan->block[0] * plan->block[1] * plan->block[2];
          EXPECT_GE(threads, 32) << c.Canonical();
          EXPECT_LE(threads, dev.max_threads_per_block) << c.Canonical();
          EXPECT_LE(plan->smem_bytes, dev.smem_per_block_optin) << c.Canonical();
          for (int i = 0; i < 3; ++i) EXPECT_GE(plan->grid[i], 1) << c.Canonical();
          EXPECT_GT(plan->bytes, 0) << c.Canonical();
        }
      }
    }
  }
}

#ifdef TUNEFARM_WITH_CUDA

std::string CacheDir() {
  if (const char* env = std::getenv("TUNEFARM_OPS_COMPILE_CACHE")) return env;
  return (fs::temp_directory_path() / "tunefarm-ops-compile-cache").string();
}

bool AllDtypes() {
  const char* env = std::getenv("TUNEFARM_OPS_COMPILE_ALL_DTYPES");
  return env && std::string(env) == "1";
}

// Spaces up to kSweepable configs compile whole; larger ones a sample.
constexpr size_t kSweepable = 4000, kSearchSample = 256;

struct CompileTask {
  const OpSpec* spec;
  std::string dtype, arch;
  Config config;
  CompiledKernel out;
};

void CompileInParallel(std::vector<CompileTask>* tasks, const std::string& cache_dir) {
  std::atomic<size_t> next{0};
  const unsigned n = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < std::min<size_t>(n, tasks->size()); ++t)
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < tasks->size();) {
        CompileTask& task = (*tasks)[i];
        task.out = CompileConfig(*task.spec, task.dtype, task.config, task.arch, cache_dir);
      }
    });
  for (auto& th : pool) th.join();
}

TEST_P(OpsTest, EveryLegalConfigCompiles) {
  const std::string cache_dir = CacheDir();
  // The reference is compiled like a config without params; it takes the
  // kernel's arguments but the tensor maps.
  OpSpec ref = spec_;
  ref.source_file = spec_.check.reference_file;
  ref.kernel = spec_.check.reference_kernel;
  std::erase_if(ref.args, [](const ArgSpec& a) { return a.kind == ArgSpec::Kind::kTensorMap; });

  for (const DeviceInfo& dev : Devices()) {
    const std::string arch = CudaArchFor(spec_, dev);
    std::vector<CompileTask> tasks;
    for (const std::string& dtype : spec_.dtypes) {
      auto configs = EnumerateConfigs(spec_, dev, dtype);
      ASSERT_TRUE(configs.ok()) << configs.status().message();
      if (configs->empty()) continue;  // an arch-specific op this device lacks
      // Every config compiles for the op's first dtype; the other dtypes
      // compile the default config and the reference (the dtype only swaps
      // the element type), unless TUNEFARM_OPS_COMPILE_ALL_DTYPES=1 asks for
      // the full product (about 25 minutes on 2 cores; CI runs the short one).
      // A space to search rather than sweep (10^4 configs and more)
      // compiles an even sample of kSearchSample configs and its default.
      const bool every_config = dtype == spec_.dtypes.front() || AllDtypes();
      const size_t step = configs->size() > kSweepable ? configs->size() / kSearchSample : 1;
      for (size_t i = 0; i < configs->size(); ++i) {
        const Config& c = (*configs)[i];
        if ((every_config && i % step == 0) || c.Canonical() == spec_.default_config.Canonical()) {
          tasks.push_back({&spec_, dtype, arch, c, {}});
        }
      }
      tasks.push_back({&ref, dtype, arch, Config{}, {}});
    }
    if (tasks.empty()) {
      std::printf("[compile] %-12s %-7s skipped: no legal config\n", spec_.name.c_str(), arch.c_str());
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    CompileInParallel(&tasks, cache_dir);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    std::map<std::string, int> ok, failed, cached, spilling, max_regs;
    std::vector<const CompileTask*> failures;
    for (const CompileTask& t : tasks) {
      const std::string key = t.dtype;
      if (t.out.failure != FailureClass::kNone) {
        ++failed[key];
        failures.push_back(&t);
        continue;
      }
      ++ok[key];
      cached[key] += t.out.from_cache;
      if (t.spec == &spec_) {
        spilling[key] += t.out.resources.local_bytes > 0;
        max_regs[key] = std::max(max_regs[key], t.out.resources.registers);
      }
      EXPECT_FALSE(t.out.image.empty()) << t.config.Canonical();
    }
    for (const std::string& dtype : spec_.dtypes)
      std::printf("[compile] %-12s %-7s %-5s %4d ok (%d cached), %d failed, %d spilling, max regs %d\n",
                  spec_.name.c_str(), arch.c_str(), dtype.c_str(), ok[dtype], cached[dtype], failed[dtype],
                  spilling[dtype], max_regs[dtype]);
    std::printf("[compile] %-12s %-7s %zu programs in %.1f s\n", spec_.name.c_str(), arch.c_str(), tasks.size(),
                secs);
    for (size_t i = 0; i < std::min<size_t>(failures.size(), 3); ++i) {
      const CompileTask& t = *failures[i];
      ADD_FAILURE() << spec_.name << " " << t.dtype << " " << arch << " "
                    << (t.spec == &spec_ ? t.config.Canonical() : std::string("reference")) << ": "
                    << FailureClassName(t.out.failure) << ": " << t.out.failure_message << "\n"
                    << t.out.log;
    }
    EXPECT_EQ(failures.size(), 0u) << spec_.name << " on " << arch;

    // The default config is the deployments' fallback: it must not spill.
    for (const CompileTask& t : tasks) {
      if (t.spec == &spec_ && t.config.Canonical() == spec_.default_config.Canonical()) {
        EXPECT_EQ(t.out.resources.local_bytes, 0) << spec_.name << " default spills on " << arch << " " << t.dtype;
      }
    }
  }
}

#else

TEST_P(OpsTest, EveryLegalConfigCompiles) { GTEST_SKIP() << "built without the CUDA toolkit (no NVRTC)"; }

#endif

std::string ParamName(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Ops, OpsTest, ::testing::ValuesIn(OpNames()), ParamName);

}  // namespace
}  // namespace tune
