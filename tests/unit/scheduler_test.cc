// Scheduler: leases, expiry, dead workers, retries and tail duplicates as
// pure logic with an injected clock.
// Long on purpose: one suite per component, a test per scheduling rule.
#include "scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "opspec/config_space.h"
#include "opspec/op_definition.h"

namespace tune {
namespace {

// A sweep of the synthetic op's 600 configs on one shape (N=1024).
SweepSubmit MakeSubmit(std::vector<std::string> gpus, uint32_t per_unit) {
  auto pkg = ReadOpPackage(std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops/synthetic");
  EXPECT_TRUE(pkg.ok()) << pkg.status().message();
  SweepSubmit s;
  s.name = "t";
  s.ops = {"synthetic"};
  s.op_packages = {*pkg};
  s.dtypes = {"f32"};
  s.shapes = {Shape{{{"N", 1024}}}};
  s.gpu_models = std::move(gpus);
  s.configs_per_unit = per_unit;
  return s;
}

// The two shapes that the confirm and refine tests sweep: each gets its
// own screening units, N=1024's first.
const std::vector<Shape> kTwoShapes = {Shape{{{"N", 1024}}}, Shape{{{"N", 4096}}}};

DeviceInfo Device(const std::string& model) {
  DeviceInfo d;
  d.model = model;
  d.max_threads_per_block = 1024;
  return d;
}

TEST(Scheduler, UnitsAppearWhenTheModelIsSeenAndCoverTheSpaceShapeByShapeSmallestFirst) {
  SchedulerOptions o;
  o.shrink_tail_units = false;  // fixed unit sizes
  Scheduler s(o);
  SweepSubmit submit = MakeSubmit({"*"}, 100);
  submit.shapes = {Shape{{{"N", 4096}}}, Shape{{{"N", 1024}}}};  // the larger one first
  ASSERT_TRUE(s.AddSweep(submit, "s1", 0).ok());
  EXPECT_FALSE(s.Lease("w1", "m1", 0, 0).has_value());  // no model known yet
  s.AddDevice(Device("m1"), 0);
  const auto* sweep = s.FindSweep("s1");
  ASSERT_NE(sweep, nullptr);
  EXPECT_EQ(sweep->pairs_total, 600u * 2);    // 600 configs x 2 shapes
  std::vector<WorkUnit> units;
  while (auto u = s.Lease("w1", "m1", 0, 0)) units.push_back(*u);
  ASSERT_EQ(units.size(), 12u);               // 600 configs / 100, per shape
  std::set<std::string> pairs;
  for (size_t i = 0; i < units.size(); ++i) {
    const WorkUnit& u = units[i];
    EXPECT_FALSE(u.op_package.empty());
    EXPECT_EQ(u.configs.size(), 100u);
    // One shape per unit: every config at N=1024 before any at N=4096.
    ASSERT_EQ(u.shapes.size(), 1u);
    EXPECT_EQ(u.shapes[0].Canonical(), i < 6 ? "N=1024" : "N=4096") << "unit " << i;
    for (const auto& c : u.configs) EXPECT_TRUE(pairs.insert(c.Id() + u.shapes[0].Canonical()).second);
  }
  EXPECT_EQ(pairs.size(), 1200u);             // every (config, shape) once
  EXPECT_EQ(sweep->units.size(), 12u);
}

// The leases a worker holds count running sweeps only: once a sweep is
// cancelled, its units still out are no work (the gauge an idle farm shows).
TEST(Scheduler, ACancelledSweepsUnitsAreNoLongerCountedAsLeases) {
  Scheduler s{SchedulerOptions{}};
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 100), "s1", 0).ok());
  s.AddDevice(Device("m1"), 0);
  ASSERT_TRUE(s.Lease("w1", "m1", 0, 0).has_value());
  EXPECT_EQ(s.LeasesPerWorker()["w1"], 1u);
  ASSERT_TRUE(s.CancelSweep("s1", 1).ok());
  EXPECT_TRUE(s.LeasesPerWorker().empty());
}

TEST(Scheduler, AResumedSweepLeasesOnlyThePairsNotStored) {
  SchedulerOptions o;
  o.shrink_tail_units = false;  // fixed unit sizes
  Scheduler s(o);
  SweepSubmit submit = MakeSubmit({"*"}, 600);
  submit.shapes = kTwoShapes;
  // Stored: the first 100 configs at N=1024 (as compile errors), every
  // config at N=4096.
  std::set<std::string> first_100;
  ASSERT_TRUE(s.AddSweep(submit, "s1", 0,
                            [&](const DeviceInfo&, const OpSpec&, const std::string&, const Config& c,
                                const Shape& shape) -> std::optional<StoredPair> {
                              if (shape.Canonical() == "N=4096") return StoredPair{};
                              if (first_100.size() < 100) first_100.insert(c.Id());
                              if (!first_100.count(c.Id())) return std::nullopt;
                              return StoredPair{true, FailureClass::kCompileError, {}};
                            })
                  .ok());
  s.AddDevice(Device("m"), 0);
  const auto* sweep = s.FindSweep("s1");
  EXPECT_EQ(sweep->pairs_total, 1200u);
  EXPECT_EQ(sweep->pairs_done, 700u);
  // What failed before the restart still counts, by class.
  EXPECT_EQ(sweep->pairs_failed, 100u);
  EXPECT_EQ(s.Progress("s1").at(0).failed_by_class, (std::map<std::string, uint64_t>{{"compile_error", 100}}));
  auto u = s.Lease("w1", "m", 0, 0);
  ASSERT_TRUE(u);
  ASSERT_EQ(u->shapes.size(), 1u);
  EXPECT_EQ(u->shapes[0].Canonical(), "N=1024");
  EXPECT_EQ(u->configs.size(), 500u);
  for (const auto& c : u->configs) EXPECT_FALSE(first_100.count(c.Id()));
  EXPECT_FALSE(s.Lease("w1", "m", 0, 0).has_value());
  s.CompleteUnit("w1", "s1", u->unit_id, 1, 1);
  EXPECT_EQ(sweep->state, RunState::kDone);
}

// Pairs stored under host digests are leased with them: the worker tells
// whether one is its own.
TEST(Scheduler, PairsStoredUnderHostDigestsAreLeasedWithThem) {
  Scheduler s(SchedulerOptions{});
  SweepSubmit submit = MakeSubmit({"*"}, 600);
  std::set<std::string> offered;
  ASSERT_TRUE(s.AddSweep(submit, "s1", 0,
                         [&](const DeviceInfo&, const OpSpec&, const std::string&, const Config& c,
                             const Shape&) -> std::optional<StoredPair> {
                           if (offered.size() >= 10 && !offered.count(c.Id())) return std::nullopt;
                           offered.insert(c.Id());
                           return StoredPair{false, FailureClass::kNone, {std::string(32, 'a'), std::string(32, 'b')}};
                         })
                  .ok());
  s.AddDevice(Device("m"), 0);
  const auto* sweep = s.FindSweep("s1");
  EXPECT_EQ(sweep->pairs_done, 0u);  // whether they are done is the worker's to say
  auto u = s.Lease("w1", "m", 0, 0);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->configs.size(), 600u);
  ASSERT_EQ(u->reusable.size(), 20u);
  for (const StoredDigest& d : u->reusable) EXPECT_TRUE(offered.count(d.config_id)) << d.config_id;
  EXPECT_EQ(u->reusable[0].digest, std::string(32, 'a'));
  EXPECT_EQ(u->reusable[1].digest, std::string(32, 'b'));
}

// With an expander set, a sweep's spaces are expanded elsewhere: until the
// outcome comes back the sweep leases nothing of that model, cannot end and
// says it is expanding; an outcome for a sweep that expects none is ignored,
// and a failed one fails the sweep with its reason.
TEST(Scheduler, ExpansionsHandedToAnExpanderLeaseNothingUntilApplied) {
  Scheduler s;
  std::vector<SpaceExpansion> handed;
  s.SetExpander([&](SpaceExpansion job) { handed.push_back(std::move(job)); });
  // Nothing of a model being expanded is screened: no refine pass asks for
  // its contenders (early or not) before its units exist.
  int near_best_calls = 0;
  s.SetNearBest([&](const DeviceInfo&, const OpSpec&, const std::string&, const Shape&, double, const std::string&) {
    ++near_best_calls;
    return NearBest{};
  });
  SweepSubmit submit = MakeSubmit({"*"}, 600);
  submit.refine_pass = true;
  ASSERT_TRUE(s.AddSweep(submit, "s1", 0).ok());
  ASSERT_TRUE(s.AddSweep(submit, "s2", 0).ok());
  s.AddDevice(Device("m"), 0);
  ASSERT_EQ(handed.size(), 2u);
  EXPECT_EQ(handed[0].device.model, "m");
  EXPECT_FALSE(s.Lease("w1", "m", 0, 0).has_value());
  EXPECT_EQ(near_best_calls, 0);
  auto progress = s.Progress("s1");
  ASSERT_EQ(progress.size(), 1u);
  EXPECT_EQ(progress[0].state, "running");
  EXPECT_EQ(progress[0].expanding, std::vector<std::string>{"m"});
  EXPECT_TRUE(progress[0].waiting_for.empty());

  s.ApplyExpansion("s1", "m", ExpandSpace(handed[0]), 0);
  s.ApplyExpansion("s1", "m", ExpandSpace(handed[0]), 0);  // expects none now: ignored
  s.ApplyExpansion("nope", "m", ExpandSpace(handed[0]), 0);
  EXPECT_TRUE(s.Progress("s1")[0].expanding.empty());
  EXPECT_EQ(s.FindSweep("s1")->pairs_total, 600u);
  auto u = s.Lease("w1", "m", 0, 0);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->sweep_id, "s1");
  EXPECT_EQ(u->configs.size(), 600u);
  EXPECT_FALSE(s.Lease("w1", "m", 0, 0).has_value());  // s2 still expanding
  s.CompleteUnit("w1", "s1", u->unit_id, 1, 1);
  EXPECT_EQ(s.FindSweep("s1")->state, RunState::kDone);

  s.ApplyExpansion("s2", "m", Status::Error("op 'synthetic': more than 10 legal configs on m"), 0);
  EXPECT_EQ(s.FindSweep("s2")->state, RunState::kFailed);
  EXPECT_NE(s.FindSweep("s2")->error.find("more than 10 legal configs"), std::string::npos);
  EXPECT_FALSE(s.Lease("w1", "m", 0, 0).has_value());
}

