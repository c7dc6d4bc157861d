// Chaos: a coordinator and 8 workers as real processes (sim backend). Workers
// are SIGKILLed at random and restarted, the coordinator is SIGKILLed and
// restarted twice; at the end the store must hold every (config, shape) pair
// exactly once and the bundle must equal the one from a fault-free run.
//
// Knobs for the long benchmark version (bench/chaos.sh):
//   TUNEFARM_CHAOS_SHAPES  shapes per model (default 25: 2 x 600 x 25 = 30,000 pairs)
//   TUNEFARM_CHAOS_BUSY    simulated seconds per measurement (default 0.002)
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "support/process.h"
#include "bundle/bundle.h"
#include "store/result_store.h"

namespace fs = std::filesystem;
using tune::testing::Child;
using tune::testing::ReadFile;

namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

class Farm {
 public:
  Farm(fs::path dir, std::string busy) : dir_(std::move(dir)), busy_(std::move(busy)) {
    endpoint_ = "tcp://127.0.0.1:" + std::to_string(tune::testing::FreePort());
  }
  std::string Path(const std::string& n) const { return (dir_ / n).string(); }
  const std::string& endpoint() const { return endpoint_; }

  void StartCoordinator() {
    coordinator_ = std::make_unique<Child>(
        std::vector<std::string>{TUNEFARM_BINARY, "coordinator", "--bind", endpoint_, "--store",
                                 Path("store"), "--heartbeat-ms", "200", "--liveness", "5",
                                 "--lease-base", "20", "--lease-per-pair", "0.05", "-v"},
        Path("coordinator.log"));
  }
  void KillCoordinator() {
    coordinator_->Signal(SIGKILL);
    coordinator_->Wait(10);
  }
  int StopCoordinator() { return coordinator_->Stop(10); }

  void StartWorker(size_t i) {
    const char* model = i % 2 ? "a100" : "h100";
    workers_.resize(std::max(workers_.size(), i + 1));
    workers_[i] = std::make_unique<Child>(
        std::vector<std::string>{TUNEFARM_BINARY, "worker", "--connect", endpoint_, "--backend",
                                 "sim", "--sim-models", model, "--name", "w" + std::to_string(i),
                                 "--sim-faults", "busy=" + busy_, "-v"},
        Path("worker" + std::to_string(i) + ".log"));
  }
  void KillWorker(size_t i) {
    workers_[i]->Signal(SIGKILL);
    workers_[i]->Wait(10);
  }
  void StopWorkers() {
    for (auto& w : workers_) w->Stop(10);
  }

 private:
  fs::path dir_;
  std::string busy_, endpoint_;
  std::unique_ptr<Child> coordinator_;
  std::vector<std::unique_ptr<Child>> workers_;
};

void WriteSweep(const std::string& path, int shapes) {
  std::ofstream f(path);
  f << "[sweep]\nname = \"chaos\"\nops = [\"synthetic\"]\ndtypes = [\"f32\"]\ngpus = [\"*\"]\n"
       "configs_per_unit = 20\nshapes = [";
  for (int i = 0; i < shapes; ++i) f << (i ? ", " : " ") << "{ N = " << (4096 + 8192 * i) << " }";
  f << " ]\n";
}

// Runs the sweep to completion, with or without chaos, and returns the
// bundle path.
std::string RunSweep(const fs::path& dir, bool chaos, int shapes, const std::string& busy,
                     uint64_t* pairs) {
  fs::create_directories(dir);
  Farm farm(dir, chaos ? busy : "0");
  WriteSweep(farm.Path("sweep.toml"), shapes);
  farm.StartCoordinator();
  const size_t kWorkers = 8;
  for (size_t i = 0; i < kWorkers; ++i) farm.StartWorker(i);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // both models said hello
  Child submit({TUNEFARM_BINARY, "submit", farm.Path("sweep.toml"), "--coordinator",
                farm.endpoint(), "--ops-dir", std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops",
                "--wait"},
               farm.Path("submit.log"));
  if (chaos) {
    std::mt19937 rng(12345);
    int coordinator_kills = 0;
    for (int tick = 0; submit.Wait(0.01) == -1 && tick < 400; ++tick) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500 + rng() % 1000));
      const size_t victim = rng() % kWorkers;
      farm.KillWorker(victim);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      farm.StartWorker(victim);
      if ((tick == 3 || tick == 7) && coordinator_kills < 2) {
        farm.KillCoordinator();
        std::this_thread::sleep_for(std::chrono::milliseconds(700));
        farm.StartCoordinator();
        ++coordinator_kills;
      }
    }
    EXPECT_EQ(coordinator_kills, 2) << "the sweep ended before the coordinator was killed twice; "
                                       "raise TUNEFARM_CHAOS_BUSY";
  }
  EXPECT_EQ(submit.Wait(300), 0) << ReadFile(farm.Path("submit.log"));
  farm.StopWorkers();
  EXPECT_EQ(farm.StopCoordinator(), 0);

  auto store = tune::ResultStore::Open(farm.Path("store"));
  EXPECT_TRUE(store.ok()) << store.status().message();
  if (!store.ok()) return "";
  std::set<std::string> seen;
  uint64_t rows = 0;
  EXPECT_TRUE((*store)->Scan({}, [&](const tune::Measurement& m) {
    ++rows;
    EXPECT_TRUE(seen.insert(m.gpu_model + "|" + m.config_id + "|" + m.shape).second);
    return true;
  }).ok());
  *pairs = rows;
  store->reset();
  Child publish({TUNEFARM_BINARY, "publish", "--store", farm.Path("store"), "--out",
                 farm.Path("bundle")},
                farm.Path("publish.log"));
  EXPECT_EQ(publish.Wait(60), 0) << ReadFile(farm.Path("publish.log"));
  return farm.Path("bundle.tfb");
}

TEST(Chaos, KilledWorkersAndCoordinatorRestartsLoseAndDoubleNothing) {
  const int shapes = EnvInt("TUNEFARM_CHAOS_SHAPES", 25);
  const char* busy_env = std::getenv("TUNEFARM_CHAOS_BUSY");
  const std::string busy = busy_env ? busy_env : "0.002";
  const fs::path dir = fs::temp_directory_path() / ("tunefarm-chaos-" + std::to_string(getpid()));
  fs::remove_all(dir);

  uint64_t clean_pairs = 0, chaos_pairs = 0;
  const std::string clean = RunSweep(dir / "clean", false, shapes, busy, &clean_pairs);
  const std::string chaotic = RunSweep(dir / "chaos", true, shapes, busy, &chaos_pairs);
  const uint64_t expected = 2ull * 600 * shapes;  // two models x 600 configs x shapes
  EXPECT_EQ(clean_pairs, expected);
  EXPECT_EQ(chaos_pairs, expected);

  auto a = tune::ReadBundleFile(clean);
  auto b = tune::ReadBundleFile(chaotic);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(a->entries.size(), b->entries.size());
  std::map<std::string, std::pair<std::string, double>> want;
  for (const auto& e : a->entries) want[e.gpu_model + "|" + e.shape.Canonical()] = {e.config_id, e.median_us};
  for (const auto& e : b->entries) {
    const auto& w = want.at(e.gpu_model + "|" + e.shape.Canonical());
    EXPECT_EQ(e.config_id, w.first) << e.gpu_model << " " << e.shape.Canonical();
    EXPECT_DOUBLE_EQ(e.median_us, w.second);
  }
  if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace
