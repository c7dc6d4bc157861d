// One sweep through every real part: a coordinator and three workers as
// separate processes on loopback (sim backend), a real RocksDB store, and a
// published bundle whose winners must be the store's minima.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "support/process.h"
#include "bundle/bundle.h"
#include "publish/publish.h"
#include "opspec/config_space.h"
#include "opspec/op_definition.h"
#include "store/result_store.h"

namespace fs = std::filesystem;
using tune::testing::Child;

namespace {

class MultiProcessSweep : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tunefarm-mp-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    endpoint_ = "tcp://127.0.0.1:" + std::to_string(tune::testing::FreePort());
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes `sweep_toml` to sweep.toml and runs it to the end on a real
  // coordinator (store at Path("store")) and one sim worker process per
  // entry of `models`, each with `faults`; every process must exit cleanly.
  void RunSweep(const std::string& sweep_toml, const std::vector<std::string>& models,
                const std::string& faults) {
    std::ofstream(Path("sweep.toml")) << sweep_toml;
    Child coordinator({bin_, "coordinator", "--bind", endpoint_, "--store", Path("store"), "--heartbeat-ms", "200"},
                      Path("coordinator.log"));
    std::vector<std::unique_ptr<Child>> workers;
    for (size_t i = 0; i < models.size(); ++i) {
      workers.push_back(std::make_unique<Child>(
          std::vector<std::string>{bin_, "worker", "--connect", endpoint_, "--backend", "sim", "--sim-models",
                                   models[i], "--name", "w" + std::to_string(i), "--sim-faults", faults},
          Path("worker" + std::to_string(i) + ".log")));
    }
    // Let every worker say hello so that "*" covers every model.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    Child submit({bin_, "submit", Path("sweep.toml"), "--coordinator", endpoint_, "--ops-dir", ops_dir_, "--wait"},
                 Path("submit.log"));
    ASSERT_EQ(submit.Wait(240), 0) << tune::testing::ReadFile(Path("submit.log"))
                                   << tune::testing::ReadFile(Path("coordinator.log"));
    for (auto& w : workers) EXPECT_EQ(w->Stop(), 0);
    EXPECT_EQ(coordinator.Stop(), 0) << tune::testing::ReadFile(Path("coordinator.log"));
  }

  const std::string bin_ = TUNEFARM_BINARY;
  const std::string ops_dir_ = std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops";
  fs::path dir_;
  std::string endpoint_;
};

