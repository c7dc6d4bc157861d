// Scheduler: leases, expiry, dead workers, retries and tail duplicates as
// pure logic with an injected clock.
#include "scheduler.h"

#include <gtest/gtest.h>

#include <set>

#include "tune/op_spec.h"

namespace tune {
namespace {

SweepSubmit MakeSubmit(std::vector<std::string> gpus, uint32_t per_unit) {
  auto pkg = ReadOpPackage(std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops/synthetic");
  EXPECT_TRUE(pkg.ok()) << pkg.status().message();
  SweepSubmit s;
  s.name = "t";
  s.ops = {"synthetic"};
  s.op_packages = {*pkg};
  s.dtypes = {"f32"};
  s.shapes = {Shape{{{"N", 1024}}}, Shape{{{"N", 4096}}}};
  s.gpu_models = std::move(gpus);
  s.configs_per_unit = per_unit;
  return s;
}

DeviceInfo Device(const std::string& model) {
  DeviceInfo d;
  d.model = model;
  d.max_threads_per_block = 1024;
  return d;
}

TEST(Scheduler, UnitsAppearWhenTheModelIsSeenAndCoverTheSpace) {
  Scheduler s;
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 100), "s1", 0).ok());
  EXPECT_FALSE(s.Lease("w1", "m1", 0).has_value());  // no model known yet
  s.AddDevice(Device("m1"));
  const auto* sweep = s.FindSweep("s1");
  ASSERT_NE(sweep, nullptr);
  EXPECT_EQ(sweep->pairs_total, 600u * 2);    // 600 configs x 2 shapes
  auto u = s.Lease("w1", "m1", 0);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->configs.size(), 100u);
  EXPECT_EQ(u->shapes.size(), 2u);
  EXPECT_FALSE(u->op_package.empty());
  std::set<std::string> ids;
  for (const auto& c : u->configs) ids.insert(c.Id());
  while (auto more = s.Lease("w1", "m1", 0)) {
    for (const auto& c : more->configs) EXPECT_TRUE(ids.insert(c.Id()).second);
  }
  EXPECT_EQ(ids.size(), 600u);                // every config once
  EXPECT_EQ(sweep->units.size(), 6u);         // 600 configs / 100
}

TEST(Scheduler, UnitSizeFollowsEachWorkersThroughput) {
  SchedulerOptions o;
  o.configs_per_unit = 10;
  o.target_unit_seconds = 20;
  o.tail_duplicates = false;
  Scheduler s(o);
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 0), "s1", 0).ok());  // 0 = adaptive
  s.AddDevice(Device("m"));
  auto fast = s.Lease("fast", "m", 0);
  auto slow = s.Lease("slow", "m", 0);
  ASSERT_TRUE(fast && slow);
  EXPECT_EQ(fast->configs.size(), 10u);  // no figure yet: the default
  // fast: 10 configs x 2 shapes in 1 s = 20 pairs/s -> 20 s = 400 pairs = 200 configs.
  s.CompleteUnit("fast", fast->unit_id, 1, 1);
  // slow: the same in 40 s = 0.5 pairs/s -> 10 pairs = 5 configs.
  s.CompleteUnit("slow", slow->unit_id, 40, 40);
  EXPECT_EQ(s.UnitSizeFor("fast", 2), 200u);
  EXPECT_EQ(s.UnitSizeFor("slow", 2), 5u);
  auto next_fast = s.Lease("fast", "m", 41);
  auto next_slow = s.Lease("slow", "m", 41);
  ASSERT_TRUE(next_fast && next_slow);
  EXPECT_EQ(next_fast->configs.size(), 200u);
  EXPECT_EQ(next_slow->configs.size(), 5u);
}

TEST(Scheduler, OnlyTargetedModelsGetUnits) {
  Scheduler s;
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"m2"}, 100), "s1", 0).ok());
  s.AddDevice(Device("m1"));
  s.AddDevice(Device("m2"));
  EXPECT_FALSE(s.Lease("w1", "m1", 0).has_value());
  EXPECT_TRUE(s.Lease("w2", "m2", 0).has_value());
}