// ExpandSpace bounds the legal configs and counts what a resumed sweep has
// stored.
TEST(Scheduler, ExpandSpaceBoundsLegalConfigsAndSkipsStoredPairs) {
  auto spec = ParseOpSpec(MakeSubmit({"*"}, 1).op_packages[0], "synthetic");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  SpaceExpansion job;
  job.sweep_id = "s";
  job.device = Device("m");
  job.specs = {*spec};
  job.dtypes = {"f32"};
  job.shapes = {kTwoShapes};
  job.max_legal_configs = 599;
  auto over = ExpandSpace(job);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("op 'synthetic': "), std::string::npos) << over.status().message();
  EXPECT_NE(over.status().message().find("more than 599 legal configs on m"), std::string::npos)
      << over.status().message();
  job.max_legal_configs = 600;
  // N=4096 is all stored, a tenth of it as timeouts.
  job.measured = [](const DeviceInfo&, const OpSpec&, const std::string&, const Config& c,
                    const Shape& shape) -> std::optional<StoredPair> {
    if (shape.Canonical() != "N=4096") return std::nullopt;
    if (std::hash<std::string>()(c.Id()) % 10 == 0) return StoredPair{true, FailureClass::kTimeout, {}};
    return StoredPair{};
  };
  auto space = ExpandSpace(job);
  ASSERT_TRUE(space.ok()) << space.status().message();
  EXPECT_EQ(space->pairs_total, 1200u);
  EXPECT_EQ(space->pairs_done, 600u);
  EXPECT_GT(space->pairs_failed, 30u);
  EXPECT_LT(space->pairs_failed, 100u);
  EXPECT_EQ(space->failed_by_class, (std::map<std::string, uint64_t>{{"timeout", space->pairs_failed}}));
  ASSERT_EQ(space->pools.size(), 1u);  // N=4096's is all stored
  EXPECT_EQ(space->pools[0].shape.Canonical(), "N=1024");
  EXPECT_EQ(space->pool_unsliced.size(), 2u);
}

// The pairs bounds: a sweep's legal configs x shapes x dtypes on a model
// (found while enumerating, before they are held), and the pairs queued
// over the farm's running sweeps (at submit, and when a space is expanded).
TEST(Scheduler, PairsPerSweepAndPerFarmAreBounded) {
  auto spec = ParseOpSpec(MakeSubmit({"*"}, 1).op_packages[0], "synthetic");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  SpaceExpansion job;
  job.sweep_id = "s";
  job.device = Device("m");
  job.specs = {*spec};
  job.dtypes = {"f32"};
  job.shapes = {kTwoShapes};
  job.max_legal_configs = 1'000'000;
  job.max_pairs = 1199;  // 600 legal configs x 2 shapes is one more
  auto over = ExpandSpace(job);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("op 'synthetic' on m: over 1200 (config, shape) pairs (more than 599 legal "
                                         "configs x 2 shapes x 1 dtypes), more than the limit of 1199 pairs per "
                                         "sweep and GPU model (--max-sweep-pairs)"),
            std::string::npos)
      << over.status().message();
  job.max_pairs = 1200;
  auto space = ExpandSpace(job);
  ASSERT_TRUE(space.ok()) << space.status().message();
  EXPECT_EQ(space->pairs_total, 1200u);

  SchedulerOptions o;
  o.max_farm_pairs = 1000;
  Scheduler s(o);
  s.AddDevice(Device("m"), 0);
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 100), "s1", 0).ok());  // 600 pairs queued
  SweepSubmit two = MakeSubmit({"*"}, 100);
  two.shapes = kTwoShapes;
  ASSERT_TRUE(s.AddSweep(two, "s2", 0).ok());  // 1200 more: past the farm's bound
  EXPECT_EQ(s.FindSweep("s2")->state, RunState::kFailed);
  EXPECT_NE(s.FindSweep("s2")->error.find("1200 (config, shape) pairs to measure with 600 queued already, more than "
                                          "the limit of 1000 pairs per farm (--max-farm-pairs)"),
            std::string::npos)
      << s.FindSweep("s2")->error;
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 100), "s3", 0).ok());  // 600 more: failed too
  EXPECT_EQ(s.FindSweep("s3")->state, RunState::kFailed);
  o.max_farm_pairs = 600;
  Scheduler full(o);
  full.AddDevice(Device("m"), 0);
  ASSERT_TRUE(full.AddSweep(MakeSubmit({"*"}, 100), "s1", 0).ok());
  auto refused = full.AddSweep(MakeSubmit({"*"}, 100), "s2", 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("the farm has 600 (config, shape) pairs queued, at the limit of 600 "
                                            "pairs per farm (--max-farm-pairs)"),
            std::string::npos)
      << refused.status().message();
}

// A key's refine pass: early once (a device ran dry with every config cut),
// at the end of the screening once, then again only after a refine unit of
// the key ended.
TEST(Scheduler, AKeysRefinePassMovesScreenEarlyScreenedAgain) {
  KeyPasses k;
  k.unsliced = 3;
  k.open_screen_units = 1;
  EXPECT_FALSE(k.RefineNow(true));   // configs left to cut
  EXPECT_FALSE(k.RefineNow(false));  // not screened
  k.unsliced = 0;
  EXPECT_TRUE(k.RefineNow(true));    // early, once
  EXPECT_FALSE(k.RefineNow(true));
  EXPECT_FALSE(k.RefineNow(false));  // a screening unit still runs
  k.open_screen_units = 0;
  EXPECT_TRUE(k.RefineNow(false));   // the screening ended
  EXPECT_FALSE(k.RefineNow(false));
  EXPECT_FALSE(k.RefineNow(true));   // no early refine once refined
  k.refine_stale = true;             // a refine unit of the key ended
  EXPECT_TRUE(k.RefineNow(false));
  EXPECT_FALSE(k.RefineNow(false));
}

// The lease book alone: queues, leases, the quietest-first order, requeues
// at the front, expiry and ends, with the times a caller passes.
TEST(LeaseBook, KeepsUnitsQueuesAndLeasesConsistent) {
  LeaseBook book;
  book.NumberFrom(100);
  auto add = [&](const std::string& sweep, const std::string& model) -> Unit& {
    Unit u;
    u.sweep_id = sweep;
    u.gpu_model = model;
    u.configs.resize(4);
    Unit& added = book.Add(std::move(u));
    book.Queue(added);
    return added;
  };
  const uint64_t a = add("s1", "h100").id, b = add("s2", "h100").id, c = add("s1", "a100").id;
  EXPECT_EQ(a, 100u);
  EXPECT_EQ(book.Queued("h100").size(), 2u);
  EXPECT_EQ(book.Queued("", "s1").size(), 2u);
  EXPECT_EQ(book.FindOf("s2", a), nullptr) << "a unit is found under its own sweep only";

  // Take skips what the caller skips and takes the first it accepts.
  Unit* taken = book.Take("h100", [](const Unit& u) {
    return u.sweep_id == "s2" ? LeaseBook::Pick::kTake : LeaseBook::Pick::kSkip;
  });
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(taken->id, b);
  EXPECT_EQ(book.Queued("h100").size(), 1u) << "the skipped unit stays queued";
  book.Lease(*taken, "w1", 10, 100);
  EXPECT_EQ(taken->state, UnitState::kLeased);
  EXPECT_EQ(taken->attempts, 1u);
  EXPECT_TRUE(book.Holds("w1", b));
  EXPECT_FALSE(book.Holds("w2", b));
  EXPECT_EQ(book.LeasedOf("h100"), 1u);
  EXPECT_DOUBLE_EQ(book.HeldFor("w1", 30), 80);

  Unit& first = *book.Take("h100", [](const Unit&) { return LeaseBook::Pick::kTake; });
  book.Lease(first, "w2", 20, 100);
  // Quietest first: b (progress at 10), then a (20); progress moves b behind.
  EXPECT_EQ(book.leased().begin()->second, b);
  book.NoteProgress(*book.Find(b), 25);
  EXPECT_EQ(book.leased().begin()->second, a);

  // A duplicate holder; the first holder's release leaves it leased.
  book.Duplicate(*book.Find(b), "w3", 30, 5);
  EXPECT_FALSE(book.Release(*book.Find(b), "w1"));
  EXPECT_EQ(book.Expired(40), (std::vector<std::pair<uint64_t, std::string>>{{b, "w3"}}));
  EXPECT_TRUE(book.Release(*book.Find(b), "w3")) << "no one holds it now";
  book.Requeue(*book.Find(b));
  EXPECT_EQ(book.Find(b)->state, UnitState::kPending);
  EXPECT_EQ(book.LeasedOf("h100"), 1u);
  EXPECT_EQ(book.Queued("h100").front()->id, b) << "a requeued unit is retried first";

  // A unit that ends leaves the leased ones; dropped units leave the queue.
  book.End(*book.Find(a), UnitState::kDone);
  EXPECT_EQ(book.LeasedOf("h100"), 0u);
  EXPECT_TRUE(book.leased().empty());
  EXPECT_EQ(book.Take("h100", [](const Unit&) { return LeaseBook::Pick::kDrop; }), nullptr);
  EXPECT_TRUE(book.Queued("h100").empty());
  book.ForgetModel("a100");
  EXPECT_TRUE(book.Queued("a100").empty());
  EXPECT_NE(book.Find(c), nullptr) << "its units stay filed";
}

// Pacing alone: a worker's next unit lasts the target at its smoothed
// pace; a unit should take its sweep's median per pair, else its holder's.
TEST(Pacing, SizesUnitsAndTellsWhatAUnitShouldTake) {
  Pacing p;
  EXPECT_EQ(p.UnitSize("w1", "N=1", 16, 20, 1, 256), 16u) << "no pace yet: the first size";
  EXPECT_EQ(p.SecondsPerPair("s1", "h100", "N=1", "w1"), 0.0);
  p.Record("w1", "s1", "h100", "N=1", 10, 5);  // 2 pairs/s
  EXPECT_EQ(p.UnitSize("w1", "N=1", 16, 20, 1, 256), 40u);
  EXPECT_EQ(p.UnitSize("w1", "N=1", 16, 1000, 1, 256), 256u) << "within the bounds";
  EXPECT_EQ(p.UnitSize("w1", "N=2", 16, 20, 1, 256), 16u) << "another shape has its own pace";
  p.Record("w1", "s1", "h100", "N=1", 10, 15);  // 2/3 pairs/s: smoothed to 4/3
  EXPECT_EQ(p.UnitSize("w1", "N=1", 16, 30, 1, 256), 40u);
  p.Record("w2", "s1", "h100", "N=1", 10, 10);
  EXPECT_DOUBLE_EQ(p.SecondsPerPair("s1", "h100", "N=1", "w9"), 1.0) << "the median of 0.5, 1.5 and 1";
  EXPECT_DOUBLE_EQ(p.SecondsPerPair("s2", "h100", "N=1", "w2"), 1.0) << "another sweep: its holder's pace";
  p.Record("w3", "s1", "h100", "N=1", 0, 10);  // every pair reused: no pace
  EXPECT_EQ(p.UnitSize("w3", "N=1", 16, 20, 1, 256), 16u);
}