TEST_F(MultiProcessSweep, EveryPairStoredOnceAndBundleWinnerIsStoreMinimumOrTiedWithIt) {
  const std::string store = Path("store");
  // Two GPU models across three hosts: sim-h100 twice, sim-a100 once.
  ASSERT_NO_FATAL_FAILURE(RunSweep("[sweep]\nname = \"mp\"\nops = [\"synthetic\"]\ndtypes = [\"f32\"]\n"
                                   "gpus = [\"*\"]\nconfigs_per_unit = 25\n"
                                   "shapes = [ { N = 1024 }, { N = 65536 }, { N = 1048576 }, { N = 16777216 } ]\n",
                                   {"h100", "h100", "a100"}, "compile=0.02,crash=0.01,wrong=0.01,nan=0.01"));

  // The expected pairs: every legal config of each model x every shape.
  auto spec = tune::LoadOpSpec(ops_dir_ + "/synthetic");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  const std::vector<std::string> shapes = {"N=1024", "N=65536", "N=1048576", "N=16777216"};
  auto store_db = tune::ResultStore::Open(store);
  ASSERT_TRUE(store_db.ok()) << store_db.status().message();
  uint64_t expected = 0;
  for (const std::string model : {"sim-h100", "sim-a100"}) {
    tune::DeviceInfo dev;
    dev.max_threads_per_block = 1024;
    auto configs = tune::EnumerateConfigs(*spec, dev);
    ASSERT_TRUE(configs.ok());
    std::set<std::string> want, got;
    for (const auto& c : *configs)
      for (const auto& s : shapes) want.insert(c.Id() + "|" + s);
    uint64_t rows = 0;
    ASSERT_TRUE((*store_db)->Scan({model, "synthetic", "f32", "", ""}, [&](const tune::Measurement& m) {
      ++rows;
      EXPECT_TRUE(got.insert(m.config_id + "|" + m.shape).second) << "pair stored twice";
      EXPECT_EQ(m.backend, "sim");
      return true;
    }).ok());
    EXPECT_EQ(rows, want.size()) << model;
    EXPECT_EQ(got, want) << model;
    expected += want.size();
  }
  EXPECT_GE(expected, 2000u);
  auto total = (*store_db)->CountResults();
  ASSERT_TRUE(total.ok());
  EXPECT_EQ(*total, expected);

  // Store minimum per (model, shape), over valid rows only, and every
  // valid row's (median, ci95).
  std::map<std::string, std::pair<double, std::string>> minimum;
  std::map<std::string, std::pair<double, double>> figure;  // model|shape|config id
  uint64_t failures = 0;
  ASSERT_TRUE((*store_db)->Scan({}, [&](const tune::Measurement& m) {
    if (!m.Valid()) {
      ++failures;
      return true;
    }
    auto& slot = minimum[m.gpu_model + "|" + m.shape];
    if (slot.second.empty() || m.median_us < slot.first) slot = {m.median_us, m.config_id};
    figure[m.gpu_model + "|" + m.shape + "|" + m.config_id] = {m.median_us, m.ci95_us};
    return true;
  }).ok());
  EXPECT_GT(failures, 0u) << "injected faults must be recorded as results";
  store_db->reset();

  Child publish({bin_, "publish", "--store", store, "--out", Path("bundle")}, Path("publish.log"));
  ASSERT_EQ(publish.Wait(60), 0) << tune::testing::ReadFile(Path("publish.log"));
  auto bundle = tune::ReadBundleFile(Path("bundle.tfb"));
  ASSERT_TRUE(bundle.ok()) << bundle.status().message();
  ASSERT_EQ(bundle->entries.size(), minimum.size());
  // The winner is the store's minimum or a config tied with it (within 1%
  // or the two CIs; publish's StableWinners), with its own stored figure.
  for (const auto& e : bundle->entries) {
    const std::string key = e.gpu_model + "|" + e.shape.Canonical();
    const auto& min = minimum.at(key);
    const auto& min_figure = figure.at(key + "|" + min.second);
    const auto it = figure.find(key + "|" + e.config_id);
    ASSERT_NE(it, figure.end()) << key << ": the winner is no stored valid row";
    EXPECT_DOUBLE_EQ(e.median_us, it->second.first);
    const bool tied = e.median_us <= min.first * (1 + tune::kTieWithin) ||
                      e.median_us - it->second.second <= min.first + min_figure.second;
    EXPECT_TRUE(e.config_id == min.second || tied) << key << ": " << e.median_us << " against " << min.first;
  }

  // `bundle lookup` answers as a deployment's runtime does, its switch too.
  const tune::BundleEntry& e = bundle->entries.front();
  int lookups = 0;
  auto lookup = [&](std::vector<std::string> argv) {
    const std::string log = Path("lookup" + std::to_string(++lookups) + ".log");
    for (const auto& a : {std::string("bundle"), std::string("lookup"), Path("bundle.tfb"), std::string("--op"), e.op,
                          std::string("--dtype"), e.dtype, std::string("--gpu"), e.gpu_model, std::string("--shape"),
                          e.shape.Canonical()}) {
      argv.push_back(a);
    }
    Child c(argv, log);
    EXPECT_EQ(c.Wait(30), 0) << tune::testing::ReadFile(log);
    return tune::testing::ReadFile(log);
  };
  EXPECT_EQ(lookup({bin_}), "exact " + e.config.Canonical() + "\n");
  EXPECT_EQ(lookup({"/usr/bin/env", "TUNEFARM_FORCE_DEFAULTS=1", bin_}),
            "default " + bundle->defaults.at(e.op).Canonical() + " (TUNEFARM_FORCE_DEFAULTS is set)\n");

  // The CLI's exit statuses: 0 for an answer, 1 when the work fails (here:
  // nothing matches, and the message says what the store holds), 2 for a
  // command line that does not parse.
  auto run = [&](std::vector<std::string> argv, std::string* out) {
    const std::string log = Path("cli" + std::to_string(++lookups) + ".log");
    argv.insert(argv.begin(), bin_);
    Child c(argv, log);
    const int rc = c.Wait(30);
    *out = tune::testing::ReadFile(log);
    return rc;
  };
  std::string out;
  EXPECT_EQ(run({"best", "--store", store, "--gpu", "h100"}, &out), 1) << out;
  EXPECT_NE(out.find("the store holds GPU models [sim-a100, sim-h100]"), std::string::npos) << out;
  EXPECT_EQ(run({"best", "--store", store, "--gpu", "sim-h100"}, &out), 0) << out;
  EXPECT_EQ(run({"results", "--store", store, "--no-such-option"}, &out), 2) << out;
  EXPECT_EQ(run({"results", "--store", store, "--format", "yaml"}, &out), 2) << out;
  EXPECT_EQ(run({"bundle", "lookup", Path("bundle.tfb"), "--op", "synthetic", "--dtype", "f32", "--gpu", "sim-h100",
                 "--shape", "N=oops"}, &out), 2) << out;
  EXPECT_EQ(run({"--help"}, &out), 0) << out;
  // A default answer says why the chain fell through to it.
  EXPECT_EQ(run({"bundle", "lookup", Path("bundle.tfb"), "--op", "synthetic", "--dtype", "f16", "--gpu", "sim-h100",
                 "--shape", "N=4096"}, &out), 0) << out;
  EXPECT_NE(out.find("(no tuned entry of synthetic/f16)"), std::string::npos) << out;
  EXPECT_EQ(run({"bundle", "lookup", Path("bundle.tfb"), "--op", "synthetic", "--dtype", "f16", "--gpu", "sim-h100",
                 "--shape", "N=4096", "--format", "json"}, &out), 0) << out;
  const auto answer = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(answer.is_object()) << out;
  EXPECT_EQ(answer.value("level", ""), "default");
  EXPECT_EQ(answer.value("why", ""), "no tuned entry of synthetic/f16");
}

