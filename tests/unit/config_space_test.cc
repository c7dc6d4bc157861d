#include "opspec/config_space.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>

namespace tune {
namespace {

const std::string kTinyDir = std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops/tiny";

DeviceInfo H100() {
  DeviceInfo d;
  d.name = "NVIDIA H100 80GB HBM3";
  d.model = "h100-80gb-hbm3";
  d.cc_major = 9;
  d.cc_minor = 0;
  d.num_sms = 132;
  d.l2_bytes = 50 << 20;
  d.smem_per_block_optin = 232448;
  d.max_threads_per_block = 1024;
  return d;
}

OpSpec Tiny() {
  auto spec = LoadOpSpec(kTinyDir);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  return spec.ok() ? std::move(spec).value() : OpSpec{};
}

// A spec with several axes and rules over outer, inner and no axes, to check
// the pruned odometer against a plain loop.
OpSpec Synthetic(std::vector<std::string> rules) {
  std::string toml = R"toml(
[op]
name = "syn"
source = "k.cu"
kernel = "k"
dims = ["M"]
dtypes = ["f16", "f32"]
default = { A = 1, B = 1, C = 1, D = 1 }
[params]
A = [1, 2, 3, 4, 5, 6, 7, 8]
B = [1, 2, 4, 8, 16]
C = [1, 3, 5, 7, 9, 11]
D = [1, 2, 3, 4, 5, 6, 7]
[constraints]
rules = [)toml";
  for (size_t i = 0; i < rules.size(); ++i) toml += (i ? ", \"" : "\"") + rules[i] + "\"";
  toml += R"toml(]
[launch]
grid = ["cdiv(M, A*B)", "1", "1"]
block = ["32*B", "1", "1"]
[[args]]
name = "x"
dir = "inout"
dtype = "$dtype"
shape = ["M"]
[check]
reference = "k.cu:k_ref"
grid = ["M", "1", "1"]
block = ["1", "1", "1"]
)toml";
  auto spec = ParseOpSpec(OpPackage{{"op.toml", toml}, {"k.cu", ""}}, "syn");
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  return spec.ok() ? std::move(spec).value() : OpSpec{};
}

TEST(ConfigSpace, TinyCountsOnAnH100) {
  SpaceStats stats;
  auto configs = EnumerateConfigs(Tiny(), H100(), &stats);
  ASSERT_TRUE(configs.ok()) << configs.status().message();
  EXPECT_EQ(stats.raw, 15u);
  EXPECT_EQ(stats.legal, 15u);
  ASSERT_EQ(configs->size(), 15u);
  // Odometer order: last axis fastest, values in spec order.
  EXPECT_EQ((*configs)[0].Canonical(), "BLOCK=64,VEC=1");
  EXPECT_EQ((*configs)[1].Canonical(), "BLOCK=64,VEC=2");
  EXPECT_EQ((*configs)[3].Canonical(), "BLOCK=128,VEC=1");
  EXPECT_EQ((*configs)[14].Canonical(), "BLOCK=1024,VEC=4");
  EXPECT_EQ((*configs)[0].params[0].first, "BLOCK");  // axis order kept
}

TEST(ConfigSpace, DeviceLimitsPrune) {
  DeviceInfo small_threads = H100();
  small_threads.max_threads_per_block = 512;
  SpaceStats stats;
  auto a = EnumerateConfigs(Tiny(), small_threads, &stats);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(stats.raw, 15u);
  EXPECT_EQ(stats.legal, 12u);  // BLOCK=1024 goes
  for (const Config& c : *a) EXPECT_LE(ValueOf(c.params, "BLOCK"), 512);

  // Rule: BLOCK*VEC*4 <= smem_optin. 2048 bytes keep BLOCK*VEC <= 512.
  DeviceInfo small_smem = H100();
  small_smem.smem_per_block_optin = 2048;
  auto b = EnumerateConfigs(Tiny(), small_smem, &stats);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(stats.legal, 9u);
  EXPECT_EQ(b->size(), 9u);
  for (const Config& c : *b) EXPECT_LE(ValueOf(c.params, "BLOCK") * ValueOf(c.params, "VEC"), 512);
  small_smem.smem_per_block_optin = 4096;
  auto c = EnumerateConfigs(Tiny(), small_smem, &stats);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(stats.legal, 12u);  // BLOCK*VEC <= 1024: 3+3+3+2+1
}

TEST(ConfigSpace, DsizeFollowsTheDtype) {
  OpSpec spec = Synthetic({"A * B * C * dsize <= smem_optin"});
  DeviceInfo d = H100();
  d.smem_per_block_optin = 512;
  SpaceStats f16, f32, both;
  ASSERT_TRUE(EnumerateConfigs(spec, d, "f16", &f16).ok());
  ASSERT_TRUE(EnumerateConfigs(spec, d, "f32", &f32).ok());
  ASSERT_TRUE(EnumerateConfigs(spec, d, &both).ok());
  EXPECT_GT(f16.legal, f32.legal);
  EXPECT_EQ(both.legal, f32.legal);  // the op's largest dtype: legal for all of them
  EXPECT_FALSE(EnumerateConfigs(spec, d, "f8").ok());
}

TEST(ConfigSpace, PrunedOdometerMatchesAPlainLoop) {
  const std::vector<std::string> rules = {
      "D % 2 == 1 || C > 4",   // inner axes
      "A * B <= 24",           // outer axes: whole subtrees go
      "sm >= 80",              // device only
      "(A + C) % 3 != 0",      // mixed
  };
  OpSpec spec = Synthetic(rules);
  SpaceStats stats;
  auto configs = EnumerateConfigs(spec, H100(), &stats);
  ASSERT_TRUE(configs.ok()) << configs.status().message();
  std::vector<std::string> expected;
  for (const ParamValue& av : spec.axes[0].values)
    for (const ParamValue& bv : spec.axes[1].values)
      for (const ParamValue& cv : spec.axes[2].values)
        for (const ParamValue& dv : spec.axes[3].values) {
          const int64_t a = av.Number(), b = bv.Number(), c = cv.Number(), d = dv.Number();
          if (!(d % 2 == 1 || c > 4)) continue;
          if (!(a * b <= 24)) continue;
          if (!((a + c) % 3 != 0)) continue;
          expected.push_back("A=" + std::to_string(a) + ",B=" + std::to_string(b) + ",C=" + std::to_string(c) +
                             ",D=" + std::to_string(d));
        }
  EXPECT_EQ(stats.raw, 8u * 5 * 6 * 7);
  EXPECT_EQ(stats.legal, expected.size());
  std::vector<std::string> got;
  for (const Config& c : *configs) got.push_back(JoinParamValues(c.params));
  EXPECT_EQ(got, expected);

  DeviceInfo old = H100();
  old.cc_major = 7;
  auto none = EnumerateConfigs(spec, old, &stats);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(stats.legal, 0u);
  EXPECT_TRUE(none->empty());
}

TEST(ConfigSpace, DeterministicWithStableDistinctIds) {
  OpSpec spec = Synthetic({"A * B <= 32"});
  auto a = EnumerateConfigs(spec, H100());
  auto b = EnumerateConfigs(spec, H100());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), b->size());
  std::set<std::string> ids;
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].params, (*b)[i].params);
    EXPECT_EQ((*a)[i].Id(), (*b)[i].Id());
    ids.insert((*a)[i].Id());
  }
  EXPECT_EQ(ids.size(), a->size());
  // Same value as computed anywhere else (see types_test).
  auto tiny = EnumerateConfigs(Tiny(), H100());
  ASSERT_TRUE(tiny.ok());
  bool found = false;
  for (const Config& c : *tiny) {
    if (c.Canonical() != "BLOCK=256,VEC=1") continue;
    EXPECT_EQ(c.Id(), "d9beaae08059d084");
    found = true;
  }
  EXPECT_TRUE(found);
}

