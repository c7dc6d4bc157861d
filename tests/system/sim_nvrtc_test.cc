// `tunefarm tune --backend sim --sim-compile nvrtc` as a person runs it on a
// host without a GPU: every config is compiled with the host's NVRTC (the
// store holds its cubins, for the simulated model's architecture), timing
// stays simulated and labelled so; a second run on the same cubin cache
// compiles nothing; `--sim-truth` times a config at the file's median;
// `--format json` counts each config once. And the fleet image cache over
// CURVE with such workers as processes (FleetImages). Built only with the
// CUDA toolkit; needs no GPU.
#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/types.h"
#include "store/result_store.h"
#include "support/http_get.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace tune {
namespace {

struct CommandRun {
  int exit_code = -1;
  std::string output;
};

// `stderr_path`: where its stderr goes (empty: into the output).
CommandRun Tunefarm(const std::string& args, const std::string& stderr_path = "") {
  CommandRun r;
  FILE* p = ::popen((std::string(TUNEFARM_BINARY) + " " + args + " 2>" + (stderr_path.empty() ? "&1" : stderr_path))
                        .c_str(),
                    "r");
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
  unsigned long long compiled = 0, cached = 0, fetched = 0;
  double seconds = -1;
};
CompileLine ParseCompileLine(const std::string& output) {
  CompileLine c;
  const size_t at = output.find("\ncompile: ");
  if (at == std::string::npos) return c;
  c.found = std::sscanf(output.c_str() + at + 1,
                        "compile: %llu compiled (%lf s of compiler time), %llu from the cubin cache, %llu fetched",
                        &c.compiled, &c.seconds, &c.cached, &c.fetched) == 4;
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

// `tune --format json` with real compiles: stdout is one document whose
// pipeline figures count each config once, compiled on the first run and
// from the cubin cache on the second.
TEST(SimNvrtc, TuneJsonCountsEachConfigOnceAsCompiledFetchedOrCached) {
  testing::TempDir dir;
  for (const char* store : {"j1", "j2"}) {
    const CommandRun run = Tunefarm(Tune(dir, store, "--format json"), dir.Sub(std::string(store) + ".err"));
    const std::string& out = run.output;
    ASSERT_EQ(run.exit_code, 0) << out << testing::ReadFile(dir.Sub(std::string(store) + ".err"));
    const nlohmann::json doc = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << "stdout is not one JSON document:\n" << out;
    ASSERT_TRUE(doc["results"].is_array());
    EXPECT_EQ(doc["results"].size(), 4u) << out;
    const nlohmann::json& pipe = doc["sweep"]["pipeline"];
    const bool first = std::string(store) == "j1";
    EXPECT_EQ(pipe["compiled"].get<uint64_t>(), first ? 4u : 0u) << out;
    EXPECT_EQ(pipe["cached"].get<uint64_t>(), first ? 0u : 4u) << out;
    EXPECT_EQ(pipe["fetched"].get<uint64_t>(), 0u) << out;
    EXPECT_EQ(pipe["compiled"].get<uint64_t>() + pipe["cached"].get<uint64_t>() + pipe["fetched"].get<uint64_t>(),
              doc["sweep"]["configs"].get<uint64_t>())
        << out;
    for (const char* f : {"devices_busy", "compile_busy"}) {
      EXPECT_GE(pipe[f].get<double>(), 0.0) << f;
      EXPECT_LE(pipe[f].get<double>(), 1.0) << f;
    }
    if (first) {
      EXPECT_GT(pipe["compile_busy"].get<double>(), 0.0) << out;
    }
    EXPECT_TRUE(doc["sweep"]["simulated"].get<bool>());
  }
}

// A device fills up to kUnitsHeldPerDevice units while it times one: the
// configs of the units behind it go to the compile pool as they come, so
// the pool compiles what the device times next. Each config still counts
// once, and the search in flight measures its whole budget.
TEST(SimNvrtc, ADeviceCompilesTheUnitsBehindTheOneItTimes) {
  testing::TempDir dir;
  const CommandRun run = Tunefarm(Tune(dir, "a", "--format json --configs-per-unit 2 --in-flight 64"), dir.Sub("a.err"));
  const std::string& out = run.output;
  ASSERT_EQ(run.exit_code, 0) << out << testing::ReadFile(dir.Sub("a.err"));
  const nlohmann::json doc = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << out;
  const nlohmann::json& pipe = doc["sweep"]["pipeline"];
  EXPECT_EQ(doc["results"].size(), 4u) << out;
  EXPECT_EQ(pipe["compiled"].get<uint64_t>(), 4u) << out;
  // Budget 4 in units of 2 (the default first): the second unit came while
  // the first was timed, and its configs compiled meanwhile.
  EXPECT_GE(pipe["units"].get<uint64_t>(), 2u) << out;
  EXPECT_GE(pipe["units_compiled_ahead"].get<uint64_t>(), 1u) << out;
}

// The fleet image cache end to end over CURVE: sim workers that compile
// with NVRTC, each key with a cache folder of its own. Each config's cubin
// sent by two worker keys is served to a third, which compiles nothing; an
// image one key sent is not served, and the third key compiles it all.
class FleetImages : public ::testing::Test {
 protected:
  void SetUp() override {
    endpoint_ = "tcp://127.0.0.1:" + std::to_string(testing::FreePort());
    for (const char* who : {"coordinator", "a1", "a2", "b", "client"}) {
      testing::Child keygen({TUNEFARM_BINARY, "keys", "curve", "--out", dir_.Sub(who), "--name", who},
                            dir_.Sub("keys.log"));
      ASSERT_EQ(keygen.Wait(20), 0) << testing::ReadFile(dir_.Sub("keys.log"));
    }
    dir_.Write("allowed", testing::ReadFile(dir_.Sub("a1.pub")) + testing::ReadFile(dir_.Sub("a2.pub")) +
                              testing::ReadFile(dir_.Sub("b.pub")));
    dir_.Write("clients", testing::ReadFile(dir_.Sub("client.pub")));
    // The small test op cut to four configs.
    namespace fs = std::filesystem;
    fs::create_directories(dir_.Sub("ops"));
    fs::copy(std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops/tiny", dir_.Sub("ops/tiny"), fs::copy_options::recursive);
    std::string toml = testing::ReadFile(dir_.Sub("ops/tiny/op.toml"));
    for (auto [from, to] : {std::pair<std::string, std::string>{"BLOCK = [64, 128, 256, 512, 1024]", "BLOCK = [128, 256]"},
                            {"VEC   = [1, 2, 4]", "VEC   = [1, 2]"}}) {
      const size_t at = toml.find(from);
      ASSERT_NE(at, std::string::npos) << from;
      toml.replace(at, from.size(), to);
    }
    dir_.Write("ops/tiny/op.toml", toml);
    std::vector<std::string> args{TUNEFARM_BINARY, "coordinator", "--bind", endpoint_, "--store", dir_.Sub("store"),
                                  "--curve-key", dir_.Sub("coordinator"), "--allow-list", dir_.Sub("allowed"),
                                  "--client-allow-list", dir_.Sub("clients"), "-v"};
    args.insert(args.end(), coordinator_extra_.begin(), coordinator_extra_.end());
    coordinator_ = std::make_unique<testing::Child>(args, dir_.Sub("coordinator.log"));
  }
  void TearDown() override {
    if (coordinator_) coordinator_->Stop(10);
  }

  // Worker `who` (its key, its own fresh cache folder) on one simulated
  // H100 (sm_90) that compiles with NVRTC; /metrics on *http_port.
  std::unique_ptr<testing::Child> StartWorker(const std::string& who, int* http_port) {
    *http_port = testing::FreePort();
    return std::make_unique<testing::Child>(
        std::vector<std::string>{TUNEFARM_BINARY, "worker", "--connect", endpoint_, "--name", who, "--curve-key",
                                 dir_.Sub(who), "--coordinator-key", dir_.Sub("coordinator.pub"), "--backend", "sim",
                                 "--sim-models", "h100", "--sim-compile", "nvrtc", "--compile-threads", "1",
                                 "--cache-dir", dir_.Sub(who + "-cache"), "--http-port", std::to_string(*http_port)},
        dir_.Sub(who + ".log"));
  }
  // Submits a sweep of the op's four configs on shape N=`n` and waits for it.
  void RunSweep(const std::string& name, int n) {
    dir_.Write(name + ".toml", "[sweep]\nname = \"" + name + "\"\nops = [\"tiny\"]\ndtypes = [\"f32\"]\n"
                               "strategy = \"exhaustive\"\nshapes = [ { N = " + std::to_string(n) + " } ]\n");
    testing::Child submit({TUNEFARM_BINARY, "submit", dir_.Sub(name + ".toml"), "--coordinator", endpoint_,
                           "--ops-dir", dir_.Sub("ops"), "--curve-key", dir_.Sub("client"), "--coordinator-key",
                           dir_.Sub("coordinator.pub"), "--wait"},
                          dir_.Sub(name + ".log"));
    ASSERT_EQ(submit.Wait(240), 0) << testing::ReadFile(dir_.Sub(name + ".log"))
                                   << testing::ReadFile(dir_.Sub("coordinator.log"));
  }
  // A counter of a worker's /metrics; -1 when it has none.
  static double Metric(int port, const std::string& name) {
    return testing::MetricValue(testing::HttpGet(port, "/metrics"), name);
  }
  struct Counts {
    double compiled = -1, fetched = -1, cached = -1;
  };
  static Counts CountsOf(int port) {
    return {Metric(port, "tunefarm_worker_compiles_total"), Metric(port, "tunefarm_worker_images_fetched_total"),
            Metric(port, "tunefarm_worker_compile_cache_hits_total")};
  }
  // One sweep measured by worker `who` alone: its counts once it is done.
  Counts SweepOn(const std::string& who, const std::string& sweep, int n) {
    int port = 0;
    auto worker = StartWorker(who, &port);
    RunSweep(sweep, n);
    const Counts c = CountsOf(port);
    EXPECT_EQ(worker->Stop(10), 0) << testing::ReadFile(dir_.Sub(who + ".log"));
    return c;
  }
  // The pipeline figures `status --format json` gives for sweep `name`.
  nlohmann::json PipelineOf(const std::string& name) {
    testing::Child status({TUNEFARM_BINARY, "status", "--coordinator", endpoint_, "--format", "json", "--curve-key",
                           dir_.Sub("client"), "--coordinator-key", dir_.Sub("coordinator.pub")},
                          dir_.Sub("status-" + name + ".json"));
    EXPECT_EQ(status.Wait(60), 0) << testing::ReadFile(dir_.Sub("status-" + name + ".json"));
    const std::string text = testing::ReadFile(dir_.Sub("status-" + name + ".json"));
    const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
    EXPECT_FALSE(doc.is_discarded()) << text;
    if (doc.is_discarded()) return {};
    for (const auto& s : doc["sweeps"])
      if (s["name"] == name) return s["pipeline"];
    ADD_FAILURE() << "no sweep named " << name << ": " << text;
    return {};
  }
  // The rows of shape N=`n`, read once the coordinator has stopped.
  std::vector<Measurement> RowsOf(int n) {
    EXPECT_EQ(coordinator_->Stop(10), 0) << testing::ReadFile(dir_.Sub("coordinator.log"));
    coordinator_.reset();
    std::vector<Measurement> out;
    for (const Measurement& m : Rows(dir_.Sub("store")))
      if (m.shape == "N=" + std::to_string(n)) out.push_back(m);
    return out;
  }

  testing::TempDir dir_;
  std::string endpoint_;
  std::vector<std::string> coordinator_extra_;  // more coordinator options (a fixture's below)
  std::unique_ptr<testing::Child> coordinator_;
};

TEST_F(FleetImages, ImagesOfTwoKeysAreServedAndTheThirdKeyCompilesNothing) {
  const Counts a1 = SweepOn("a1", "s1", 4096);
  EXPECT_EQ(a1.compiled, 4) << testing::ReadFile(dir_.Sub("a1.log"));
  EXPECT_EQ(a1.fetched, 0);
  // One key's word: a2 is served nothing and compiles every config itself.
  const Counts a2 = SweepOn("a2", "s2", 8192);
  EXPECT_EQ(a2.compiled, 4) << testing::ReadFile(dir_.Sub("a2.log"));
  EXPECT_EQ(a2.fetched, 0) << testing::ReadFile(dir_.Sub("a2.log"));
  // Two keys' word: b takes every image and compiles none; configs its
  // later units take again come from its own cache, not asked for twice.
  const Counts b = SweepOn("b", "s3", 16384);
  EXPECT_EQ(b.compiled, 0) << testing::ReadFile(dir_.Sub("b.log"));
  EXPECT_EQ(b.fetched, 4) << testing::ReadFile(dir_.Sub("b.log"));
  EXPECT_GE(b.cached, 0);
  // The coordinator says where each sweep's time went, from its units'
  // reports: s1 compiled its four configs, s3 fetched them.
  const nlohmann::json p1 = PipelineOf("s1"), p3 = PipelineOf("s3");
  ASSERT_TRUE(p1.is_object() && p3.is_object());
  EXPECT_GE(p1["units"].get<uint64_t>(), 1u) << p1;
  EXPECT_EQ(p1["compiled"].get<uint64_t>(), 4u) << p1;
  EXPECT_GT(p1["compile_seconds"].get<double>(), 0.0) << p1;
  // Its one worker's one compile thread, busy for part of the sweep's wall
  // time (first lease to last unit's end): a fraction of it, never over.
  EXPECT_EQ(p1["compile_threads"].get<uint32_t>(), 1u) << p1;
  EXPECT_GT(p1["wall_seconds"].get<double>(), 0.0) << p1;
  EXPECT_GT(p1["compile_busy"].get<double>(), 0.0) << p1;
  EXPECT_LE(p1["compile_busy"].get<double>(), 1.0) << p1;
  EXPECT_EQ(p3["compile_busy"].get<double>(), 0.0) << "s3 compiled nothing: " << p3;
  EXPECT_EQ(p3["compiled"].get<uint64_t>(), 0u) << p3;
  EXPECT_EQ(p3["fetched"].get<uint64_t>(), 4u) << p3;
  EXPECT_GE(p3["devices_busy"].get<double>(), 0.0);
  EXPECT_LE(p3["devices_busy"].get<double>(), 1.0);
  // a1 again: its own cubin cache has every config, so it asks for none
  // (served though they would be) and counts each as a cache hit.
  const Counts again = SweepOn("a1", "s4", 32768);
  EXPECT_EQ(again.compiled, 0) << testing::ReadFile(dir_.Sub("a1.log"));
  EXPECT_EQ(again.fetched, 0) << testing::ReadFile(dir_.Sub("a1.log"));
  EXPECT_GE(again.cached, 4) << testing::ReadFile(dir_.Sub("a1.log"));
  const std::vector<Measurement> rows = RowsOf(16384);
  ASSERT_EQ(rows.size(), 4u);
  for (const Measurement& m : rows) {
    EXPECT_TRUE(m.Valid()) << m.config.Canonical() << ": " << m.failure_message;
    EXPECT_EQ(m.worker, "b");
    EXPECT_EQ(m.arch, "sm_90");
  }
}

TEST_F(FleetImages, AnImageOfOneKeyIsNotServed) {
  const Counts a1 = SweepOn("a1", "s1", 4096);
  EXPECT_EQ(a1.compiled, 4) << testing::ReadFile(dir_.Sub("a1.log"));
  const Counts b = SweepOn("b", "s3", 16384);
  EXPECT_EQ(b.fetched, 0) << testing::ReadFile(dir_.Sub("b.log"));
  EXPECT_EQ(b.compiled, 4) << testing::ReadFile(dir_.Sub("b.log"));
  const std::vector<Measurement> rows = RowsOf(16384);
  ASSERT_EQ(rows.size(), 4u);
  for (const Measurement& m : rows) EXPECT_TRUE(m.Valid()) << m.config.Canonical() << ": " << m.failure_message;
}

// A builder (`worker --compile-only`, a key of the builder allow-list) on
// a farm of one sim GPU worker that compiles with NVRTC: the builder
// compiles a sweep's configs for sm_90 before the device takes them, and
// the device fetches every one and compiles none.
class BuilderFarm : public FleetImages {
 protected:
  void SetUp() override {
    testing::Child keygen({TUNEFARM_BINARY, "keys", "curve", "--out", dir_.Sub("builder"), "--name", "builder"},
                          dir_.Sub("keys.log"));
    ASSERT_EQ(keygen.Wait(20), 0) << testing::ReadFile(dir_.Sub("keys.log"));
    dir_.Write("builders", testing::ReadFile(dir_.Sub("builder.pub")));
    http_ = testing::FreePort();
    // A stopped worker stays live (its device keeps its model's pools).
    coordinator_extra_ = {"--builder-allow-list", dir_.Sub("builders"), "--http-port", std::to_string(http_),
                          "--liveness", "600"};
    FleetImages::SetUp();
  }
  // The coordinator's `name` counter once it reaches `want`, polled (its
  // /metrics is a snapshot a second), or what it is once `watched` exits.
  std::vector<Measurement> BuiltAheadOfTheDevice(const std::string& search, size_t configs);
  double CoordinatorMetricOnce(const std::string& name, double want, testing::Child& watched) {
    double v = -1;
    for (int i = 0; i < 3000; ++i) {
      v = Metric(http_, name);
      if (v >= want || watched.Wait(0.001) != -1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return v;
  }
  int http_ = 0;
};

// A builder compiles sweep s1's `configs` configs (`search`: its sweep-file
// lines) while the GPU worker is stopped; once it goes on, the worker
// compiles none of them: each is fetched. Returns s1's rows.
std::vector<Measurement> BuilderFarm::BuiltAheadOfTheDevice(const std::string& search, size_t configs) {
  int port = 0;
  auto worker = StartWorker("a1", &port);
  // A first sweep (another dtype: other cubins) makes the worker's model
  // live, so that the next sweep's configs wait in the model's pools.
  dir_.Write("s0.toml", "[sweep]\nname = \"s0\"\nops = [\"tiny\"]\ndtypes = [\"f16\"]\n"
                        "strategy = \"exhaustive\"\nshapes = [ { N = 4096 } ]\n");
  {
    testing::Child submit({TUNEFARM_BINARY, "submit", dir_.Sub("s0.toml"), "--coordinator", endpoint_, "--ops-dir",
                           dir_.Sub("ops"), "--curve-key", dir_.Sub("client"), "--coordinator-key",
                           dir_.Sub("coordinator.pub"), "--wait"},
                          dir_.Sub("s0.log"));
    EXPECT_EQ(submit.Wait(240), 0) << testing::ReadFile(dir_.Sub("s0.log"))
                                   << testing::ReadFile(dir_.Sub("coordinator.log"));
  }
  const Counts before = CountsOf(port);
  EXPECT_EQ(before.compiled, 4) << testing::ReadFile(dir_.Sub("a1.log"));
  // The device takes nothing while the builder works.
  worker->Signal(SIGSTOP);
  dir_.Write("s1.toml", "[sweep]\nname = \"s1\"\nops = [\"tiny\"]\ndtypes = [\"f32\"]\ngpus = [\"sim-h100\"]\n" +
                            search + "shapes = [ { N = 8192 } ]\n");
  testing::Child submit({TUNEFARM_BINARY, "submit", dir_.Sub("s1.toml"), "--coordinator", endpoint_, "--ops-dir",
                         dir_.Sub("ops"), "--curve-key", dir_.Sub("client"), "--coordinator-key",
                         dir_.Sub("coordinator.pub")},
                        dir_.Sub("s1.log"));
  EXPECT_EQ(submit.Wait(60), 0) << testing::ReadFile(dir_.Sub("s1.log"));
  const std::string submitted = testing::ReadFile(dir_.Sub("s1.log"));
  const std::string sweep_id = submitted.substr(0, submitted.find('\n'));
  testing::Child builder({TUNEFARM_BINARY, "worker", "--compile-only", "--arch", "sm_90", "--connect", endpoint_,
                          "--name", "builder", "--curve-key", dir_.Sub("builder"), "--coordinator-key",
                          dir_.Sub("coordinator.pub"), "--compile-threads", "1", "--cache-dir",
                          dir_.Sub("builder-cache"), "-v"},
                         dir_.Sub("builder.log"));
  const double built = CoordinatorMetricOnce("tunefarm_builder_images_total", double(configs), builder);
  EXPECT_EQ(built, double(configs)) << testing::ReadFile(dir_.Sub("builder.log"))
                                    << testing::ReadFile(dir_.Sub("coordinator.log"));
  worker->Signal(SIGCONT);
  testing::Child wait({TUNEFARM_BINARY, "status", sweep_id, "--wait", "--coordinator", endpoint_, "--curve-key",
                       dir_.Sub("client"), "--coordinator-key", dir_.Sub("coordinator.pub")},
                      dir_.Sub("s1-wait.log"));
  EXPECT_EQ(wait.Wait(240), 0) << testing::ReadFile(dir_.Sub("s1-wait.log"))
                               << testing::ReadFile(dir_.Sub("coordinator.log"));
  const Counts after = CountsOf(port);
  const nlohmann::json p1 = PipelineOf("s1");
  EXPECT_EQ(builder.Stop(10), 0) << testing::ReadFile(dir_.Sub("builder.log"));
  EXPECT_EQ(worker->Stop(10), 0) << testing::ReadFile(dir_.Sub("a1.log"));
  const std::vector<Measurement> rows = RowsOf(8192);  // the store, once the coordinator stopped
  EXPECT_EQ(after.compiled - before.compiled, 0) << testing::ReadFile(dir_.Sub("a1.log"));
  EXPECT_EQ(after.fetched - before.fetched, int(rows.size())) << testing::ReadFile(dir_.Sub("a1.log"));
  EXPECT_EQ(built, double(rows.size()));
  EXPECT_TRUE(p1.is_object());
  if (p1.is_object()) {
    EXPECT_EQ(p1["compiled"].get<uint64_t>(), 0u) << p1;
    EXPECT_EQ(p1["fetched"].get<uint64_t>(), rows.size()) << p1;
  }
  for (const Measurement& m : rows) {
    EXPECT_TRUE(m.Valid()) << m.config.Canonical() << ": " << m.failure_message;
    EXPECT_EQ(m.arch, "sm_90");
  }
  return rows;
}

TEST_F(BuilderFarm, TheBuilderCompilesAheadAndTheDeviceCompilesNothing) {
  EXPECT_EQ(BuiltAheadOfTheDevice("strategy = \"exhaustive\"\n", 4).size(), 4u);
}

// A searched key proposes as its devices lease; with its device stopped,
// the builder's request has it propose its first batch, which the builder
// compiles and the device then fetches.
TEST_F(BuilderFarm, ASearchedKeyProposesAheadForTheBuilder) {
  EXPECT_EQ(BuiltAheadOfTheDevice("strategy = \"random\"\nbudget = 3\nseed = 7\n", 3).size(), 3u);
}

}  // namespace
}  // namespace tune