TEST_F(MultiProcessSweep, ConfirmPhaseRetimesTheFastestConfigsOfEachShapeAndTheyWin) {
  const std::string store = Path("store");
  ASSERT_NO_FATAL_FAILURE(RunSweep("[sweep]\nname = \"confirm\"\nops = [\"synthetic\"]\ndtypes = [\"f32\"]\n"
                                   "gpus = [\"*\"]\nconfirm_top = 3\nconfirm_seconds = 0.2\n"
                                   "shapes = [ { N = 1024 }, { N = 1048576 } ]\n",
                                   {"h100", "h100"}, "wrong=0.02"));

  auto spec = tune::LoadOpSpec(ops_dir_ + "/synthetic");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  tune::DeviceInfo dev;
  dev.max_threads_per_block = 1024;
  auto configs = tune::EnumerateConfigs(*spec, dev);
  ASSERT_TRUE(configs.ok());
  auto db = tune::ResultStore::Open(store);
  ASSERT_TRUE(db.ok()) << db.status().message();
  // Confirm rows replace rows; they add none.
  EXPECT_EQ(*(*db)->CountResults(), configs->size() * 2);
  struct PerShape {
    std::map<std::string, double> confirmed;  // config id -> median
    double slowest_confirmed = 0, fastest_other = 1e300;
  };
  std::map<std::string, PerShape> shapes;
  ASSERT_TRUE((*db)->Scan({"sim-h100", "synthetic", "f32", "", ""}, [&](const tune::Measurement& m) {
    PerShape& p = shapes[m.shape];
    if (m.pass == tune::Measurement::Pass::kConfirm) {
      EXPECT_TRUE(m.Valid()) << m.config_id;
      EXPECT_GE(m.samples, 15u) << "at least three windows of five samples";
      p.confirmed[m.config_id] = m.median_us;
      p.slowest_confirmed = std::max(p.slowest_confirmed, m.median_us);
    } else if (m.Valid()) {
      p.fastest_other = std::min(p.fastest_other, m.median_us);
    }
    return true;
  }).ok());
  ASSERT_EQ(shapes.size(), 2u);
  for (const auto& [shape, p] : shapes) {
    // The top 3, and the near-ties within 2% of the leader after them (at
    // most twice the top: ContendersOf).
    EXPECT_GE(p.confirmed.size(), 3u) << shape;
    EXPECT_LE(p.confirmed.size(), 6u) << shape;
    // The confirmed configs were the fastest: timed again they moved by the
    // sim's 1% noise at most, nowhere near the rest.
    EXPECT_LE(p.slowest_confirmed, 1.04 * p.fastest_other) << shape;
  }
  db->reset();

  Child publish({bin_, "publish", "--store", store, "--out", Path("bundle")}, Path("publish.log"));
  ASSERT_EQ(publish.Wait(60), 0) << tune::testing::ReadFile(Path("publish.log"));
  auto bundle = tune::ReadBundleFile(Path("bundle.tfb"));
  ASSERT_TRUE(bundle.ok()) << bundle.status().message();
  ASSERT_EQ(bundle->entries.size(), 2u);
  for (const auto& e : bundle->entries) {
    const PerShape& p = shapes.at(e.shape.Canonical());
    ASSERT_TRUE(p.confirmed.count(e.config_id)) << "the winner must be a confirmed config";
    // The fastest confirmed config, or one tied with it (StableWinners).
    for (const auto& [id, median] : p.confirmed) EXPECT_LE(e.median_us, (1 + tune::kTieWithin) * median + e.ci95_us);
  }
}

}  // namespace