TEST(Scheduler, LeasesAreCountedPerWorker) {
  Scheduler s;
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 100), "s1", 0).ok());
  s.AddDevice(Device("m"), 0);
  ASSERT_TRUE(s.Lease("w1", "m", 0, 0));
  ASSERT_TRUE(s.Lease("w1", "m", 0, 0));
  const auto third = s.Lease("w2", "m", 0, 0);
  ASSERT_TRUE(third);
  EXPECT_EQ(s.LeasesPerWorker(), (std::map<std::string, size_t>{{"w1", 2}, {"w2", 1}}));
  s.CompleteUnit("w2", "s1", third->unit_id, 1, 1);
  s.DropWorker("w1", 1);
  EXPECT_TRUE(s.LeasesPerWorker().empty());
}

// Adaptive unit sizes: 10 configs until a worker's pace is known, then
// units of about 20 s; no tail duplicates.
SchedulerOptions PaceOptions() {
  SchedulerOptions o;
  o.configs_per_unit = 10;
  o.target_unit_seconds = 20;
  o.tail_duplicates = false;
  return o;
}

// Configs a worker reused took it no time: its pace is that of the ones it
// measured; their stored failures count as the sweep's, once.
TEST(Scheduler, ReusedConfigsAreNoPartOfAWorkersPace) {
  Scheduler s(PaceOptions());
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 0), "s1", 0).ok());
  s.AddDevice(Device("m"), 0);
  auto u = s.Lease("w", "m", 0, 0);
  ASSERT_TRUE(u);
  s.NoteReused("s1", u->unit_id, 8, 1, {{"timeout", 1}});
  s.NoteReused("s1", u->unit_id, 8, 1, {{"timeout", 1}});  // a resent first batch: counted once
  s.NoteReused("s1", 999, 3, 0, {});                         // no such unit: nothing
  // 2 pairs measured in 1 s -> 20 s = 40 configs (not 200).
  s.CompleteUnit("w", "s1", u->unit_id, 1, 1);
  EXPECT_EQ(s.UnitSizeFor("w", u->shapes[0]), 40u);
  // A reused row's failure is the sweep's, as a measured one's would be.
  const SweepState* sweep = s.FindSweep("s1");
  EXPECT_EQ(sweep->pairs_failed, 1u);
  EXPECT_EQ(sweep->failed_by_class.at("timeout"), 1u);
}

TEST(Scheduler, UnitSizeFollowsEachWorkersThroughput) {
  Scheduler s(PaceOptions());
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 0), "s1", 0).ok());  // 0 = adaptive
  s.AddDevice(Device("m"), 0);
  auto fast = s.Lease("fast", "m", 0, 0);
  auto slow = s.Lease("slow", "m", 0, 0);
  ASSERT_TRUE(fast && slow);
  EXPECT_EQ(fast->configs.size(), 10u);  // no figure yet: the default
  ASSERT_EQ(fast->shapes.size(), 1u);
  const Shape first = fast->shapes[0], second{{{"N", 4096}}};
  EXPECT_EQ(first.Canonical(), "N=1024");
  // fast: 10 pairs in 1 s = 10 pairs/s -> 20 s = 200 configs.
  s.CompleteUnit("fast", "s1", fast->unit_id, 1, 1);
  // slow: the same in 40 s = 0.25 pairs/s -> 5 configs.
  s.CompleteUnit("slow", "s1", slow->unit_id, 40, 40);
  EXPECT_EQ(s.UnitSizeFor("fast", first), 200u);
  EXPECT_EQ(s.UnitSizeFor("slow", first), 5u);
  // Each shape has a pace of its own: no figure yet for the other one.
  EXPECT_EQ(s.UnitSizeFor("fast", second), 10u);
  auto next_fast = s.Lease("fast", "m", 41, 0);
  auto next_slow = s.Lease("slow", "m", 41, 0);
  ASSERT_TRUE(next_fast && next_slow);
  EXPECT_EQ(next_fast->configs.size(), 200u);
  EXPECT_EQ(next_slow->configs.size(), 5u);
}

TEST(Scheduler, OnlyTargetedModelsGetUnits) {
  Scheduler s;
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"m2"}, 100), "s1", 0).ok());
  s.AddDevice(Device("m1"), 0);
  s.AddDevice(Device("m2"), 0);
  EXPECT_FALSE(s.Lease("w1", "m1", 0, 0).has_value());
  EXPECT_TRUE(s.Lease("w2", "m2", 0, 0).has_value());
}

TEST(Scheduler, ExpiredLeaseReturnsToTheQueueAndIsRetriedFirst) {
  SchedulerOptions o;
  o.shrink_tail_units = false;  // fixed unit sizes
  o.lease_base_seconds = 10;
  o.lease_per_pair_seconds = 0;
  o.tail_duplicates = false;
  Scheduler s(o);
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 300), "s1", 0).ok());
  s.AddDevice(Device("m"), 0);
  auto a = s.Lease("w1", "m", 0, 0);
  auto b = s.Lease("w2", "m", 0, 0);
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(s.Lease("w3", "m", 1, 0).has_value());
  EXPECT_EQ(s.ExpireLeases(5, 0), 0u);
  EXPECT_EQ(s.ExpireLeases(11, 0), 2u);
  auto again = s.Lease("w3", "m", 12, 0);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->attempt, 2u);  // attempts count leases, from 1
}

// A unit fetched while the worker still holds one waits behind it: its lease
// runs from when the held one would end, not from now.
TEST(Scheduler, AUnitQueuedBehindAHeldOneKeepsItsWholeLease) {
  SchedulerOptions o;
  o.shrink_tail_units = false;
  o.lease_base_seconds = 10;
  o.lease_per_pair_seconds = 0;
  o.tail_duplicates = false;
  Scheduler s(o);
  SweepSubmit submit = MakeSubmit({"*"}, 300);
  submit.configs_per_unit = 50;
  ASSERT_TRUE(s.AddSweep(submit, "s1", 0).ok());
  s.AddDevice(Device("m"), 0);
  auto running = s.Lease("w1", "m", 0, 0);
  auto queued = s.Lease("w1", "m", 8, 0);  // asked for while the first one ends
  auto other = s.Lease("w2", "m", 8, 0);   // another worker's units do not lengthen it
  ASSERT_TRUE(running && queued && other);
  EXPECT_DOUBLE_EQ(queued->lease_seconds, 12);  // 2 s left of the first, then its own 10
  EXPECT_DOUBLE_EQ(other->lease_seconds, 10);
  // At 19 the first is late (due at 10) and w2's too (18); the queued one
  // runs until 20.
  EXPECT_EQ(s.ExpireLeases(19, 0), 2u);
  EXPECT_EQ(s.LeasesPerWorker().at("w1"), 1u);
}

TEST(Scheduler, DeadWorkerLeasesAreRequeued) {
  SchedulerOptions o;
  o.tail_duplicates = false;
  Scheduler s(o);
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 600), "s1", 0).ok());
  s.AddDevice(Device("m"), 0);
  auto a = s.Lease("w1", "m", 0, 0);
  ASSERT_TRUE(a);
  EXPECT_FALSE(s.Lease("w2", "m", 0, 0).has_value());
  s.DropWorker("w1", 0);
  auto b = s.Lease("w2", "m", 0, 0);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->unit_id, a->unit_id);
}

TEST(Scheduler, UnitFailsAfterMaxAttempts) {
  SchedulerOptions o;
  o.max_attempts = 2;
  o.tail_duplicates = false;
  Scheduler s(o);
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 600), "s1", 0).ok());
  s.AddDevice(Device("m"), 0);
  ASSERT_TRUE(s.Lease("w1", "m", 0, 0));
  s.DropWorker("w1", 0);
  ASSERT_TRUE(s.Lease("w2", "m", 0, 0));
  s.DropWorker("w2", 0);
  EXPECT_FALSE(s.Lease("w3", "m", 0, 0).has_value());
  // Ended, failed: its one unit's pairs count as failed, and it says why.
  EXPECT_EQ(s.FindSweep("s1")->state, RunState::kFailed);
  EXPECT_NE(s.FindSweep("s1")->error.find("1 of 1 units failed"), std::string::npos) << s.FindSweep("s1")->error;
  EXPECT_NE(s.FindSweep("s1")->error.find("after 2 leases: its worker left"), std::string::npos)
      << s.FindSweep("s1")->error;
  auto p = s.Progress("s1");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].units_done, 1u);
  EXPECT_EQ(p[0].pairs_failed, p[0].pairs_total);
  EXPECT_EQ(p[0].failed_by_class.at("unit_failed"), p[0].pairs_total);
}

TEST(Scheduler, TailDuplicatesStragglersAndFirstCompletionWins) {
  SchedulerOptions o;
  o.tail_min_age_seconds = 2;
  Scheduler s(o);
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 600), "s1", 0).ok());
  s.AddDevice(Device("m"), 0);
  auto a = s.Lease("w1", "m", 0, 0);
  ASSERT_TRUE(a);
  EXPECT_FALSE(s.Lease("w2", "m", 1, 0).has_value());  // too young to duplicate
  auto dup = s.Lease("w2", "m", 3, 0);
  ASSERT_TRUE(dup);
  EXPECT_EQ(dup->unit_id, a->unit_id);
  EXPECT_FALSE(s.Lease("w3", "m", 4, 0).has_value());  // at most one duplicate
  s.CompleteUnit("w2", "s1", dup->unit_id, 5, 5);
  EXPECT_EQ(s.FindSweep("s1")->state, RunState::kDone);
  s.CompleteUnit("w1", "s1", a->unit_id, 6, 6);  // the slower copy changes nothing
  EXPECT_EQ(s.FindSweep("s1")->state, RunState::kDone);
}

TEST(Scheduler, UnitsWithResultsArrivingOrQueuedAreNoStragglers) {
  SchedulerOptions o;
  o.tail_min_age_seconds = 2;
  Scheduler s(o);
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 600), "s1", 0).ok());
  s.AddDevice(Device("m"), 0);
  auto a = s.Lease("w1", "m", 0, 0);
  ASSERT_TRUE(a);
  s.BatchQueued("s1", a->unit_id, 1.5);
  // However long the batch waits to be stored, its unit is not stuck.
  EXPECT_FALSE(s.Lease("w2", "m", 4, 0).has_value());
  s.BatchIngested("s1", a->unit_id, 600, 2, {{"crash", 2}}, 4.5);
  EXPECT_EQ(s.FindSweep("s1")->pairs_done, 600u);
  EXPECT_EQ(s.FindSweep("s1")->pairs_failed, 2u);
  EXPECT_EQ(s.Progress("s1").at(0).failed_by_class, (std::map<std::string, uint64_t>{{"crash", 2}}));
  EXPECT_FALSE(s.Lease("w2", "m", 6, 0).has_value());  // 1.5 s since the rows were stored
  s.BatchQueued("s0", a->unit_id, 6.2);  // the id of another sweep's unit: ignored
  s.BatchQueued("s1", 999, 6.2);         // an unknown unit: ignored
  auto dup = s.Lease("w2", "m", 6.6, 0);    // 2.1 s without progress
  ASSERT_TRUE(dup);
  EXPECT_EQ(dup->unit_id, a->unit_id);
}

