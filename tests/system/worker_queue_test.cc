// A device asks for its next unit while it runs the last config of the
// current one, so the unit is already queued when the device gets to it:
// a coordinator and a worker (sim backend, real sockets) in this process,
// a sweep of many small units, and the worker's own count of units that
// arrived while their device was busy.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <zmq.hpp>

#include "coordinator.h"
#include "support/temp_dir.h"
#include "opspec/op_definition.h"
#include "protocol/protocol.h"
#include "worker.h"

namespace tune {
namespace {

// One request/reply over a fresh DEALER socket.
Command Call(zmq::context_t& ctx, const std::string& endpoint, Command cmd) {
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::rcvtimeo, 10000);
  s.connect(endpoint);
  Envelope env;
  env.seq = 1;
  env.sender = "worker-queue-test";
  env.command = std::move(cmd);
  const std::string frame = EncodeEnvelope(env);
  s.send(zmq::buffer(frame), zmq::send_flags::none);
  zmq::message_t reply;
  if (!s.recv(reply)) return ErrorReply{"no reply"};
  auto decoded = DecodeEnvelope(reply.data(), reply.size());
  if (!decoded.ok()) return ErrorReply{decoded.status().message()};
  return decoded->command;
}

TEST(WorkerQueue, ADeviceHasItsNextUnitBeforeItFinishesTheCurrentOne) {
  testing::TempDir dir("worker_queue_test");
  CoordinatorOptions copts;
  copts.endpoint = "tcp://127.0.0.1:*";
  copts.store_path = dir.Sub("store");
  Coordinator coordinator(copts);
  ASSERT_TRUE(coordinator.Start().ok());
  std::atomic<bool> stop{false};
  std::thread coordinator_thread([&] { (void)coordinator.Run(&stop); });

  WorkerOptions wopts;
  wopts.endpoint = coordinator.bound_endpoint();
  wopts.backend = "sim";
  wopts.sim_models = {"h100"};
  wopts.sim_faults = "busy=0.005";  // 5 ms of real time per (config, shape)
  wopts.batch_seconds = 0.05;
  Worker worker(wopts);
  ASSERT_TRUE(worker.Start().ok());

  auto pkg = ReadOpPackage(std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops/synthetic");
  ASSERT_TRUE(pkg.ok()) << pkg.status().message();
  SweepSubmit submit;
  submit.name = "queue";
  submit.ops = {"synthetic"};
  submit.op_packages = {*pkg};
  submit.dtypes = {"f32"};
  submit.shapes = {Shape{{{"N", 4096}}}, Shape{{{"N", 8192}}}};
  submit.gpu_models = {"*"};
  submit.configs_per_unit = 10;  // 600 configs: about 60 units of ~0.1 s
  zmq::context_t ctx;
  auto accepted = Call(ctx, coordinator.bound_endpoint(), submit);
  ASSERT_TRUE(std::holds_alternative<SweepAccepted>(accepted)) << CommandName(accepted);
  const std::string sweep_id = std::get<SweepAccepted>(accepted).sweep_id;

  std::thread worker_thread([&] { (void)worker.Run(&stop); });
  std::string state = "running";
  for (int i = 0; i < 600 && state == "running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto reply = Call(ctx, coordinator.bound_endpoint(), SweepStatusRequest{sweep_id});
    if (auto* st = std::get_if<SweepStatus>(&reply); st && !st->sweeps.empty()) state = st->sweeps[0].state;
  }
  stop = true;
  worker_thread.join();
  coordinator_thread.join();
  EXPECT_EQ(state, "done");

  const WorkerStats stats = worker.stats();
  EXPECT_EQ(stats.measured, 1200u);
  ASSERT_GT(stats.units, 20u);
  // Every unit after the first can arrive early; units cut small at the end
  // of the sweep may not. Asked only once the device is idle, none would.
  EXPECT_GE(stats.units_queued, stats.units / 2)
      << stats.units_queued << " of " << stats.units << " units were queued behind a busy device";
}

}  // namespace
}  // namespace tune