TEST(ConfigSpace, BadConstraintAndHugeSpaceFail) {
  OpSpec spec = Tiny();
  spec.constraints.push_back("BLOCK <= M");
  auto bad = EnumerateConfigs(spec, H100());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("[constraints] rules[2]: unknown variable 'M'"), std::string::npos)
      << bad.status().message();

  OpSpec huge = Tiny();
  huge.constraints.clear();
  std::vector<ParamValue> thousand(1000);
  for (int i = 0; i < 1000; ++i) thousand[i] = i;
  huge.axes = {{"P", thousand}, {"Q", thousand}, {"R", thousand}, {"S", thousand}};
  SpaceStats stats;
  auto too_big = EnumerateConfigs(huge, H100(), &stats);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(stats.raw, 1000000000000u);
  EXPECT_NE(too_big.status().message().find("raw points"), std::string::npos);
}

TEST(PlanLaunch, TinyNumbers) {
  OpSpec spec = Tiny();
  Config cfg{{{"BLOCK", 256}, {"VEC", 2}}};
  Shape shape{{{"N", 1000}}};
  auto plan = PlanLaunch(spec, "f16", cfg, shape, H100());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->grid[0], 2);  // cdiv(1000, 512)
  EXPECT_EQ(plan->grid[1], 1);
  EXPECT_EQ(plan->block[0], 256);
  EXPECT_EQ(plan->smem_bytes, 2048);
  EXPECT_EQ(plan->arg_elems, (std::vector<int64_t>{1000, 1000, 0, 0, 0}));
  EXPECT_EQ(plan->scalar_values, (std::vector<double>{0, 0, 1.5, 0.25, 1000}));
  EXPECT_EQ(plan->ref_grid[0], 4);  // cdiv(1000, 256)
  EXPECT_EQ(plan->ref_block[0], 256);
  EXPECT_EQ(plan->ref_block[1], 1);
  EXPECT_EQ(plan->flops, 2000);
  EXPECT_EQ(plan->bytes, 4000);  // 2*N*dsize, f16

  auto f32 = PlanLaunch(spec, "f32", cfg, shape, H100());
  ASSERT_TRUE(f32.ok());
  EXPECT_EQ(f32->bytes, 8000);

  // Params may come in any order.
  Config swapped{{{"VEC", 2}, {"BLOCK", 256}}};
  auto same = PlanLaunch(spec, "f16", swapped, shape, H100());
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->grid[0], 2);
}

