// The coordinator's policies that need no socket.
#include <gtest/gtest.h>

#include "coordinator.h"
#include "scheduler.h"
#include "worker_sessions.h"

namespace tune {
namespace {

TEST(NoWorkRetry, SmallFarmsAskAgainSoonAndIdlePollingStaysBoundedAsTheFarmGrows) {
  EXPECT_EQ(NoWorkRetryMs(0), 20u);
  EXPECT_EQ(NoWorkRetryMs(1), 20u);
  EXPECT_EQ(NoWorkRetryMs(100), 20u);
  EXPECT_EQ(NoWorkRetryMs(500), 100u);
  EXPECT_EQ(NoWorkRetryMs(1000), 200u);
  EXPECT_EQ(NoWorkRetryMs(5000), 1000u);
  EXPECT_EQ(NoWorkRetryMs(100000), 1000u);
  // Idle requests per second over the farm: 1000 / retry per worker.
  for (size_t workers : {1u, 10u, 250u, 1000u, 5000u}) {
    EXPECT_LE(1000.0 * double(workers) / NoWorkRetryMs(workers), 5000.0 + 1e-9) << workers << " workers";
  }
}

DeviceInfo SimDevice(int index, const std::string& model) {
  DeviceInfo d;
  d.index = index;
  d.model = model;
  d.backend = "sim";
  return d;
}

Hello HelloOf(const std::string& name, std::vector<DeviceInfo> devices) {
  Hello h;
  h.worker_name = name;
  h.devices = std::move(devices);
  return h;
}

TEST(CoordinatorWorkerSessions, HelloDevicesAreCheckedBeforeTheyNameAModel) {
  EXPECT_TRUE(CheckDevices({SimDevice(0, "h100-sxm"), SimDevice(1, "h100-sxm")}).ok());
  const Status twice = CheckDevices({SimDevice(0, "h100-sxm"), SimDevice(0, "a100")});
  EXPECT_NE(twice.message().find("device 0: index given twice"), std::string::npos) << twice.message();
  const Status upper = CheckDevices({SimDevice(3, "H100")});
  EXPECT_NE(upper.message().find("device 3: model 'H100'"), std::string::npos) << upper.message();
  DeviceInfo rocm = SimDevice(0, "mi300");
  rocm.backend = "rocm";
  EXPECT_NE(CheckDevices({rocm}).message().find("unknown backend 'rocm'"), std::string::npos);
  std::vector<DeviceInfo> many;
  for (int i = 0; i < 65; ++i) many.push_back(SimDevice(i, "sim"));
  EXPECT_FALSE(CheckDevices(many).ok());
}

TEST(CoordinatorWorkerSessions, OnlyServedDevicesMakeAModelLiveUntilTheSessionEnds) {
  Scheduler scheduler;
  WorkerSessions sessions(&scheduler);
  WorkerSession& s = sessions.Start("w1", HelloOf("host:1", {SimDevice(0, "h100"), SimDevice(1, "a100")}), "", 10);
  EXPECT_FALSE(scheduler.ModelLive("h100"));  // named in the hello, asked for nothing yet
  ASSERT_NE(s.Device(0), nullptr);
  EXPECT_EQ(s.Device(7), nullptr);
  sessions.Serve(s, *s.Device(0));
  sessions.Serve(s, *s.Device(0));  // a device asking again counts once
  EXPECT_TRUE(scheduler.ModelLive("h100"));
  EXPECT_FALSE(scheduler.ModelLive("a100"));
  // A second hello starts over: the first session's device is given back.
  sessions.Start("w1", HelloOf("host:1", {SimDevice(0, "h100")}), "", 11);
  EXPECT_FALSE(scheduler.ModelLive("h100"));
  sessions.Serve(*sessions.Find("w1"), *sessions.Find("w1")->Device(0));
  sessions.Drop("w1");
  EXPECT_FALSE(scheduler.ModelLive("h100"));
  EXPECT_EQ(sessions.Find("w1"), nullptr);
  EXPECT_EQ(sessions.size(), 0u);
}

TEST(CoordinatorWorkerSessions, ATickSortsSessionsIntoRevokedDeadAndDueAHeartbeat) {
  Scheduler scheduler;
  WorkerSessions sessions(&scheduler);
  sessions.Start("fresh", HelloOf("fresh", {}), "key-fresh", 103);
  sessions.Start("quiet", HelloOf("quiet", {}), "key-quiet", 103);
  sessions.Start("dead", HelloOf("dead", {}), "key-dead", 90);
  sessions.Start("revoked", HelloOf("revoked", {}), "key-gone", 90);
  sessions.NoteSent("fresh", 104.5);
  sessions.NoteSent("quiet", 103.5);  // heard 2 s ago, told nothing for 1.5 s
  ASSERT_NE(sessions.Heard("fresh", 104.9), nullptr);
  EXPECT_EQ(sessions.Heard("stranger", 104.9), nullptr);
  // 1 s heartbeats, 3 missed make a worker dead.
  auto due = sessions.Check(105, 1.0, 3, [](const std::string& key) { return key != "key-gone"; });
  EXPECT_EQ(due.revoked, std::vector<std::string>{"revoked"});
  EXPECT_EQ(due.dead, std::vector<std::string>{"dead"});
  EXPECT_EQ(due.quiet, std::vector<std::string>{"quiet"});
  EXPECT_EQ(sessions.worker_deaths(), 1u);
  // Without the key check a revoked key is judged by its heartbeats alone.
  due = sessions.Check(105, 1.0, 3, nullptr);
  EXPECT_TRUE(due.revoked.empty());
  EXPECT_EQ(due.dead, (std::vector<std::string>{"dead", "revoked"}));
  EXPECT_EQ(sessions.worker_deaths(), 3u);
}

TEST(CoordinatorWorkerSessions, ViolationsCountPerSessionAndAHelloForgetsThem) {
  Scheduler scheduler;
  WorkerSessions sessions(&scheduler);
  sessions.Start("w", HelloOf("w", {}), "", 0);
  EXPECT_EQ(sessions.Find("w")->Lessee(), "w");  // no CURVE: its name
  for (uint32_t i = 1; i < kMaxViolations; ++i) EXPECT_FALSE(sessions.NoteViolation("w")) << i;
  EXPECT_TRUE(sessions.NoteViolation("w"));
  EXPECT_FALSE(sessions.NoteViolation("unknown"));
  sessions.Start("w", HelloOf("w", {}), "curve-key", 1);
  EXPECT_EQ(sessions.Find("w")->Lessee(), "curve-key");
  EXPECT_FALSE(sessions.NoteViolation("w"));
  EXPECT_EQ(sessions.Find("w")->violations, 1u);
}

TEST(CoordinatorWorkerSessions, ClockSkewIsKeptAndOneDeviceStandsForEachModel) {
  Scheduler scheduler;
  WorkerSessions sessions(&scheduler);
  sessions.Start("a", HelloOf("a", {SimDevice(0, "h100"), SimDevice(1, "h100")}), "", 0);
  sessions.Start("b", HelloOf("b", {SimDevice(0, "a100"), SimDevice(1, "h100")}), "", 0);
  sessions.NoteClockSkew("a", 2 * kClockSkewWarnSeconds);
  EXPECT_TRUE(sessions.Find("a")->told_skew);
  EXPECT_EQ(sessions.Find("a")->clock_skew_seconds, 2 * kClockSkewWarnSeconds);
  sessions.NoteClockSkew("b", 1);
  EXPECT_FALSE(sessions.Find("b")->told_skew);
  const auto devices = sessions.DevicesByModel();
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].model, "h100");
  EXPECT_EQ(devices[1].model, "a100");
}

}  // namespace
}  // namespace tune