TEST(Scheduler, OnlyUnitsSlowerThanTheirPeersAreDuplicated) {
  SchedulerOptions o;
  o.shrink_tail_units = false;  // fixed unit sizes
  o.tail_min_age_seconds = 2;
  o.tail_slow_factor = 1.5;
  Scheduler s(o);
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 300), "s1", 0).ok());  // 2 units of 600 pairs
  s.AddDevice(Device("m"), 0);
  auto a = s.Lease("w1", "m", 0, 0);
  auto b = s.Lease("w2", "m", 0, 0);
  ASSERT_TRUE(a && b);
  s.CompleteUnit("w1", "s1", a->unit_id, 10, 10);  // units of this sweep take 10 s
  // b has gone 12 s without progress: longer than tail_min_age, yet within
  // 1.5 x what a unit takes, so it is not a straggler yet.
  EXPECT_FALSE(s.Lease("w3", "m", 12, 0).has_value());
  auto dup = s.Lease("w3", "m", 15.5, 0);
  ASSERT_TRUE(dup);
  EXPECT_EQ(dup->unit_id, b->unit_id);
}

TEST(Scheduler, BeforeAnyUnitOfASweepIsDoneTheHoldersOwnPaceCounts) {
  SchedulerOptions o;
  o.tail_min_age_seconds = 2;
  o.tail_slow_factor = 1.5;
  Scheduler s(o);
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 600), "s1", 0).ok());  // 1 unit of 600 pairs
  s.AddDevice(Device("m"), 0);
  auto first = s.Lease("w1", "m", 0, 0);
  ASSERT_TRUE(first);
  s.CompleteUnit("w1", "s1", first->unit_id, 12, 12);  // w1 measures 50 pairs/s
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 600), "s2", 20).ok());
  auto second = s.Lease("w1", "m", 20, 0);
  ASSERT_TRUE(second);
  EXPECT_FALSE(s.Lease("w2", "m", 30, 0).has_value());  // w1 needs 12 s for it
  auto dup = s.Lease("w2", "m", 38.5, 0);                // 18.5 s: 1.5 x 12 s passed
  ASSERT_TRUE(dup);
  EXPECT_EQ(dup->unit_id, second->unit_id);
}

TEST(Scheduler, ProgressCountsUnitsOnceWhateverTheirEnd) {
  SchedulerOptions o;
  o.shrink_tail_units = false;  // fixed unit sizes
  o.max_attempts = 1;
  o.tail_duplicates = false;
  Scheduler s(o);
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 200), "s1", 0).ok());  // 3 units
  s.AddDevice(Device("m"), 0);
  auto a = s.Lease("w1", "m", 0, 0);
  auto b = s.Lease("w2", "m", 0, 0);
  auto c = s.Lease("w3", "m", 0, 0);
  ASSERT_TRUE(a && b && c);
  s.CompleteUnit("w1", "s1", a->unit_id, 1, 1);
  s.CompleteUnit("w1", "s1", a->unit_id, 2, 2);  // a repeated final batch
  s.DropWorker("w2", 0);                      // b fails: no attempts left
  s.CompleteUnit("w2", "s1", b->unit_id, 3, 3);  // its rows still arrive
  EXPECT_EQ(s.Progress("s1")[0].units_done, 2u);
  EXPECT_EQ(s.FindSweep("s1")->state, RunState::kRunning);
  s.CompleteUnit("w3", "s1", c->unit_id, 4, 4);
  EXPECT_EQ(s.Progress("s1")[0].units_done, 3u);
  // b's rows came after all: not failed, and the sweep ends done.
  EXPECT_EQ(s.FindSweep("s1")->state, RunState::kDone) << s.FindSweep("s1")->error;
  EXPECT_EQ(s.Progress("s1")[0].pairs_failed, 0u);
}

TEST(Scheduler, UnitsAreNumberedFromTheGivenFirstIdAndBelongToTheirSweep) {
  SchedulerOptions o;
  o.shrink_tail_units = false;  // fixed unit sizes
  o.tail_duplicates = false;
  Scheduler s(o);
  s.NumberUnitsFrom(7ull << 32);
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 200), "s1", 0).ok());  // 3 units
  s.AddDevice(Device("m"), 0);
  std::set<uint64_t> ids;
  for (const char* w : {"w1", "w2", "w3"}) {
    auto u = s.Lease(w, "m", 0, 0);
    ASSERT_TRUE(u);
    EXPECT_GE(u->unit_id, 7ull << 32);
    ids.insert(u->unit_id);
  }
  EXPECT_EQ(ids.size(), 3u);
  const uint64_t first = *ids.begin();
  s.CompleteUnit("w1", "another-sweep", first, 1, 1);  // same number, other sweep
  EXPECT_EQ(s.Progress("s1")[0].units_done, 0u);
  s.CompleteUnit("w1", "s1", first, 1, 1);
  EXPECT_EQ(s.Progress("s1")[0].units_done, 1u);
}

TEST(Scheduler, UnitsShrinkAtTheEndSoThatDevicesFinishTogether) {
  SchedulerOptions o;
  o.tail_duplicates = false;
  Scheduler s(o);
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 100), "s1", 0).ok());  // 600 configs
  for (int d = 0; d < 4; ++d) s.AddDevice(Device("m"), 0);
  // Four devices: each completes its unit and takes the next, in turn.
  std::vector<size_t> sizes;
  std::map<std::string, std::optional<WorkUnit>> held;
  size_t configs = 0;
  for (int round = 0; round < 200; ++round) {
    const std::string w = "w" + std::to_string(round % 4);
    if (held[w]) s.CompleteUnit(w, "s1", held[w]->unit_id, round, round);
    held[w] = s.Lease(w, "m", round, 0);
    if (!held[w]) continue;
    sizes.push_back(held[w]->configs.size());
    configs += held[w]->configs.size();
  }
  EXPECT_EQ(configs, 600u) << "every config leased exactly once";
  ASSERT_GE(sizes.size(), 8u);
  EXPECT_EQ(sizes.front(), 100u) << "full-size units while much is left";
  EXPECT_EQ(sizes.back(), 1u) << "the last units are single configs";
  for (size_t i = 1; i < sizes.size(); ++i) EXPECT_LE(sizes[i], sizes[i - 1]) << "unit " << i;
  for (auto& [w, u] : held) {
    if (u) s.CompleteUnit(w, "s1", u->unit_id, 300, 300);
  }
  EXPECT_EQ(s.FindSweep("s1")->state, RunState::kDone);
}

TEST(Scheduler, AConfigIsLeasedOnlyOnTheShapesItsShapeRulesAllow) {
  SchedulerOptions o;
  o.tail_duplicates = false;
  Scheduler s(o);
  SweepSubmit submit = MakeSubmit({"*"}, 1000);
  // TILE*UNROLL <= N: at N=64 only TILE*UNROLL in {32, 64} (3 of 30 (TILE,
  // UNROLL) pairs), at N=1024 20 of 30; SPLIT and PAD multiply by 20.
  std::string& toml = submit.op_packages[0]["op.toml"];
  toml.replace(toml.find("rules = [\"TILE <= max_threads\"]"), 32,
               "rules = [\"TILE <= max_threads\", \"TILE*UNROLL <= N\"]");
  submit.shapes = {Shape{{{"N", 64}}}, Shape{{{"N", 1024}}}};
  ASSERT_TRUE(s.AddSweep(submit, "s1", 0).ok());
  s.AddDevice(Device("m"), 0);
  EXPECT_EQ(s.FindSweep("s1")->pairs_total, 20u * (3 + 20));
  std::map<std::string, size_t> per_shape;
  while (auto u = s.Lease("w", "m", 0, 0)) {
    for (const Config& c : u->configs) {
      const int64_t n = ValueOf(u->shapes[0].dims, "N");
      EXPECT_LE(ValueOf(c.params, "TILE") * ValueOf(c.params, "UNROLL"), n) << c.Canonical() << " at N=" << n;
      per_shape[u->shapes[0].Canonical()]++;
    }
    s.CompleteUnit("w", "s1", u->unit_id, 1, 1);
  }
  EXPECT_EQ(per_shape["N=64"], 60u);
  EXPECT_EQ(per_shape["N=1024"], 400u);
  EXPECT_EQ(s.FindSweep("s1")->state, RunState::kDone);
}

TEST(Scheduler, ALoneDeviceKeepsFullSizeUnitsToTheEnd) {
  SchedulerOptions o;
  o.tail_duplicates = false;
  Scheduler s(o);
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 100), "s1", 0).ok());  // 600 configs
  s.AddDevice(Device("m"), 0);
  // It holds its next unit while it runs one: nothing to balance with.
  std::vector<size_t> sizes;
  std::optional<WorkUnit> running = s.Lease("w", "m", 0, 0), next;
  for (int round = 1; running && round < 50; ++round) {
    sizes.push_back(running->configs.size());
    next = s.Lease("w", "m", round, 0);
    s.CompleteUnit("w", "s1", running->unit_id, round, round);
    running = next;
  }
  EXPECT_EQ(sizes, std::vector<size_t>(6, 100));
}

