// The coordinator serving stored kernel images to workers (ImageRequest,
// coordinator/image_service.h): a real coordinator process over CURVE (a
// witness is a worker key), worker keys speaking the protocol by hand.
// An image two keys sent is served byte for byte to a third key leased a
// unit of its config; one key's word is not served; requests outside the
// sender's lease are refused naming it; a flood is cut off while the
// coordinator keeps answering.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>
#include <zmq.hpp>

#include "support/cubin.h"
#include "support/http_get.h"
#include "support/process.h"
#include "support/protocol_peer.h"
#include "support/temp_dir.h"
#include "protocol/protocol.h"
#include "opspec/op_definition.h"
#include "wire/curve.h"

namespace tune {
namespace {

namespace fs = std::filesystem;
using testing::Child;
using testing::ReadFile;
using Peer = testing::ProtocolPeer;

constexpr char kModel[] = "sim-a100";

// The synthetic op cut to two configs (TILE 32 and 64), timed on four
// shapes: a sweep of one unit of both configs per shape, leased to the
// peers in turn (units are cut shape by shape, whole: the coordinator runs
// with --shrink-tail-units false).
constexpr char kSweep[] =
    "[sweep]\nname = \"images\"\nops = [\"tiny\"]\ndtypes = [\"f32\"]\nconfigs_per_unit = 2\n"
    "shapes = [ { N = 4096 }, { N = 2048 }, { N = 1024 }, { N = 512 } ]\n";

using testing::MetricValue;

class ImageServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    endpoint_ = "tcp://127.0.0.1:" + std::to_string(testing::FreePort());
    http_ = testing::FreePort();
    for (const char* who : {"coordinator", "a", "b", "c", "d", "client"}) {
      Child keygen({TUNEFARM_BINARY, "keys", "curve", "--out", dir_.Sub(who), "--name", who}, dir_.Sub("keys.log"));
      ASSERT_EQ(keygen.Wait(20), 0) << ReadFile(dir_.Sub("keys.log"));
    }
    std::string allowed;
    for (const char* who : {"a", "b", "c", "d"}) allowed += ReadFile(dir_.Sub(std::string(who) + ".pub"));
    dir_.Write("allowed", allowed);
    dir_.Write("clients", ReadFile(dir_.Sub("client.pub")));
    fs::create_directories(dir_.Sub("ops"));
    fs::copy(std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops/synthetic", dir_.Sub("ops/tiny"),
             fs::copy_options::recursive);
    std::string toml = ReadFile(dir_.Sub("ops/tiny/op.toml"));
    for (auto [from, to] : {std::pair<std::string, std::string>{"name    = \"synthetic\"", "name    = \"tiny\""},
                            {"default = { TILE = 128,", "default = { TILE = 32,"},
                            {"TILE   = [32, 64, 128, 256, 512, 1024]", "TILE   = [32, 64]"},
                            {"UNROLL = [1, 2, 4, 8, 16]", "UNROLL = [1]"},
                            {"SPLIT  = [1, 2, 3, 4, 5]", "SPLIT  = [1]"},
                            {"PAD    = [0, 1, 2, 3]", "PAD    = [0]"}}) {
      const size_t at = toml.find(from);
      ASSERT_NE(at, std::string::npos) << from;
      toml.replace(at, from.size(), to);
    }
    dir_.Write("ops/tiny/op.toml", toml);
    dir_.Write("sweep.toml", kSweep);
    auto server = LoadCurvePublicKey(dir_.Sub("coordinator.pub"));
    ASSERT_TRUE(server.ok()) << server.status().message();
    server_key_ = *server;

