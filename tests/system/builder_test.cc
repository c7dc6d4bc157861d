// Builders (coordinator/build_service.h): a real coordinator process over
// CURVE with a builder allow-list, builder and worker keys speaking the
// protocol by hand. A builder is handed the configs a GPU model's devices
// will take next, and the images it sends are served on its key's word; a
// batch with an image of an architecture it did not say, of work it was not
// handed, with a wrong sha256 or that is no cubin is refused in one line
// naming it, and nothing of it is stored; a worker key may not send builder
// commands, nor a builder key a worker's.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>
#include <zmq.hpp>

#include "protocol/protocol.h"
#include "opspec/op_definition.h"
#include "store/result_store.h"
#include "support/cubin.h"
#include "support/http_get.h"
#include "support/process.h"
#include "support/protocol_peer.h"
#include "support/temp_dir.h"
#include "wire/curve.h"

namespace tune {
namespace {

namespace fs = std::filesystem;
using testing::Child;
using testing::ReadFile;
using Peer = testing::ProtocolPeer;

constexpr char kModel[] = "sim-a100";

// The synthetic op cut to two configs, timed on four shapes: one unit of
// both configs per shape, so that once a device takes the first shape's,
// three shapes' pools of the same two configs wait uncut.
constexpr char kSweep[] =
    "[sweep]\nname = \"builds\"\nops = [\"tiny\"]\ndtypes = [\"f32\"]\nconfigs_per_unit = 2\n"
    "shapes = [ { N = 4096 }, { N = 2048 }, { N = 1024 }, { N = 512 } ]\n";

using testing::MetricValue;

class BuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    endpoint_ = "tcp://127.0.0.1:" + std::to_string(testing::FreePort());
    http_ = testing::FreePort();
    for (const char* who : {"coordinator", "a", "c", "b1", "b2", "client"}) {
      Child keygen({TUNEFARM_BINARY, "keys", "curve", "--out", dir_.Sub(who), "--name", who}, dir_.Sub("keys.log"));
      ASSERT_EQ(keygen.Wait(20), 0) << ReadFile(dir_.Sub("keys.log"));
    }
    dir_.Write("allowed", ReadFile(dir_.Sub("a.pub")) + ReadFile(dir_.Sub("c.pub")));
    dir_.Write("builders", ReadFile(dir_.Sub("b1.pub")) + ReadFile(dir_.Sub("b2.pub")));
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
                                 "--client-allow-list", dir_.Sub("clients"), "--builder-allow-list",
                                 dir_.Sub("builders"), "--http-port", std::to_string(http_),
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
  // Worker key `who` with one simulated device of compute capability 9.0
  // (its toolchain "sim"), which took the first unit it was given: the
  // model is live and its other shapes' pools wait.
  std::unique_ptr<Peer> Worker(const std::string& who, WorkUnit* unit) {
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
    peer->Send(Hello{who + ":1", "0.1", {d}});
    peer->Receive<HelloAck>();
    if (unit) *unit = peer->RequestUnit();
    return peer;
  }
  // Builder key `who`, for sm_90 with the "sim" toolchain (the device's).
  std::unique_ptr<Peer> Builder(const std::string& who) {
    auto peer = std::make_unique<Peer>(ctx_, endpoint_, 10000, Curve(who));
    peer->Send(Hello{who + ":1", "0.1", {}, {"sm_90"}, "sim"});
    peer->Receive<HelloAck>();
    return peer;
  }
  // A work for `builder`: it asks until the coordinator hands one.
  BuildWork Work(Peer& builder) {
    for (int i = 0; i < 100; ++i) {
      builder.Send(BuildRequest{8});
      auto cmd = builder.ReceiveAny();
      if (!cmd) break;
      if (auto* work = std::get_if<BuildWork>(&*cmd)) return std::move(*work);
      if (!std::holds_alternative<NoWork>(*cmd)) {
        ADD_FAILURE() << "expected build_work or no_work, got " << CommandName(*cmd);
        return {};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "no build work came" << CoordinatorLog();
    return {};
  }
  KernelImage Image(const Config& config, const std::string& arch = "sm_90") const {
    KernelImage k;
    k.kernel_hash = kernel_hash_;
    k.config_id = config.Id();
    k.dtype = "f32";
    k.arch = arch;
    k.image = testing::SyntheticCubin(arch, entry_, config.Id());
    k.sha256 = Sha256Hex(k.image);
    return k;
  }
  // The kernel images the store holds now (read beside the coordinator).
  size_t StoredImages() {
    auto store = ResultStore::OpenReadOnly(dir_.Sub("store"));
    EXPECT_TRUE(store.ok()) << store.status().message();
    if (!store.ok()) return 0;
    size_t n = 0;
    EXPECT_TRUE((*store)->ForEachKernel([&](const KernelImage&) { ++n; }).ok());
    return n;
  }
  // `name` of /metrics once it reaches `want` (a snapshot a second), or
  // what it is after a while.
  double MetricOnce(const std::string& name, double want) {
    double v = -1;
    for (int i = 0; i < 100 && (v = MetricValue(testing::HttpGet(http_, "/metrics"), name)) < want; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return v;
  }
  std::string CoordinatorLog() const { return ReadFile(dir_.Sub("coordinator.log")); }

  testing::TempDir dir_;
  zmq::context_t ctx_{1};
  std::string endpoint_, server_key_, kernel_hash_, entry_;
  int http_ = 0;
  std::unique_ptr<Child> coordinator_;
};

TEST_F(BuilderTest, ABuilderIsHandedWhatDevicesTakeNextAndItsImagesAreServedOnItsWord) {
  WorkUnit first;
  auto a = Worker("a", &first);
  ASSERT_EQ(first.configs.size(), 2u) << CoordinatorLog();
  auto b1 = Builder("b1");
  const BuildWork work = Work(*b1);
  ASSERT_EQ(work.configs.size(), 2u) << CoordinatorLog();
  EXPECT_EQ(work.arch, "sm_90");
  EXPECT_EQ(work.dtype, "f32");
  EXPECT_EQ(work.op, "tiny");
  EXPECT_EQ(work.kernel_hash, kernel_hash_) << "the op's hash for the builder's toolchain";
  EXPECT_FALSE(work.op_package.empty());
  b1->Send(BuiltImages{work.work_id, {Image(work.configs[0]), Image(work.configs[1])}, 0});
  EXPECT_EQ(MetricOnce("tunefarm_builder_images_total", 2), 2) << CoordinatorLog();
  // Built once: nothing is left to hand.
  b1->Send(BuildRequest{8});
  EXPECT_TRUE(std::holds_alternative<NoWork>(b1->ReceiveAny().value_or(Command{ErrorReply{"silence"}})));

  // A worker key leased a later shape of the same configs takes both images
  // on the builder's word alone, byte for byte.
  WorkUnit later;
  auto c = Worker("c", &later);
  ASSERT_EQ(later.configs.size(), 2u);
  std::vector<ImageWant> wants;
  for (const Config& cfg : later.configs) wants.push_back(ImageWant{kernel_hash_, cfg.Id(), "f32", "sm_90"});
  c->Send(ImageRequest{later.sweep_id, later.unit_id, wants});
  const ImageReply served = c->Receive<ImageReply>();
  EXPECT_EQ(served.refused, "");
  ASSERT_EQ(served.images.size(), 2u) << CoordinatorLog();
  EXPECT_EQ(served.missing, 0u);
  for (const KernelImage& k : served.images) {
    EXPECT_EQ(k.image, testing::SyntheticCubin("sm_90", entry_, k.config_id));
    EXPECT_TRUE(k.witnesses.empty());
  }
}

// What a worker asked for and was not served stays open while it holds the
// unit: builders are handed those configs first (of the unit its worker
// compiles now, the back half: the worker compiles from the front), and
// once a builder's images of them are stored the worker is sent them
// unasked.
TEST_F(BuilderTest, AWorkerIsSentWhatABuilderBuiltOfTheConfigsItWasNotServed) {
  WorkUnit first;
  auto a = Worker("a", &first);
  ASSERT_EQ(first.configs.size(), 2u) << CoordinatorLog();
  std::vector<ImageWant> wants;
  for (const Config& cfg : first.configs) wants.push_back(ImageWant{kernel_hash_, cfg.Id(), "f32", "sm_90"});
  a->Send(ImageRequest{first.sweep_id, first.unit_id, wants});
  const ImageReply none = a->Receive<ImageReply>();
  EXPECT_TRUE(none.images.empty());
  EXPECT_EQ(none.missing, 2u);
  auto b1 = Builder("b1");
  const BuildWork work = Work(*b1);
  ASSERT_EQ(work.configs.size(), 2u) << CoordinatorLog();
  // The back half of the unit its worker compiles first, then what the
  // pools hold (the same configs on other shapes).
  EXPECT_EQ(work.configs[0].Id(), first.configs[1].Id()) << "the held unit's back half first";
  EXPECT_EQ(work.configs[1].Id(), first.configs[0].Id());
  b1->Send(BuiltImages{work.work_id, {Image(work.configs[0]), Image(work.configs[1])}, 0});
  const ImageReply late = a->Receive<ImageReply>();
  EXPECT_EQ(late.unit_id, first.unit_id);
  EXPECT_EQ(late.refused, "");
  ASSERT_EQ(late.images.size(), 2u) << CoordinatorLog();
  for (const KernelImage& k : late.images) {
    EXPECT_EQ(k.image, testing::SyntheticCubin("sm_90", entry_, k.config_id));
    EXPECT_TRUE(k.witnesses.empty());
  }
}

TEST_F(BuilderTest, BadImagesAreRefusedNamingTheBuilderAndNothingIsStored) {
  WorkUnit first;
  auto a = Worker("a", &first);
  ASSERT_FALSE(first.configs.empty()) << CoordinatorLog();
  // Each refusal costs the builder its work (handed again) and counts
  // against it: two each for b1 and b2, below the cut-off.
  auto refused = [&](Peer& builder, BuiltImages built, const std::string& who, const std::string& why) {
    builder.Send(std::move(built));
    const ErrorReply reply = builder.Receive<ErrorReply>();
    EXPECT_NE(reply.message.find("builder " + who), std::string::npos) << reply.message;
    EXPECT_NE(reply.message.find(why), std::string::npos) << reply.message;
    EXPECT_EQ(reply.message.find('\n'), std::string::npos) << "one line";
  };
  auto b1 = Builder("b1");
  BuildWork work = Work(*b1);
  ASSERT_FALSE(work.configs.empty()) << CoordinatorLog();
  refused(*b1, BuiltImages{work.work_id + 1000, {Image(work.configs[0])}, 0}, "b1:1", "was not handed to it");
  refused(*b1, BuiltImages{work.work_id, {Image(work.configs[0], "sm_80")}, 0}, "b1:1",
          "arch 'sm_80' that it did not say it builds for");

  auto b2 = Builder("b2");
  work = Work(*b2);
  ASSERT_GE(work.configs.size(), 2u) << CoordinatorLog();
  // A good image beside one whose sha256 is not its image's: the batch is
  // refused whole, the good one is not stored either.
  KernelImage lying = Image(work.configs[1]);
  lying.sha256 = Sha256Hex("another image");
  refused(*b2, BuiltImages{work.work_id, {Image(work.configs[0]), lying}, 0}, "b2:1", "sha256");
  work = Work(*b2);
  KernelImage not_cubin = Image(work.configs[0]);
  not_cubin.image = "#!/bin/sh\necho not a cubin\n";
  not_cubin.sha256 = Sha256Hex(not_cubin.image);
  refused(*b2, BuiltImages{work.work_id, {not_cubin}, 0}, "b2:1", "image 0:");

  EXPECT_EQ(MetricOnce("tunefarm_builds_refused_total", 4), 4) << CoordinatorLog();
  EXPECT_EQ(MetricValue(testing::HttpGet(http_, "/metrics"), "tunefarm_builder_images_total"), 0);
  EXPECT_EQ(StoredImages(), 0u);
  EXPECT_NE(CoordinatorLog().find("refused built images"), std::string::npos);
}

TEST_F(BuilderTest, KeysMayNotSendAnotherRolesCommands) {
  // A worker key asking for build work is cut off, naming its key.
  auto a = Worker("a", nullptr);
  a->Send(BuildRequest{4});
  auto cmd = a->ReceiveAny();
  ASSERT_TRUE(cmd && std::holds_alternative<Disconnect>(*cmd)) << CoordinatorLog();
  const std::string reason = std::get<Disconnect>(*cmd).reason;
  EXPECT_NE(reason.find("a worker key may not send build_request"), std::string::npos) << reason;
  auto key = LoadCurvePublicKey(dir_.Sub("a.pub"));
  ASSERT_TRUE(key.ok()) << key.status().message();
  EXPECT_NE(reason.find(*key), std::string::npos) << reason;

  // ... and so is one saying hello as a builder.
  Peer posing(ctx_, endpoint_, 10000, Curve("c"));
  posing.Send(Hello{"c:1", "0.1", {}, {"sm_90"}, "sim"});
  cmd = posing.ReceiveAny();
  ASSERT_TRUE(cmd && std::holds_alternative<Disconnect>(*cmd));
  EXPECT_NE(std::get<Disconnect>(*cmd).reason.find("may not say hello as a builder"), std::string::npos);

  // A builder key may not lease, nor ask for status.
  auto b1 = Builder("b1");
  b1->Send(RequestWork{0});
  cmd = b1->ReceiveAny();
  ASSERT_TRUE(cmd && std::holds_alternative<Disconnect>(*cmd));
  EXPECT_NE(std::get<Disconnect>(*cmd).reason.find("a builder key may not send request_work"), std::string::npos)
      << std::get<Disconnect>(*cmd).reason;
  auto b2 = Builder("b2");
  b2->Send(SweepStatusRequest{});
  cmd = b2->ReceiveAny();
  ASSERT_TRUE(cmd && std::holds_alternative<Disconnect>(*cmd));
  EXPECT_NE(std::get<Disconnect>(*cmd).reason.find("a builder key may not send sweep_status_request"),
            std::string::npos);
}

}  // namespace
}  // namespace tune
