// The search stage as pure functions: spaces walked without enumeration,
// each strategy deterministic for a seed and observations, never proposing
// twice or outside the space, and replay's figures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/known_gpus.h"
#include "base/limits.h"
#include "search/key_search.h"
#include "search/registry.h"
#include "search/replay.h"
#include "search/search_space.h"
#include "search/strategy.h"
#include "opspec/config_space.h"
#include "report/t4.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace tune {
namespace {

DeviceInfo H100() {
  const DeviceInfo* d = FindKnownGpu("h100-80gb-hbm3");
  EXPECT_NE(d, nullptr);
  return d ? *d : DeviceInfo{};
}

OpSpec Gemm() {
  auto spec = LoadOpSpec(std::string(TUNEFARM_SOURCE_DIR) + "/ops/gemm");
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  return spec.ok() ? std::move(spec).value() : OpSpec{};
}

// A synthetic space of five axes (16,807 raw points) with a constraint, and
// a figure with one best point and a smooth bowl around it.
OpSpec Synthetic() {
  OpSpec s;
  s.name = "synthetic";
  s.dtypes = {"f16"};
  for (const char* name : {"A", "B", "C", "D", "E"}) s.axes.push_back(Axis{name, {1, 2, 4, 8, 16, 32, 64}});
  s.constraints = {"A*B <= 512"};
  return s;
}
double Bowl(const Config& c) {
  const double best[] = {8, 16, 2, 32, 4};
  double d = 0;
  for (size_t i = 0; i < c.params.size(); ++i) d += std::pow(std::log2(c.params[i].second.Number()) - std::log2(best[i]), 2);
  return 10 + d;
}

TEST(SearchSpace, CountsAndListsWhatEnumerationFindsAndSamplesOnlyLegalPoints) {
  const OpSpec spec = Gemm();
  auto listed = EnumerateConfigs(spec, H100());
  ASSERT_TRUE(listed.ok());
  auto space = SearchSpace::Create(spec, H100(), "f16");
  ASSERT_TRUE(space.ok()) << space.status().message();
  bool exact = false;
  EXPECT_EQ(space->LegalCount(&exact), listed->size());
  EXPECT_TRUE(exact);
  // Estimated from samples, within 10% here.
  const double estimate = static_cast<double>(space->LegalCount(&exact, /*exact_below=*/0));
  EXPECT_FALSE(exact);
  EXPECT_NEAR(estimate, listed->size(), 0.1 * listed->size());
  auto all = space->Enumerate(1'000'000);
  ASSERT_TRUE(all.ok());
  std::set<std::string> ids;
  for (const Config& c : *listed) ids.insert(c.Id());
  ASSERT_EQ(all->size(), listed->size());
  for (const SpacePoint& p : *all) EXPECT_TRUE(ids.count(space->ToConfig(p).Id()));
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200; ++i) {
    auto p = space->Sample(rng);
    ASSERT_TRUE(p.has_value());
    EXPECT_TRUE(ids.count(space->ToConfig(*p).Id()));
    for (const SpacePoint& q : space->Neighbours(*p)) {
      EXPECT_TRUE(ids.count(space->ToConfig(q).Id()));
      int moved = 0;
      for (size_t a = 0; a < p->size(); ++a) moved += std::abs(int((*p)[a]) - int(q[a]));
      EXPECT_EQ(moved, 1);
    }
  }
  // A config maps back to its point; one with a value the axis lacks does not.
  EXPECT_EQ(space->PointOf(space->ToConfig((*all)[3])), (*all)[3]);
  Config odd = space->ToConfig((*all)[3]);
  odd.params[0].second = 48;
  EXPECT_FALSE(space->PointOf(odd).has_value());
  EXPECT_FALSE(space->Enumerate(10).ok());
}

TEST(SearchSpace, ShapeRulesSeeTheShape) {
  OpSpec spec = Synthetic();
  spec.dims = {"M"};
  spec.shape_constraints = {"A <= M"};
  const Shape small{{{"M", 4}}};
  auto space = SearchSpace::Create(spec, H100(), "f16", &small);
  ASSERT_TRUE(space.ok()) << space.status().message();
  auto all = space->Enumerate(1'000'000);
  ASSERT_TRUE(all.ok());
  for (const SpacePoint& p : *all) EXPECT_LE(space->ToConfig(p).params[0].second, 4);
  const Shape none{{{"N", 4}}};
  EXPECT_FALSE(SearchSpace::Create(spec, H100(), "f16", &none).ok());
  EXPECT_FALSE(SearchSpace::Create(spec, H100(), "f99").ok());
}

// RunSearch: runs `name` with a budget over the synthetic bowl: the configs in the
// order proposed.
std::vector<std::string> RunSearch(const SearchSpace& space, const std::string& name, uint64_t seed, uint64_t budget,
                             double* best = nullptr) {
  SearchOptions o;
  o.strategy = name;
  o.seed = seed;
  o.budget = budget;
  auto s = MakeStrategy(space, o);
  EXPECT_TRUE(s.ok()) << s.status().message();
  std::vector<std::string> order;
  double b = INFINITY;
  while (order.size() < budget) {
    auto batch = (*s)->Propose(std::min<size_t>(16, budget - order.size()));
    if (batch.empty()) break;
    // Results come back in another order than proposed: nothing may change.
    for (auto it = batch.rbegin(); it != batch.rend(); ++it) {
      const Config c = space.ToConfig(*it);
      b = std::min(b, Bowl(c));
      (*s)->Observe(*it, c.params[0].second == 64 ? std::nullopt : std::optional<double>(Bowl(c)));
    }
    for (const SpacePoint& p : batch) order.push_back(space.ToConfig(p).Canonical());
  }
  if (best) *best = b;
  return order;
}

TEST(SearchStrategy, EachIsDeterministicNeverRepeatsAndStaysLegal) {
  auto space = SearchSpace::Create(Synthetic(), H100(), "f16");
  ASSERT_TRUE(space.ok());
  for (const std::string& name : StrategyNames()) {
    SCOPED_TRACE(name);
    const auto a = RunSearch(*space, name, 11, 300), b = RunSearch(*space, name, 11, 300), c = RunSearch(*space, name, 12, 300);
    EXPECT_EQ(a, b);
    EXPECT_EQ(a.size(), 300u);
    if (name != "exhaustive" && name != "auto") {
      EXPECT_NE(a, c);
    }
    std::set<std::string> seen(a.begin(), a.end());
    EXPECT_EQ(seen.size(), a.size());
    for (const std::string& text : a) {
      Config cfg;
      ASSERT_TRUE(ParseParamValues(text, &cfg.params));
      EXPECT_LE(cfg.params[0].second.Number() * cfg.params[1].second.Number(), 512) << text;
    }
  }
}