    coordinator_ = std::make_unique<Child>(
        std::vector<std::string>{TUNEFARM_BINARY, "coordinator", "--bind", endpoint_, "--store", dir_.Sub("store"),
                                 "--curve-key", dir_.Sub("coordinator"), "--allow-list", dir_.Sub("allowed"),
                                 "--client-allow-list", dir_.Sub("clients"), "--http-port", std::to_string(http_),
                                 "--shrink-tail-units", "false", "-v"},
        dir_.Sub("coordinator.log"));
    Peer probe(ctx_, endpoint_, 10000, Curve("client"));
    probe.Send(SweepStatusRequest{});
    ASSERT_TRUE(probe.ReceiveAny().has_value()) << CoordinatorLog();
    Child submit({TUNEFARM_BINARY, "submit", dir_.Sub("sweep.toml"), "--coordinator", endpoint_, "--ops-dir",
                  dir_.Sub("ops"), "--curve-key", dir_.Sub("client"), "--coordinator-key",
                  dir_.Sub("coordinator.pub")},
                 dir_.Sub("submit.log"));
    ASSERT_EQ(submit.Wait(60), 0) << ReadFile(dir_.Sub("submit.log")) << CoordinatorLog();
    auto pkg = ReadOpPackage(dir_.Sub("ops/tiny"));
    ASSERT_TRUE(pkg.ok()) << pkg.status().message();
    auto spec = ParseOpSpec(*pkg, "tiny");
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    kernel_hash_ = OpHash(*spec, "sim");
    entry_ = spec->kernel;
  }
  void TearDown() override {
    if (coordinator_) {
      EXPECT_EQ(coordinator_->Stop(10), 0) << CoordinatorLog();
    }
  }

  std::optional<testing::PeerCurve> Curve(const std::string& who) {
    auto keys = LoadCurveKeyPair(dir_.Sub(who));
    EXPECT_TRUE(keys.ok()) << keys.status().message();
    if (!keys.ok()) return std::nullopt;
    return testing::PeerCurve{*keys, server_key_};
  }
  // A worker key `who` that said hello with one device of compute
  // capability 9.0 (its cubins are sm_90 or sm_90a).
  // `name`: what its hello says (default "who:1").
  std::unique_ptr<Peer> Worker(const std::string& who, const std::string& name = "") {
    auto peer = std::make_unique<Peer>(ctx_, endpoint_, 10000, Curve(who));
    DeviceInfo d;
    d.index = 0;
    d.name = "Simulated a100";
    d.model = kModel;
    d.backend = "sim";
    d.nvrtc_version = "sim";
    d.max_threads_per_block = 1024;
    d.cc_major = 9;
    d.cc_minor = 0;
    peer->Send(Hello{name.empty() ? who + ":1" : name, "0.1", {d}});
    peer->Receive<HelloAck>();
    return peer;
  }
  // The cubin every honest worker makes of `config`.
  std::string Cubin(const Config& config) const { return testing::SyntheticCubin("sm_90", entry_, config.Id()); }
  KernelImage Image(const Config& config) const {
    KernelImage k;
    k.kernel_hash = kernel_hash_;
    k.config_id = config.Id();
    k.dtype = "f32";
    k.arch = "sm_90";
    k.image = Cubin(config);
    k.sha256 = Sha256Hex(k.image);
    return k;
  }
  // `unit`'s final batch: a checked row of each config, with the cubins
  // of those of `with_images`.
  Results Report(const WorkUnit& unit, const std::vector<Config>& with_images) const {
    Results r{unit.sweep_id, unit.unit_id, 0, true, {}, {}, {}, {}, {}};
    for (const Config& c : unit.configs) {
      Measurement m;
      m.gpu_model = kModel;
      m.op = unit.op;
      m.dtype = unit.dtype;
      m.shape = unit.shapes.at(0).Canonical();
      m.kernel_hash = kernel_hash_;
      m.config = c;
      m.config_id = c.Id();
      m.median_us = m.mean_us = m.min_us = m.max_us = c.Id() == slow_ ? 500 : 50;
      m.samples = 5;
      m.check_passed = true;
      m.backend = "sim";
      m.arch = "sm_90";
      r.measurements.push_back(m);
    }
    for (const Config& c : with_images) r.kernels.push_back(Image(c));
    return r;
  }
  ImageWant Want(const Config& c) const { return ImageWant{kernel_hash_, c.Id(), "f32", "sm_90"}; }
  std::string CoordinatorLog() const { return ReadFile(dir_.Sub("coordinator.log")); }

  testing::TempDir dir_;
  zmq::context_t ctx_{1};
  std::string endpoint_, server_key_, kernel_hash_, entry_;
  std::string slow_;  // a config whose rows Report makes ten times slower (out of the refine pass)
  int http_ = 0;
  std::unique_ptr<Child> coordinator_;
};

