// Restart: a coordinator process SIGKILLed in the middle of a sweep and
// started again over the same store, with a worker spoken for by a real
// DEALER socket, so the test decides exactly which results arrive when.
//
// The worker holds a unit leased by the first run and sends its last batch
// only after the restart. Those rows must be stored, and they must not
// complete any unit of the second run: the resumed sweep cuts its units
// differently (configs already stored are skipped), so a unit of the second
// run that took the old unit's number would be counted done with configs
// never measured.
#include <gtest/gtest.h>

#include <optional>
#include <zmq.hpp>

#include "support/process.h"
#include "support/protocol_peer.h"
#include "support/temp_dir.h"
#include "opspec/op_definition.h"
#include "protocol/protocol.h"
#include "publish/publish.h"
#include "store/result_store.h"

using tune::testing::Child;
using tune::testing::ReadFile;

namespace tune {
namespace {

constexpr char kModel[] = "sim-restart";

using Peer = testing::ProtocolPeer;

class RestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    endpoint_ = "tcp://127.0.0.1:" + std::to_string(testing::FreePort());
    auto pkg = ReadOpPackage(std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops/synthetic");
    ASSERT_TRUE(pkg.ok()) << pkg.status().message();
    package_ = *pkg;
    auto spec = ParseOpSpec(package_, "synthetic");
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    kernel_hash_ = KernelHash(*spec, "sim");
    device_.model = kModel;
    device_.name = kModel;
    device_.backend = "sim";
    device_.nvrtc_version = "sim";
    device_.max_threads_per_block = 1024;
  }
  void StartCoordinator() {
    coordinator_ = std::make_unique<Child>(
        std::vector<std::string>{TUNEFARM_BINARY, "coordinator", "--bind", endpoint_, "--store",
                                 dir_.Sub("store"), "--heartbeat-ms", "500",
                                 "--liveness", "60", "--lease-base", "600", "-v"},
        dir_.Sub("coordinator.log"));
  }

  std::unique_ptr<Peer> Greet() {
    auto peer = std::make_unique<Peer>(ctx_, endpoint_);
    peer->Send(Hello{"restart-worker", "test", {device_}});
    peer->Receive<HelloAck>();
    return peer;
  }

  // Rows for configs [begin, end) of `unit`, as a worker would send them.
  Results Batch(const WorkUnit& unit, size_t begin, size_t end, uint64_t batch, bool final) {
    Results r;
    r.sweep_id = unit.sweep_id;
    r.unit_id = unit.unit_id;
    r.batch = batch;
    r.final = final;
    for (size_t i = begin; i < end; ++i) {
      for (const auto& shape : unit.shapes) {
        Measurement m;
        m.gpu_model = kModel;
        m.op = unit.op;
        m.dtype = unit.dtype;
        m.shape = shape.Canonical();
        m.kernel_hash = kernel_hash_;
        m.config = unit.configs[i];
        m.config_id = m.config.Id();
        m.median_us = m.mean_us = m.min_us = m.max_us = 10.0 + static_cast<double>(i);
        m.samples = 5;
        m.check_passed = true;
        m.backend = "sim";
        r.measurements.push_back(std::move(m));
      }
    }
    return r;
  }

  // A sweep of the synthetic op at N=4096 on kModel, units of 20 configs,
  // submitted through `client`: its id.
  std::string SubmitSweep(Peer& client, const std::string& name) {
    SweepSubmit submit;
    submit.name = name;
    submit.ops = {"synthetic"};
    submit.op_packages = {package_};
    submit.dtypes = {"f32"};
    submit.shapes = {Shape{{{"N", 4096}}}};
    submit.gpu_models = {kModel};
    submit.configs_per_unit = 20;
    client.Send(submit);
    return client.Receive<SweepAccepted>().sweep_id;
  }

  SweepProgress Progress(Peer& peer, const std::string& sweep_id) {
    peer.Send(SweepStatusRequest{sweep_id});
    auto st = peer.Receive<SweepStatus>();
    EXPECT_EQ(st.sweeps.size(), 1u);
    return st.sweeps.empty() ? SweepProgress{} : st.sweeps[0];
  }