TEST(SearchStrategy, ExhaustiveCoversTheSpaceOnceAndEnds) {
  auto space = SearchSpace::Create(Synthetic(), H100(), "f16");
  ASSERT_TRUE(space.ok());
  const auto all = RunSearch(*space, "exhaustive", 0, 100'000);
  EXPECT_EQ(all.size(), space->LegalCount());
}

TEST(SearchStrategy, LearningStrategiesFindTheBowlsBottomSoonerThanRandom) {
  auto space = SearchSpace::Create(Synthetic(), H100(), "f16");
  ASSERT_TRUE(space.ok());
  int model_wins = 0, evolution_wins = 0;
  for (uint64_t seed = 0; seed < 5; ++seed) {
    double random = 0, model = 0, evolution = 0;
    RunSearch(*space, "random", seed, 150, &random);
    RunSearch(*space, "model", seed, 150, &model);
    RunSearch(*space, "evolution", seed, 150, &evolution);
    model_wins += model < random ? 1 : 0;
    evolution_wins += evolution < random ? 1 : 0;
    EXPECT_EQ(model, 10) << "seed " << seed << ": the model missed the bottom in 150 of "
                         << space->LegalCount() << " configs";
  }
  EXPECT_GE(model_wins, 4);
  EXPECT_GE(evolution_wins, 3);
}

TEST(SearchStrategy, AutoIsExhaustiveForSmallSpacesAndPriorsComeFirst) {
  auto space = SearchSpace::Create(Synthetic(), H100(), "f16");
  ASSERT_TRUE(space.ok());
  SearchOptions o;
  o.exhaustive_up_to = 100'000;
  EXPECT_EQ((*MakeStrategy(*space, o))->Name(), "exhaustive/1");
  o.exhaustive_up_to = 10;
  EXPECT_EQ((*MakeStrategy(*space, o))->Name(), "model/1");
  o.budget = 1'000'000;  // the budget covers the space
  EXPECT_EQ((*MakeStrategy(*space, o))->Name(), "exhaustive/1");

  Config best = space->ToConfig(*space->PointOf(Config{{{"A", 8}, {"B", 16}, {"C", 2}, {"D", 32}, {"E", 4}}}));
  std::vector<PriorTrial> priors = {{Config{{{"A", 1}, {"B", 1}, {"C", 1}, {"D", 1}, {"E", 1}}}, 1.5, {1.f}},
                                    {best, 1.0, {1.f}}};
  for (const char* name : {"random", "evolution", "model", "exhaustive"}) {
    SearchOptions so;
    so.strategy = name;
    auto s = MakeStrategy(*space, so, priors, {2.f});
    ASSERT_TRUE(s.ok());
    const auto first = (*s)->Propose(2);
    ASSERT_EQ(first.size(), 2u) << name;
    EXPECT_EQ(space->ToConfig(first[0]).Canonical(), best.Canonical()) << name;
  }
  EXPECT_FALSE(CheckStrategyName("genetic", "strategy").ok());
  EXPECT_NE(CheckStrategyName("genetic", "strategy").message().find("known: exhaustive, random"), std::string::npos);
  SearchOptions bad;
  bad.strategy = "annealing";
  EXPECT_FALSE(MakeStrategy(*space, bad).ok());
}

// The registry is the one table: the names sweep files accept, what each
// entry makes and calls itself, the help texts, the auto rule and the
// defaults all come from it.
TEST(StrategyRegistry, OneTableNamesMakesAndResolvesEveryStrategy) {
  auto space = SearchSpace::Create(Synthetic(), H100(), "f16");
  ASSERT_TRUE(space.ok());
  std::vector<std::string> names;
  for (const StrategyEntry& e : Strategies()) {
    names.push_back(e.name);
    SearchOptions o;
    o.strategy = e.name;
    auto s = MakeStrategy(*space, o);
    ASSERT_TRUE(s.ok()) << e.name << ": " << s.status().message();
    EXPECT_EQ((*s)->Name(), e.Proposer());
    EXPECT_NE(StrategyHelp().find(e.name + " (" + e.help + ")"), std::string::npos) << StrategyHelp();
    EXPECT_EQ(MeasuresWhole(e.name), !e.searches);
  }
  names.push_back(kAutoStrategy);
  EXPECT_EQ(StrategyNames(), names);
  EXPECT_FALSE(MeasuresWhole(kAutoStrategy));
  EXPECT_EQ(FindStrategy(kAutoStrategy), nullptr);
  // Auto: whole at or below the bound or where the budget covers the space.
  EXPECT_TRUE(MeasuresWhole(ResolveAuto(100, 0, 100)));
  EXPECT_EQ(ResolveAuto(101, 0, 100), kAutoSearches);
  EXPECT_EQ(ResolveAuto(101, 50, 100), kAutoSearches);
  EXPECT_TRUE(MeasuresWhole(ResolveAuto(101, 101, 100)));
  EXPECT_NE(FindStrategy(kAutoSearches), nullptr);
  EXPECT_EQ(WholeProposer(), FindStrategy(ResolveAuto(1, 0, 1))->Proposer());
  // The count is asked for only where auto needs it.
  int counted = 0;
  const auto legal = [&]() -> Result<uint64_t> { return ++counted, uint64_t{5}; };
  EXPECT_EQ(*ResolveStrategy(kAutoSearches, 0, 100, legal), kAutoSearches);
  EXPECT_EQ(counted, 0);
  EXPECT_TRUE(MeasuresWhole(*ResolveStrategy(kAutoStrategy, 0, 100, legal)));
  EXPECT_EQ(counted, 1);
  EXPECT_FALSE(ResolveStrategy("genetic", 0, 100, legal).ok());
  // The defaults' one home.
  EXPECT_EQ(SearchOptions{}.strategy, kDefaultStrategy);
  EXPECT_EQ(SweepSubmit{}.strategy, kStrategyForOldClients);
  EXPECT_TRUE(MeasuresWhole(kStrategyForOldClients));
  const std::vector<std::string> searching = SearchingStrategyNames();
  EXPECT_NE(std::find(searching.begin(), searching.end(), kBaselineStrategy), searching.end());
  for (const std::string& n : searching) EXPECT_FALSE(MeasuresWhole(n)) << n;
}

// KeySearch drives a strategy for one key as MakeStrategy's strategy would
// be driven by hand, and holds the key's budget, its in-flight rule and the
// strategy contract.
TEST(KeySearch, DrivesOneKeyWithinItsBudgetAndTheContract) {
  auto made = SearchSpace::Create(Synthetic(), H100(), "f16");
  ASSERT_TRUE(made.ok());
  const auto space = std::make_shared<const SearchSpace>(std::move(made).value());
  bool exact = false;
  const uint64_t legal = space->LegalCount(&exact);
  ASSERT_TRUE(exact);
  SearchOptions o;
  o.strategy = kAutoSearches;
  o.seed = 5;
  o.budget = legal + 1000;  // capped at the exact legal count
  auto ks = KeySearch::Create(space, o);
  ASSERT_TRUE(ks.ok()) << ks.status().message();
  EXPECT_EQ((*ks)->budget(), legal);
  EXPECT_EQ((*ks)->legal(), legal);
  EXPECT_EQ((*ks)->proposer(), FindStrategy(kAutoSearches)->Proposer());
  o.budget = 40;
  ks = KeySearch::Create(space, o);
  ASSERT_TRUE(ks.ok());
  KeySearch& k = **ks;
  EXPECT_EQ(k.budget(), 40u);
  // The in-flight rule and the budget size what is asked for.
  EXPECT_EQ(k.Want(0, 0, 16, 16, 0), 16u);
  EXPECT_EQ(k.Want(16, 0, 64, 16, 16), 0u);  // one batch out before any figure
  EXPECT_EQ(k.Want(0, 0, 16, 16, 35), 5u);
  EXPECT_EQ(k.Want(0, 0, 16, 16, 40), 0u);
  // Stored rows: each legal config once; an illegal one (A*B > 512) is left out.
  Measurement good, again, illegal;
  good.config = Config{{{"A", 8}, {"B", 16}, {"C", 2}, {"D", 32}, {"E", 4}}};
  good.samples = 10;
  good.check_passed = true;
  good.median_us = 10;
  again = good;
  illegal.config = Config{{{"A", 64}, {"B", 64}, {"C", 2}, {"D", 32}, {"E", 4}}};
  EXPECT_EQ(k.ObserveRows({good, again, illegal}), 1u);

  // Same seed, same proposals as the strategy driven by hand.
  SearchOptions by_hand = o;
  by_hand.strategy = "random";
  auto ks2 = KeySearch::Create(space, by_hand);
  auto s = MakeStrategy(*space, by_hand);
  ASSERT_TRUE(ks2.ok() && s.ok());
  for (int batch = 0; batch < 3; ++batch) {
    auto got = (*ks2)->ProposeConfigs(8);
    ASSERT_TRUE(got.ok());
    std::vector<Config> want;
    for (const SpacePoint& p : (*s)->Propose(8)) want.push_back(space->ToConfig(p));
    ASSERT_EQ(got->size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ((*got)[i].Canonical(), want[i].Canonical());
  }
  EXPECT_EQ((*ks2)->proposed(), 24u);
  EXPECT_FALSE((*ks2)->dry());
  // Run dry: every legal point once, then none.
  uint64_t total = (*ks2)->proposed();
  for (;;) {
    auto got = (*ks2)->Propose(4096);
    ASSERT_TRUE(got.ok()) << got.status().message();
    if (got->empty()) break;
    total += got->size();
  }
  EXPECT_EQ(total, legal);
  EXPECT_TRUE((*ks2)->dry());
  SearchOptions bad = o;
  bad.strategy = "annealing";
  EXPECT_FALSE(KeySearch::Create(space, bad).ok());
}

// A key whose first configs all fail the same way (a compile error every
// config shares: the op's failure) stops proposing; a key whose failures
// differ, are of a config's kind, or that ran once goes on.
TEST(KeySearch, AnOpWideFailureStopsTheKeyWithItsCause) {
  auto made = SearchSpace::Create(Synthetic(), H100(), "f16");
  ASSERT_TRUE(made.ok());
  const auto space = std::make_shared<const SearchSpace>(std::move(made).value());
  SearchOptions o;
  o.strategy = "random";
  o.seed = 3;
  o.budget = 200;
  auto probe = KeySearch::Create(space, o);
  ASSERT_TRUE(probe.ok());
  auto configs = (*probe)->ProposeConfigs(kOpWideFailureRows + 4);
  ASSERT_TRUE(configs.ok());
  ASSERT_EQ(configs->size(), kOpWideFailureRows + 4);
  auto failed = [&](size_t n, FailureClass c, const std::string& why) {
    std::vector<Measurement> rows;
    for (size_t i = 0; i < n; ++i) {
      Measurement m;
      m.config = (*configs)[i];
      m.failure = c;
      m.failure_message = why;
      rows.push_back(m);
    }
    return rows;
  };
  const std::string why = "version: exit code 3: torch is missing\nTraceback ...";
  auto search = [&] {
    auto ks = KeySearch::Create(space, o);
    EXPECT_TRUE(ks.ok());
    return std::move(ks).value();
  };
  // One short of the rule: it goes on.
  auto k = search();
  k->ObserveRows(failed(kOpWideFailureRows - 1, FailureClass::kCompileError, why));
  EXPECT_EQ(k->op_wide_failure(), "");
  EXPECT_FALSE(k->ProposeConfigs(8)->empty());
  // At the rule: it stops, naming the cause by its first line.
  k = search();
  k->ObserveRows(failed(kOpWideFailureRows, FailureClass::kCompileError, why));
  EXPECT_EQ(k->op_wide_failure(), "compile_error: version: exit code 3: torch is missing");
  auto none = k->ProposeConfigs(8);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  // A config's kind of failure (out of resources) is not the op's.
  k = search();
  k->ObserveRows(failed(kOpWideFailureRows + 4, FailureClass::kResources, "too much shared memory"));
  EXPECT_EQ(k->op_wide_failure(), "");
  // Two causes: not one failure of the op.
  auto rows = failed(kOpWideFailureRows + 4, FailureClass::kCompileError, why);
  rows.back().failure_message = "error: BLOCK_M must divide M";
  k = search();
  k->ObserveRows(rows);
  EXPECT_EQ(k->op_wide_failure(), "");
  // One config that ran: the op works.
  rows = failed(kOpWideFailureRows + 4, FailureClass::kCrash, "segfault");
  rows[3].failure = FailureClass::kNone;
  rows[3].failure_message.clear();
  rows[3].samples = 10;
  rows[3].check_passed = true;
  rows[3].median_us = 12;
  k = search();
  k->ObserveRows(rows);
  EXPECT_EQ(k->op_wide_failure(), "");
}

// A model that cannot train (here: priors whose features are not finite,
// which XGBoost refuses) makes its batch random, with a warning, and the
// search goes on.
TEST(SearchStrategy, AModelThatFailsToTrainFallsBackToRandomWithAWarning) {
  auto space = SearchSpace::Create(Synthetic(), H100(), "f16");
  ASSERT_TRUE(space.ok());
  std::vector<PriorTrial> priors;
  std::mt19937_64 rng(1);
  for (int i = 0; i < 20; ++i) priors.push_back({space->ToConfig(*space->Sample(rng)), 1.0 + i, {INFINITY}});
  SearchOptions o;
  o.strategy = "model";
  o.budget = 200;
  auto s = MakeStrategy(*space, o, priors, {1.f});
  ASSERT_TRUE(s.ok());
  std::vector<std::string> warnings;
  size_t proposed = 0;
  for (int round = 0; round < 6; ++round) {
    const auto batch = (*s)->Propose(16);
    proposed += batch.size();
    for (const SpacePoint& p : batch) (*s)->Observe(p, Bowl(space->ToConfig(p)));
    for (std::string& w : (*s)->TakeWarnings()) warnings.push_back(std::move(w));
  }
  EXPECT_EQ(proposed, 96u);
  ASSERT_FALSE(warnings.empty()) << "the model trained on infinite features";
  EXPECT_NE(warnings[0].find("this batch is random"), std::string::npos) << warnings[0];
}

TEST(Replay, CountsEvaluationsToComeNearTheBest) {
  GroundTruth t;
  t.key = "synthetic";
  auto space = SearchSpace::Create(Synthetic(), H100(), "f16");
  ASSERT_TRUE(space.ok());
  auto all = space->Enumerate(100'000);
  ASSERT_TRUE(all.ok());
  for (const SpacePoint& p : all.value()) {
    const Config c = space->ToConfig(p);
    t.configs.push_back(c);
    t.us.push_back(c.params[0].second == 64 ? std::nullopt : std::optional<double>(Bowl(c)));
  }
  ReplayOptions o;
  o.seeds = 5;
  o.search.strategy = "exhaustive";
  auto ex = Replay(t, o);
  ASSERT_TRUE(ex.ok()) << ex.status().message();
  EXPECT_EQ(ex->legal, t.configs.size());
  EXPECT_DOUBLE_EQ(ex->best_us, 10);
  // Exhaustive reaches the best at its place in the space's order, every seed.
  size_t at = 0;
  while (Bowl(t.configs[at]) != 10) ++at;
  EXPECT_EQ(ex->figures[0].median, at + 1);
  EXPECT_EQ(ex->figures[0].reached, 5u);
  o.search.strategy = "model";
  o.search.budget = 8;  // too few to find it
  auto tight = Replay(t, o);
  ASSERT_TRUE(tight.ok());
  EXPECT_FALSE(tight->figures[0].median_reached);
  t.us.assign(t.us.size(), std::nullopt);
  EXPECT_FALSE(Replay(t, o).ok());
}


// The synthetic bowl as ground truth (A=64 fails).
GroundTruth BowlTruth(const SearchSpace& space) {
  GroundTruth t;
  t.key = "synthetic";
  auto all = space.Enumerate(100'000);
  EXPECT_TRUE(all.ok());
  for (const SpacePoint& p : all.value()) {
    const Config c = space.ToConfig(p);
    t.configs.push_back(c);
    t.us.push_back(c.params[0].second == 64 ? std::nullopt : std::optional<double>(Bowl(c)));
  }
  return t;
}

std::vector<std::tuple<uint32_t, uint64_t, uint64_t, bool, bool>> Figures(const ReplayResult& r) {
  std::vector<std::tuple<uint32_t, uint64_t, uint64_t, bool, bool>> out;
  for (const ReplayFigure& f : r.figures) out.emplace_back(f.reached, f.median, f.p90, f.median_reached, f.p90_reached);
  return out;
}

// In flight as deep as a batch is lock-step, to the figure; deeper, the
// seeded finishing order gives the same figures run after run, and other
// figures than lock-step's (results come back later and out of order).
TEST(Replay, InFlightOfOneBatchIsLockStepAndDeeperIsDeterministic) {
  auto space = SearchSpace::Create(Synthetic(), H100(), "f16");
  ASSERT_TRUE(space.ok());
  const GroundTruth t = BowlTruth(*space);
  for (const char* name : {"model", "evolution"}) {
    SCOPED_TRACE(name);
    ReplayOptions o;
    o.seeds = 6;
    o.search.strategy = name;
    o.search.budget = 400;
    auto lock = Replay(t, o);
    ASSERT_TRUE(lock.ok()) << lock.status().message();
    o.in_flight = o.batch;
    auto one = Replay(t, o);
    ASSERT_TRUE(one.ok()) << one.status().message();
    EXPECT_EQ(Figures(*lock), Figures(*one));
    o.in_flight = 64;
    auto a = Replay(t, o), b = Replay(t, o);
    ASSERT_TRUE(a.ok()) << a.status().message();
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(Figures(*a), Figures(*b));
    EXPECT_NE(Figures(*a), Figures(*lock));
    EXPECT_EQ(a->figures[2].reached, 6u) << "within 5% inside the budget, every seed";
  }
  ReplayOptions bad;
  bad.in_flight = 8;  // under a batch of 16
  auto refused = Replay(t, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("fewer than a batch of 16"), std::string::npos)
      << refused.status().message();
}

// A farm's pipeline asks a strategy again while earlier proposals are still
// unmeasured, and results come back out of order: no strategy proposes a
// pending (or measured) point twice, and none stalls: each keeps proposing
// whole batches until the budget is spent.
TEST(SearchStrategy, ProposalsInFlightNeverRepeatAPendingPointNorStall) {
  auto space = SearchSpace::Create(Synthetic(), H100(), "f16");
  ASSERT_TRUE(space.ok());
  constexpr size_t kBatch = 16, kDepth = 64, kBudget = 640;
  for (const std::string& name : StrategyNames()) {
    SCOPED_TRACE(name);
    SearchOptions o;
    o.strategy = name;
    o.seed = 3;
    o.budget = kBudget;
    auto s = MakeStrategy(*space, o);
    ASSERT_TRUE(s.ok()) << s.status().message();
    std::set<SpacePoint> proposed;
    std::vector<std::vector<SpacePoint>> units;
    size_t in_flight = 0, total = 0, turn = 0;
    while (total < kBudget) {
      while (total < kBudget && ProposalNow(in_flight, total - in_flight, kDepth, kBatch) > 0) {
        const auto batch = (*s)->Propose(kBatch);
        ASSERT_EQ(batch.size(), kBatch) << "stalled after " << total << " proposals, " << in_flight << " in flight";
        for (const SpacePoint& p : batch) {
          EXPECT_TRUE(proposed.insert(p).second) << space->ToConfig(p).Canonical() << " proposed twice";
          EXPECT_TRUE(space->Legal(p));
        }
        total += batch.size();
        in_flight += batch.size();
        units.push_back(batch);
      }
      // The units finish out of order: every third turn the newest first,
      // else the oldest; each unit's results last to first.
      const size_t next = ++turn % 3 == 0 ? units.size() - 1 : 0;
      const std::vector<SpacePoint> unit = units[next];
      units.erase(units.begin() + static_cast<std::ptrdiff_t>(next));
      in_flight -= unit.size();
      for (auto it = unit.rbegin(); it != unit.rend(); ++it) {
        const Config c = space->ToConfig(*it);
        (*s)->Observe(*it, c.params[0].second == 64 ? std::nullopt : std::optional<double>(Bowl(c)));
      }
    }
    EXPECT_EQ(proposed.size(), kBudget);
    // Replay holds every strategy to the same contract, in its finishing order.
    ReplayOptions ro;
    ro.seeds = 3;
    ro.search.strategy = name;
    ro.search.budget = 300;
    ro.in_flight = 128;
    auto r = Replay(BowlTruth(*space), ro);
    EXPECT_TRUE(r.ok()) << r.status().message();
  }
}

// With configs in flight, the model's initial samples are counted as they
// are proposed: once a batch's figures are in and enough configs are
// pending, the next batch searches the best's neighbourhood rather than
// sampling at random while the samples already proposed are measured.
TEST(SearchStrategy, TheModelSearchesOnceItHasFiguresWhileItsSamplesAreInFlight) {
  auto space = SearchSpace::Create(Synthetic(), H100(), "f16");
  ASSERT_TRUE(space.ok());
  SearchOptions o;
  o.strategy = "model";
  o.seed = 5;
  auto s = MakeStrategy(*space, o);
  ASSERT_TRUE(s.ok());
  const auto first = (*s)->Propose(16);
  ASSERT_EQ(first.size(), 16u);
  const SpacePoint* best = nullptr;
  double best_us = INFINITY;
  for (const SpacePoint& p : first) {
    const Config c = space->ToConfig(p);
    const std::optional<double> us = c.params[0].second == 64 ? std::nullopt : std::optional<double>(Bowl(c));
    (*s)->Observe(p, us);
    if (us && *us < best_us) best_us = *us, best = &p;
  }
  ASSERT_NE(best, nullptr);
  // 16 figures in, 16 more samples in flight: the initial 24 are proposed.
  ASSERT_EQ((*s)->Propose(16).size(), 16u);
  const auto guided = (*s)->Propose(16);
  ASSERT_EQ(guided.size(), 16u);
  const auto steps = space->Neighbours(*best);
  const std::set<SpacePoint> near(steps.begin(), steps.end());
  size_t by_best = 0;
  for (const SpacePoint& p : guided) by_best += near.count(p);
  EXPECT_GE(by_best, 6u) << "of the " << near.size() << " one-axis steps of the best, in a batch of 16";
}

// The offline commands (`search replay`, `search predict`, `sweep
// from-misses`) on hostile files, as processes: each refusal is one line
// naming the file, the line or the bound.

constexpr char kCsvHeader[] = "gpu_model,op,dtype,shape,config,status,median_us\n";

// Runs the tunefarm command `args` to its end; its exit code, and its
// stdout and stderr in `*log`.
int RunTunefarm(const testing::TempDir& dir, std::vector<std::string> args, std::string* log) {
  static int runs = 0;
  const std::string path = dir.Sub("run" + std::to_string(++runs) + ".log");
  args.insert(args.begin(), TUNEFARM_BINARY);
  testing::Child c(args, path);
  const int rc = c.Wait(3600);
  *log = testing::ReadFile(path);
  return rc;
}

// Rows of one (GPU model, op, dtype) per `models`, over `shapes` shapes and
// `configs` configs each (every config on every shape, figures varying with
// both), for `search predict`.
std::string PredictRows(const std::vector<std::string>& models, size_t shapes, size_t configs) {
  std::string out = kCsvHeader;
  for (const std::string& model : models)
    for (size_t s = 0; s < shapes; ++s)
      for (size_t c = 0; c < configs; ++c) {
        const size_t m = 64 * (1 + s % 16), n = 64 * (1 + s / 16);
        const double us = 10.0 + static_cast<double>((s * 7 + c * 13) % 23) + 0.1 * static_cast<double>(c);
        out += model + ",gemm,f16,\"M=" + std::to_string(m) + ",N=" + std::to_string(n) + ",K=1024\",\"BM=" +
               std::to_string(16 << (c % 4)) + ",BN=" + std::to_string(16 << (c / 4)) + "\",ok," +
               std::to_string(us) + "\n";
      }
  return out;
}

TEST(SearchInputs, AGzipBombIsRefusedAtTheDecompressedBound) {
  testing::TempDir dir;
  const std::string bomb = dir.Sub("bomb.csv.gz");
  // Rows of another GPU model (filtered out) past the bound: a MiB or so
  // compressed.
  FILE* gz = ::popen(("gzip -1 > '" + bomb + "'").c_str(), "w");
  ASSERT_NE(gz, nullptr);
  std::fputs(kCsvHeader, gz);
  const std::string row = "a100,gemm,f16,M=64,\"BM=" + std::string(60'000, '1') + "\",ok,1.0\n";
  std::string chunk;
  while (chunk.size() < (size_t(1) << 20)) chunk += row;
  for (uint64_t written = 0; written <= kMaxReplayInputBytes; written += chunk.size())
    ASSERT_EQ(std::fwrite(chunk.data(), 1, chunk.size(), gz), chunk.size());
  ASSERT_EQ(::pclose(gz), 0);
  std::string log;
  EXPECT_EQ(RunTunefarm(dir, {"search", "replay", "--results", bomb, "--gpu", "h100"}, &log), 1) << log;
  EXPECT_NE(log.find(bomb + ": over " + std::to_string(kMaxReplayInputBytes) +
                     " bytes decompressed (kMaxReplayInputBytes)"),
            std::string::npos)
      << log;
}

TEST(SearchInputs, AConfigOfMoreParamsThanAnOpHasIsRefusedByItsLine) {
  testing::TempDir dir;
  std::string config;
  for (int p = 0; p < 6000; ++p) config += (p ? ",P" : "P") + std::to_string(p) + "=1";
  dir.Write("wide.csv", std::string(kCsvHeader) + "h100,gemm,f16,\"M=64\",\"BM=16\",ok,1.5\n" +
                            "h100,gemm,f16,\"M=64\",\"" + config + "\",ok,1.0\n");
  std::string log;
  EXPECT_EQ(RunTunefarm(dir, {"search", "replay", "--results", dir.Sub("wide.csv"), "--seeds", "1"}, &log), 1) << log;
  EXPECT_NE(log.find("wide.csv:3: config: 6000 params, over the bound of " + std::to_string(kMaxOpParams)),
            std::string::npos)
      << log;
}

TEST(SearchInputs, AShapeThatIsNotNamedPositiveIntegersIsRefusedByItsLine) {
  testing::TempDir dir;
  for (const char* shape : {"M=abc,,=", "M=64,,N=2", "M=0", "M=64,M=64", "1M=64", "M.x=64", ""}) {
    dir.Write("bad.csv", std::string(kCsvHeader) + "h100,gemm,f16,\"M=64\",\"BM=16\",ok,1.5\n" +
                             "h100,gemm,f16,\"" + shape + "\",\"BM=16\",ok,1.0\n");
    std::string log;
    EXPECT_EQ(RunTunefarm(dir, {"search", "replay", "--results", dir.Sub("bad.csv"), "--seeds", "1"}, &log), 1)
        << shape << ": " << log;
    EXPECT_NE(log.find("bad.csv:3: shape: "), std::string::npos) << shape << ": " << log;
  }
}

// `search replay --in-flight`: the model search of a committed ground truth
// (the shipped gemm, 296 configs of an H100 shape) comes within 2% of the
// exhaustive best inside a budget of a third of the space, every seed, with 64 configs
// in flight; the table's header says the depth; a depth under a batch, or
// past the bound, or not a number, is refused in one line naming the flag.
TEST(SearchInputs, ReplayInFlightReachesTheBestAndRefusesABadDepth) {
  testing::TempDir dir;
  const std::string truth = std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/search/gemm_shapes.h100.results.csv.gz";
  std::string log;
  ASSERT_EQ(RunTunefarm(dir, {"search", "replay", "--results", truth, "--shape", "M=1024,N=1024,K=4096", "--strategy",
                              "model", "--seeds", "10", "--budget", "100", "--in-flight", "64", "--format", "json"},
                        &log),
            0)
      << log;
  // Where it is goes to stderr (never silent for minutes), the document to stdout.
  EXPECT_NE(log.find("replay: key 1 of 1 ("), std::string::npos) << log;
  const auto json = nlohmann::json::parse(log.substr(log.find('[')), nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << log;
  bool model = false;
  for (const auto& r : json) {
    if (r["strategy"] != "model/1") continue;
    model = true;
    EXPECT_EQ(r["in_flight"], 64) << r.dump();
    EXPECT_EQ(r["within"][1]["within"], 0.02) << r.dump();
    EXPECT_EQ(r["within"][1]["reached"], 10) << r.dump();
  }
  EXPECT_TRUE(model) << log;
  ASSERT_EQ(RunTunefarm(dir, {"search", "replay", "--results", truth, "--shape", "M=1024,N=1024,K=1024", "--strategy",
                              "random", "--seeds", "1", "--in-flight", "48"},
                        &log),
            0)
      << log;
  EXPECT_NE(log.find("batch 16, 48 in flight (3 units measured at a time"), std::string::npos) << log;
  for (const char* depth : {"8", "5000", "many", "-16"}) {
    EXPECT_EQ(RunTunefarm(dir, {"search", "replay", "--results", truth, "--seeds", "1", "--in-flight", depth}, &log),
              2)
        << depth << ": " << log;
    EXPECT_NE(log.find("--in-flight"), std::string::npos) << depth << ": " << log;
  }
  EXPECT_EQ(RunTunefarm(dir, {"search", "replay", "--results", truth, "--seeds", "1", "--in-flight", "8"}, &log), 2);
  EXPECT_NE(log.find("--in-flight: 8 is fewer than a batch (--batch 16)"), std::string::npos) << log;
}

TEST(SearchInputs, PredictRefusesAGroupOfMoreShapesThanAFitTakes) {
  testing::TempDir dir;
  dir.Write("many.csv", PredictRows({"h100"}, kMaxFitShapes + 1, 2));
  std::string log;
  EXPECT_EQ(RunTunefarm(dir, {"search", "predict", "--results", dir.Sub("many.csv")}, &log), 1) << log;
  EXPECT_NE(log.find("h100 gemm/f16: " + std::to_string(kMaxFitShapes + 1) + " tuned shapes, over the bound of " +
                     std::to_string(kMaxFitShapes)),
            std::string::npos)
      << log;
  // Within it, it runs.
  dir.Write("bound.csv", PredictRows({"h100"}, 16, 2));
  EXPECT_EQ(RunTunefarm(dir, {"search", "predict", "--results", dir.Sub("bound.csv")}, &log), 0) << log;
  EXPECT_NE(log.find("geometric mean over 16 held-out shapes"), std::string::npos) << log;
}

// SIGTERM while predict fits (groups at the bound, many of them: minutes
// of work) ends it with a line and a failing status.
TEST(SearchInputs, PredictStopsOnSigterm) {
  testing::TempDir dir;
  std::vector<std::string> models;
  for (int m = 0; m < 16; ++m) models.push_back("gpu" + std::to_string(m));
  dir.Write("big.csv", PredictRows(models, kMaxFitShapes, 16));
  const std::string path = dir.Sub("predict.log");
  testing::Child c({TUNEFARM_BINARY, "search", "predict", "--results", dir.Sub("big.csv")}, path);
  // Started: its first held-out shape is printed.
  while (testing::ReadFile(path).find("gpu0 gemm/f16") == std::string::npos) {
    ASSERT_EQ(c.Wait(0.05), -1) << "ended before it was signalled: " << testing::ReadFile(path);
  }
  c.Signal(SIGTERM);
  const int rc = c.Wait(3600);
  EXPECT_EQ(rc, 1) << testing::ReadFile(path);
  EXPECT_NE(testing::ReadFile(path).find("search predict: stopped (SIGINT or SIGTERM)"), std::string::npos)
      << testing::ReadFile(path);
}

std::string Miss(const std::string& shape, uint64_t count, const std::string& extra = "") {
  return R"({"op": "gemm", "dtype": "f16", "gpu_model": "h100", "level": "predicted", "count": )" +
         std::to_string(count) + R"(, "shape": )" + shape + extra + "}\n";
}

TEST(FromMisses, ADimNameThatIsNoIdentifierIsRefusedByItsLine) {
  testing::TempDir dir;
  dir.Write("m.jsonl", Miss(R"({"M": 64})", 1) + Miss(R"({"M.x": 64})", 1));
  std::string log;
  EXPECT_EQ(RunTunefarm(dir, {"sweep", "from-misses", dir.Sub("m.jsonl"), "--out", dir.Sub("next.toml")}, &log), 1)
      << log;
  EXPECT_NE(log.find("m.jsonl:2: field 'shape': dim name 'M.x' is not an identifier"), std::string::npos) << log;
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("next.toml")));
}

TEST(FromMisses, CountsSaturateInsteadOfWrapping) {
  testing::TempDir dir;
  const uint64_t most = uint64_t(1) << 53;  // a line's largest count
  std::string text = Miss(R"({"M": 64})", 3 * (uint64_t(1) << 32));
  for (int i = 0; i < 2048; ++i) text += Miss(R"({"M": 128})", most);  // 2^64 in all
  dir.Write("m.jsonl", text);
  std::string log;
  EXPECT_EQ(RunTunefarm(dir, {"sweep", "from-misses", dir.Sub("m.jsonl")}, &log), 0) << log;
  EXPECT_NE(log.find("{ M = 128 },  # asked 18446744073709551615 or more times"), std::string::npos) << log;
  EXPECT_NE(log.find("{ M = 64 },  # asked 12884901888 times"), std::string::npos) << log;
  EXPECT_LT(log.find("M = 128"), log.find("M = 64")) << "most asked first: " << log;
}

TEST(FromMisses, ALineOverTheBoundIsRefusedByItsNumber) {
  testing::TempDir dir;
  const std::string pad = R"(, "pad": ")" + std::string(kMaxInputLineBytes, 'x') + "\"";
  dir.Write("m.jsonl", Miss(R"({"M": 64})", 1) + Miss(R"({"M": 128})", 1, pad));
  std::string log;
  EXPECT_EQ(RunTunefarm(dir, {"sweep", "from-misses", dir.Sub("m.jsonl")}, &log), 1) << log;
  EXPECT_NE(log.find("m.jsonl:2: a line over " + std::to_string(kMaxInputLineBytes) + " bytes"), std::string::npos)
      << log;
}

// T4 (report/t4.h): Kernel Tuner's results documents as ground truth, the
// farm's own export among them, and hostile ones refused naming the field.

// An exhaustive key of 24 configs on an H100, two of them failed.
std::vector<Measurement> T4Rows() {
  std::vector<Measurement> rows;
  for (int bm : {16, 32, 64, 128})
    for (int bn : {16, 32, 64})
      for (const char* order : {"row", "col"}) {
        Measurement m;
        m.gpu_model = "h100-80gb-hbm3";
        m.op = "gemm";
        m.dtype = "f16";
        m.shape = "M=512,N=512";
        m.backend = "sim";
        m.config.params = {{"BM", ParamValue(bm)}, {"BN", ParamValue(bn)}, {"ORDER", ParamValue::String(order)}};
        m.config_id = m.config.Id();
        m.unix_time = 1'790'000'000;
        if (bm == 128 && bn == 64) {
          m.failure = std::string(order) == "row" ? FailureClass::kResources : FailureClass::kWrongResult;
        } else {
          m.check_passed = true;
          m.samples = 30;
          m.median_us = 10 + std::abs(bm - 64) * 0.25 + std::abs(bn - 32) * 0.5 + (order[0] == 'c' ? 0.75 : 0.0);
          m.mean_us = m.median_us * 1.01, m.stdev_us = 0.1, m.min_us = m.median_us * 0.99, m.max_us = m.median_us * 1.1;
          m.ci95_us = 0.05;
        }
        rows.push_back(m);
      }
  return rows;
}

std::string CsvOf(const std::vector<Measurement>& rows) {
  std::string out = kCsvHeader;
  for (const Measurement& m : rows) {
    char us[64];
    std::snprintf(us, sizeof us, "%.17g", m.median_us);
    out += m.gpu_model + "," + m.op + "," + m.dtype + ",\"" + m.shape + "\",\"" + m.config.Canonical() + "\"," +
           m.StatusName() + "," + us + "\n";
  }
  return out;
}

TEST(T4, TheFarmsExportReadsBackRowForRow) {
  const std::vector<Measurement> rows = T4Rows();
  std::vector<T4Row> read;
  Status st = ReadT4Results(T4ResultsJson(rows), "x.json", T4Key{}, [&](const T4Row& r) {
    read.push_back(r);
    return Status::OK();
  });
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(read.size(), rows.size());
  // The failure classes as T4's invalidity; a sim row says it is one.
  const nlohmann::json doc = nlohmann::json::parse(T4ResultsJson(rows));
  std::map<std::string, std::string> invalidity;
  for (const auto& r : doc["results"]) {
    const std::string status = r["metadata"]["status"];
    invalidity[status] = r["invalidity"];
    EXPECT_EQ(r["correctness"], status == "wrong_result" ? 0 : 1) << status;
    EXPECT_EQ(r["metadata"]["simulated"], true);
  }
  EXPECT_EQ(invalidity, (std::map<std::string, std::string>{
                            {"ok", "correct"}, {"resources", "runtime"}, {"wrong_result", "correctness"}}));
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(read[i].index, i);
    EXPECT_EQ(read[i].gpu_model, rows[i].gpu_model);
    EXPECT_EQ(read[i].op, "gemm");
    EXPECT_EQ(read[i].dtype, "f16");
    EXPECT_EQ(read[i].shape, "M=512,N=512");
    EXPECT_EQ(read[i].config.Canonical(), rows[i].config.Canonical());
    EXPECT_EQ(read[i].config.params[2].second.text(), rows[i].config.params[2].second.text());
    ASSERT_EQ(read[i].us.has_value(), rows[i].Valid()) << i;
    if (read[i].us) EXPECT_NEAR(*read[i].us, rows[i].median_us, 1e-9 * rows[i].median_us);
  }
}

TEST(T4, AnExportReplaysAsTheSameRowsAsCsvDo) {
  testing::TempDir dir;
  const std::vector<Measurement> rows = T4Rows();
  dir.Write("truth.json", T4ResultsJson(rows));
  dir.Write("truth.csv", CsvOf(rows));
  std::string from_t4, from_csv;
  const std::vector<std::string> common = {"search", "replay", "--strategy", "evolution,random", "--seeds", "3",
                                           "--format", "json"};
  auto with = [&](const std::string& flag, const std::string& file) {
    std::vector<std::string> a = common;
    a.push_back(flag);
    a.push_back(dir.Sub(file));
    return a;
  };
  ASSERT_EQ(RunTunefarm(dir, with("--truth", "truth.json"), &from_t4), 0) << from_t4;
  ASSERT_EQ(RunTunefarm(dir, with("--results", "truth.csv"), &from_csv), 0) << from_csv;
  EXPECT_EQ(from_t4, from_csv);
  EXPECT_NE(from_t4.find("\"key\": \"h100-80gb-hbm3 gemm/f16 M=512,N=512\""), std::string::npos) << from_t4;
  EXPECT_NE(from_t4.find("\"legal\": 24"), std::string::npos) << from_t4;
  EXPECT_NE(from_t4.find("\"valid\": 22"), std::string::npos) << from_t4;
}

// As Kernel Tuner writes a file: no tunefarm metadata, runtimes in ms, a
// "time" measurement, failed configs with their invalidity.
constexpr char kKernelTunerT4[] = R"({"results": [
  {"timestamp": "2026-01-01 10:00:00+00:00", "configuration": {"block_size_x": 32, "tile": 1},
   "times": {"compilation": 120.5, "benchmark": 30.0, "framework": 0.1, "search_algorithm": 0.01,
             "validation": 0.0, "runtimes": [1.5, 1.25, 1.75]},
   "invalidity": "correct", "correctness": 1,
   "measurements": [{"name": "time", "value": 1.5, "unit": "ms"}], "objectives": ["time"]},
  {"timestamp": "2026-01-01 10:00:01+00:00", "configuration": {"block_size_x": 64, "tile": 1},
   "times": {"runtimes": [0.5, 0.75, 0.25]}, "invalidity": "correct", "correctness": 1,
   "objectives": ["time"]},
  {"timestamp": "2026-01-01 10:00:02+00:00", "configuration": {"block_size_x": 128, "tile": 1},
   "times": {"compilation": 99.0, "runtimes": []}, "invalidity": "compile", "correctness": 1,
   "measurements": [], "objectives": ["time"]}],
 "schema_version": "1.0.0"})";