TEST_F(ImageServiceTest, ImagesTwoKeysSentAreServedOthersAreMissingAndStrayRequestsAreRefused) {
  // Worker keys a and b each measure a unit holding config `both`; a sends
  // the cubins of both configs of its unit, b that of `both` only.
  auto a = Worker("a");
  const WorkUnit unit_a = a->RequestUnit();
  ASSERT_EQ(unit_a.configs.size(), 2u) << CoordinatorLog();
  const Config both = unit_a.configs[0], one = unit_a.configs[1];
  slow_ = one.Id();
  a->Send(Report(unit_a, {both, one}));
  ASSERT_EQ(a->Receive<ResultsAck>().refused, "");
  auto b = Worker("b");
  const WorkUnit unit_b = b->RequestUnit();
  // The first shape's refine unit (its best config, `both`: `one` was
  // reported far slower), or the next shape's screening unit.
  ASSERT_TRUE(std::any_of(unit_b.configs.begin(), unit_b.configs.end(),
                          [&](const Config& c) { return c.Id() == both.Id(); }));
  ASSERT_NE(unit_b.unit_id, unit_a.unit_id);
  b->Send(Report(unit_b, {both}));
  ASSERT_EQ(b->Receive<ResultsAck>().refused, "");

  // Key c, leased a later shape's unit of the same configs, asks for both
  // cubins: the one two keys sent comes byte for byte, the other is missing.
  auto c = Worker("c");
  const WorkUnit unit_c = c->RequestUnit();
  ASSERT_EQ(unit_c.configs.size(), 2u);
  c->Send(ImageRequest{unit_c.sweep_id, unit_c.unit_id, {Want(both), Want(one)}});
  const ImageReply served = c->Receive<ImageReply>();
  EXPECT_EQ(served.refused, "");
  ASSERT_EQ(served.images.size(), 1u);
  EXPECT_EQ(served.images[0].config_id, both.Id());
  EXPECT_EQ(served.images[0].image, Cubin(both));
  EXPECT_EQ(served.images[0].sha256, Sha256Hex(Cubin(both)));
  EXPECT_TRUE(served.images[0].witnesses.empty());
  EXPECT_EQ(served.missing, 1u);

  // Its sender's own word is no witness either: a asks for the image only
  // it sent, of its own unit.
  a->Send(ImageRequest{unit_a.sweep_id, unit_a.unit_id, {Want(one)}});
  const ImageReply own = a->Receive<ImageReply>();
  EXPECT_EQ(own.refused, "");
  EXPECT_TRUE(own.images.empty());
  EXPECT_EQ(own.missing, 1u);

  // A config its unit does not hold, and a unit leased to another key:
  // refused, naming the peer, nothing served.
  ImageWant stray = Want(both);
  stray.config_id = "TILE=999";
  c->Send(ImageRequest{unit_c.sweep_id, unit_c.unit_id, {stray}});
  const ImageReply not_held = c->Receive<ImageReply>();
  EXPECT_NE(not_held.refused.find("c:1"), std::string::npos) << not_held.refused;
  EXPECT_NE(not_held.refused.find("does not hold"), std::string::npos) << not_held.refused;
  EXPECT_TRUE(not_held.images.empty());
  c->Send(ImageRequest{unit_a.sweep_id, unit_a.unit_id, {Want(both)}});
  const ImageReply not_leased = c->Receive<ImageReply>();
  EXPECT_NE(not_leased.refused.find("c:1"), std::string::npos) << not_leased.refused;
  EXPECT_NE(not_leased.refused.find("not leased to it"), std::string::npos) << not_leased.refused;
  EXPECT_TRUE(not_leased.images.empty());
  const std::string log = CoordinatorLog();
  EXPECT_NE(log.find("refused image request"), std::string::npos) << log;

  std::string metrics;
  for (int i = 0; i < 50 && MetricValue(metrics = testing::HttpGet(http_, "/metrics"),
                                        "tunefarm_kernel_images_served_total") < 1;
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a snapshot a second
  EXPECT_EQ(MetricValue(metrics, "tunefarm_kernel_images_served_total"), 1) << metrics;
  EXPECT_EQ(MetricValue(metrics, "tunefarm_image_requests_refused_total"), 2) << metrics;
}

// A witness is a key: one worker key answering as "evil-a" and then as
// "evil-b" plants the same cubin twice, and it is one witness: not served
// to another worker, and `publish` ships the config without it.
TEST_F(ImageServiceTest, OneKeyUnderTwoNamesIsOneWitnessAndPublishShipsTheConfigOnly) {
  Config planted;
  for (const char* name : {"evil-a:1", "evil-b:1"}) {
    auto evil_peer = Worker("a", name);
    Peer& evil = *evil_peer;
    const WorkUnit unit = evil.RequestUnit();
    ASSERT_FALSE(unit.configs.empty()) << CoordinatorLog();
    if (planted.params.empty()) planted = unit.configs[0];
    ASSERT_TRUE(std::any_of(unit.configs.begin(), unit.configs.end(),
                            [&](const Config& c) { return c.Id() == planted.Id(); }));
    evil.Send(Report(unit, {planted}));
    ASSERT_EQ(evil.Receive<ResultsAck>().refused, "") << CoordinatorLog();
    evil.Send(Disconnect{"done"});
  }
  auto c = Worker("c");
  const WorkUnit unit_c = c->RequestUnit();
  c->Send(ImageRequest{unit_c.sweep_id, unit_c.unit_id, {Want(planted)}});
  const ImageReply reply = c->Receive<ImageReply>();
  EXPECT_TRUE(reply.images.empty()) << "one key's word was served";
  EXPECT_EQ(reply.missing, 1u);
  Child publish({TUNEFARM_BINARY, "publish", "--coordinator", endpoint_, "--curve-key", dir_.Sub("client"),
                 "--coordinator-key", dir_.Sub("coordinator.pub"), "--out", dir_.Sub("bundle"), "--unsigned"},
                dir_.Sub("publish.log"));
  ASSERT_EQ(publish.Wait(120), 0) << ReadFile(dir_.Sub("publish.log"));
  const std::string json = ReadFile(dir_.Sub("bundle.json"));
  EXPECT_NE(json.find("\"config_id\": \"" + planted.Id() + "\""), std::string::npos) << json;  // the config ships
  EXPECT_EQ(json.find(Sha256Hex(Cubin(planted))), std::string::npos) << json;  // its cubin does not
  EXPECT_NE(ReadFile(dir_.Sub("publish.log")).find("config-only"), std::string::npos)
      << ReadFile(dir_.Sub("publish.log"));
}

TEST_F(ImageServiceTest, AFloodOfImageRequestsIsCutOffAndStatusIsAnsweredMeanwhile) {
  auto d = Worker("d");
  const WorkUnit unit = d->RequestUnit();
  ASSERT_FALSE(unit.configs.empty()) << CoordinatorLog();
  constexpr int kFlood = 60;
  for (int i = 0; i < kFlood; ++i) d->Send(ImageRequest{unit.sweep_id, unit.unit_id, {Want(unit.configs[0])}});
  int answered = 0, refused = 0;
  bool cut_off = false;
  while (auto cmd = d->ReceiveAny()) {
    if (auto* reply = std::get_if<ImageReply>(&*cmd)) {
      (reply->refused.empty() ? answered : refused)++;
      if (!reply->refused.empty()) {
        EXPECT_NE(reply->refused.find("d:1"), std::string::npos) << reply->refused;
      }
    } else if (std::holds_alternative<tune::Disconnect>(*cmd)) {
      cut_off = true;
      break;
    }
  }
  EXPECT_TRUE(cut_off) << CoordinatorLog();
  EXPECT_GE(refused, 1);
  EXPECT_LT(answered, kFlood);
  Peer client(ctx_, endpoint_, 10000, Curve("client"));
  client.Send(SweepStatusRequest{});
  const SweepStatus status = client.Receive<SweepStatus>();
  ASSERT_EQ(status.sweeps.size(), 1u);
  EXPECT_EQ(status.sweeps[0].state, "running");
}

}  // namespace
}  // namespace tune
