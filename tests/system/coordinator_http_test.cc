// The coordinator's HTTP side end to end: a real coordinator process with a
// sim worker runs a sweep; /api/sweeps, /api/workers, /api/best and /metrics
// report it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <sstream>
#include <thread>

#include <filesystem>
#include <fstream>

#include "store/result_store.h"
#include "support/http_get.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using tune::testing::Child;
using tune::testing::ReadFile;

namespace {

// The body of a 200 answer to GET `path`; "" otherwise.
std::string Get(int port, const std::string& path) {
  const std::string resp = tune::testing::HttpGet(port, path);
  auto body = resp.find("\r\n\r\n");
  if (resp.rfind("HTTP/1.1 200", 0) != 0 || body == std::string::npos) return "";
  return resp.substr(body + 4);
}

}  // namespace

TEST(CoordinatorHttp, ApiAndMetricsFollowASweep) {
  const fs::path dir = fs::temp_directory_path() / ("tunefarm-http-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto path = [&](const std::string& n) { return (dir / n).string(); };
  std::ofstream(path("sweep.toml")) << "[sweep]\nname = \"web\"\nops = [\"synthetic\"]\n"
                                       "dtypes = [\"f32\"]\nshapes = [ { N = 4096 } ]\n";
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(tune::testing::FreePort());
  const int http = tune::testing::FreePort();
  Child coordinator({TUNEFARM_BINARY, "coordinator", "--bind", endpoint, "--store", path("store"),
                     "--http-port", std::to_string(http)},
                    path("coordinator.log"));
  Child worker({TUNEFARM_BINARY, "worker", "--connect", endpoint, "--backend", "sim", "--sim-models",
                "a100", "--name", "web-worker"},
               path("worker.log"));
  Child submit({TUNEFARM_BINARY, "submit", path("sweep.toml"), "--coordinator", endpoint, "--ops-dir",
                std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops", "--wait"},
               path("submit.log"));
  ASSERT_EQ(submit.Wait(120), 0) << ReadFile(path("submit.log"));
  // Snapshots refresh every second, best rows every five.
  std::string sweeps, best, metrics, workers;
  for (int i = 0; i < 100; ++i) {
    sweeps = Get(http, "/api/sweeps");
    best = Get(http, "/api/best");
    if (sweeps.find("\"done\"") != std::string::npos && best.find("sim-a100") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  workers = Get(http, "/api/workers");
  metrics = Get(http, "/metrics");
  const nlohmann::json compare = nlohmann::json::parse(Get(http, "/api/compare"), nullptr, false);
  EXPECT_NE(sweeps.find("\"name\":\"web\""), std::string::npos) << sweeps;
  // 600 configs screened, then refined: on the sim's cost model every
  // synthetic config lies within 8% of the best.
  EXPECT_NE(sweeps.find("\"pairs_done\":1200"), std::string::npos) << sweeps;
  EXPECT_NE(workers.find("web-worker"), std::string::npos) << workers;
  EXPECT_NE(workers.find("Simulated A100"), std::string::npos) << workers;
  EXPECT_NE(workers.find("\"leases\":0"), std::string::npos) << workers;  // the sweep is done: none held
  EXPECT_NE(best.find("\"gpu_model\":\"sim-a100\""), std::string::npos) << best;
  EXPECT_NE(sweeps.find("\"failed_by_class\":{}"), std::string::npos) << sweeps;  // nothing failed
  // The comparison carries throughput and roofline share: the synthetic op
  // moves 2*N*dsize bytes, and the sim model has a peak bandwidth.
  ASSERT_EQ(compare["groups"].size(), 1u) << compare.dump();
  const auto& gpu = compare["groups"][0]["gpus"].at(0);
  EXPECT_EQ(gpu["gpu_model"], "sim-a100");
  EXPECT_EQ(gpu["unit"], "GB/s");
  EXPECT_NEAR(gpu["throughput"].get<double>(), 2 * 4096 * 4 / (gpu["median_us"].get<double>() * 1e3), 1e-6);
  EXPECT_GT(gpu["roofline_share"].get<double>(), 0);
  EXPECT_NE(metrics.find("tunefarm_results_stored_total 1200"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("tunefarm_workers 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("tunefarm_sweep_pairs{"), std::string::npos) << metrics;
  // Prometheus's naming rule (promtool check metrics): "_total" is for
  // counters only.
  std::istringstream lines(metrics);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# TYPE ", 0) != 0 || line.find(" counter") != std::string::npos) continue;
    const std::string name = line.substr(7, line.find(' ', 7) - 7);
    EXPECT_FALSE(name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0) << line;
  }
  EXPECT_NE(Get(http, "/").find("<html"), std::string::npos);
  worker.Stop();
  EXPECT_EQ(coordinator.Stop(), 0);
  if (!HasFailure()) fs::remove_all(dir);
}

namespace {

// (gpu_model, op, dtype, shape) -> the winner's config id.
using WinnerMap = std::map<std::string, std::string>;
std::string KeyOf(const std::string& gpu, const std::string& op, const std::string& dtype, const std::string& shape) {
  return gpu + " " + op + "/" + dtype + " " + shape;
}
// Winners from a JSON array of rows (dashboard, `best`, Python).
WinnerMap WinnersOfRows(const nlohmann::json& rows) {
  WinnerMap out;
  for (const auto& r : rows)
    out[KeyOf(r["gpu_model"], r["op"], r["dtype"], r["shape"])] = r["config_id"].get<std::string>();
  return out;
}

}  // namespace

// One rule names each key's winner: the dashboard, `best`, `compare`,
// `publish` (the bundle) and Python agree on a store with near-ties (the
// sim's synthetic configs lie within a few percent of each other, and a
// planted key's fastest config is 0.5% ahead of one with a smaller id, which
// the tie rule picks). A sweep also stays on the dashboard after a restart,
// as `status` lists it.
TEST(CoordinatorHttp, EveryAnswerNamesTheSameWinnersAndARestartForgetsNoSweep) {
  tune::testing::TempDir dir;
  {
    auto store = tune::ResultStore::Open(dir.Sub("store"));
    ASSERT_TRUE(store.ok()) << store.status().message();
    auto row = [](int64_t n, double us) {
      tune::Measurement m;
      m.gpu_model = "h100-80gb-hbm3";
      m.op = "synthetic";
      m.dtype = "f32";
      m.shape = "N=2048";
      m.kernel_hash = "planted";
      m.config.params = {{"TILE", n}, {"UNROLL", 1}, {"SPLIT", 1}, {"PAD", 0}};
      m.config_id = m.config.Id();
      m.check_passed = true;
      m.samples = 25;
      m.median_us = m.mean_us = us;
      m.ci95_us = us / 1000;
      m.backend = "cuda";
      m.device_name = "NVIDIA H100 80GB HBM3";
      m.unix_time = 2000;
      return m;
    };
    tune::Measurement a = row(64, 100.0), b = row(128, 100.5);
    if (a.config_id < b.config_id) std::swap(a.median_us, b.median_us);  // the fastest has the larger id
    ASSERT_TRUE((*store)->Put(a).ok());
    ASSERT_TRUE((*store)->Put(b).ok());
  }
  dir.Write("sweep.toml", "[sweep]\nname = \"ties\"\nops = [\"synthetic\"]\ndtypes = [\"f32\"]\n"
                          "shapes = [ { N = 4096 }, { N = 1024 } ]\n");
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(tune::testing::FreePort());
  const int http = tune::testing::FreePort();
  const std::vector<std::string> coordinator_args = {TUNEFARM_BINARY, "coordinator", "--bind", endpoint, "--store",
                                                     dir.Sub("store"), "--http-port", std::to_string(http)};
  auto coordinator = std::make_unique<Child>(coordinator_args, dir.Sub("coordinator.log"));
  {
    Child worker({TUNEFARM_BINARY, "worker", "--connect", endpoint, "--backend", "sim", "--sim-models", "h100"},
                 dir.Sub("worker.log"));
    Child submit({TUNEFARM_BINARY, "submit", dir.Sub("sweep.toml"), "--coordinator", endpoint, "--ops-dir",
                  std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops", "--wait"},
                 dir.Sub("submit.log"));
    ASSERT_EQ(submit.Wait(180), 0) << ReadFile(dir.Sub("submit.log"));
    worker.Stop();
  }
  // The dashboard's best rows are rebuilt every five seconds.
  WinnerMap dashboard;
  for (int i = 0; i < 150 && dashboard.size() < 3; ++i) {
    const nlohmann::json best = nlohmann::json::parse(Get(http, "/api/best"), nullptr, false);
    if (!best.is_discarded()) dashboard = WinnersOfRows(best["best"]);
    if (dashboard.size() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(dashboard.size(), 3u) << Get(http, "/api/best");
  EXPECT_EQ(coordinator->Stop(), 0);
  // Restarted: the sweep that ended before is still listed.
  coordinator = std::make_unique<Child>(coordinator_args, dir.Sub("coordinator2.log"));
  std::string sweeps;
  for (int i = 0; i < 100 && sweeps.find("\"name\":\"ties\"") == std::string::npos; ++i) {
    sweeps = Get(http, "/api/sweeps");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_NE(sweeps.find("\"name\":\"ties\""), std::string::npos) << sweeps;
  EXPECT_EQ(coordinator->Stop(), 0);
  coordinator.reset();

  auto run = [&](const std::string& log, std::vector<std::string> args) {
    Child c(std::move(args), dir.Sub(log));
    EXPECT_EQ(c.Wait(120), 0) << ReadFile(dir.Sub(log));
    const nlohmann::json doc = nlohmann::json::parse(ReadFile(dir.Sub(log)), nullptr, false);
    EXPECT_FALSE(doc.is_discarded()) << ReadFile(dir.Sub(log));
    return doc;
  };
  const WinnerMap best =
      WinnersOfRows(run("best.json", {TUNEFARM_BINARY, "best", "--store", dir.Sub("store"), "--format", "json"}));
  WinnerMap compare;
  const nlohmann::json compared =
      run("compare.json", {TUNEFARM_BINARY, "compare", "--store", dir.Sub("store"), "--format", "json"});
  for (const auto& r : compared["rows"])
    for (const auto& w : r["winners"])
      if (w["present"].get<bool>()) compare[KeyOf(w["gpu_model"], r["op"], r["dtype"], r["shape"])] = w["config_id"];
  Child publish({TUNEFARM_BINARY, "publish", "--store", dir.Sub("store"), "--out", dir.Sub("bundle"), "--unsigned"},
                dir.Sub("publish.log"));
  ASSERT_EQ(publish.Wait(120), 0) << ReadFile(dir.Sub("publish.log"));
  WinnerMap bundle;
  const nlohmann::json published = nlohmann::json::parse(ReadFile(dir.Sub("bundle.json")));
  for (const auto& e : published["entries"])
    bundle[KeyOf(e["gpu_model"], e["op"], e["dtype"], "N=" + std::to_string(e["shape"]["N"].get<int64_t>()))] =
        e["config_id"];
  const WinnerMap python = WinnersOfRows(run(
      "python.json", {"/usr/bin/env", "PYTHONPATH=" + std::string(TUNEFARM_SOURCE_DIR) + "/python",
                      std::string("TUNEFARM_FARM_LIB=") + TUNEFARM_FARM_LIB, TUNEFARM_PYTHON3, "-c",
                      "import json, sys, tunefarm\n"
                      "rows = tunefarm.Farm.open_store(sys.argv[1]).best()\n"
                      "print(json.dumps([dict(r, config=None, shape=','.join('%s=%d' % d for d in r['shape'].items()))\n"
                      "                  for r in rows]))\n",
                      dir.Sub("store")}));
  const std::string planted = KeyOf("h100-80gb-hbm3", "synthetic", "f32", "N=2048");
  ASSERT_TRUE(best.count(planted)) << ReadFile(dir.Sub("best.json"));
  EXPECT_EQ(best.at(planted), std::min(tune::Config{{{"TILE", 64}, {"UNROLL", 1}, {"SPLIT", 1}, {"PAD", 0}}}.Id(),
                                       tune::Config{{{"TILE", 128}, {"UNROLL", 1}, {"SPLIT", 1}, {"PAD", 0}}}.Id()))
      << "the tie rule's winner: the smaller config id";
  EXPECT_EQ(dashboard, best);
  EXPECT_EQ(compare, best);
  EXPECT_EQ(bundle, best);
  EXPECT_EQ(python, best);
}