TEST(T4, AKernelTunerFileReplaysAsTheKeyTheFlagsName) {
  testing::TempDir dir;
  dir.Write("kt.json", kKernelTunerT4);
  std::vector<T4Row> read;
  ASSERT_TRUE(ReadT4Results(kKernelTunerT4, "kt.json", T4Key{}, [&](const T4Row& r) {
                read.push_back(r);
                return Status::OK();
              }).ok());
  ASSERT_EQ(read.size(), 3u);
  EXPECT_DOUBLE_EQ(*read[0].us, 1500.0);  // the "time" measurement, ms
  EXPECT_DOUBLE_EQ(*read[1].us, 500.0);   // else the runtimes' median
  EXPECT_FALSE(read[2].us.has_value());
  EXPECT_EQ(read[0].op, "t4");
  EXPECT_EQ(read[0].shape, "problem=1");
  std::string log;
  EXPECT_EQ(RunTunefarm(dir, {"search", "replay", "--results", dir.Sub("kt.json"), "--gpu", "a100", "--op", "conv",
                              "--shape", "N=4096", "--seeds", "1", "--format", "json"},
                        &log),
            0)
      << log;
  EXPECT_NE(log.find("\"key\": \"a100 conv/t4 N=4096\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"best_us\": 500"), std::string::npos) << log;
}