TEST(Scheduler, ConfirmUnitsFollowTheLastUnitOfEachModelAndEndTheSweep) {
  SchedulerOptions o;
  o.shrink_tail_units = false;  // fixed unit sizes
  Scheduler s(o);
  // The contenders of a key: its first `top` configs, per the shape asked.
  std::vector<std::string> asked;
  s.SetContenders([&](const DeviceInfo& dev, const OpSpec& spec, const std::string& dtype, const Shape& shape,
                      uint32_t top, const std::string&) {
    asked.push_back(dev.model + "/" + spec.name + "/" + dtype + "/" + shape.Canonical());
    auto all = EnumerateConfigs(spec, dev);
    std::vector<Config> first(all->begin(), all->begin() + top);
    return first;
  });
  SweepSubmit submit = MakeSubmit({"*"}, 600);  // 2 units per model, one per shape
  submit.shapes = kTwoShapes;
  submit.confirm_top = 3;
  submit.confirm_seconds = 1.5;
  submit.confirm_timing = ConfirmTiming::kBurst;
  ASSERT_TRUE(s.AddSweep(submit, "s1", 0).ok());
  s.AddDevice(Device("m1"), 0);
  s.AddDevice(Device("m2"), 0);
  const auto* sweep = s.FindSweep("s1");
  const uint64_t pairs_before = sweep->pairs_total;

  auto a = s.Lease("w1", "m1", 0, 0);
  auto b = s.Lease("w1", "m1", 0, 0);
  auto c = s.Lease("w2", "m2", 0, 0);
  ASSERT_TRUE(a && b && c);
  EXPECT_FALSE(a->confirm());
  s.CompleteUnit("w1", "s1", a->unit_id, 1, 1);
  EXPECT_TRUE(asked.empty());  // m1 still has a unit out
  s.CompleteUnit("w1", "s1", b->unit_id, 2, 2);
  // m1 is measured: one confirm unit per shape, with that shape alone; m2
  // still measures and gets none yet.
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_EQ(asked[0], "m1/synthetic/f32/N=1024");
  EXPECT_EQ(sweep->pairs_total, pairs_before + 2 * 3);
  std::vector<WorkUnit> confirms;
  while (auto u = s.Lease("w1", "m1", 3, 0)) confirms.push_back(*u);
  ASSERT_EQ(confirms.size(), 2u);
  for (const auto& u : confirms) {
    EXPECT_TRUE(u.confirm());
    EXPECT_EQ(u.confirm_seconds, 1.5);
    EXPECT_EQ(u.confirm_timing, ConfirmTiming::kBurst);
    EXPECT_EQ(u.configs.size(), 3u);
    ASSERT_EQ(u.shapes.size(), 1u);
  }
  EXPECT_EQ(confirms[1].shapes[0].Canonical(), "N=4096");
  EXPECT_FALSE(s.Lease("w9", "m1", 100, 0).has_value());  // a confirm unit is never duplicated
  for (const auto& u : confirms) s.CompleteUnit("w1", "s1", u.unit_id, 4, 4);
  EXPECT_EQ(sweep->state, RunState::kRunning);  // m2 has not been measured or confirmed
  auto d = s.Lease("w2", "m2", 4, 0);
  ASSERT_TRUE(d);
  s.CompleteUnit("w2", "s1", c->unit_id, 5, 5);
  s.CompleteUnit("w2", "s1", d->unit_id, 5, 5);
  ASSERT_EQ(asked.size(), 4u);
  std::vector<WorkUnit> m2_confirms;
  while (auto u = s.Lease("w2", "m2", 6, 0)) m2_confirms.push_back(*u);
  ASSERT_EQ(m2_confirms.size(), 2u);
  s.CompleteUnit("w2", "s1", m2_confirms[0].unit_id, 7, 7);
  EXPECT_EQ(sweep->state, RunState::kRunning);
  s.CompleteUnit("w2", "s1", m2_confirms[1].unit_id, 7, 7);
  EXPECT_EQ(sweep->state, RunState::kDone);
  EXPECT_EQ(s.Progress("s1")[0].units_total, 8u);
}

TEST(Scheduler, EachShapesRefineUnitsFollowItsScreeningAndComeBeforeTheConfirmUnits) {
  SchedulerOptions o;
  o.shrink_tail_units = false;
  o.refine_within = 0.05;
  Scheduler s(o);
  // The near-best configs of a key: its first 10; best 7 us at N=1024,
  // 20 us at N=4096.
  std::vector<std::string> asked;
  s.SetNearBest([&](const DeviceInfo& dev, const OpSpec& spec, const std::string& dtype, const Shape& shape,
                    double within, const std::string&) {
    EXPECT_EQ(within, 0.05);
    asked.push_back(dtype + "/" + shape.Canonical());
    auto all = EnumerateConfigs(spec, dev);
    return NearBest{std::vector<Config>(all->begin(), all->begin() + 10), shape.Canonical() == "N=1024" ? 7.0 : 20.0};
  });
  s.SetContenders([&](const DeviceInfo&, const OpSpec&, const std::string&, const Shape&,
                  uint32_t top, const std::string&) {
    asked.push_back("confirm");
    return std::vector<Config>(top, Config{});
  });
  SweepSubmit submit = MakeSubmit({"*"}, 600);  // one screening unit per dtype and shape
  submit.shapes = kTwoShapes;
  submit.dtypes = {"f32", "f16"};
  submit.refine_pass = true;
  submit.confirm_top = 2;
  submit.confirm_seconds = 1;
  ASSERT_TRUE(s.AddSweep(submit, "s1", 0).ok());
  s.AddDevice(Device("m"), 0);
  const auto* sweep = s.FindSweep("s1");
  const uint64_t pairs_before = sweep->pairs_total;
  auto first = s.Lease("w1", "m", 0, 0);
  ASSERT_TRUE(first);
  EXPECT_TRUE(first->screen_only);
  EXPECT_FALSE(first->refine());
  EXPECT_EQ(first->dtype + "/" + first->shapes[0].Canonical(), "f32/N=1024");
  s.CompleteUnit("w1", "s1", first->unit_id, 1, 1);
  // f32 at N=1024 is screened: its refine units come next, a config each,
  // while the other (dtype, shape)s still screen.
  ASSERT_EQ(asked, (std::vector<std::string>{"f32/N=1024"}));
  EXPECT_EQ(sweep->pairs_total, pairs_before + 10);
  std::vector<WorkUnit> refines;
  for (int i = 0; i < 10; ++i) {
    auto u = s.Lease("w1", "m", 2, 0);
    ASSERT_TRUE(u);
    EXPECT_TRUE(u->refine());
    EXPECT_FALSE(u->screen_only);
    EXPECT_EQ(u->dtype, "f32");
    EXPECT_EQ(u->configs.size(), 1u);
    ASSERT_EQ(u->shapes.size(), 1u);
    EXPECT_EQ(u->shapes[0].Canonical(), "N=1024");
    EXPECT_EQ(u->refine_best_us, 7.0);
    refines.push_back(*u);
  }
  auto next = s.Lease("w2", "m", 2, 0);  // then the screening goes on
  ASSERT_TRUE(next);
  EXPECT_TRUE(next->screen_only);
  EXPECT_EQ(next->dtype + "/" + next->shapes[0].Canonical(), "f16/N=1024");
  // Each refine unit done looks again and finds no new contender.
  for (const auto& u : refines) s.CompleteUnit("w1", "s1", u.unit_id, 3, 3);
  EXPECT_EQ(asked.size(), 11u);
  s.CompleteUnit("w2", "s1", next->unit_id, 4, 4);
  // The rest in turn: each shape's refine units straight after its
  // screening, and the confirm units once everything else is done.
  std::vector<std::string> order;
  double now = 5;
  while (auto u = s.Lease("w1", "m", now, 0)) {
    const std::string what = u->dtype + "/" + u->shapes[0].Canonical();
    order.push_back(u->confirm() ? "confirm " + what : u->refine() ? "refine " + what : "screen " + what);
    s.CompleteUnit("w1", "s1", u->unit_id, now, int64_t(now));
    now += 1;
  }
  ASSERT_EQ(order.size(), 10u + 1 + 10 + 1 + 10 + 4);
  EXPECT_EQ(order[0], "refine f16/N=1024");
  EXPECT_EQ(order[10], "screen f32/N=4096");
  EXPECT_EQ(order[11], "refine f32/N=4096");
  EXPECT_EQ(order[21], "screen f16/N=4096");
  EXPECT_EQ(order[22], "refine f16/N=4096");
  for (size_t i = 32; i < order.size(); ++i) EXPECT_EQ(order[i].rfind("confirm", 0), 0u) << order[i];
  EXPECT_EQ(asked.back(), "confirm");
  EXPECT_EQ(sweep->state, RunState::kDone);

  // Without the refine pass (an older client) screening units time
  // contenders themselves.
  Scheduler one(o);
  one.SetNearBest([&](const DeviceInfo&, const OpSpec&, const std::string&, const Shape&, double, const std::string&) {
    ADD_FAILURE() << "no refine pass asked for";
    return NearBest{};
  });
  ASSERT_TRUE(one.AddSweep(MakeSubmit({"*"}, 600), "s2", 0).ok());
  one.AddDevice(Device("m"), 0);
  auto u = one.Lease("w1", "m", 0, 0);
  ASSERT_TRUE(u);
  EXPECT_FALSE(u->screen_only);
  one.CompleteUnit("w1", "s2", u->unit_id, 1, 1);
  EXPECT_EQ(one.FindSweep("s2")->state, RunState::kDone);
}

TEST(Scheduler, DevicesThatRunDryRefineTheContendersScreenedSoFar) {
  SchedulerOptions o;
  o.shrink_tail_units = false;
  Scheduler s(o);
  // Before the last screening unit ends the first 5 configs of a shape are
  // near the best (10 us); at the end, with a better best (9 us), the first
  // 7 are.
  int calls = 0;
  s.SetNearBest([&](const DeviceInfo& dev, const OpSpec& spec, const std::string&, const Shape&,
                double, const std::string&) {
    const bool final = ++calls > 2;
    auto all = EnumerateConfigs(spec, dev);
    return NearBest{std::vector<Config>(all->begin(), all->begin() + (final ? 7 : 5)), final ? 9.0 : 10.0};
  });
  SweepSubmit submit = MakeSubmit({"*"}, 600);
  submit.shapes = kTwoShapes;
  submit.refine_pass = true;
  ASSERT_TRUE(s.AddSweep(submit, "s1", 0).ok());
  s.AddDevice(Device("m"), 0);
  auto first_shape = s.Lease("w1", "m", 0, 0);
  auto screening = s.Lease("w1", "m", 0, 0);
  ASSERT_TRUE(first_shape && screening);
  s.CompleteUnit("w1", "s1", first_shape->unit_id, 0.2, 0.2);
  std::vector<WorkUnit> early;
  while (auto u = s.Lease("w2", "m", 0.5, 0)) early.push_back(*u);
  ASSERT_EQ(early.size(), 10u);  // 5 configs x 2 shapes, once
  EXPECT_EQ(calls, 2);
  for (const auto& u : early) {
    EXPECT_TRUE(u.refine());
    EXPECT_EQ(u.refine_best_us, 10.0);
  }
  for (const auto& u : early) s.CompleteUnit("w2", "s1", u.unit_id, 1, 1);
  EXPECT_EQ(s.FindSweep("s1")->state, RunState::kRunning);
  s.CompleteUnit("w1", "s1", screening->unit_id, 2, 2);
  // Only the configs that came near the final best since.
  std::vector<WorkUnit> rest;
  while (auto u = s.Lease("w2", "m", 3, 0)) rest.push_back(*u);
  ASSERT_EQ(rest.size(), 4u);
  std::set<std::string> early_ids;
  for (const auto& u : early) early_ids.insert(u.configs[0].Id() + u.shapes[0].Canonical());
  for (const auto& u : rest) {
    EXPECT_EQ(u.refine_best_us, 9.0);
    EXPECT_FALSE(early_ids.count(u.configs[0].Id() + u.shapes[0].Canonical()));
  }
  for (const auto& u : rest) s.CompleteUnit("w2", "s1", u.unit_id, 4, 4);
  EXPECT_EQ(s.FindSweep("s1")->state, RunState::kDone);
}

