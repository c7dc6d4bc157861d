// `tunefarm tune --backend sim --sim-compile nvrtc` as a person runs it on a
// host without a GPU: every config is compiled with the host's NVRTC (the
// store holds its cubins, for the simulated model's architecture), timing
// stays simulated and labelled so; a second run on the same cubin cache
// compiles nothing; `--sim-truth` times a config at the file's median.
// Built only with the CUDA toolkit; needs no GPU.
#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "base/types.h"
#include "store/result_store.h"
#include "support/temp_dir.h"

namespace tune {
namespace {

struct CommandRun {
  int exit_code = -1;
  std::string output;
};

CommandRun Tunefarm(const std::string& args) {
  CommandRun r;
  FILE* p = ::popen((std::string(TUNEFARM_BINARY) + " " + args + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// A few configs of the small test op on one simulated H100 (sm_90).
std::string Tune(const testing::TempDir& dir, const std::string& store, const std::string& more = "") {
  return "tune --backend sim --sim-models h100 --sim-compile nvrtc --ops-dir " + std::string(TUNEFARM_SOURCE_DIR) +
         "/tests/data/ops --op tiny --dtype f32 --shape N=65536 --strategy random --budget 4 --one-pass --quiet "
         "--unsigned --compile-threads 2 --store " + dir.Sub(store) + " --cache-dir " + dir.Sub("cache") +
         " --bundle " + dir.Sub(store + "-bundle") + " " + more;
}

// The `compile:` line's figures.
struct CompileLine {
  bool found = false;
  unsigned long long compiled = 0, cached = 0;
  double seconds = -1;
};
CompileLine ParseCompileLine(const std::string& output) {
  CompileLine c;
  const size_t at = output.find("\ncompile: ");
  if (at == std::string::npos) return c;
  c.found = std::sscanf(output.c_str() + at + 1, "compile: %llu compiled (%lf s of compiler time), %llu from the cubin cache",
                        &c.compiled, &c.seconds, &c.cached) == 3;
  return c;
}

std::vector<Measurement> Rows(const std::string& store_path) {
  std::vector<Measurement> rows;
  auto store = ResultStore::OpenReadOnly(store_path);
  EXPECT_TRUE(store.ok()) << store.status().message();
  if (!store.ok()) return rows;
  Status st = (*store)->Scan(ResultFilter{}, [&](const Measurement& m) {
    rows.push_back(m);
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.message();
  return rows;
}

TEST(SimNvrtc, CompilesEveryConfigForRealStoresItsCubinsAndCachesThem) {
  testing::TempDir dir;
  const CommandRun first = Tunefarm(Tune(dir, "s1"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("SIMULATED"), std::string::npos) << first.output;
  const CompileLine c1 = ParseCompileLine(first.output);
  ASSERT_TRUE(c1.found) << first.output;
  EXPECT_EQ(c1.compiled, 4u) << first.output;
  EXPECT_GT(c1.seconds, 0) << first.output;
  EXPECT_EQ(c1.cached, 0u) << first.output;

  // Rows: simulated, measured with a cubin for the simulated H100's arch,
  // under the NVRTC version's kernel hash.
  const std::vector<Measurement> rows = Rows(dir.Sub("s1"));
  ASSERT_EQ(rows.size(), 4u);
  for (const Measurement& m : rows) {
    EXPECT_TRUE(m.Valid()) << m.config.Canonical() << ": " << m.failure_message;
    EXPECT_EQ(m.backend, "sim");
    EXPECT_EQ(m.gpu_model, "sim-h100");
    EXPECT_EQ(m.arch, "sm_90") << m.config.Canonical();
    EXPECT_FALSE(m.nvrtc_version.empty());
    EXPECT_NE(m.nvrtc_version, "sim");
    EXPECT_GT(m.resources.registers, 0) << "ptxas's figures, not drawn ones";
  }

  // The store holds each config's cubin, a real one for sm_90.
  {
    auto store = ResultStore::OpenReadOnly(dir.Sub("s1"));
    ASSERT_TRUE(store.ok()) << store.status().message();
    std::map<std::string, std::string> images;  // config id -> arch
    Status st = (*store)->ForEachKernel([&](const KernelImage& k) {
      EXPECT_TRUE(CheckCubin(k.image, k.arch).ok()) << k.Key() << ": " << CheckCubin(k.image, k.arch).message();
      EXPECT_TRUE(CheckCubinEntries(k.image, {"tiny_axpb"}).ok()) << k.Key();
      images[k.config_id] = k.arch;
    });
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(images.size(), rows.size());
    for (const Measurement& m : rows) {
      EXPECT_EQ(images[m.config_id], "sm_90") << m.config_id;
      auto k = (*store)->GetKernel(m.kernel_hash, m.config_id, m.dtype, m.arch);
      ASSERT_TRUE(k.ok()) << k.status().message();
      EXPECT_TRUE(CheckCubin(k->image, "sm_90").ok());
    }
  }

  // A new store on the same host: the same configs, every one from the
  // cubin cache.
  const CommandRun second = Tunefarm(Tune(dir, "s2"));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  const CompileLine c2 = ParseCompileLine(second.output);
  ASSERT_TRUE(c2.found) << second.output;
  EXPECT_EQ(c2.compiled, 0u) << second.output;
  EXPECT_EQ(c2.cached, 4u) << second.output;
  const std::vector<Measurement> again = Rows(dir.Sub("s2"));
  ASSERT_EQ(again.size(), rows.size());
  for (const Measurement& m : again) {
    EXPECT_EQ(m.arch, "sm_90");
    EXPECT_EQ(m.kernel_hash, rows[0].kernel_hash) << "one toolchain, one op: one kernel hash";
  }
}

TEST(SimNvrtc, AGroundTruthFileTimesItsConfigsAtItsMedians) {
  testing::TempDir dir;
  const CommandRun first = Tunefarm(Tune(dir, "s1"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::vector<Measurement> rows = Rows(dir.Sub("s1"));
  ASSERT_FALSE(rows.empty());
  const Measurement& pick = rows.front();
  // As `tunefarm results --format csv` writes a GPU sweep's rows: the model
  // the sim model stands for, a quoted config.
  dir.Write("truth.csv",
            "gpu_model,op,dtype,shape,config,config_id,status,median_us,backend\n"
            "h100-80gb-hbm3,tiny,f32,N=65536,\"" + pick.config.Canonical() + "\"," + pick.config_id +
                ",ok,321.5,cuda\n");
  const CommandRun truth = Tunefarm(Tune(dir, "s3", "--sim-truth " + dir.Sub("truth.csv")));
  ASSERT_EQ(truth.exit_code, 0) << truth.output;
  EXPECT_NE(truth.output.find("SIMULATED"), std::string::npos) << truth.output;
  bool seen = false;
  for (const Measurement& m : Rows(dir.Sub("s3"))) {
    EXPECT_EQ(m.backend, "sim");
    if (m.config_id == pick.config_id) {
      seen = true;
      EXPECT_DOUBLE_EQ(m.median_us, 321.5);
    } else {
      EXPECT_LT(m.median_us, 321.5) << "the cost model's figure";
    }
  }
  EXPECT_TRUE(seen);

  // A file that is no results CSV: one line naming it, nothing run.
  dir.Write("bad.csv", "a,b\n1,2\n");
  const CommandRun bad = Tunefarm(Tune(dir, "s4", "--sim-truth " + dir.Sub("bad.csv")));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--sim-truth: " + dir.Sub("bad.csv")), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace tune
