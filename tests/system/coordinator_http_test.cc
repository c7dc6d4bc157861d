// The coordinator's HTTP side end to end: a real coordinator process with a
// sim worker runs a sweep; /api/sweeps, /api/workers, /api/best and /metrics
// report it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>

#include <filesystem>
#include <fstream>

#include "support/http_get.h"
#include "support/process.h"

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