TEST(Scheduler, ConfigsThatRefinedFiguresBringNearTheBestAreRefinedWhileThePassRuns) {
  SchedulerOptions o;
  o.shrink_tail_units = false;
  o.tail_duplicates = true;
  Scheduler s(o);
  // The first look: configs 0-2; once a refined figure is stored (slower
  // than its screening one), configs 3-4 are near the best too; then
  // nothing new.
  int calls = 0;
  s.SetNearBest([&](const DeviceInfo& dev, const OpSpec& spec, const std::string&, const Shape&,
                double, const std::string&) {
    ++calls;
    auto all = EnumerateConfigs(spec, dev);
    return NearBest{std::vector<Config>(all->begin(), all->begin() + (calls == 1 ? 3 : 5)), 10.0};
  });
  SweepSubmit submit = MakeSubmit({"*"}, 600);
  submit.refine_pass = true;
  ASSERT_TRUE(s.AddSweep(submit, "s1", 0).ok());
  s.AddDevice(Device("m"), 0);
  auto screening = s.Lease("w1", "m", 0, 0);
  ASSERT_TRUE(screening);
  s.CompleteUnit("w1", "s1", screening->unit_id, 1, 1);
  EXPECT_EQ(calls, 1);
  std::vector<WorkUnit> first;
  while (auto u = s.Lease("w1", "m", 1, 0)) first.push_back(*u);
  ASSERT_EQ(first.size(), 3u);
  // A refine unit is never duplicated, however long it takes.
  EXPECT_FALSE(s.Lease("w2", "m", 100, 0).has_value());
  // The first refine unit done: a look finds configs 3 and 4, to refine
  // while the other two units still run.
  s.CompleteUnit("w1", "s1", first[0].unit_id, 101, 101);
  EXPECT_EQ(calls, 2);
  std::vector<WorkUnit> second;
  while (auto u = s.Lease("w2", "m", 101, 0)) second.push_back(*u);
  ASSERT_EQ(second.size(), 2u);
  for (const auto& u : second) EXPECT_TRUE(u.refine());
  // Every later unit done looks again and finds nothing new.
  for (size_t i = 1; i < first.size(); ++i) s.CompleteUnit("w1", "s1", first[i].unit_id, 102, 102);
  EXPECT_EQ(calls, 4);
  EXPECT_FALSE(s.Lease("w2", "m", 102, 0).has_value());
  EXPECT_EQ(s.FindSweep("s1")->state, RunState::kRunning);
  for (const auto& u : second) s.CompleteUnit("w2", "s1", u.unit_id, 103, 103);
  EXPECT_EQ(calls, 6);
  EXPECT_EQ(s.FindSweep("s1")->state, RunState::kDone);
}

TEST(Scheduler, NothingToConfirmEndsTheSweepWithItsLastUnit) {
  SchedulerOptions o;
  o.shrink_tail_units = false;
  Scheduler s(o);
  int asked = 0;
  s.SetContenders([&](const DeviceInfo&, const OpSpec&, const std::string&, const Shape&,
                  uint32_t, const std::string&) {
    ++asked;
    return std::vector<Config>{};  // every key confirmed already (a resumed sweep)
  });
  SweepSubmit submit = MakeSubmit({"*"}, 600);
  submit.shapes = kTwoShapes;
  submit.confirm_top = 4;
  submit.confirm_seconds = 2;
  ASSERT_TRUE(s.AddSweep(submit, "s1", 0).ok());
  s.AddDevice(Device("m"), 0);
  for (int i = 0; i < 2; ++i) {
    auto a = s.Lease("w1", "m", 0, 0);
    ASSERT_TRUE(a);
    s.CompleteUnit("w1", "s1", a->unit_id, 1, 1);
  }
  EXPECT_EQ(asked, 2);  // a look per shape
  EXPECT_EQ(s.FindSweep("s1")->state, RunState::kDone);

  // A sweep without a confirm phase never asks.
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 600), "s2", 0).ok());
  auto b = s.Lease("w1", "m", 2, 0);
  ASSERT_TRUE(b);
  s.CompleteUnit("w1", "s2", b->unit_id, 3, 3);
  EXPECT_EQ(asked, 2);
  EXPECT_EQ(s.FindSweep("s2")->state, RunState::kDone);

  submit.confirm_seconds = 0;
  auto bad = s.AddSweep(submit, "s3", 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("confirm_seconds"), std::string::npos);
  submit.confirm_seconds = 1;
  submit.confirm_top = kMaxConfirmTop + 1;
  bad = s.AddSweep(submit, "s4", 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("confirm_top"), std::string::npos);
}

// One valid row of a key for NearBestOf: config "c<i>", screened at
// `screen_us`, refined at `refined_us` where that is > 0.
Measurement KeyRow(int i, double screen_us, double refined_us = 0) {
  Measurement m;
  m.config = Config{{{"i", i}}};
  if (refined_us > 0) m.pass = Measurement::Pass::kRefine;
  m.median_us = m.ReplacesScreening() ? refined_us : screen_us;
  m.screen_us = m.ReplacesScreening() ? screen_us : 0;
  return m;
}

std::set<int64_t> Picked(const NearBest& near) {
  std::set<int64_t> ids;
  for (const auto& c : near.configs) ids.insert(c.params.at(0).second.Number());
  return ids;
}

TEST(NearBestOf, ScreeningFiguresWithinTheWindowOfTheBest) {
  const auto near = NearBestOf({KeyRow(0, 100), KeyRow(1, 107), KeyRow(2, 109), KeyRow(3, 150)}, 0.08);
  EXPECT_EQ(Picked(near), (std::set<int64_t>{0, 1}));
  EXPECT_EQ(near.best_us, 100);
}

TEST(NearBestOf, RefinedFiguresRisingTogetherBringNoConfigNear) {
  // Five configs refined on hot devices, every figure 10% above its
  // screening one: the best in screening terms is still 100, and 112 stays
  // out. Comparing the raw refined best (110) would have let it in.
  std::vector<Measurement> rows = {KeyRow(0, 100, 110), KeyRow(1, 101, 111.1), KeyRow(2, 102, 112.2),
                                   KeyRow(3, 103, 113.3), KeyRow(4, 104, 114.4), KeyRow(5, 112),
                                   KeyRow(6, 107.5)};
  auto near = NearBestOf(rows, 0.08);
  EXPECT_EQ(Picked(near), (std::set<int64_t>{6}));
  EXPECT_DOUBLE_EQ(near.best_us, 100);
  // With fewer than five refined configs the figures are taken as they are.
  rows.erase(rows.begin() + 1, rows.begin() + 4);
  near = NearBestOf(rows, 0.08);
  EXPECT_EQ(Picked(near), (std::set<int64_t>{5, 6}));
}

TEST(NearBestOf, ABestScreenedTooFastWidensTheWindow) {
  // The best's refined figure rose 15%, the others' 0-1%: in screening
  // terms the best is about 114, and 120 comes within 8% of it.
  const std::vector<Measurement> rows = {KeyRow(0, 100, 115), KeyRow(1, 114, 114.5), KeyRow(2, 115, 115),
                                         KeyRow(3, 116, 117), KeyRow(4, 117, 117), KeyRow(5, 120),
                                         KeyRow(6, 130)};
  const auto near = NearBestOf(rows, 0.08);
  EXPECT_EQ(Picked(near), (std::set<int64_t>{5}));
}

TEST(ContendersOf, RefinedFiguresComeFirstThenTheFaster) {
  // c3's screening figure is the fastest, but it was taken in other
  // conditions than the refined ones: the refined configs go first.
  const std::vector<Measurement> rows = {KeyRow(0, 100, 104), KeyRow(1, 101, 103), KeyRow(2, 102, 108),
                                         KeyRow(3, 99), KeyRow(4, 120)};
  auto top = ContendersOf(rows, 4);
  ASSERT_EQ(top.size(), 4u);
  EXPECT_EQ(top[0].params.at(0).second, 1);
  EXPECT_EQ(top[1].params.at(0).second, 0);
  EXPECT_EQ(top[2].params.at(0).second, 2);
  EXPECT_EQ(top[3].params.at(0).second, 3);
  EXPECT_EQ(ContendersOf(rows, 10).size(), 5u);
}

TEST(ContendersOf, NearTiesJustPastTheTopAreConfirmedToo) {
  // Refined figures 100, 100.5, 101, 101.9, 103, 120: a top 2 takes the
  // two within 2% after it (101, 101.9), not 103; never more than twice
  // the top.
  const std::vector<Measurement> rows = {KeyRow(0, 90, 100), KeyRow(1, 91, 100.5), KeyRow(2, 92, 101),
                                         KeyRow(3, 93, 101.9), KeyRow(4, 94, 103), KeyRow(5, 95, 120),
                                         KeyRow(6, 80)};
  auto top = ContendersOf(rows, 2);
  ASSERT_EQ(top.size(), 4u);
  EXPECT_EQ(top[3].params.at(0).second, 3);
  EXPECT_EQ(ContendersOf(rows, 1).size(), 2u);  // twice the top at most
  // Screening figures never join a refined leader's near-ties.
  const std::vector<Measurement> mixed = {KeyRow(0, 90, 100), KeyRow(1, 100.5)};
  EXPECT_EQ(ContendersOf(mixed, 1).size(), 1u);
}

