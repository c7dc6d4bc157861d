// A farm over CURVE: the coordinator admits the worker and client keys on its
// allow-list and nobody else; a sweep runs end to end through encrypted links.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/process.h"
#include "tune/result_store.h"

namespace fs = std::filesystem;
using tune::testing::Child;
using tune::testing::ReadFile;

TEST(CurveFarm, AllowListedWorkerMeasuresUnknownWorkerGetsNothing) {
  const std::string bin = TUNEFARM_BINARY;
  const fs::path dir = fs::temp_directory_path() / ("tunefarm-curve-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto path = [&](const std::string& n) { return (dir / n).string(); };
  for (const char* who : {"coordinator", "worker", "client", "stranger"}) {
    Child keygen({bin, "keys", "curve", "--out", path(who), "--name", who}, path("keys.log"));
    ASSERT_EQ(keygen.Wait(20), 0) << ReadFile(path("keys.log"));
  }
  {
    std::ofstream allow(path("allowed"));
    allow << ReadFile(path("worker.pub")) << ReadFile(path("client.pub"));
    std::ofstream sweep(path("sweep.toml"));
    sweep << "[sweep]\nname = \"curve\"\nops = [\"synthetic\"]\ndtypes = [\"f32\"]\n"
             "shapes = [ { N = 4096 } ]\n";
  }
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(tune::testing::FreePort());
  Child coordinator({bin, "coordinator", "--bind", endpoint, "--store", path("store"), "--curve-key",
                     path("coordinator"), "--allow-list", path("allowed"), "-v"},
                    path("coordinator.log"));
  auto worker = [&](const std::string& name, const std::string& key) {
    return std::make_unique<Child>(
        std::vector<std::string>{bin, "worker", "--connect", endpoint, "--backend", "sim", "--name",
                                 name, "--curve-key", path(key), "--coordinator-key",
                                 path("coordinator.pub")},
        path(name + ".log"));
  };
  auto stranger = worker("stranger", "stranger");
  auto allowed = worker("allowed", "worker");
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  Child submit({bin, "submit", path("sweep.toml"), "--coordinator", endpoint, "--ops-dir",
                std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops", "--curve-key", path("client"),
                "--coordinator-key", path("coordinator.pub"), "--wait"},
               path("submit.log"));
  ASSERT_EQ(submit.Wait(120), 0) << ReadFile(path("submit.log")) << ReadFile(path("coordinator.log"));
  // A client that is not on the list gets no answer.
  Child refused({bin, "status", "--coordinator", endpoint, "--curve-key", path("stranger"),
                 "--coordinator-key", path("coordinator.pub")},
                path("refused.log"));
  EXPECT_EQ(refused.Wait(30), 1);
  EXPECT_NE(ReadFile(path("refused.log")).find("did not answer"), std::string::npos);
  allowed->Stop();
  stranger->Stop();
  ASSERT_EQ(coordinator.Stop(), 0);

  const std::string log = ReadFile(path("coordinator.log"));
  EXPECT_EQ(log.find("hello from stranger"), std::string::npos) << log;
  EXPECT_NE(log.find("hello from allowed"), std::string::npos) << log;
  auto store = tune::ResultStore::Open(path("store"));
  ASSERT_TRUE(store.ok()) << store.status().message();
  uint64_t rows = 0;
  ASSERT_TRUE((*store)->Scan({}, [&](const tune::Measurement& m) {
    ++rows;
    EXPECT_EQ(m.worker, "allowed");
    return true;
  }).ok());
  EXPECT_EQ(rows, 600u);
  if (!HasFailure()) fs::remove_all(dir);
}

TEST(CurveFarm, NonLoopbackBindWithoutKeysIsRefused) {
  const fs::path dir = fs::temp_directory_path() / ("tunefarm-curve-refuse-" + std::to_string(getpid()));
  fs::create_directories(dir);
  Child coordinator({TUNEFARM_BINARY, "coordinator", "--bind", "tcp://*:0", "--store",
                     (dir / "store").string()},
                    (dir / "log").string());
  EXPECT_EQ(coordinator.Wait(20), 1);
  EXPECT_NE(ReadFile((dir / "log").string()).find("not loopback"), std::string::npos);
  fs::remove_all(dir);
}