  testing::TempDir dir_{"restart_test"};
  std::string endpoint_;
  OpPackage package_;
  std::string kernel_hash_;
  DeviceInfo device_;
  zmq::context_t ctx_;
  std::unique_ptr<Child> coordinator_;
};

TEST_F(RestartTest, ResultsOfAUnitLeasedBeforeTheRestartCompleteNoUnitOfTheNextRun) {
  StartCoordinator();
  auto worker = Greet();
  auto client = std::make_unique<Peer>(ctx_, endpoint_);
  const std::string sweep_id = SubmitSweep(*client, "restart");
  ASSERT_FALSE(sweep_id.empty());
  // A model is live once a device of it asks for work: units exist from then.
  const WorkUnit old_unit = worker->RequestUnit();
  const uint64_t pairs_total = Progress(*client, sweep_id).pairs_total;
  ASSERT_GT(pairs_total, 100u);
  ASSERT_EQ(old_unit.configs.size(), 20u);
  worker->Send(Batch(old_unit, 0, 10, 0, false));
  EXPECT_EQ(worker->Receive<ResultsAck>().stored, 10u);

  coordinator_->Signal(SIGKILL);
  coordinator_->Wait(10);
  StartCoordinator();
  worker = Greet();
  client = std::make_unique<Peer>(ctx_, endpoint_);

  // The resumed sweep skips the ten stored configs, so its first unit starts
  // at the old unit's eleventh config and runs past the old unit's end.
  const WorkUnit unit = worker->RequestUnit();
  ASSERT_FALSE(unit.configs.empty());
  EXPECT_EQ(unit.configs[0].Id(), old_unit.configs[10].Id());
  EXPECT_NE(unit.unit_id, old_unit.unit_id) << "a unit number of the last run was given out again";

  const uint64_t done_before = Progress(*client, sweep_id).units_done;
  worker->Send(Batch(old_unit, 10, 20, 1, true));
  const ResultsAck resent = worker->Receive<ResultsAck>();
  EXPECT_EQ(resent.stored, 10u) << resent.refused << ReadFile(dir_.Sub("coordinator.log"));
  EXPECT_EQ(Progress(*client, sweep_id).units_done, done_before)
      << "the old unit's final batch completed a unit of this run";

  // The farm goes on: every unit measured, the sweep done, every pair stored.
  std::optional<WorkUnit> next = unit;
  while (next) {
    worker->Send(Batch(*next, 0, next->configs.size(), 0, true));
    worker->Receive<ResultsAck>();
    worker->Send(RequestWork{0});
    auto reply = worker->ReceiveAny();
    ASSERT_TRUE(reply.has_value()) << "no reply to a work request";
    next.reset();
    if (auto* u = std::get_if<WorkUnit>(&*reply)) next = std::move(*u);
    else ASSERT_TRUE(std::holds_alternative<NoWork>(*reply)) << CommandName(*reply);
  }
  const SweepProgress end = Progress(*client, sweep_id);
  EXPECT_EQ(end.state, "done");
  // Pairs the last run's late batch stored count once, as the units of this
  // run that hold them complete: a finished sweep says all of them.
  EXPECT_EQ(end.pairs_done, end.pairs_total);
  EXPECT_EQ(coordinator_->Stop(10), 0) << ReadFile(dir_.Sub("coordinator.log"));

  auto store = ResultStore::OpenReadOnly(dir_.Sub("store"));
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto rows = (*store)->CountResults();
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(*rows, pairs_total);
}

// A cancelled sweep leases nothing more, acknowledges late results
// without storing them, cannot be cancelled twice, and stays ended across a
// restart of the coordinator.
TEST_F(RestartTest, ACancelledSweepLeasesNothingMoreAndStaysEndedAfterARestart) {
  StartCoordinator();
  auto worker = Greet();
  auto client = std::make_unique<Peer>(ctx_, endpoint_);
  const std::string sweep_id = SubmitSweep(*client, "cancel");
  const WorkUnit unit = worker->RequestUnit();
  ASSERT_EQ(unit.configs.size(), 20u);
  worker->Send(Batch(unit, 0, 10, 0, false));
  EXPECT_EQ(worker->Receive<ResultsAck>().stored, 10u);

  client->Send(SweepCancel{sweep_id});
  const SweepStatus cancelled = client->Receive<SweepStatus>();
  ASSERT_EQ(cancelled.sweeps.size(), 1u);
  EXPECT_EQ(cancelled.sweeps[0].state, "cancelled");
  // Cancelled again: left as it ended, its status the answer.
  client->Send(SweepCancel{sweep_id});
  const SweepStatus again = client->Receive<SweepStatus>();
  ASSERT_EQ(again.sweeps.size(), 1u);
  EXPECT_EQ(again.sweeps[0].state, "cancelled");
  EXPECT_EQ(again.sweeps[0].finished_unix, cancelled.sweeps[0].finished_unix);
  client->Send(SweepCancel{"no-such-sweep"});
  EXPECT_NE(client->Receive<ErrorReply>().message.find("unknown sweep"), std::string::npos);

  worker->Send(RequestWork{0});
  EXPECT_TRUE(std::holds_alternative<NoWork>(worker->ReceiveAny().value_or(Command{})));
  worker->Send(Batch(unit, 10, 20, 1, true));  // late: acknowledged, not stored
  const ResultsAck late = worker->Receive<ResultsAck>();
  EXPECT_EQ(late.stored, 0u);
  EXPECT_TRUE(late.refused.empty()) << late.refused;

  coordinator_->Signal(SIGTERM);
  ASSERT_EQ(coordinator_->Wait(10), 0) << ReadFile(dir_.Sub("coordinator.log"));
  StartCoordinator();
  worker = Greet();
  worker->Send(RequestWork{0});
  EXPECT_TRUE(std::holds_alternative<NoWork>(worker->ReceiveAny().value_or(Command{})))
      << "a cancelled sweep was resumed";
  // Its history survives the restart: `status` still lists it as it ended.
  client = std::make_unique<Peer>(ctx_, endpoint_);
  const SweepProgress after = Progress(*client, sweep_id);
  EXPECT_EQ(after.sweep_id, sweep_id);
  EXPECT_EQ(after.state, "cancelled");
  EXPECT_EQ(after.name, "cancel");
  EXPECT_EQ(after.pairs_done, cancelled.sweeps[0].pairs_done);
  EXPECT_GT(after.finished_unix, 0);
  EXPECT_EQ(coordinator_->Stop(10), 0) << ReadFile(dir_.Sub("coordinator.log"));
  auto store = ResultStore::OpenReadOnly(dir_.Sub("store"));
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_EQ(*(*store)->CountResults(), 10u);  // what was stored before the cancel stays
  // Its key is marked partial: 10 of the space measured.
  Measurement row;
  ASSERT_TRUE((*store)->Scan({}, [&](const Measurement& m) { return row = m, false; }).ok());
  auto coverage = (*store)->GetCoverage(row.gpu_model, row.op, row.dtype, row.shape, row.kernel_hash);
  ASSERT_TRUE(coverage.ok() && coverage->has_value()) << ReadFile(dir_.Sub("coordinator.log"));
  EXPECT_EQ((*coverage)->state, KeyCoverage::State::kPartial);
  EXPECT_EQ((*coverage)->evaluated, 10u);
  EXPECT_GT((*coverage)->legal, 10u);
  // So says a bundle published from it.
  PublishOptions config_only;
  config_only.kernels = false;
  auto bundle = BuildBundle(**store, {}, "cancelled", config_only);
  ASSERT_TRUE(bundle.ok()) << bundle.status().message();
  ASSERT_EQ(bundle->entries.size(), 1u);
  EXPECT_EQ(bundle->entries[0].coverage.state, "partial");
  EXPECT_EQ(bundle->entries[0].coverage.evaluated, 10u);
}

}  // namespace
}  // namespace tune
