// The coordinator reads its clocks through CoordinatorOptions::env: a
// coordinator whose wall clock is a day behind the host's (a fake Env), a
// sim worker on the host's clock, one small sweep. The rows keep the
// coordinator's (fake) time and the worker's clock shows a day ahead.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <ctime>
#include <thread>
#include <zmq.hpp>

#include "base/env.h"
#include "protocol/protocol.h"
#include "coordinator.h"
#include "opspec/op_definition.h"
#include "support/http_get.h"
#include "support/temp_dir.h"
#include "worker.h"

namespace tune {
namespace {

constexpr int64_t kDaySeconds = 86400;

// The host's clocks, but the wall clock a day behind.
class DayBehindEnv : public Env {
 public:
  int64_t NowUnixSeconds() override { return Env::NowUnixSeconds() - kDaySeconds; }
};

Command Call(zmq::context_t& ctx, const std::string& endpoint, Command cmd) {
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::rcvtimeo, 10000);
  s.connect(endpoint);
  Envelope env;
  env.seq = 1;
  env.sender = "coordinator-env-test";
  env.command = std::move(cmd);
  const std::string frame = EncodeEnvelope(env);
  s.send(zmq::buffer(frame), zmq::send_flags::none);
  zmq::message_t reply;
  if (!s.recv(reply)) return ErrorReply{"no reply"};
  auto decoded = DecodeEnvelope(reply.data(), reply.size());
  if (!decoded.ok()) return ErrorReply{decoded.status().message()};
  return decoded->command;
}

TEST(CoordinatorEnv, RowsAndTheClockSkewComeFromTheInjectedClock) {
  testing::TempDir dir("coordinator_env_test");
  DayBehindEnv env;
  CoordinatorOptions copts;
  copts.endpoint = "tcp://127.0.0.1:*";
  copts.store_path = dir.Sub("store");
  copts.http_port = 0;
  copts.env = &env;
  Coordinator coordinator(copts);
  ASSERT_TRUE(coordinator.Start().ok());
  std::atomic<bool> stop{false};
  std::thread coordinator_thread([&] { (void)coordinator.Run(&stop); });

  WorkerOptions wopts;
  wopts.endpoint = coordinator.bound_endpoint();
  wopts.backend = "sim";
  wopts.sim_models = {"h100"};
  wopts.name = "env-worker";
  Worker worker(wopts);
  ASSERT_TRUE(worker.Start().ok());
  std::thread worker_thread([&] { (void)worker.Run(&stop); });

  auto pkg = ReadOpPackage(std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops/tiny");
  ASSERT_TRUE(pkg.ok()) << pkg.status().message();
  SweepSubmit submit;
  submit.name = "env";
  submit.ops = {"tiny"};
  submit.op_packages = {*pkg};
  submit.dtypes = {"f32"};
  submit.shapes = {Shape{{{"N", 4096}}}};
  submit.gpu_models = {"*"};
  zmq::context_t ctx;
  const int64_t before = std::time(nullptr);
  auto accepted = Call(ctx, coordinator.bound_endpoint(), submit);
  ASSERT_TRUE(std::holds_alternative<SweepAccepted>(accepted)) << CommandName(accepted);
  const std::string sweep_id = std::get<SweepAccepted>(accepted).sweep_id;
  std::string state = "running";
  for (int i = 0; i < 300 && state == "running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto reply = Call(ctx, coordinator.bound_endpoint(), SweepStatusRequest{sweep_id});
    if (auto* st = std::get_if<SweepStatus>(&reply); st && !st->sweeps.empty()) state = st->sweeps[0].state;
  }
  // The workers document is rebuilt every second: wait for one built after
  // the last batch was stored.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  const std::string url = coordinator.http_url();  // "http://127.0.0.1:PORT/"
  const int port = std::stoi(url.substr(url.rfind(':') + 1));
  const std::string response = tune::testing::HttpGet(port, "/api/workers");
  const int64_t after = std::time(nullptr);
  stop = true;
  worker_thread.join();
  coordinator_thread.join();
  ASSERT_EQ(state, "done");

  size_t rows = 0;
  Status scanned = coordinator.store()->Scan(ResultFilter{}, [&](const Measurement& m) {
    ++rows;
    EXPECT_GE(m.unix_time, before - kDaySeconds) << m.config_id;
    EXPECT_LE(m.unix_time, after - kDaySeconds) << m.config_id;
    return true;
  });
  ASSERT_TRUE(scanned.ok()) << scanned.message();
  EXPECT_GT(rows, 0u);

  const size_t body = response.find("\r\n\r\n");
  ASSERT_NE(body, std::string::npos) << response;
  const nlohmann::json doc = nlohmann::json::parse(response.substr(body + 4), nullptr, false);
  ASSERT_EQ(doc["workers"].size(), 1u) << response;
  const nlohmann::json& w = doc["workers"][0];
  EXPECT_EQ(w["name"], "env-worker");
  EXPECT_NEAR(w["clock_skew_seconds"].get<double>(), double(kDaySeconds), double(after - before) + 2);
  EXPECT_TRUE(w["clock_off"].get<bool>());
}

}  // namespace
}  // namespace tune