// Liveness is work done: a model whose device asked once, took a unit and
// went quiet stops holding a `*` sweep model_idle_seconds after its lease
// ran out (its pairs dropped, the sweep ends), while a model that keeps
// taking work is waited for; a sweep that names the quiet model waits on.
// Meanwhile status says what each sweep waits for.
TEST(Scheduler, AModelWhoseDevicesTakeNoWorkStopsHoldingStarSweeps) {
  SchedulerOptions o;
  o.shrink_tail_units = false;
  o.tail_duplicates = false;
  o.lease_base_seconds = 10;
  o.lease_per_pair_seconds = 0;
  o.model_idle_seconds = 60;
  Scheduler s(o);
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 100), "star", 0).ok());
  s.AddDevice(Device("quiet"), 0);
  s.AddDevice(Device("busy"), 0);
  ASSERT_TRUE(s.Lease("wq", "quiet", 0, 0).has_value());  // asks once, then only heartbeats
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"quiet"}, 100), "named", 0).ok());
  const SweepState* star = s.FindSweep("star");
  EXPECT_EQ(star->pairs_total, 1200u);
  std::optional<WorkUnit> held;
  auto waits = [&](const std::string& id, double now) { return s.Progress(id, now).at(0).waits; };
  for (int t = 0; t <= 130; ++t) {
    s.ExpireLeases(t, t);
    if (t % 20 == 0 && t <= 100) held = s.Lease("wb", "busy", t, 0);  // one unit every 20 s
    if (t % 20 == 5 && held) s.CompleteUnit("wb", "star", held->unit_id, t, t);
    const auto skipped = s.SkipQuietModels(t, t);
    if (t == 40) {
      // Quiet since its lease ran out (t=10); busy took work 0 s ago.
      EXPECT_EQ(waits("star", t),
                std::vector<std::string>{"quiet: 600 pairs queued, no device has taken work for 30 s; "
                                         "skipped after 60 s"});
      EXPECT_EQ(waits("named", t),
                std::vector<std::string>{"quiet: 600 pairs queued, no device has taken work for 30 s"});
    }
    if (t == 69) {
      EXPECT_TRUE(star->skipped.empty());
      EXPECT_EQ(star->state, RunState::kRunning);
    }
    if (t == 70) {
      ASSERT_EQ(skipped.size(), 1u);
      EXPECT_EQ(skipped[0].sweep_id, "star");
      EXPECT_EQ(skipped[0].model, "quiet");
    } else {
      EXPECT_TRUE(skipped.empty()) << "t=" << t;
    }
  }
  // Busy measured all its 600 pairs; quiet's 600 were dropped.
  EXPECT_EQ(star->state, RunState::kDone);
  EXPECT_EQ(star->pairs_total, 600u);
  EXPECT_EQ(star->pairs_done, 600u);
  ASSERT_TRUE(star->skipped.count("quiet"));
  const auto progress = s.Progress("star", 130).at(0);
  EXPECT_EQ(progress.skipped,
            std::vector<std::string>{"quiet: no device took work for 60 s with 600 pairs queued; those pairs are "
                                     "dropped"});
  EXPECT_TRUE(progress.waits.empty());
  EXPECT_FALSE(star->skipped.count("busy"));
  // The sweep that names it waits on, and says for how long.
  EXPECT_EQ(s.FindSweep("named")->state, RunState::kRunning);
  EXPECT_EQ(waits("named", 130),
            std::vector<std::string>{"quiet: 600 pairs queued, no device has taken work for 120 s"});
  // A device of it that comes back and takes work is no longer quiet.
  ASSERT_TRUE(s.Lease("wq", "quiet", 131, 0).has_value());
  EXPECT_TRUE(waits("named", 135).empty());
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

namespace tune {
namespace {

// Runs a searched sweep to its end with `workers` workers (a device each)
// taking units in turn and the store answering with made-up figures;
// returns the configs measured, in the order first leased.
std::vector<std::string> RunSearchedSweep(SweepSubmit submit, int workers, size_t* max_open = nullptr,
                                          SchedulerOptions options = {}) {
  Scheduler s(options);
  std::map<std::string, Measurement> stored;  // config id -> row
  s.SetKeyRows([&](const DeviceInfo&, const OpSpec&, const std::string&, const Shape&) {
    std::vector<Measurement> rows;
    for (const auto& [id, m] : stored) rows.push_back(m);
    return rows;
  });
  EXPECT_TRUE(s.AddSweep(submit, "s1", 0).ok());
  for (int w = 0; w < workers; ++w) s.AddDevice(Device("m"), 0);  // one device per worker
  std::vector<std::string> order;
  std::vector<std::pair<std::string, WorkUnit>> open;
  double now = 1;
  for (int round = 0; round < 10'000 && s.FindSweep("s1")->state == RunState::kRunning; ++round) {
    for (int w = 0; w < workers; ++w) {
      const std::string who = "w" + std::to_string(w);
      if (auto u = s.Lease(who, "m", now, 0)) {
        // A device with nothing else to do may take a duplicate lease of a
        // straggler: what is measured counts once.
        for (const Config& c : u->configs)
          if (std::find(order.begin(), order.end(), c.Canonical()) == order.end()) order.push_back(c.Canonical());
        open.emplace_back(who, *u);
      }
    }
    if (max_open) *max_open = std::max(*max_open, open.size());
    if (open.empty()) break;
    // The oldest unit's figures arrive: a bowl around 7 on every axis.
    auto [who, u] = open.front();
    open.erase(open.begin());
    for (const Config& c : u.configs) {
      Measurement m;
      m.config = c;
      m.check_passed = true;
      m.median_us = 10;
      for (const auto& [name, v] : c.params) m.median_us += std::abs(std::log2(double(v.Number()) + 1) - 3);
      stored[c.Id()] = m;
    }
    s.CompleteUnit(who, "s1", u.unit_id, now, 1);
    now += 1;
  }
  EXPECT_EQ(s.FindSweep("s1")->state, RunState::kDone);
  return order;
}

// No clock of its own: a searched sweep's end is stamped with the wall time
// of the call that ends it, never the host's.
TEST(Scheduler, ASearchedSweepsEndIsStampedWithItsCallersWallTime) {
  for (const bool ahead : {false, true}) {
    SCOPED_TRACE(ahead ? "ProposeAhead" : "Lease");
    SweepSubmit submit = MakeSubmit({"*"}, 8);
    submit.strategy = "random";
    submit.seed = 5;
    submit.budget = 20;
    Scheduler s{SchedulerOptions{}};
    ASSERT_TRUE(s.AddSweep(submit, "s1", 3).ok());
    s.AddDevice(Device("m"), 3);
    double now = 1;
    for (int round = 0; round < 1000 && s.FindSweep("s1")->state == RunState::kRunning; ++round, now += 1) {
      if (ahead) {
        s.ProposeAhead("m", now, 11);
        if (s.FindSweep("s1")->state != RunState::kRunning) break;
      }
      auto u = s.Lease("w", "m", now, 9);
      if (!u) continue;
      s.CompleteUnit("w", "s1", u->unit_id, now, 7);
    }
    EXPECT_EQ(s.FindSweep("s1")->state, RunState::kDone);
    // Whichever call ends it (the last CompleteUnit, a Lease or a
    // ProposeAhead that finds the search over), the stamp is that call's.
    const int64_t end = s.FindSweep("s1")->finished_unix;
    EXPECT_TRUE(end == 7 || end == 9 || (ahead && end == 11)) << end;
  }
}

TEST(Scheduler, ASearchedKeyMeasuresItsBudgetOnceEachBatchAfterTheLastOnesFigures) {
  SweepSubmit submit = MakeSubmit({"*"}, 8);
  submit.strategy = "model";
  submit.seed = 5;
  submit.budget = 100;
  size_t max_open = 0;
  const auto one = RunSearchedSweep(submit, 1, &max_open);
  EXPECT_EQ(one.size(), 100u);
  EXPECT_EQ(std::set<std::string>(one.begin(), one.end()).size(), 100u);
  // Lock-step (one batch in flight), two workers lease the same configs as
  // one: a batch waits for the last one's figures.
  SchedulerOptions lock_step;
  lock_step.search_in_flight = 16;
  const auto lone = RunSearchedSweep(submit, 1, nullptr, lock_step);
  EXPECT_EQ(RunSearchedSweep(submit, 2, nullptr, lock_step), lone);
  // In flight, a seed and an order in which figures arrive give one search.
  EXPECT_EQ(RunSearchedSweep(submit, 1), one);
  submit.seed = 6;
  EXPECT_NE(RunSearchedSweep(submit, 1), one);
  // A search out of time ends early, and so does its sweep (with its refine
  // pass): nothing is left waiting.
  submit.seed = 5;
  submit.budget_seconds = 2.5;
  const auto timed = RunSearchedSweep(submit, 1);
  EXPECT_GT(timed.size(), 0u);
  EXPECT_LT(timed.size(), 100u);
  submit.budget_seconds = 0;
  // A budget over the space measures the space once.
  submit.strategy = "random";
  submit.budget = 5000;
  EXPECT_EQ(RunSearchedSweep(submit, 1).size(), 600u);
  // auto: the synthetic op's 600 configs are few enough to measure whole.
  submit.strategy = "auto";
  submit.budget = 0;
  EXPECT_EQ(RunSearchedSweep(submit, 1).size(), 600u);
}

// A searched key proposes its next batch while the figures of the last come
// in: up to its in-flight depth of configs wait to be measured, never more
// than half what it has measured (one batch at first: a slow start), and a
// batch goes out as soon as the depth has room for a whole one.
TEST(Scheduler, ASearchedKeyKeepsConfigsInFlightUpToItsDepth) {
  for (const uint32_t depth : {16u, 64u}) {
    SCOPED_TRACE(depth);
    SchedulerOptions o;
    o.search_in_flight = depth;
    o.shrink_tail_units = false;
    Scheduler s(o);
    s.SetKeyRows([](const DeviceInfo&, const OpSpec&, const std::string&, const Shape&) {
      return std::vector<Measurement>{};
    });
    SweepSubmit submit = MakeSubmit({"*"}, 8);  // units of 8, batches of 16 (kSearchBatchMin)
    submit.strategy = "random";
    submit.budget = 400;
    ASSERT_TRUE(s.AddSweep(submit, "s1", 0).ok());
    s.AddDevice(Device("m"), 0);
    std::vector<WorkUnit> open;
    auto lease_all = [&] {
      size_t configs = 0;
      while (auto u = s.Lease("w", "m", 1, 0)) {
        configs += u->configs.size();
        open.push_back(*u);
      }
      return configs;
    };
    auto complete_oldest = [&](size_t units) {
      for (size_t i = 0; i < units; ++i) {
        s.CompleteUnit("w", "s1", open.front().unit_id, 1, 1);
        open.erase(open.begin());
      }
    };
    // Each round the oldest unit's figures come in: what is in flight never
    // passes the open depth, and a batch goes out as soon as it has room.
    size_t measured = 0, most = 0;
    for (int round = 0; round < 40; ++round) {
      lease_all();
      size_t in_flight = 0;
      for (const WorkUnit& u : open) in_flight += u.configs.size();
      const size_t room = std::max<size_t>(16, std::min<size_t>(depth, measured / 2));
      EXPECT_LE(in_flight, room) << "round " << round;
      EXPECT_GT(in_flight + 16, room) << "round " << round << ": room for a batch left unproposed";
      most = std::max(most, in_flight);
      complete_oldest(1);
      measured += 8;
    }
    EXPECT_EQ(most, depth) << "the whole depth once enough is measured";
    EXPECT_EQ(s.FindSweep("s1")->state, RunState::kRunning);
  }
}

TEST(Scheduler, ASearchStartsFromItsNeighboursBestWhenTheStoreHasThem) {
  Scheduler s;
  Config best{{{"TILE", 256}, {"UNROLL", 4}, {"SPLIT", 2}, {"PAD", 1}}};
  std::vector<std::string> asked;
  s.SetPriors([&](const DeviceInfo& d, const OpSpec&, const std::string&, const Shape& shape) {
    asked.push_back(d.model + " " + shape.Canonical());
    return std::vector<PriorTrial>{{Config{{{"TILE", 32}, {"UNROLL", 1}, {"SPLIT", 1}, {"PAD", 0}}}, 3.0, {1.f}},
                                   {best, 1.0, {1.f}}};
  });
  SweepSubmit submit = MakeSubmit({"*"}, 8);
  submit.strategy = "evolution";
  submit.budget = 50;
  ASSERT_TRUE(s.AddSweep(submit, "s1", 0).ok());
  s.AddDevice(Device("m"), 0);
  auto u = s.Lease("w", "m", 1, 0);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(asked, std::vector<std::string>{"m N=1024"});
  ASSERT_GE(u->configs.size(), 2u);
  // The op's default first (what the winner is weighed against), then the
  // neighbour's best.
  EXPECT_EQ(u->configs[0].Canonical(), "PAD=0,SPLIT=1,TILE=128,UNROLL=1");
  EXPECT_EQ(u->configs[1].Canonical(), best.Canonical());
  // The neighbour's slow config is not measured first.
  for (const Config& c : u->configs) EXPECT_NE(c.params[0].second.Number() * 100 + c.params[1].second.Number(), 3201);
}

TEST(Scheduler, SearchFieldsOutOfRangeAreRefusedNamingTheField) {
  Scheduler s;
  SweepSubmit submit = MakeSubmit({"*"}, 8);
  submit.strategy = "annealing";
  auto r = s.AddSweep(submit, "s1", 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("strategy: unknown strategy 'annealing'"), std::string::npos);
  submit.strategy = "model";
  submit.budget = kMaxSearchBudget + 1;
  r = s.AddSweep(submit, "s2", 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("budget"), std::string::npos);
  submit.budget = 10;
  submit.budget_seconds = -1;
  EXPECT_FALSE(s.AddSweep(submit, "s3", 0).ok());
}

// A shared farm serves urgent work first: once a small sweep of higher
// priority is added behind a big one, every unit of the small one is leased
// before any further unit of the big one (a retry of the big one's
// included), and the small one ends first.
TEST(Scheduler, AHigherPrioritySweepIsLeasedWholeBeforeAnyFurtherUnitOfALowerOne) {
  SchedulerOptions o;
  o.shrink_tail_units = false;  // fixed unit sizes
  o.tail_duplicates = false;
  Scheduler s(o);
  SweepSubmit big = MakeSubmit({"*"}, 10);
  big.shapes = kTwoShapes;  // 120 units
  ASSERT_TRUE(s.AddSweep(big, "big", 0).ok());
  s.AddDevice(Device("m"), 0);
  std::vector<WorkUnit> held;
  for (const char* w : {"w1", "w2", "w3"}) {
    auto u = s.Lease(w, "m", 0, 0);
    ASSERT_TRUE(u);
    EXPECT_EQ(u->sweep_id, "big");
    held.push_back(*u);
  }
  SweepSubmit urgent = MakeSubmit({"*"}, 100);  // 6 units
  urgent.name = "urgent";
  urgent.priority = 80;
  ASSERT_TRUE(s.AddSweep(urgent, "urgent", 1).ok());
  EXPECT_EQ(s.Progress("urgent").at(0).priority, 80u);
  EXPECT_EQ(s.Progress("big").at(0).priority, kDefaultSweepPriority);
  s.DropWorker("w3", 1);  // the big one's unit goes back to the queue, first in line for it
  size_t urgent_units = 0;
  for (int i = 0; i < 6; ++i) {
    const std::string worker = i % 2 ? "w1" : "w2";
    auto u = s.Lease(worker, "m", 2 + i, 0);
    ASSERT_TRUE(u);
    EXPECT_EQ(u->sweep_id, "urgent") << "lease " << i;
    if (u->sweep_id != "urgent") continue;
    ++urgent_units;
    s.CompleteUnit(worker, "urgent", u->unit_id, 3 + i, 3 + i);
  }
  EXPECT_EQ(urgent_units, 6u);
  EXPECT_EQ(s.FindSweep("urgent")->state, RunState::kDone);
  EXPECT_EQ(s.FindSweep("big")->state, RunState::kRunning);
  // Then the big one, from its retried unit.
  auto next = s.Lease("w4", "m", 10, 0);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->sweep_id, "big");
  EXPECT_EQ(next->unit_id, held[2].unit_id);
}

// Sweeps of equal priority keep their submission order, and a lower one
// waits for the higher one's tail: an idle device duplicates a straggler of
// the higher one rather than take the lower one's fresh units.
TEST(Scheduler, EqualPrioritiesKeepSubmissionOrderAndStragglersOfAHigherOneComeFirst) {
  SchedulerOptions o;
  o.shrink_tail_units = false;
  o.tail_min_age_seconds = 2;
  Scheduler s(o);
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 300), "first", 0).ok());
  ASSERT_TRUE(s.AddSweep(MakeSubmit({"*"}, 300), "second", 0).ok());
  SweepSubmit urgent = MakeSubmit({"*"}, 600);  // one unit
  urgent.priority = 90;
  ASSERT_TRUE(s.AddSweep(urgent, "urgent", 0).ok());
  s.AddDevice(Device("m"), 0);
  auto a = s.Lease("w1", "m", 0, 0);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->sweep_id, "urgent");
  auto b = s.Lease("w2", "m", 1, 0);  // the urgent unit is too young to duplicate
  ASSERT_TRUE(b);
  EXPECT_EQ(b->sweep_id, "first");
  auto dup = s.Lease("w3", "m", 3, 0);
  ASSERT_TRUE(dup);
  EXPECT_EQ(dup->sweep_id, "urgent");
  EXPECT_EQ(dup->unit_id, a->unit_id);
  s.CompleteUnit("w3", "urgent", dup->unit_id, 4, 4);
  EXPECT_EQ(s.FindSweep("urgent")->state, RunState::kDone);
  std::vector<std::string> order;
  for (int i = 0; i < 3; ++i) {
    auto u = s.Lease("w4", "m", 5, 0);
    ASSERT_TRUE(u);
    order.push_back(u->sweep_id);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"first", "second", "second"}));
}

