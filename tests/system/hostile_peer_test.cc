// Hostile peers at the coordinator's door. Each test runs a real coordinator
// process on loopback, a hostile peer that speaks the protocol by hand, and
// honest sim workers, and asserts that the coordinator keeps serving a real
// sweep to completion, that nothing forged or stale is stored or published,
// and that nothing honest is lost.
// Long on purpose: one test per class of hostile input, sharing one fixture.
#include <gtest/gtest.h>

#include <ctime>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <thread>
#include <zmq.hpp>

#include "support/http_get.h"
#include "support/process.h"
#include "support/protocol_peer.h"
#include "support/temp_dir.h"
#include "opspec/op_definition.h"
#include "opspec/sweep_file.h"
#include "protocol/protocol.h"
#include "store/records.h"
#include "store/result_store.h"

namespace tune {
namespace {

namespace fs = std::filesystem;
using testing::Child;
using testing::ReadFile;
using Peer = testing::ProtocolPeer;

constexpr char kModel[] = "sim-a100";  // what `--sim-models a100` workers have
constexpr char kSweep[] =
    "[sweep]\nname = \"honest\"\nops = [\"synthetic\"]\ndtypes = [\"f32\"]\nshapes = [ { N = 4096 } ]\n";
// The synthetic op's 600 configs: a sweep stores a row per config (its
// refined row replaces its screening one).
constexpr uint64_t kSweepRows = 600;

using testing::HttpGet;

class HostilePeerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    endpoint_ = "tcp://127.0.0.1:" + std::to_string(testing::FreePort());
    http_ = testing::FreePort();
    fs::create_directories(dir_.Sub("ops"));
    fs::copy(std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops/synthetic", dir_.Sub("ops/synthetic"),
             fs::copy_options::recursive);
    dir_.Write("sweep.toml", kSweep);
  }
  void TearDown() override {
    for (auto& w : workers_) w->Stop();
    if (coordinator_) {
      EXPECT_EQ(coordinator_->Stop(10), 0) << CoordinatorLog();
    }
  }