TEST(PlanLaunch, BufferSizesMultiplyShapeExpressions) {
  OpSpec spec = Tiny();
  spec.args[0].shape = {"N", "VEC", "3"};
  auto plan = PlanLaunch(spec, "f32", Config{{{"BLOCK", 64}, {"VEC", 4}}}, Shape{{{"N", 10}}}, H100());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->arg_elems[0], 120);
}

TEST(PlanLaunch, ErrorsNameTheField) {
  OpSpec spec = Tiny();
  Config cfg{{{"BLOCK", 256}, {"VEC", 2}}};
  auto no_dim = PlanLaunch(spec, "f16", cfg, Shape{}, H100());
  ASSERT_FALSE(no_dim.ok());
  EXPECT_NE(no_dim.status().message().find("no value for dim 'N'"), std::string::npos);
  auto extra = PlanLaunch(spec, "f16", cfg, Shape{{{"N", 8}, {"M", 8}}}, H100());
  ASSERT_FALSE(extra.ok());
  EXPECT_NE(extra.status().message().find("dim 'M' is not in the spec"), std::string::npos);
  auto no_param = PlanLaunch(spec, "f16", Config{{{"BLOCK", 256}}}, Shape{{{"N", 8}}}, H100());
  ASSERT_FALSE(no_param.ok());
  EXPECT_NE(no_param.status().message().find("no value for param 'VEC'"), std::string::npos);
  auto zero_grid = PlanLaunch(spec, "f16", cfg, Shape{{{"N", 0}}}, H100());
  ASSERT_FALSE(zero_grid.ok());
  EXPECT_NE(zero_grid.status().message().find("/op.toml: [launch] grid[0]: 'cdiv(N, BLOCK * VEC)' gives 0"),
            std::string::npos)
      << zero_grid.status().message();
  EXPECT_FALSE(PlanLaunch(spec, "f8", cfg, Shape{{{"N", 8}}}, H100()).ok());
}