TEST(Scheduler, APriorityOutOfRangeIsRefusedNamingTheField) {
  Scheduler s;
  SweepSubmit submit = MakeSubmit({"*"}, 8);
  submit.priority = kMaxSweepPriority + 1;
  auto r = s.AddSweep(submit, "s1", 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sweep 't': priority: 101 is out of range: expected an integer in 0..100"),
            std::string::npos)
      << r.status().message();
  submit.priority = kMaxSweepPriority;
  EXPECT_TRUE(s.AddSweep(submit, "s2", 0).ok());
}

}  // namespace
}  // namespace tune

namespace tune {
namespace {

// A searched key measures the op's default config in its first batch,
// within its budget, so that its winner has the default's figure beside it
// as an exhaustive key's has.
TEST(Scheduler, ASearchedKeyMeasuresTheOpsDefaultFirstWithinItsBudget) {
  for (const char* strategy : {"random", "evolution", "model"}) {
    SweepSubmit submit = MakeSubmit({"*"}, 8);
    submit.strategy = strategy;
    submit.budget = 5;
    const auto order = RunSearchedSweep(submit, 1);
    ASSERT_EQ(order.size(), 5u) << strategy;
    EXPECT_EQ(order[0], "PAD=0,SPLIT=1,TILE=128,UNROLL=1") << strategy;
  }
}

// A config list (SweepSubmit::configs) is what a listed sweep measures, on
// every shape, and nothing else; its keys' coverage says "listed", a part
// of the op's space.
TEST(Scheduler, AListedSweepMeasuresExactlyItsConfigsOnEveryShape) {
  SchedulerOptions o;
  o.shrink_tail_units = false;
  Scheduler s(o);
  SweepSubmit submit = MakeSubmit({"*"}, 100);
  submit.shapes = kTwoShapes;
  submit.strategy = "auto";
  submit.configs = {Config{{{"PAD", 0}, {"SPLIT", 1}, {"UNROLL", 2}, {"TILE", 64}}},  // any param order
                    Config{{{"TILE", 256}, {"UNROLL", 1}, {"SPLIT", 3}, {"PAD", 2}}},
                    Config{{{"TILE", 1024}, {"UNROLL", 16}, {"SPLIT", 5}, {"PAD", 3}}}};
  ASSERT_TRUE(s.AddSweep(submit, "s1", 0).ok());
  s.AddDevice(Device("m"), 0);
  const SweepState* sweep = s.FindSweep("s1");
  ASSERT_NE(sweep, nullptr);
  EXPECT_EQ(sweep->pairs_total, 6u);
  std::set<std::string> leased;
  while (auto u = s.Lease("w", "m", 1, 0)) {
    for (const Config& c : u->configs) EXPECT_TRUE(leased.insert(c.Canonical() + " " + u->shapes[0].Canonical()).second);
  }
  const std::set<std::string> want = {
      "PAD=0,SPLIT=1,TILE=64,UNROLL=2 N=1024",  "PAD=2,SPLIT=3,TILE=256,UNROLL=1 N=1024",
      "PAD=3,SPLIT=5,TILE=1024,UNROLL=16 N=1024", "PAD=0,SPLIT=1,TILE=64,UNROLL=2 N=4096",
      "PAD=2,SPLIT=3,TILE=256,UNROLL=1 N=4096",  "PAD=3,SPLIT=5,TILE=1024,UNROLL=16 N=4096"};
  EXPECT_EQ(leased, want);
  ASSERT_EQ(sweep->plans.size(), 2u);
  for (const auto& [key, plan] : sweep->plans) {
    EXPECT_EQ(plan.strategy, "listed/1");
    EXPECT_EQ(plan.legal, 600u);  // of the op's space: 3 listed are not the whole of it
    EXPECT_TRUE(plan.searched);
  }

  // On a model whose limits a listed config breaks, the sweep fails naming
  // the config's index.
  Scheduler small;
  ASSERT_TRUE(small.AddSweep(submit, "s2", 0).ok());
  DeviceInfo d = Device("small");
  d.max_threads_per_block = 512;
  small.AddDevice(d, 0);
  ASSERT_EQ(small.FindSweep("s2")->state, RunState::kFailed);
  EXPECT_NE(small.FindSweep("s2")->error.find("configs[2] PAD=3,SPLIT=5,TILE=1024,UNROLL=16 breaks a constraint of op "
                                              "'synthetic' on small"),
            std::string::npos)
      << small.FindSweep("s2")->error;

  // A peer's list is checked at the door, as a sweep file's is.
  submit.configs.push_back(Config{{{"TILE", 64}, {"UNROLL", 2}, {"SPLIT", 1}}});
  auto r = s.AddSweep(submit, "s3", 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sweep 't': configs[3]: no value for param 'PAD'"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace tune