TEST(T4, AHostileFileIsRefusedByOneLineNamingTheField) {
  testing::TempDir dir;
  auto edit = [](const std::string& from, const std::string& to) {
    std::string s = kKernelTunerT4;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  const std::pair<std::string, std::string> cases[] = {
      {edit("[0.5, 0.75, 0.25]", "[0.5, NaN, 0.25]"), "results[1].times.runtimes[1]: NaN, not a finite number"},
      {edit("\"value\": 1.5", "\"value\": Infinity"), "results[0].measurements[0].value: Infinity, not a finite number"},
      {edit("\"compilation\": 99.0", "\"compilation\": -Infinity"), "results[2].times.compilation: -Infinity"},
      {edit("\"times\": {\"runtimes\": [0.5, 0.75, 0.25]}, ", ""), "results[1].times: missing (required by T4)"},
      {edit("\"configuration\": {\"block_size_x\": 64, \"tile\": 1},", ""), "results[1].configuration: missing"},
      {edit("\"tile\": 1}", "\"tile\": 1.5}"), "results[0].configuration.tile must be an integer"},
      {edit("[0.5, 0.75, 0.25]", "[0.5, -0.75, 0.25]"), "results[1].times.runtimes[1]: not a positive number"},
      {edit("\"invalidity\": \"compile\"", "\"invalidity\": \"broken\""), "results[2].invalidity: not one of"},
      {edit("\"invalidity\": \"correct\", \"correctness\": 1,\n   \"objectives\"", "\"invalidity\": \"correct\",\n   \"objectives\""),
       "results[1].correctness: missing"},
      {edit("\"1.0.0\"", "\"2.0.0\""), "schema_version: '2.0.0': this reader takes T4 version 1.x.y"},
      {edit("\"schema_version\": \"1.0.0\"", "\"version\": 1"), "schema_version: missing"},
      {edit("\"runtimes\": [0.5, 0.75, 0.25]", "\"runtimes\": []"), "results[1].times.runtimes: empty"},
      {std::string("{\"schema_version\": \"1.0.0\", \"results\": [") + std::string(100, '[') , "nested over 32 deep"},
  };
  for (const auto& [text, want] : cases) {
    dir.Write("bad.json", text);
    std::string log;
    EXPECT_EQ(RunTunefarm(dir, {"search", "replay", "--results", dir.Sub("bad.json"), "--seeds", "1"}, &log), 1)
        << want << ": " << log;
    EXPECT_NE(log.find(dir.Sub("bad.json") + ": " + want), std::string::npos) << want << ": " << log;
    EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << want << ": " << log;
  }
}

}  // namespace
}  // namespace tune