// Binding a config to the spec's params is linear in their number: a spec
// and a config of 30,000 params (what no parser lets through, but a stored
// row or a hand-built spec may hold) plan in milliseconds, where a lookup
// of each param among the others took seconds (the dashboard's comparison
// plans every winner on the coordinator).
TEST(PlanLaunch, BindingParamsIsLinearInTheirNumber) {
  OpSpec spec = Tiny();
  Config cfg{{{"BLOCK", 256}, {"VEC", 2}}};
  for (int i = 0; i < 30000; ++i) {
    spec.axes.push_back(Axis{"P" + std::to_string(i), {1}});
    cfg.params.emplace_back("P" + std::to_string(i), 1);
  }
  auto planner = LaunchPlanner::Create(spec, "f16", H100());
  ASSERT_TRUE(planner.ok()) << planner.status().message();
  auto plan = planner->Plan(cfg, Shape{{{"N", 1000}}});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->grid[0], 2);
  // A param given twice binds its first value; a missing one is named.
  Config twice{{{"BLOCK", 256}, {"VEC", 2}, {"BLOCK", 64}}};
  for (int i = 0; i < 30000; ++i) twice.params.emplace_back("P" + std::to_string(i), 1);
  EXPECT_EQ(planner->Plan(twice, Shape{{{"N", 1000}}})->block[0], 256);
  cfg.params.pop_back();
  auto missing = planner->Plan(cfg, Shape{{{"N", 1000}}});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no value for param 'P29999'"), std::string::npos);
}

TEST(PlanLaunch, PlannerReusesCompiledExpressions) {
  OpSpec spec = Tiny();
  auto planner = LaunchPlanner::Create(spec, "bf16", H100());
  ASSERT_TRUE(planner.ok()) << planner.status().message();
  auto configs = EnumerateConfigs(spec, H100());
  ASSERT_TRUE(configs.ok());
  for (int64_t n : {1, 1000, 1 << 24}) {
    Shape shape{{{"N", n}}};
    for (const Config& c : *configs) {
      auto a = planner->Plan(c, shape);
      auto b = PlanLaunch(spec, "bf16", c, shape, H100());
      ASSERT_TRUE(a.ok() && b.ok());
      const int64_t tile = ValueOf(c.params, "BLOCK") * ValueOf(c.params, "VEC");
      EXPECT_EQ(a->grid[0], (n + tile - 1) / tile);
      EXPECT_EQ(a->grid[0], b->grid[0]);
      EXPECT_EQ(a->smem_bytes, tile * 4);
      EXPECT_EQ(a->arg_elems, b->arg_elems);
    }
  }
}

TEST(PlanLaunch, RepeatedCallsSeeEveryChangeOfInput) {
  OpSpec spec = Tiny();
  Config cfg{{{"BLOCK", 256}, {"VEC", 2}}};
  Shape shape{{{"N", 1000}}};
  ASSERT_EQ(PlanLaunch(spec, "f16", cfg, shape, H100())->grid[0], 2);
  OpSpec edited = spec;
  edited.grid[0] = "cdiv(N, BLOCK)";
  EXPECT_EQ(PlanLaunch(edited, "f16", cfg, shape, H100())->grid[0], 4);
  edited.smem = "smem_optin / 2";
  DeviceInfo other = H100();
  other.smem_per_block_optin = 1000;
  EXPECT_EQ(PlanLaunch(edited, "f16", cfg, shape, H100())->smem_bytes, 232448 / 2);
  EXPECT_EQ(PlanLaunch(edited, "f16", cfg, shape, other)->smem_bytes, 500);
  edited.args[0].shape = {"2*N"};
  EXPECT_EQ(PlanLaunch(edited, "f16", cfg, shape, other)->arg_elems[0], 2000);
  EXPECT_EQ(PlanLaunch(spec, "f32", cfg, shape, H100())->bytes, 8000);
  EXPECT_EQ(PlanLaunch(spec, "f16", cfg, shape, H100())->bytes, 4000);
}

}  // namespace
}  // namespace tune