TEST(Scheduler, ExpiredLeaseReturnsToTheQueueAndIsRetriedFirst) {
  SchedulerOptions o;
  o.lease_base_seconds = 10;
  o.lease_per_pair_seconds = 0;
  o.tail_duplicates = false;
  Scheduler s(o);
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 300), "s1", 0).ok());
  s.AddDevice(Device("m"));
  auto a = s.Lease("w1", "m", 0);
  auto b = s.Lease("w2", "m", 0);
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(s.Lease("w3", "m", 1).has_value());
  EXPECT_EQ(s.ExpireLeases(5), 0u);
  EXPECT_EQ(s.ExpireLeases(11), 2u);
  auto again = s.Lease("w3", "m", 12);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->attempt, 2u);  // attempts count leases, from 1
}

TEST(Scheduler, DeadWorkerLeasesAreRequeued) {
  SchedulerOptions o;
  o.tail_duplicates = false;
  Scheduler s(o);
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 600), "s1", 0).ok());
  s.AddDevice(Device("m"));
  auto a = s.Lease("w1", "m", 0);
  ASSERT_TRUE(a);
  EXPECT_FALSE(s.Lease("w2", "m", 0).has_value());
  s.DropWorker("w1");
  auto b = s.Lease("w2", "m", 0);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->unit_id, a->unit_id);
}

TEST(Scheduler, UnitFailsAfterMaxAttempts) {
  SchedulerOptions o;
  o.max_attempts = 2;
  o.tail_duplicates = false;
  Scheduler s(o);
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 600), "s1", 0).ok());
  s.AddDevice(Device("m"));
  ASSERT_TRUE(s.Lease("w1", "m", 0));
  s.DropWorker("w1");
  ASSERT_TRUE(s.Lease("w2", "m", 0));
  s.DropWorker("w2");
  EXPECT_FALSE(s.Lease("w3", "m", 0).has_value());
  EXPECT_EQ(s.FindSweep("s1")->state, "done");  // finished, with a failed unit
  auto p = s.Progress("s1");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].units_done, 1u);
}

TEST(Scheduler, TailDuplicatesStragglersAndFirstCompletionWins) {
  SchedulerOptions o;
  o.tail_min_age_seconds = 2;
  Scheduler s(o);
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 600), "s1", 0).ok());
  s.AddDevice(Device("m"));
  auto a = s.Lease("w1", "m", 0);
  ASSERT_TRUE(a);
  EXPECT_FALSE(s.Lease("w2", "m", 1).has_value());  // too young to duplicate
  auto dup = s.Lease("w2", "m", 3);
  ASSERT_TRUE(dup);
  EXPECT_EQ(dup->unit_id, a->unit_id);
  EXPECT_FALSE(s.Lease("w3", "m", 4).has_value());  // at most one duplicate
  s.CompleteUnit("w2", dup->unit_id, 5, 5);
  EXPECT_EQ(s.FindSweep("s1")->state, "done");
  s.CompleteUnit("w1", a->unit_id, 6, 6);  // the slower copy changes nothing
  EXPECT_EQ(s.FindSweep("s1")->state, "done");
}

TEST(Scheduler, RejectsBadSweeps) {
  Scheduler s;
  auto bad_dtype = MakeSubmit({"*"}, 10);
  bad_dtype.dtypes = {"bf16"};
  auto r = s.AddSweep(bad_dtype, "a", 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("dtype 'bf16'"), std::string::npos);
  auto bad_shape = MakeSubmit({"*"}, 10);
  bad_shape.shapes = {Shape{{{"M", 4}}}};
  r = s.AddSweep(bad_shape, "b", 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no shape"), std::string::npos);
  auto mismatched = MakeSubmit({"*"}, 10);
  mismatched.ops = {"gemm"};
  r = s.AddSweep(mismatched, "c", 0);
  ASSERT_FALSE(r.ok());
}

}  // namespace
}  // namespace tune
