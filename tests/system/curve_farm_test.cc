// A farm over CURVE: the coordinator admits the worker and client keys on its
// allow-list and nobody else; a sweep runs end to end through encrypted links.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <fstream>
#include <sstream>

#include "support/process.h"
#include "store/result_store.h"

namespace fs = std::filesystem;
using tune::testing::Child;
using tune::testing::ReadFile;

namespace {

// An empty folder of this process under the system's temp folder.
fs::path FreshDir(const std::string& prefix) {
  const fs::path dir = fs::temp_directory_path() / (prefix + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// `tunefarm keys curve` for each name: dir/name and dir/name.pub.
void MakeKeys(const fs::path& dir, std::initializer_list<const char*> names) {
  for (const char* who : names) {
    const std::string out = (dir / who).string(), log = (dir / "keys.log").string();
    Child keygen({TUNEFARM_BINARY, "keys", "curve", "--out", out, "--name", who}, log);
    ASSERT_EQ(keygen.Wait(20), 0) << ReadFile(log);
  }
}

}  // namespace

TEST(CurveFarm, AllowListedWorkerMeasuresUnknownWorkerGetsNothing) {
  const std::string bin = TUNEFARM_BINARY;
  const fs::path dir = FreshDir("tunefarm-curve-");
  auto path = [&](const std::string& n) { return (dir / n).string(); };
  ASSERT_NO_FATAL_FAILURE(MakeKeys(dir, {"coordinator", "worker", "client", "stranger"}));
  {
    std::ofstream allow(path("allowed"));
    allow << ReadFile(path("worker.pub"));
    std::ofstream clients(path("clients"));
    clients << ReadFile(path("client.pub"));
    std::ofstream sweep(path("sweep.toml"));
    sweep << "[sweep]\nname = \"curve\"\nops = [\"synthetic\"]\ndtypes = [\"f32\"]\n"
             "shapes = [ { N = 4096 } ]\n";
  }
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(tune::testing::FreePort());
  Child coordinator({bin, "coordinator", "--bind", endpoint, "--store", path("store"), "--curve-key",
                     path("coordinator"), "--allow-list", path("allowed"), "--client-allow-list",
                     path("clients"), "-v"},
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
  auto client_as_worker = worker("client-as-worker", "client");  // a client key cannot lease
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  // A worker key cannot submit.
  Child worker_submit({bin, "submit", path("sweep.toml"), "--coordinator", endpoint, "--ops-dir",
                       std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops", "--curve-key", path("worker"),
                       "--coordinator-key", path("coordinator.pub")},
                      path("worker_submit.log"));
  EXPECT_NE(worker_submit.Wait(60), 0) << ReadFile(path("worker_submit.log"));
  EXPECT_NE(ReadFile(path("worker_submit.log")).find("refused the request: a worker key may not send sweep_submit"),
            std::string::npos)
      << ReadFile(path("worker_submit.log"));
  Child submit({bin, "submit", path("sweep.toml"), "--coordinator", endpoint, "--ops-dir",
                std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops", "--curve-key", path("client"),
                "--coordinator-key", path("coordinator.pub"), "--wait"},
               path("submit.log"));
  ASSERT_EQ(submit.Wait(120), 0) << ReadFile(path("submit.log")) << ReadFile(path("coordinator.log"));
  // A client that is not on the list is refused at the handshake, and told so.
  Child refused({bin, "status", "--coordinator", endpoint, "--curve-key", path("stranger"),
                 "--coordinator-key", path("coordinator.pub")},
                path("refused.log"));
  EXPECT_EQ(refused.Wait(30), 1);
  EXPECT_NE(ReadFile(path("refused.log")).find("refused this client's key (CURVE status 400)"), std::string::npos)
      << ReadFile(path("refused.log"));
  allowed->Stop();
  stranger->Stop();
  client_as_worker->Stop();
  ASSERT_EQ(coordinator.Stop(), 0);

  const std::string log = ReadFile(path("coordinator.log"));
  EXPECT_EQ(log.find("hello worker=stranger "), std::string::npos) << log;
  EXPECT_EQ(log.find("hello worker=client-as-worker "), std::string::npos) << log;
  EXPECT_NE(log.find("a client key may not send hello"), std::string::npos) << log;
  EXPECT_NE(log.find("a worker key may not send sweep_submit"), std::string::npos) << log;
  EXPECT_EQ(log.find("' accepted"), log.rfind("' accepted")) << "one sweep only: " << log;
  EXPECT_NE(log.find("hello worker=allowed "), std::string::npos) << log;
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

// A worker key taken off the allow-list loses its live connection (the
// coordinator re-reads the list) and its leases go back to the queue: another
// worker finishes the sweep, and the revoked key never says hello again.
TEST(CurveFarm, RevokedWorkerKeyLosesItsConnectionAndItsLeases) {
  const std::string bin = TUNEFARM_BINARY;
  const fs::path dir = FreshDir("tunefarm-curve-revoke-");
  auto path = [&](const std::string& n) { return (dir / n).string(); };
  ASSERT_NO_FATAL_FAILURE(MakeKeys(dir, {"coordinator", "w1", "w2", "client"}));
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(path(name + ".new")) << text;
    fs::rename(path(name + ".new"), path(name));  // as an editor or ansible would
  };
  write("allowed", ReadFile(path("w1.pub")) + ReadFile(path("w2.pub")));
  write("clients", ReadFile(path("client.pub")));
  write("sweep.toml",
        "[sweep]\nname = \"revoke\"\nops = [\"synthetic\"]\ndtypes = [\"f32\"]\nshapes = [ { N = 4096 } ]\n");
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(tune::testing::FreePort());
  Child coordinator({bin, "coordinator", "--bind", endpoint, "--store", path("store"), "--curve-key",
                     path("coordinator"), "--allow-list", path("allowed"), "--client-allow-list",
                     path("clients"), "-v"},
                    path("coordinator.log"));
  auto worker = [&](const std::string& name, const std::string& busy) {
    return std::make_unique<Child>(
        std::vector<std::string>{bin, "worker", "--connect", endpoint, "--backend", "sim", "--name", name,
                                 "--curve-key", path(name), "--coordinator-key", path("coordinator.pub"),
                                 "--sim-faults", "busy=" + busy},
        path(name + ".log"));
  };
  auto w1 = worker("w1", "0.01");  // 600 configs at 10 ms: still leasing when revoked
  Child submit({bin, "submit", path("sweep.toml"), "--coordinator", endpoint, "--ops-dir",
                std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops", "--curve-key", path("client"),
                "--coordinator-key", path("coordinator.pub"), "--wait"},
               path("submit.log"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  write("allowed", ReadFile(path("w2.pub")));
  std::this_thread::sleep_for(std::chrono::milliseconds(3500));  // the list is checked every 2 s
  auto w2 = worker("w2", "0");
  ASSERT_EQ(submit.Wait(120), 0) << ReadFile(path("submit.log")) << ReadFile(path("coordinator.log"));
  w1->Stop();
  w2->Stop();
  ASSERT_EQ(coordinator.Stop(), 0);

  const std::string log = ReadFile(path("coordinator.log"));
  EXPECT_NE(log.find("is no longer on"), std::string::npos) << log;
  EXPECT_TRUE(std::regex_search(log, std::regex("coordinator: lease [^\n]* worker=w1\n")))
      << "w1 leased nothing before it was revoked: " << log;
  const size_t first = log.find("hello worker=w1 ");
  ASSERT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find("hello worker=w1 ", first + 1), std::string::npos) << "w1 came back: " << log;
  EXPECT_NE(log.find("hello worker=w2 "), std::string::npos) << log;
  auto store = tune::ResultStore::Open(path("store"));
  ASSERT_TRUE(store.ok()) << store.status().message();
  uint64_t rows = 0;
  ASSERT_TRUE((*store)->Scan({}, [&](const tune::Measurement&) {
    ++rows;
    return true;
  }).ok());
  EXPECT_EQ(rows, 600u);
  if (!HasFailure()) fs::remove_all(dir);
}

// An edit that leaves a malformed line in the worker list still applies the
// rest of it: the key taken off loses its live connection and never says
// hello again, the key still listed keeps working and finishes the sweep.
TEST(CurveFarm, AMalformedLineInTheAllowListStillRevokesTheKeysTakenOff) {
  const std::string bin = TUNEFARM_BINARY;
  const fs::path dir = FreshDir("tunefarm-curve-malformed-");
  auto path = [&](const std::string& n) { return (dir / n).string(); };
  ASSERT_NO_FATAL_FAILURE(MakeKeys(dir, {"coordinator", "w1", "w2", "client"}));
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(path(name + ".new")) << text;
    fs::rename(path(name + ".new"), path(name));
  };
  write("allowed", ReadFile(path("w1.pub")) + ReadFile(path("w2.pub")));
  write("clients", ReadFile(path("client.pub")));
  write("sweep.toml",
        "[sweep]\nname = \"malformed\"\nops = [\"synthetic\"]\ndtypes = [\"f32\"]\nshapes = [ { N = 4096 } ]\n");
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(tune::testing::FreePort());
  Child coordinator({bin, "coordinator", "--bind", endpoint, "--store", path("store"), "--curve-key",
                     path("coordinator"), "--allow-list", path("allowed"), "--client-allow-list",
                     path("clients"), "-v"},
                    path("coordinator.log"));
  auto worker = [&](const std::string& name) {
    return std::make_unique<Child>(
        std::vector<std::string>{bin, "worker", "--connect", endpoint, "--backend", "sim", "--name", name,
                                 "--curve-key", path(name), "--coordinator-key", path("coordinator.pub"),
                                 "--sim-faults", "busy=0.02"},
        path(name + ".log"));
  };
  auto w1 = worker("w1");
  auto w2 = worker("w2");  // 600 configs at 20 ms on two workers: still leasing when w1 is revoked
  Child submit({bin, "submit", path("sweep.toml"), "--coordinator", endpoint, "--ops-dir",
                std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops", "--curve-key", path("client"),
                "--coordinator-key", path("coordinator.pub"), "--wait"},
               path("submit.log"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  write("allowed", "# w1 is gone\nw1-key-goes-here\n" + ReadFile(path("w2.pub")));
  ASSERT_EQ(submit.Wait(120), 0) << ReadFile(path("submit.log")) << ReadFile(path("coordinator.log"));
  w1->Stop();
  w2->Stop();
  ASSERT_EQ(coordinator.Stop(), 0);

  const std::string log = ReadFile(path("coordinator.log"));
  auto key_of = [&](const std::string& name) {  // the first line that is not a comment
    std::istringstream in(ReadFile(path(name + ".pub")));
    std::string line;
    while (std::getline(in, line) && (line.empty() || line[0] == '#')) {
    }
    return line.substr(0, 40);
  };
  const std::string w1_key = key_of("w1"), w2_key = key_of("w2");
  EXPECT_NE(log.find(path("allowed") + ":2: 'w1-key-g"), std::string::npos) << log;
  EXPECT_NE(log.find("(line skipped)"), std::string::npos) << log;
  EXPECT_NE(log.find("key " + w1_key + " is no longer on"), std::string::npos) << "w1 was never revoked: " << log;
  EXPECT_EQ(log.find("key " + w2_key + " is no longer on"), std::string::npos) << "w2 lost its connection: " << log;
  const size_t first = log.find("hello worker=w1 ");
  ASSERT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find("hello worker=w1 ", first + 1), std::string::npos) << "w1 came back: " << log;
  const size_t w2_hello = log.find("hello worker=w2 ");
  ASSERT_NE(w2_hello, std::string::npos) << log;
  EXPECT_EQ(log.find("hello worker=w2 ", w2_hello + 1), std::string::npos) << "w2 had to reconnect: " << log;
  auto store = tune::ResultStore::OpenReadOnly(path("store"));
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ(*(*store)->CountResults(), 600u);
  if (!HasFailure()) fs::remove_all(dir);
}