namespace {

// A client that waits is told what it waits for and may stop waiting: a
// sweep for a GPU model no worker has says so, --timeout ends the wait with
// how to re-attach, status --wait re-attaches, and the sweep goes on until
// cancelled.
TEST_F(MultiProcessSweep, WaitingClientsAreToldWhatTheyWaitForAndMayStopWaiting) {
  std::ofstream(Path("sweep.toml")) << "[sweep]\nname = \"nobody-has-it\"\nops = [\"synthetic\"]\ndtypes = [\"f32\"]\n"
                                       "gpus = [\"l40s\"]\nshapes = [ { N = 1048576 } ]\n";
  Child coordinator({bin_, "coordinator", "--bind", endpoint_, "--store", Path("store"), "--heartbeat-ms", "200"},
                    Path("coordinator.log"));
  Child worker({bin_, "worker", "--connect", endpoint_, "--backend", "sim", "--sim-models", "h100", "--name", "w0"},
               Path("worker.log"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  Child submit({bin_, "submit", Path("sweep.toml"), "--coordinator", endpoint_, "--ops-dir", ops_dir_, "--wait",
                "--timeout", "2"},
               Path("submit.log"));
  EXPECT_EQ(submit.Wait(60), 1);
  const std::string log = tune::testing::ReadFile(Path("submit.log"));
  EXPECT_NE(log.find("waiting for l40s: no live worker has it"), std::string::npos) << log;
  const size_t at = log.find("still running after");
  ASSERT_NE(at, std::string::npos) << log;
  const std::string id = log.substr(0, log.find('\n'));
  // The hint is a command to paste: the farm's flags are in it.
  EXPECT_NE(log.find("tunefarm status " + id + " --wait --coordinator " + endpoint_, at), std::string::npos) << log;
  Child again({bin_, "status", id, "--coordinator", endpoint_, "--wait", "--timeout", "1"}, Path("again.log"));
  EXPECT_EQ(again.Wait(60), 1);
  EXPECT_NE(tune::testing::ReadFile(Path("again.log")).find("still running after"), std::string::npos)
      << tune::testing::ReadFile(Path("again.log"));
  Child cancel({bin_, "cancel", id, "--coordinator", endpoint_}, Path("cancel.log"));
  EXPECT_EQ(cancel.Wait(60), 0) << tune::testing::ReadFile(Path("cancel.log"));
  Child ended({bin_, "status", id, "--coordinator", endpoint_, "--wait"}, Path("ended.log"));
  EXPECT_EQ(ended.Wait(60), 1);
  EXPECT_NE(tune::testing::ReadFile(Path("ended.log")).find("cancelled"), std::string::npos)
      << tune::testing::ReadFile(Path("ended.log"));
  EXPECT_EQ(worker.Stop(), 0);
  EXPECT_EQ(coordinator.Stop(), 0);
}

}  // namespace

namespace {

// The shortest prefix of `id` that no id of `others` begins with.
std::string UniquePrefix(const std::string& id, const std::vector<std::string>& others) {
  size_t n = 1;
  for (const std::string& o : others) {
    size_t same = 0;
    while (same < id.size() && same < o.size() && id[same] == o[same]) ++same;
    n = std::max(n, same + 1);
  }
  return id.substr(0, n);
}

// `cancel` and `status` take a sweep id's unique prefix, name the matches
// of an ambiguous one, and `cancel` of an ended sweep, before or after a
// coordinator restart, says how it ended and exits 0.
TEST_F(MultiProcessSweep, CancelAndStatusTakeIdPrefixesAndCancelOfAnEndedSweepSaysSo) {
  auto first_line = [](const std::string& text) { return text.substr(0, text.find('\n')); };
  std::ofstream(Path("done.toml")) << "[sweep]\nname = \"ends\"\nops = [\"synthetic\"]\ndtypes = [\"f32\"]\n"
                                      "gpus = [\"*\"]\nshapes = [ { N = 1024 } ]\n";
  std::ofstream(Path("waits.toml")) << "[sweep]\nname = \"waits\"\nops = [\"synthetic\"]\ndtypes = [\"f32\"]\n"
                                       "gpus = [\"l40s\"]\nshapes = [ { N = 1024 } ]\n";
  auto coordinator = std::make_unique<Child>(
      std::vector<std::string>{bin_, "coordinator", "--bind", endpoint_, "--store", Path("store"), "--heartbeat-ms",
                               "200"},
      Path("coordinator.log"));
  Child worker({bin_, "worker", "--connect", endpoint_, "--backend", "sim", "--sim-models", "h100", "--name", "w0"},
               Path("worker.log"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  Child done({bin_, "submit", Path("done.toml"), "--coordinator", endpoint_, "--ops-dir", ops_dir_, "--wait"},
             Path("done.log"));
  ASSERT_EQ(done.Wait(120), 0) << tune::testing::ReadFile(Path("done.log"));
  const std::string a = first_line(tune::testing::ReadFile(Path("done.log")));
  std::vector<std::string> waiting;
  for (int i = 0; i < 2; ++i) {
    const std::string log = Path("waits" + std::to_string(i) + ".log");
    Child submit({bin_, "submit", Path("waits.toml"), "--coordinator", endpoint_, "--ops-dir", ops_dir_}, log);
    ASSERT_EQ(submit.Wait(60), 0) << tune::testing::ReadFile(log);
    waiting.push_back(first_line(tune::testing::ReadFile(log)));
  }
  const std::string& b = waiting[0];
  const std::string& c = waiting[1];
  ASSERT_NE(b, c);

  // A unique prefix names its sweep.
  Child cancel({bin_, "cancel", UniquePrefix(b, {a, c}), "--coordinator", endpoint_}, Path("cancel.log"));
  EXPECT_EQ(cancel.Wait(60), 0) << tune::testing::ReadFile(Path("cancel.log"));
  EXPECT_NE(tune::testing::ReadFile(Path("cancel.log")).find("sweep " + b + " cancelled"), std::string::npos)
      << tune::testing::ReadFile(Path("cancel.log"));
  // A prefix that two sweeps share is refused, naming both.
  size_t shared = 0;
  while (b[shared] == c[shared]) ++shared;
  ASSERT_GT(shared, 0u);  // ids begin with their submit time
  Child ambiguous({bin_, "status", b.substr(0, shared), "--coordinator", endpoint_}, Path("ambiguous.log"));
  EXPECT_EQ(ambiguous.Wait(60), 1);
  const std::string why = tune::testing::ReadFile(Path("ambiguous.log"));
  EXPECT_NE(why.find("ambiguous"), std::string::npos) << why;
  EXPECT_NE(why.find(b), std::string::npos) << why;
  EXPECT_NE(why.find(c), std::string::npos) << why;

  // An ended sweep is left as it ended, and `cancel` says so.
  Child again({bin_, "cancel", a, "--coordinator", endpoint_}, Path("again.log"));
  EXPECT_EQ(again.Wait(60), 0) << tune::testing::ReadFile(Path("again.log"));
  EXPECT_NE(tune::testing::ReadFile(Path("again.log")).find("sweep " + a + " is done already"), std::string::npos)
      << tune::testing::ReadFile(Path("again.log"));

  // After a restart the ended sweeps are known from their records.
  EXPECT_EQ(coordinator->Stop(), 0);
  coordinator = std::make_unique<Child>(
      std::vector<std::string>{bin_, "coordinator", "--bind", endpoint_, "--store", Path("store"), "--heartbeat-ms",
                               "200"},
      Path("coordinator2.log"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  Child restarted({bin_, "cancel", UniquePrefix(a, {b, c}), "--coordinator", endpoint_}, Path("restarted.log"));
  EXPECT_EQ(restarted.Wait(60), 0) << tune::testing::ReadFile(Path("restarted.log"));
  EXPECT_NE(tune::testing::ReadFile(Path("restarted.log")).find("sweep " + a + " is done already"),
            std::string::npos)
      << tune::testing::ReadFile(Path("restarted.log"));
  Child status({bin_, "status", UniquePrefix(b, {a, c}), "--coordinator", endpoint_}, Path("status.log"));
  EXPECT_EQ(status.Wait(60), 0) << tune::testing::ReadFile(Path("status.log"));
  EXPECT_NE(tune::testing::ReadFile(Path("status.log")).find(b), std::string::npos)
      << tune::testing::ReadFile(Path("status.log"));
  EXPECT_EQ(worker.Stop(), 0);
  EXPECT_EQ(coordinator->Stop(), 0);
}

}  // namespace

namespace {

// Names label rows, logs and metrics: a second live worker of a name is
// refused, with the reason, and the first goes on.
TEST_F(MultiProcessSweep, ASecondLiveWorkerOfANameIsRefused) {
  Child coordinator({bin_, "coordinator", "--bind", endpoint_, "--store", Path("store"), "--heartbeat-ms", "200"},
                    Path("coordinator.log"));
  Child first({bin_, "worker", "--connect", endpoint_, "--backend", "sim", "--name", "gpu0"}, Path("first.log"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  Child second({bin_, "worker", "--connect", endpoint_, "--backend", "sim", "--name", "gpu0"}, Path("second.log"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(second.Stop(), 0);
  EXPECT_EQ(first.Stop(), 0);
  EXPECT_EQ(coordinator.Stop(), 0);
  const std::string log = tune::testing::ReadFile(Path("coordinator.log"));
  EXPECT_NE(log.find("a live worker is already named 'gpu0'"), std::string::npos) << log;
  EXPECT_NE(tune::testing::ReadFile(Path("second.log")).find("already named 'gpu0'"), std::string::npos)
      << tune::testing::ReadFile(Path("second.log"));
  EXPECT_EQ(tune::testing::ReadFile(Path("first.log")).find("disconnected us"), std::string::npos)
      << tune::testing::ReadFile(Path("first.log"));
}

}  // namespace