  void StartCoordinator(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {TUNEFARM_BINARY, "coordinator", "--bind", endpoint_, "--store", Store(),
                                     "--http-port", std::to_string(http_), "-v"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    coordinator_ = std::make_unique<Child>(argv, dir_.Sub("coordinator.log"));
    // Up once it answers a status request.
    Peer probe(ctx_, endpoint_);
    probe.Send(SweepStatusRequest{});
    ASSERT_TRUE(probe.ReceiveAny().has_value()) << CoordinatorLog();
  }
  void StartHonestWorker(const std::string& name = "honest") {
    workers_.push_back(std::make_unique<Child>(
        std::vector<std::string>{TUNEFARM_BINARY, "worker", "--connect", endpoint_, "--backend", "sim",
                                 "--sim-models", "a100", "--name", name},
        dir_.Sub(name + ".log")));
  }
  // `tunefarm submit` of a sweep file: its exit status; the log in *log.
  int Submit(const std::string& sweep_file, bool wait, std::string* log = nullptr) {
    std::vector<std::string> argv = {TUNEFARM_BINARY, "submit", sweep_file, "--coordinator", endpoint_,
                                     "--ops-dir", dir_.Sub("ops")};
    if (wait) argv.push_back("--wait");
    Child submit(argv, dir_.Sub("submit.log"));
    const int rc = submit.Wait(120);
    if (log) *log = ReadFile(dir_.Sub("submit.log"));
    return rc;
  }
  // The honest farm at work: a sweep of the synthetic op runs to completion.
  void ExpectAHonestSweepCompletes() {
    std::string log;
    EXPECT_EQ(Submit(dir_.Sub("sweep.toml"), true, &log), 0) << log << CoordinatorLog();
  }
  std::string Store() const { return store_override_.empty() ? dir_.Sub("store") : store_override_; }
  std::string CoordinatorLog() const { return ReadFile(dir_.Sub("coordinator.log")); }
  std::vector<Measurement> Rows() {
    std::vector<Measurement> rows;
    auto store = ResultStore::OpenReadOnly(Store());
    EXPECT_TRUE(store.ok()) << store.status().message();
    if (!store.ok()) return rows;
    EXPECT_TRUE((*store)->Scan({}, [&](const Measurement& m) {
      rows.push_back(m);
      return true;
    }).ok());
    return rows;
  }
  OpPackage Package(const std::string& op = "synthetic") {
    auto pkg = ReadOpPackage(dir_.Sub("ops/" + op));
    EXPECT_TRUE(pkg.ok()) << pkg.status().message();
    return pkg.ok() ? *pkg : OpPackage{};
  }
  static DeviceInfo Device(const std::string& model, int index = 0) {
    DeviceInfo d;
    d.index = index;
    d.name = "Simulated " + model;
    d.model = model;
    d.backend = "sim";
    d.nvrtc_version = "sim";
    d.max_threads_per_block = 1024;
    return d;
  }
  // `op`'s op.toml with `from` replaced by `to`, as a new op folder `name`.
  void EditOp(const std::string& name, const std::string& from, const std::string& to) {
    if (!fs::exists(dir_.Sub("ops/" + name))) {
      fs::copy(dir_.Sub("ops/synthetic"), dir_.Sub("ops/" + name), fs::copy_options::recursive);
    }
    std::string toml = ReadFile(dir_.Sub("ops/" + name + "/op.toml"));
    const size_t at = toml.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    toml.replace(at, from.size(), to);
    dir_.Write("ops/" + name + "/op.toml", toml);
  }
  std::string Metrics() { return HttpGet(http_, "/metrics"); }
  // Polls the coordinator until sweep `id` ends (two minutes at most); its
  // last state.
  std::string WaitForSweep(const std::string& id) {
    Peer client(ctx_, endpoint_);
    std::string state;
    for (int i = 0; i < 1200 && (state.empty() || state == "running"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      client.Send(SweepStatusRequest{id});
      const auto status = client.Receive<SweepStatus>();
      state = status.sweeps.empty() ? "" : status.sweeps[0].state;
    }
    return state;
  }

  testing::TempDir dir_{"hostile_peer_test"};
  std::string endpoint_;
  int http_ = 0;
  zmq::context_t ctx_;
  std::unique_ptr<Child> coordinator_;
  std::vector<std::unique_ptr<Child>> workers_;
  std::string store_override_;
};

using testing::MetricValue;

TEST_F(HostilePeerTest, InvalidUtf8InAnyTextFieldIsAProtocolErrorNotACrash) {
  StartCoordinator();
  const std::string bad = "host\xff\xfe:1";
  std::vector<std::pair<std::string, Command>> commands;
  commands.emplace_back("hello.workerName", Hello{bad, "0.1", {Device(kModel)}});
  commands.emplace_back("hello.farmVersion", Hello{"host:1", bad, {Device(kModel)}});
  DeviceInfo named = Device(kModel);
  named.name = bad;
  commands.emplace_back("device name", Hello{"host:1", "0.1", {named}});
  SweepSubmit submit;
  submit.name = bad;
  commands.emplace_back("sweepSubmit.name", submit);
  commands.emplace_back("sweepStatusRequest.sweepId", SweepStatusRequest{bad});
  commands.emplace_back("disconnect.reason", tune::Disconnect{bad});
  commands.emplace_back("results.sweepId", Results{bad, 1, 0, true, {}, {}, {}, {}, {}});
  for (auto& [what, cmd] : commands) {
    Peer hostile(ctx_, endpoint_);
    hostile.Send(cmd);
    auto reply = hostile.Receive<tune::Disconnect>();
    EXPECT_NE(reply.reason.find("not valid UTF-8"), std::string::npos) << what << ": " << reply.reason;
  }
  {
    Peer hostile(ctx_, endpoint_);
    hostile.Send(Heartbeat{}, bad);  // the envelope's own sender
    EXPECT_NE(hostile.Receive<tune::Disconnect>().reason.find("sender"), std::string::npos);
  }
  StartHonestWorker();
  ExpectAHonestSweepCompletes();
  EXPECT_EQ(Rows().size(), kSweepRows);
  std::string metrics;
  for (int i = 0; i < 50 && MetricValue(metrics = Metrics(), "tunefarm_protocol_errors_total") < 8; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GE(MetricValue(metrics, "tunefarm_protocol_errors_total"), 8) << metrics;
  EXPECT_NE(HttpGet(http_, "/api/workers").find("honest"), std::string::npos);
}

// A device's power limit is a label of its energy figures: one that is no
// power (NaN, negative, past any board) ends the hello; an honest worker's
// shows in the workers document.
TEST_F(HostilePeerTest, ADevicesPowerLimitIsCheckedAtTheDoorAndListed) {
  StartCoordinator();
  for (double limit : {std::nan(""), -1.0, 1e9}) {
    DeviceInfo device = Device(kModel);
    device.power_limit_w = limit;
    Peer hostile(ctx_, endpoint_);
    hostile.Send(Hello{"host:1", "0.1", {device}});
    const std::string reason = hostile.Receive<tune::Disconnect>().reason;
    EXPECT_NE(reason.find("power limit"), std::string::npos) << limit << ": " << reason;
  }
  DeviceInfo device = Device(kModel);
  device.power_limit_w = 700;
  Peer labelled(ctx_, endpoint_);
  labelled.Send(Hello{"labelled:1", "0.1", {device}});
  labelled.Receive<HelloAck>();
  std::string workers;  // the documents are snapshots, a second apart
  for (int i = 0; i < 100 && (workers = HttpGet(http_, "/api/workers")).find("labelled") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_NE(workers.find("\"power_limit_w\":700"), std::string::npos) << workers;
}

// Bytes that are not UTF-8 in rows stored before the codec checked text:
// the coordinator opens such a store and serves it, and every JSON writer
// replaces them.
TEST_F(HostilePeerTest, AStoreHoldingInvalidUtf8OpensAndEveryJsonWriterServesIt) {
  {
    auto store = ResultStore::Open(Store());
    ASSERT_TRUE(store.ok()) << store.status().message();
    Measurement m;
    m.gpu_model = kModel;
    m.op = "synth\xff" "etic";
    m.dtype = "f32";
    m.shape = "N=4096";
    m.kernel_hash = "0123456789abcdef0123456789abcdef";
    m.config = Config{{{"TILE", 64}}};
    m.config_id = m.config.Id();
    m.median_us = m.mean_us = m.min_us = m.max_us = 5;
    m.samples = 5;
    m.check_passed = true;
    m.backend = "sim";
    m.worker = "old\xc3\x28worker";
    m.device_name = "\xff";
    ASSERT_TRUE((*store)->Put(m).ok());
  }
  StartCoordinator();
  std::string best;
  for (int i = 0; i < 100 && best.find("200 OK") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    best = HttpGet(http_, "/api/best");
  }
  EXPECT_NE(best.find("200 OK"), std::string::npos) << best;
  EXPECT_NE(best.find("\"sim-a100\""), std::string::npos) << best;
  for (const std::vector<std::string>& argv :
       {std::vector<std::string>{"results", "--store", Store(), "--format", "json"},
        std::vector<std::string>{"compare", "--store", Store(), "--format", "json"},
        std::vector<std::string>{"compare", "--store", Store(), "--format", "html"}}) {
    std::vector<std::string> full = {TUNEFARM_BINARY};
    full.insert(full.end(), argv.begin(), argv.end());
    Child report(full, dir_.Sub("report.log"));
    EXPECT_EQ(report.Wait(60), 0) << argv[0] << " " << argv.back() << ": " << ReadFile(dir_.Sub("report.log"));
    if (argv[0] == "results") {
      EXPECT_NE(ReadFile(dir_.Sub("report.log")).find("synth\xef\xbf\xbd" "etic"), std::string::npos)
          << ReadFile(dir_.Sub("report.log"));
    }
  }
  StartHonestWorker();
  ExpectAHonestSweepCompletes();
}

TEST_F(HostilePeerTest, ResultsThatDoNotMatchTheirLeaseAreRefusedAndNothingForgedIsStored) {
  StartCoordinator();
  Peer hostile(ctx_, endpoint_);
  hostile.Send(Hello{"hostile:1", "0.1", {Device(kModel)}});
  hostile.Receive<HelloAck>();
  std::string submitted;
  ASSERT_EQ(Submit(dir_.Sub("sweep.toml"), false, &submitted), 0);
  const std::string sweep_id = submitted.substr(0, submitted.find('\n'));
  const WorkUnit unit = hostile.RequestUnit();
  ASSERT_FALSE(unit.configs.empty());
  auto spec = ParseOpSpec(Package(), "synthetic");
  ASSERT_TRUE(spec.ok());
  auto row = [&](const Config& c, double median) {
    Measurement m;
    m.gpu_model = kModel;
    m.op = unit.op;
    m.dtype = unit.dtype;
    m.shape = unit.shapes.at(0).Canonical();
    m.kernel_hash = KernelHash(*spec, "sim");
    m.config = c;
    m.config_id = c.Id();
    m.median_us = m.mean_us = m.min_us = m.max_us = median;
    m.samples = 5;
    m.check_passed = true;
    m.backend = "sim";
    return m;
  };
  // A unit never leased, a -1 us winner, a config outside the space.
  hostile.Send(Results{unit.sweep_id, 777, 0, true, {row(unit.configs[0], 1)}, {}, {}, {}, {}});
  EXPECT_NE(hostile.Receive<ResultsAck>().refused.find("not leased"), std::string::npos);
  hostile.Send(Results{unit.sweep_id, unit.unit_id, 0, false, {row(unit.configs[0], -1)}, {}, {}, {}, {}});
  EXPECT_NE(hostile.Receive<ResultsAck>().refused.find("median_us"), std::string::npos);
  hostile.Send(Results{unit.sweep_id, unit.unit_id, 1, true, {row(Config{{{"TILE", 7}, {"UNROLL", 99}}}, 0.5)}, {}, {}, {}, {}});
  EXPECT_NE(hostile.Receive<ResultsAck>().refused.find("does not hold"), std::string::npos);
  // Three refusals: disconnected, and its lease went back to the queue.
  EXPECT_NE(hostile.Receive<tune::Disconnect>().reason.find("refused"), std::string::npos);

  StartHonestWorker();
  EXPECT_EQ(WaitForSweep(sweep_id), "done") << CoordinatorLog();
  const auto rows = Rows();
  EXPECT_EQ(rows.size(), kSweepRows);
  for (const auto& m : rows) {
    EXPECT_EQ(m.worker, "honest");
    EXPECT_GT(m.median_us, 0);
  }
  std::string metrics;
  for (int i = 0; i < 50 && MetricValue(metrics = Metrics(), "tunefarm_results_refused_total") != 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a snapshot a second
  }
  EXPECT_EQ(MetricValue(metrics, "tunefarm_results_refused_total"), 3) << metrics;
}

// A worker's figures and clock are checked against what can be: a median
// faster than the device's physics (its op's metrics at a bound above
// every GPU's peak) is refused as impossible, and rows are stored with the
// coordinator's time, not the sender's (whose skew it is told).
TEST_F(HostilePeerTest, ImpossibleFiguresAreRefusedAndRowsKeepTheCoordinatorsClock) {
  StartCoordinator();
  Peer hostile(ctx_, endpoint_);
  DeviceInfo device = Device(kModel);
  device.num_sms = 132;
  device.sm_clock_mhz = 1980;
  hostile.Send(Hello{"skewed:1", "0.1", {device}});
  hostile.Receive<HelloAck>();
  ASSERT_EQ(Submit(dir_.Sub("sweep.toml"), false), 0);
  const WorkUnit unit = hostile.RequestUnit();
  ASSERT_FALSE(unit.configs.empty());
  auto spec = ParseOpSpec(Package(), "synthetic");
  ASSERT_TRUE(spec.ok());
  auto row = [&](double median, int64_t unix_time) {
    Measurement m;
    m.gpu_model = kModel;
    m.op = unit.op;
    m.dtype = unit.dtype;
    m.shape = unit.shapes.at(0).Canonical();
    m.kernel_hash = KernelHash(*spec, "sim");
    m.config = unit.configs[0];
    m.config_id = unit.configs[0].Id();
    m.median_us = m.mean_us = m.min_us = m.max_us = median;
    m.samples = 5;
    m.check_passed = true;
    m.backend = "sim";
    m.unix_time = unix_time;
    return m;
  };
  const int64_t now = std::time(nullptr);
  hostile.Send(Results{unit.sweep_id, unit.unit_id, 0, false, {row(1e-6, now)}, {}, {}, {}, {}});
  const ResultsAck impossible = hostile.Receive<ResultsAck>();
  EXPECT_NE(impossible.refused.find("impossible"), std::string::npos) << impossible.refused;
  // A plausible row from a clock a year ahead.
  hostile.Send(Results{unit.sweep_id, unit.unit_id, 1, false, {row(5, now + 365 * 86400)}, {}, {}, {}, {}});
  const ResultsAck ack = hostile.Receive<ResultsAck>();
  EXPECT_TRUE(ack.refused.empty()) << ack.refused;
  EXPECT_GT(ack.clock_skew_seconds, 364 * 86400.0);
  std::vector<Measurement> rows;
  for (int i = 0; i < 50 && (rows = Rows()).empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NEAR(double(rows[0].unix_time), double(now), 60.0);
  EXPECT_NE(CoordinatorLog().find("clock is off"), std::string::npos);
  const std::string skew = "tunefarm_worker_clock_skew_seconds{worker=\"skewed:1\"} 3";
  std::string metrics;
  for (int i = 0; i < 50 && (metrics = Metrics()).find(skew) == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a snapshot a second
  }
  EXPECT_NE(metrics.find(skew), std::string::npos) << metrics;
}

// The peak resident memory of process `pid` in MiB (VmHWM), or -1.
double PeakRssMib(pid_t pid) {
  const std::string status = ReadFile("/proc/" + std::to_string(pid) + "/status");
  const size_t at = status.find("VmHWM:");
  return at == std::string::npos ? -1 : std::stod(status.substr(at + 6)) / 1024;
}

// A peer that floods the coordinator with results frames faster than they
// can be stored is disconnected once the ingest queue is full: the queue,
// and so the coordinator's memory, stays bounded, and honest workers (who
// keep each batch until it is acknowledged) lose nothing.
TEST_F(HostilePeerTest, AResultsFloodIsCutOffAtTheIngestQueueBoundAndNothingHonestIsLost) {
  StartCoordinator({"--max-ingest-queue-mib", "1"});
  StartHonestWorker();
  std::string submitted;
  ASSERT_EQ(Submit(dir_.Sub("sweep.toml"), false, &submitted), 0) << submitted;
  const std::string sweep_id = submitted.substr(0, submitted.find('\n'));
  Peer flood(ctx_, endpoint_, 60000);
  flood.Send(Hello{"flood:1", "0.1", {Device(kModel)}});
  flood.Receive<HelloAck>();
  Results batch{sweep_id, 777, 0, false, {}, {}, {}, {}, {}};
  for (int i = 0; i < 4000; ++i) {
    Measurement m;
    m.gpu_model = kModel;
    m.op = "synthetic";
    m.dtype = "f32";
    m.shape = "N=4096";
    m.config = Config{{{"TILE", 32 + i}}};
    m.config_id = m.config.Id();
    m.median_us = 1;
    m.samples = 1;
    batch.measurements.push_back(std::move(m));
  }
  Envelope env;
  env.command = batch;
  const std::string frame = EncodeEnvelope(env);
  ASSERT_GT(frame.size(), 1u << 20);
  const int frames = 160;  // 160 frames of 2.3 MiB against a queue of 1 MiB
  for (int i = 0; i < frames; ++i) flood.SendFrame(frame);
  std::string reason;
  while (auto cmd = flood.ReceiveAny()) {
    if (auto* d = std::get_if<tune::Disconnect>(&*cmd)) {
      reason = d->reason;
      break;
    }
  }
  EXPECT_NE(reason.find("results queue full"), std::string::npos) << reason << CoordinatorLog();
  EXPECT_EQ(WaitForSweep(sweep_id), "done") << CoordinatorLog();
  EXPECT_EQ(Rows().size(), kSweepRows);
  // The queue held about one frame at a time: far less than the flood's
  // 370 MiB (the rest is RocksDB, ZeroMQ and the decoding of a frame).
  EXPECT_LT(PeakRssMib(coordinator_->pid()), 200) << frames << " frames of " << frame.size() << " bytes";
}

TEST_F(HostilePeerTest, PhantomModelsNeverMakeASweepWaitAndTooManyDevicesAreRefused) {
  StartCoordinator();
  Peer phantom(ctx_, endpoint_);
  std::vector<DeviceInfo> devices;
  for (int i = 0; i < 64; ++i) devices.push_back(Device("phantom-" + std::to_string(i), i));
  phantom.Send(Hello{"phantom:1", "0.1", devices});
  phantom.Receive<HelloAck>();
  {
    Peer greedy(ctx_, endpoint_);
    devices.push_back(Device("phantom-64", 64));
    greedy.Send(Hello{"greedy:1", "0.1", devices});
    EXPECT_NE(greedy.Receive<tune::Disconnect>().reason.find("65 devices"), std::string::npos);
  }
  StartHonestWorker();
  ExpectAHonestSweepCompletes();  // gpus = ["*"]: the live models, not the named ones
  for (const auto& m : Rows()) EXPECT_EQ(m.gpu_model, kModel);
  // The same sweep again: everything is stored, nothing is measured again.
  std::string again;
  EXPECT_EQ(Submit(dir_.Sub("sweep.toml"), true, &again), 0) << again;
  EXPECT_NE(again.find("already measured: 600 (config, shape) pairs stored, nothing to do"), std::string::npos)
      << again;
  // A sweep that names a model no live worker serves says what it waits for.
  dir_.Write("phantom.toml", std::string(kSweep) + "gpus = [\"phantom-3\"]\n");
  ASSERT_EQ(Submit(dir_.Sub("phantom.toml"), false), 0);
  Child status({TUNEFARM_BINARY, "status", "--coordinator", endpoint_}, dir_.Sub("status.log"));
  ASSERT_EQ(status.Wait(30), 0);
  EXPECT_NE(ReadFile(dir_.Sub("status.log")).find("waiting for phantom-3"), std::string::npos)
      << ReadFile(dir_.Sub("status.log"));
}

// A peer whose device asks for work once and then only heartbeats makes its
// model live, but not for long: a `*` sweep stops waiting for it once no
// device of it has taken work for --model-idle-seconds, ends with the honest
// model's rows, and `status` says what it skipped and why.
TEST_F(HostilePeerTest, AModelWhoseDevicesAskOnceAndGoQuietStopsHoldingStarSweeps) {
  StartCoordinator({"--model-idle-seconds", "3"});
  std::atomic<bool> stop{false}, asked{false};
  std::thread quiet([&] {
    Peer peer(ctx_, endpoint_, 2000);
    peer.Send(Hello{"quiet:1", "0.1", {Device("sim-h100")}});
    peer.Receive<HelloAck>();
    peer.Send(RequestWork{0});  // no sweep yet: no_work, and the model is live
    peer.ReceiveAny();
    asked = true;
    while (!stop) {
      peer.Send(Heartbeat{});
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  while (!asked) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  StartHonestWorker();
  std::string log;
  EXPECT_EQ(Submit(dir_.Sub("sweep.toml"), true, &log), 0) << log << CoordinatorLog();
  Child status({TUNEFARM_BINARY, "status", "--coordinator", endpoint_}, dir_.Sub("status.log"));
  EXPECT_EQ(status.Wait(30), 0);
  stop = true;
  quiet.join();
  const std::string text = ReadFile(dir_.Sub("status.log"));
  EXPECT_NE(text.find("skipped sim-h100: no device took work for "), std::string::npos) << text;
  EXPECT_NE(text.find(" s with 600 pairs queued; those pairs are dropped"), std::string::npos) << text;
  for (const auto& m : Rows()) EXPECT_EQ(m.gpu_model, kModel);
}

TEST_F(HostilePeerTest, AnOversizedSpaceIsRefusedAtSubmitAndTheFarmServesOn) {
  StartCoordinator();
  std::string values = "[1";
  for (int i = 2; i <= 1000; ++i) values += ", " + std::to_string(i);
  values += "]";
  EditOp("huge", "name    = \"synthetic\"", "name    = \"huge\"");
  EditOp("huge", "PAD = 0 }", "PAD = 0, A = 1, B = 1, C = 1 }");
  EditOp("huge", "PAD    = [0, 1, 2, 3]", "PAD = [0, 1, 2, 3]\nA = " + values + "\nB = " + values + "\nC = " + values);
  dir_.Write("huge.toml", "[sweep]\nname = \"huge\"\nops = [\"huge\"]\ndtypes = [\"f32\"]\nshapes = [ { N = 4096 } ]\n");
  std::string log;
  EXPECT_NE(Submit(dir_.Sub("huge.toml"), false, &log), 0);
  EXPECT_NE(log.find("op 'huge'"), std::string::npos) << log;
  EXPECT_NE(log.find("600000000000 raw points"), std::string::npos) << log;
  StartHonestWorker();
  ExpectAHonestSweepCompletes();
}

// Expanding a sweep's spaces runs beside the coordinator's loop: while a
// large space is enumerated, status requests are
// answered at once (a worker's heartbeats and leases go through the same
// loop), and the sweep then runs to completion.
TEST_F(HostilePeerTest, ExpandingALargeSpaceNeverBlocksTheLoop) {
  // 54 million raw points whose rules read every axis, so that none can be
  // skipped: seconds of enumeration, for 600 legal configs.
  StartCoordinator({"--max-raw-configs", "100000000"});
  StartHonestWorker();
  std::string values = "[1";
  for (int i = 2; i <= 300; ++i) values += ", " + std::to_string(i);
  values += "]";
  EditOp("wide", "name    = \"synthetic\"", "name    = \"wide\"");
  EditOp("wide", "PAD = 0 }", "PAD = 0, A = 1, B = 1 }");
  EditOp("wide", "PAD    = [0, 1, 2, 3]", "PAD = [0, 1, 2, 3]\nA = " + values + "\nB = " + values);
  EditOp("wide", "rules = [\"TILE <= max_threads\"]",
         "rules = [\"TILE <= max_threads\", \"TILE + UNROLL + SPLIT + PAD + A + B > 0\", "
         "\"A + B + 0 * (TILE + UNROLL + SPLIT + PAD) == 2\"]");
  dir_.Write("wide.toml", "[sweep]\nname = \"wide\"\nops = [\"wide\"]\ndtypes = [\"f32\"]\nshapes = [ { N = 4096 } ]\n");
  std::string submitted;
  ASSERT_EQ(Submit(dir_.Sub("wide.toml"), false, &submitted), 0) << submitted;
  const std::string sweep_id = submitted.substr(0, submitted.find('\n'));
  Peer client(ctx_, endpoint_);
  // Answered while the space is being expanded: the loop was not blocked.
  bool seen_expanding = false;
  for (int i = 0; i < 3000; ++i) {
    client.Send(SweepStatusRequest{sweep_id});
    const auto status = client.Receive<SweepStatus>();
    ASSERT_EQ(status.sweeps.size(), 1u);
    if (!status.sweeps[0].expanding.empty()) {
      seen_expanding = true;
    } else if (seen_expanding || status.sweeps[0].state != "running") {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(seen_expanding) << CoordinatorLog();
  EXPECT_EQ(WaitForSweep(sweep_id), "done") << CoordinatorLog();
  EXPECT_NE(CoordinatorLog().find("config spaces expanded sweep=" + sweep_id + " model=" + std::string(kModel) + " pairs=600 "),
            std::string::npos)
      << CoordinatorLog();
  ExpectAHonestSweepCompletes();
}

// Changing what a measurement means (its launch geometry, its check) gives
// its rows a new kernel hash: the next sweep measures again, and the old rows
// stay beside the new.
TEST_F(HostilePeerTest, AChangedLaunchOrCheckStartsNewRows) {
  StartCoordinator();
  StartHonestWorker();
  ExpectAHonestSweepCompletes();
  EXPECT_EQ(Rows().size(), kSweepRows);
  // A batch of a sweep that has ended (a duplicate lease's, late) is
  // acknowledged and stores nothing: all its rows are stored already.
  {
    Peer late(ctx_, endpoint_);
    late.Send(Hello{"late:1", "0.1", {Device(kModel)}});
    late.Receive<HelloAck>();
    const std::string sweep_id = Rows().front().sweep_id;
    late.Send(Results{sweep_id, 777, 0, true, {}, {}, {}, {}, {}});
    const ResultsAck ack = late.Receive<ResultsAck>();
    EXPECT_EQ(ack.stored, 0u);
    EXPECT_EQ(ack.refused, "");
  }
  EditOp("synthetic", "rtol = 1e-3", "rtol = 2e-3");
  ExpectAHonestSweepCompletes();
  EXPECT_EQ(Rows().size(), kSweepRows * 2);
  EditOp("synthetic", "block = [\"TILE\", \"1\", \"1\"]", "block = [\"TILE\", \"1\", \"1*1\"]");
  ExpectAHonestSweepCompletes();
  EXPECT_EQ(Rows().size(), kSweepRows * 3);
}

// Status requests from a thread of their own while a test runs: how many
// were answered (the loop serves workers the same way).
class StatusProbe {
 public:
  StatusProbe(zmq::context_t& ctx, const std::string& endpoint)
      : thread_([this, &ctx, endpoint] {
          Peer client(ctx, endpoint);
          while (!stop_) {
            client.Send(SweepStatusRequest{});
            if (client.ReceiveAny()) ++answers_;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
        }) {}
  ~StatusProbe() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int answers() const { return answers_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> answers_{0};
  std::thread thread_;
};

// A sweep of `pkg` (op "synthetic") over `shapes`, as a hostile client sends
// it, bypassing `submit`'s own checks.
SweepSubmit SweepOf(const OpPackage& pkg, std::vector<Shape> shapes = {Shape{{{"N", 4096}}}}) {
  SweepSubmit submit;
  submit.name = "hostile";
  submit.ops = {"synthetic"};
  submit.op_packages = {pkg};
  submit.dtypes = {"f32"};
  submit.shapes = std::move(shapes);
  submit.gpu_models = {"*"};
  return submit;
}

// Each bound of base/limits.h on what a client submits is refused with one
// line naming the bound, the value and the limit, while the coordinator
// answers status as ever; then the farm serves an honest sweep. (How fast is
// a benchmark's question, not this test's: CI shares a loaded VM.)
TEST_F(HostilePeerTest, SubmitsOverTheBoundsAreRefusedFastAndStatusIsAnsweredMeanwhile) {
  StartCoordinator();
  StartHonestWorker();
  ExpectAHonestSweepCompletes();  // the model is live: the next sweeps expand at once
  StatusProbe probe(ctx_, endpoint_);
  Peer client(ctx_, endpoint_);
  auto refusal = [&](const SweepSubmit& submit) {
    client.Send(submit);
    return client.Receive<ErrorReply>().message;
  };
  auto with_params = [&](const std::string& params, const std::string& defaults) {
    OpPackage pkg = Package();
    std::string& toml = pkg["op.toml"];
    toml.replace(toml.find("PAD    = [0, 1, 2, 3]"), 21, "PAD    = [0, 1, 2, 3]\n" + params);
    toml.replace(toml.find("PAD = 0 }"), 9, "PAD = 0" + defaults + " }");
    return pkg;
  };
  // One axis of 200,000 values.
  std::string values = "[1";
  for (int i = 2; i <= 200000; ++i) values += ", " + std::to_string(i);
  std::string error = refusal(SweepOf(with_params("A = " + values + "]", ", A = 1")));
  EXPECT_NE(error.find("[params] A: 200000 values, more than the limit of 4096 values per axis"), std::string::npos)
      << error;
  // 100,000 single-valued params.
  std::string params, defaults;
  for (int i = 0; i < 100000; ++i) {
    params += "P" + std::to_string(i) + " = [1]\n";
    defaults += ", P" + std::to_string(i) + " = 1";
  }
  error = refusal(SweepOf(with_params(params, defaults)));
  EXPECT_NE(error.find("[params]: 100004 params, more than the limit of 64 params per op"), std::string::npos)
      << error.substr(0, 300);
  // A package over the bytes bound, in a frame the socket takes.
  OpPackage big = Package();
  big["data.bin"] = std::string((32u << 20) + 1, 'x');
  error = refusal(SweepOf(big));
  EXPECT_NE(error.find("bytes, more than the limit of 33554432 bytes per package"), std::string::npos) << error;

  // 1,000,000 legal configs x 40 shapes: accepted (legality is known per
  // model only), failed as its space is enumerated, before the pairs are held.
  OpPackage wide = Package();
  std::string& toml = wide["op.toml"];
  std::string thousand = "[1";
  for (int i = 2; i <= 1000; ++i) thousand += ", " + std::to_string(i);
  thousand += "]";
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"TILE   = [32, 64, 128, 256, 512, 1024]", "TILE = " + thousand},
           {"UNROLL = [1, 2, 4, 8, 16]", "UNROLL = " + thousand},
           {"SPLIT  = [1, 2, 3, 4, 5]", "SPLIT = [1]"},
           {"PAD    = [0, 1, 2, 3]", "PAD = [0]"}}) {
    toml.replace(toml.find(from), from.size(), to);
  }
  std::vector<Shape> shapes;
  for (int i = 0; i < 40; ++i) shapes.push_back(Shape{{{"N", 1024 + i}}});
  client.Send(SweepOf(wide, shapes));
  const std::string id = client.Receive<SweepAccepted>().sweep_id;
  SweepStatus status;
  for (int i = 0; i < 6000; ++i) {
    client.Send(SweepStatusRequest{id});
    status = client.Receive<SweepStatus>();
    if (!status.sweeps.empty() && status.sweeps[0].state != "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(status.sweeps.size(), 1u);
  EXPECT_EQ(status.sweeps[0].state, "failed");
  EXPECT_NE(status.sweeps[0].error.find("more than 100000 legal configs x 40 shapes x 1 dtypes), more than the limit "
                                        "of 4000000 pairs per sweep and GPU model (--max-sweep-pairs)"),
            std::string::npos)
      << status.sweeps[0].error;

  probe.Stop();
  EXPECT_GT(probe.answers(), 5);
  EXPECT_LT(PeakRssMib(coordinator_->pid()), 1024);
  ExpectAHonestSweepCompletes();
}

// A peer whose every batch is refused spends each unit's leases: the units
// fail with the refusal as their reason, the sweep ends failed (not "done"
// with nothing measured), and `status --wait` exits non-zero saying why.
TEST_F(HostilePeerTest, ASweepWhoseEveryBatchIsRefusedEndsFailedSayingWhy) {
  EditOp("tiny", "name    = \"synthetic\"", "name    = \"tiny\"");
  EditOp("tiny", "TILE   = [32, 64, 128, 256, 512, 1024]", "TILE   = [64, 128]");
  EditOp("tiny", "UNROLL = [1, 2, 4, 8, 16]", "UNROLL = [1]");
  EditOp("tiny", "SPLIT  = [1, 2, 3, 4, 5]", "SPLIT  = [1]");
  EditOp("tiny", "PAD    = [0, 1, 2, 3]", "PAD    = [0]");
  dir_.Write("tiny.toml", "[sweep]\nname = \"tiny\"\nops = [\"tiny\"]\ndtypes = [\"f32\"]\nshapes = [ { N = 4096 } ]\n");
  StartCoordinator({"--max-attempts", "2"});
  std::string submitted;
  ASSERT_EQ(Submit(dir_.Sub("tiny.toml"), false, &submitted), 0) << submitted;
  const std::string sweep_id = submitted.substr(0, submitted.find('\n'));
  Peer client(ctx_, endpoint_);
  auto state = [&] {
    client.Send(SweepStatusRequest{sweep_id});
    const auto status = client.Receive<SweepStatus>();
    return status.sweeps.empty() ? SweepProgress{} : status.sweeps[0];
  };
  // A fresh connection each time (three refusals disconnect a peer): every
  // unit it is leased comes back refused, a row of a config no unit holds.
  for (int i = 0; i < 40 && state().state == "running"; ++i) {
    Peer hostile(ctx_, endpoint_);
    hostile.Send(Hello{"refused:" + std::to_string(i), "0.1", {Device(kModel)}});
    hostile.Receive<HelloAck>();
    const WorkUnit unit = hostile.RequestUnit();
    if (unit.configs.empty()) break;
    Measurement m;
    m.gpu_model = kModel;
    m.op = unit.op;
    m.dtype = unit.dtype;
    m.shape = unit.shapes.at(0).Canonical();
    m.kernel_hash = "kh";
    m.config = Config{{{"TILE", 7}}};
    m.config_id = m.config.Id();
    m.median_us = m.mean_us = m.min_us = m.max_us = 5;
    m.samples = 5;
    m.check_passed = true;
    m.backend = "sim";
    hostile.Send(Results{unit.sweep_id, unit.unit_id, 0, true, {m}, {}, {}, {}, {}});
    EXPECT_FALSE(hostile.Receive<ResultsAck>().refused.empty());
  }
  const SweepProgress end = state();
  EXPECT_EQ(end.state, "failed") << CoordinatorLog();
  EXPECT_NE(end.error.find("units failed"), std::string::npos) << end.error;
  EXPECT_NE(end.error.find("results refused"), std::string::npos) << end.error;
  EXPECT_EQ(end.pairs_failed, end.pairs_total);
  EXPECT_TRUE(Rows().empty());
  Child wait({TUNEFARM_BINARY, "status", sweep_id, "--wait", "--coordinator", endpoint_}, dir_.Sub("wait.log"));
  EXPECT_NE(wait.Wait(60), 0);
  EXPECT_NE(ReadFile(dir_.Sub("wait.log")).find("units failed"), std::string::npos) << ReadFile(dir_.Sub("wait.log"));
}

// A sweep's retry list names each failure class once: 1.5 million copies of
// one class (read for every batch of results) are refused at submit.
TEST_F(HostilePeerTest, ARetryListOfRepeatedClassesIsRefusedAtSubmit) {
  StartCoordinator();
  auto sweep = LoadSweepFile(dir_.Sub("sweep.toml"), dir_.Sub("ops"));
  ASSERT_TRUE(sweep.ok()) << sweep.status().message();
  sweep->retry.assign(1'500'000, "timeout");
  Peer client(ctx_, endpoint_);
  client.Send(*sweep);
  const std::string refused = client.Receive<ErrorReply>().message;
  EXPECT_NE(refused.find("listed twice"), std::string::npos) << refused;
  sweep->retry = {"timeout", "crash"};
  client.Send(*sweep);
  EXPECT_FALSE(client.Receive<SweepAccepted>().sweep_id.empty()) << CoordinatorLog();
}

// A client may submit so many sweeps a minute, refused ones included; past
// that it is told which bound and when to come back, and status still works.
TEST_F(HostilePeerTest, SweepsPerClientPerMinuteAreBounded) {
  StartCoordinator({"--max-sweeps-per-minute", "3"});
  Peer client(ctx_, endpoint_);
  SweepSubmit empty = SweepOf(Package());
  empty.dtypes.clear();
  for (int i = 0; i < 3; ++i) {
    client.Send(empty);
    EXPECT_NE(client.Receive<ErrorReply>().message.find("no dtypes"), std::string::npos);
  }
  client.Send(SweepOf(Package()));
  const std::string error = client.Receive<ErrorReply>().message;
  EXPECT_NE(error.find("3 sweeps submitted in the last 60 s, at the limit of 3 sweeps per client per minute "
                       "(--max-sweeps-per-minute)"),
            std::string::npos)
      << error;
  // Another connection from the same host is the same client.
  Peer again(ctx_, endpoint_);
  again.Send(SweepOf(Package()));
  EXPECT_NE(again.Receive<ErrorReply>().message.find("sweeps per client per minute"), std::string::npos);
  again.Send(SweepStatusRequest{});
  EXPECT_TRUE(again.Receive<SweepStatus>().sweeps.empty());
}

// A client may bring so many new package bytes to the store an hour: past
// its share the submit is refused naming the bound, nothing is stored of
// it, and a package stored already costs nothing again.
TEST_F(HostilePeerTest, NewPackageBytesPerClientPerHourAreBounded) {
  StartCoordinator({"--max-package-bytes-per-client-hour", std::to_string(7u << 19)});  // 3.5 MiB
  Peer client(ctx_, endpoint_);
  auto sized = [&](char tag) {
    OpPackage pkg = Package();
    pkg["data.bin"] = std::string(1u << 20, tag);  // 1 MiB, a new package per tag
    return SweepOf(pkg);
  };
  for (char tag : {'a', 'b'}) {
    client.Send(sized(tag));
    EXPECT_FALSE(client.Receive<SweepAccepted>().sweep_id.empty()) << CoordinatorLog();
  }
  client.Send(sized('a'));  // stored already: no new bytes
  auto again = client.ReceiveAny();
  ASSERT_TRUE(again.has_value());
  EXPECT_TRUE(std::holds_alternative<SweepAccepted>(*again))
      << (std::holds_alternative<ErrorReply>(*again) ? std::get<ErrorReply>(*again).message : CommandName(*again));
  client.Send(sized('c'));
  client.Send(sized('d'));
  EXPECT_FALSE(client.Receive<SweepAccepted>().sweep_id.empty()) << CoordinatorLog();
  const std::string error = client.Receive<ErrorReply>().message;
  EXPECT_NE(error.find("this client may still bring this hour (--max-package-bytes-per-client-hour)"),
            std::string::npos)
      << error;
  size_t stored = 0;
  {
    auto store = ResultStore::OpenReadOnly(Store());
    ASSERT_TRUE(store.ok()) << store.status().message();
    ASSERT_TRUE((*store)->ForEachOp([&](const OpRecord& op) {
      auto data = op.package.find("data.bin");
      if (data != op.package.end() && data->second[0] == 'd') ADD_FAILURE() << "the refused package was stored";
      ++stored;
    }).ok());
  }
  EXPECT_EQ(stored, 3u);
}

// Each new version of an op is kept in the store while a sweep may need it;
// beyond the newest eight, versions of sweeps that ended are removed.
TEST_F(HostilePeerTest, OldOpVersionsAreRemovedFromTheStoreOnceNoSweepNeedsThem) {
  StartCoordinator();
  Peer client(ctx_, endpoint_);
  std::set<char> kept;  // the versions stored, by their data's byte
  auto versions = [&] {
    auto store = ResultStore::OpenReadOnly(Store());
    EXPECT_TRUE(store.ok()) << store.status().message();
    kept.clear();
    if (store.ok()) {
      EXPECT_TRUE((*store)->ForEachOp([&](const OpRecord& op) { kept.insert(op.package.at("data.bin")[0]); }).ok());
    }
    return kept.size();
  };
  std::string running;
  for (int i = 0; i < 12; ++i) {
    OpPackage pkg = Package();
    pkg["data.bin"] = std::string(1 << 20, static_cast<char>('a' + i));
    client.Send(SweepOf(pkg));  // no live worker: it waits, running
    const std::string id = client.Receive<SweepAccepted>().sweep_id;
    if (i == 0) {
      running = id;  // left running: its version stays whatever its age
      continue;
    }
    client.Send(SweepCancel{id});
    (void)client.Receive<SweepStatus>();
  }
  // Versions submitted in the same second are equally new: the eight kept
  // are any eight of the newest, plus those of running sweeps (the first
  // sweep's; the last one's while it ran).
  size_t n = 0;
  for (int i = 0; i < 100 && (n = versions()) > 10; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_GE(n, 8u);
  EXPECT_LE(n, 10u) << CoordinatorLog();
  EXPECT_TRUE(kept.count('a'));
  EXPECT_TRUE(kept.count('l'));
  EXPECT_NE(CoordinatorLog().find("op versions pruned"), std::string::npos) << CoordinatorLog();
  client.Send(SweepStatusRequest{running});
  const SweepStatus status = client.Receive<SweepStatus>();
  ASSERT_EQ(status.sweeps.size(), 1u);
  EXPECT_EQ(status.sweeps[0].state, "running");
}

// Op packages that would make NVRTC read files of a worker's host are
// refused: by `submit` before anything is sent, and by the coordinator from
// a client that sends one anyway.
TEST_F(HostilePeerTest, OpPackagesThatReachOutsideThemselvesAreRefused) {
  StartCoordinator();
  struct Case {
    const char* what;
    std::function<void(OpPackage&)> spoil;
    const char* names;
  };
  const std::vector<Case> cases = {
      {"include path option",
       [](OpPackage& p) { p["op.toml"].replace(p["op.toml"].find("kernel  ="), 0, "options = [\"-I/\"]\n"); },
       "allow-list"},
      {"pre-include option",
       [](OpPackage& p) {
         p["op.toml"].replace(p["op.toml"].find("kernel  ="), 0, "options = [\"--pre-include=/etc/hostname\"]\n");
       },
       "allow-list"},
      {"absolute include", [](OpPackage& p) { p["synthetic.cu"] = "#include \"/etc/hostname\"\n" + p["synthetic.cu"]; },
       "outside the op package"},
      {"spliced include",
       [](OpPackage& p) { p["synthetic.cu"] = "#/**/inc\\\nlude </etc/hostname>\n" + p["synthetic.cu"]; },
       "outside the op package"},
      {"climbing include", [](OpPackage& p) { p["synthetic.cu"] = "#include <../../etc/hostname>\n" + p["synthetic.cu"]; },
       "outside the op package"},
      {"file name", [](OpPackage& p) { p["../x.h"] = "int x;"; }, "file name"},
  };
  Peer client(ctx_, endpoint_);
  for (const auto& c : cases) {
    OpPackage pkg = Package();
    c.spoil(pkg);
    SweepSubmit submit;
    submit.name = c.what;
    submit.ops = {"synthetic"};
    submit.op_packages = {pkg};
    submit.dtypes = {"f32"};
    submit.shapes = {Shape{{{"N", 4096}}}};
    submit.gpu_models = {"*"};
    client.Send(submit);
    const std::string error = client.Receive<ErrorReply>().message;
    EXPECT_NE(error.find(c.names), std::string::npos) << c.what << ": " << error;
  }
  // The same through `submit`: a one-line error before anything is sent.
  EditOp("synthetic", "kernel  =", "options = [\"-I/\"]\nkernel  =");
  std::string log;
  EXPECT_NE(Submit(dir_.Sub("sweep.toml"), false, &log), 0);
  EXPECT_NE(log.find("-I/"), std::string::npos) << log;
}

}  // namespace
}  // namespace tune

namespace tune {
namespace {

// A store stopped uncleanly with its rows only in the write-ahead log, then
// one byte of that log flipped: the coordinator refuses to start with one
// line naming the log file (rather than serve the rows before the byte), and
// starts with what is readable once asked to with --store-recover.
TEST_F(HostilePeerTest, ACorruptWriteAheadLogStopsTheCoordinatorUntilAskedToRecover) {
  const std::string live = dir_.Sub("live");
  {
    auto store = ResultStore::Open(live);
    ASSERT_TRUE(store.ok()) << store.status().message();
    for (int i = 0; i < 297; ++i) {
      Measurement m;
      m.gpu_model = kModel;
      m.op = "synthetic";
      m.dtype = "f32";
      m.shape = "N=4096";
      m.kernel_hash = "0123456789abcdef0123456789abcdef";
      m.config = Config{{{"TILE", i}}};
      m.config_id = m.config.Id();
      m.median_us = m.mean_us = m.min_us = m.max_us = 5 + i;
      m.samples = 5;
      m.check_passed = true;
      m.backend = "sim";
      m.worker = "w";
      ASSERT_TRUE((*store)->Put(m).ok());
    }
    // Copied while open: what a crash leaves on disk.
    fs::copy(live, Store(), fs::copy_options::recursive);
  }
  std::string wal;
  for (const auto& e : fs::directory_iterator(Store())) {
    if (e.path().extension() == ".log" && (wal.empty() || fs::file_size(e.path()) > fs::file_size(wal))) {
      wal = e.path().string();
    }
  }
  ASSERT_FALSE(wal.empty());
  {
    std::fstream f(wal, std::ios::in | std::ios::out | std::ios::binary);
    const auto middle = static_cast<std::streamoff>(fs::file_size(wal) / 2);
    f.seekg(middle);
    const char byte = static_cast<char>(f.get() ^ 0x40);
    f.seekp(middle);
    f.put(byte);
  }
  Child coordinator({TUNEFARM_BINARY, "coordinator", "--bind", endpoint_, "--store", Store()},
                    dir_.Sub("corrupt.log"));
  const int rc = coordinator.Wait(30);
  EXPECT_GT(rc, 0) << "-1: still running";
  EXPECT_LT(rc, 128) << "killed by a signal";
  const std::string log = ReadFile(dir_.Sub("corrupt.log"));
  EXPECT_NE(log.find("write-ahead log " + fs::path(wal).filename().string() + " is corrupt"), std::string::npos)
      << log;
  EXPECT_NE(log.find("--store-recover"), std::string::npos) << log;

  StartCoordinator({"--store-recover"});
  ASSERT_EQ(coordinator_->Stop(10), 0) << CoordinatorLog();
  coordinator_.reset();
  const std::string recovered = CoordinatorLog();
  EXPECT_NE(recovered.find("recovered: skipped"), std::string::npos) << recovered;
  EXPECT_NE(recovered.find(" result rows"), std::string::npos) << recovered;
  EXPECT_GT(Rows().size(), 0u);
  EXPECT_LT(Rows().size(), 297u);
}

// A store on a small filesystem that fills up mid-sweep: the coordinator
// stops leasing and says why (status, /metrics), never aborts, and resumes
// by itself once space is back; the sweep completes with every row stored.
// Needs to mount a tmpfs (root); skips otherwise.
// A flipped byte in a table file of the store: the coordinator refuses to
// start with one line naming the store and the file, rather than start and
// livelock on the first read.
TEST_F(HostilePeerTest, ACorruptTableFileStopsTheCoordinatorAtStartNamingTheFile) {
  StartCoordinator();
  StartHonestWorker();
  ExpectAHonestSweepCompletes();
  for (auto& w : workers_) w->Stop();
  workers_.clear();
  ASSERT_EQ(coordinator_->Stop(10), 0) << CoordinatorLog();
  StartCoordinator();  // opening replays the log into table files
  ASSERT_EQ(coordinator_->Stop(10), 0) << CoordinatorLog();
  coordinator_.reset();
  std::string sst;
  uintmax_t largest = 0;
  for (const auto& e : fs::directory_iterator(Store())) {
    if (e.path().extension() == ".sst" && fs::file_size(e.path()) > largest) {
      largest = fs::file_size(e.path());
      sst = e.path().string();
    }
  }
  ASSERT_GT(largest, 1024u) << "no table file written";
  {
    std::fstream f(sst, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(100);
    const char byte = static_cast<char>(f.get() ^ 0x40);
    f.seekp(100);
    f.put(byte);
  }
  Child coordinator({TUNEFARM_BINARY, "coordinator", "--bind", endpoint_, "--store", Store()},
                    dir_.Sub("corrupt.log"));
  const int rc = coordinator.Wait(30);
  EXPECT_GT(rc, 0) << "-1: still running";
  EXPECT_LT(rc, 128) << "killed by a signal";
  const std::string log = ReadFile(dir_.Sub("corrupt.log"));
  EXPECT_NE(log.find("checksum or corruption error"), std::string::npos) << log;
  EXPECT_NE(log.find(fs::path(sst).filename().string()), std::string::npos) << log;
}

TEST_F(HostilePeerTest, AFullDiskStopsLeasingUntilWritesSucceedAgain) {
  const std::string mnt = dir_.Sub("small");
  fs::create_directories(mnt);
  // Roomy enough for the reserve's floor (64 MiB) and RocksDB's preallocated WAL.
  if (std::system(("mount -t tmpfs -o size=256m tmpfs " + mnt + " 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root)";
  }
  struct Unmount {
    std::string at;
    ~Unmount() { (void)!std::system(("umount -l " + at).c_str()); }
  } unmount{mnt};
  store_override_ = mnt + "/store";
  StartCoordinator({"--store-reserve-mib", "0"});  // raised to the floor: a full disk is still refused
  // Fill the filesystem, then start the farm on it.
  (void)!std::system(("dd if=/dev/zero of=" + mnt + "/filler bs=1M count=512 2>/dev/null").c_str());
  StartHonestWorker();
  std::string submitted;
  ASSERT_EQ(Submit(dir_.Sub("sweep.toml"), false, &submitted), 0) << submitted;
  std::string metrics;
  for (int i = 0; i < 100 && MetricValue(metrics = Metrics(), "tunefarm_store_writable") != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(MetricValue(metrics, "tunefarm_store_writable"), 0) << metrics << CoordinatorLog();
  Child status({TUNEFARM_BINARY, "status", "--coordinator", endpoint_}, dir_.Sub("status.log"));
  EXPECT_EQ(status.Wait(30), 0);
  EXPECT_NE(ReadFile(dir_.Sub("status.log")).find("store writes fail"), std::string::npos)
      << ReadFile(dir_.Sub("status.log"));
  fs::remove(mnt + "/filler");
  const std::string sweep_id = submitted.substr(0, submitted.find('\n'));
  EXPECT_EQ(WaitForSweep(sweep_id), "done") << CoordinatorLog();
  EXPECT_NE(CoordinatorLog().find("store writes succeed again"), std::string::npos) << CoordinatorLog();
  EXPECT_NE(CoordinatorLog().find("store reserve raised to its floor"), std::string::npos) << CoordinatorLog();
  for (auto& w : workers_) w->Stop();
  workers_.clear();
  EXPECT_EQ(coordinator_->Stop(10), 0) << CoordinatorLog();
  coordinator_.reset();
  EXPECT_EQ(Rows().size(), kSweepRows);
}

}  // namespace
}  // namespace tune

namespace tune {
namespace {

// Remote reads (StoreRead): an export is its maker's to page through, and
// gone once read to its end; another peer naming it is refused with a line;
// reads arriving together each get a piece or a line to try again (the
// bound on exports at once); the farm serves on.
TEST_F(HostilePeerTest, RemoteReadsAreTheirMakersAndBounded) {
  StartCoordinator();
  StartHonestWorker();
  ExpectAHonestSweepCompletes();
  Peer reader(ctx_, endpoint_), other(ctx_, endpoint_);
  reader.Send(StoreRead{});
  const StoreChunk first = reader.Receive<StoreChunk>();
  ASSERT_GT(first.total_bytes, 0u);
  EXPECT_EQ(first.offset, 0u);
  ASSERT_EQ(first.data.size(), first.total_bytes);  // a small store: one piece, and the export is dropped
  reader.Send(StoreRead{ResultFilter{}, first.export_id, 0});
  EXPECT_NE(reader.Receive<ErrorReply>().message.find("no export"), std::string::npos);
  std::vector<std::unique_ptr<Peer>> peers;
  for (size_t i = 0; i < 6; ++i) {
    peers.push_back(std::make_unique<Peer>(ctx_, endpoint_));
    peers.back()->Send(StoreRead{ResultFilter{"no-such-model", "", "", "", ""}, "", 0});
  }
  size_t chunks = 0, busy = 0;
  for (auto& p : peers) {
    auto reply = p->ReceiveAny();
    ASSERT_TRUE(reply.has_value());
    if (std::holds_alternative<StoreChunk>(*reply)) ++chunks;
    if (const auto* e = std::get_if<ErrorReply>(&*reply)) busy += e->message.find("try again") != std::string::npos;
  }
  EXPECT_EQ(chunks + busy, 6u);
  other.Send(StoreRead{ResultFilter{}, first.export_id, 1u << 30});
  EXPECT_NE(other.Receive<ErrorReply>().message.find("no export"), std::string::npos);
  ExpectAHonestSweepCompletes();
}

}  // namespace
}  // namespace tune
