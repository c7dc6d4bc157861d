// TimingPolicy's stopping rules, over the sim backend: contenders are timed
// to the tight CI target, configs behind the best only to the ranking one,
// configs far behind stop at the minimum. (On a GPU: cuda_backend_test.)
#include <gtest/gtest.h>

#include "measure/backend.h"
#include "opspec/config_space.h"
#include "opspec/op_definition.h"

namespace tune {
namespace {

TEST(TimingPolicy, ContendersGetTheTightTargetOthersTheRankingOne) {
  TimingPolicy p;
  p.target_rel_ci = 0.001;
  p.rank_rel_ci = 0.05;
  p.refine_within = 0.08;
  EXPECT_TRUE(p.Contender(100, 0));      // nothing timed yet
  EXPECT_TRUE(p.Contender(107, 100));
  EXPECT_FALSE(p.Contender(109, 100));
  EXPECT_EQ(p.TargetRelCi(107, 100), 0.001);
  EXPECT_EQ(p.TargetRelCi(109, 100), 0.05);
  p.rank_rel_ci = 0;                     // never looser than the target
  EXPECT_EQ(p.TargetRelCi(109, 100), 0.001);
}

TEST(TimingPolicy, AConfigBehindTheBestStopsAtTheRankingTarget) {
  auto spec = LoadOpSpec(std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops/synthetic");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  auto sim = MakeSimBackend("h100-sxm", 0, SimFaults{});
  auto configs = EnumerateConfigs(*spec, sim->device());
  ASSERT_TRUE(configs.ok());
  CompiledKernel k = sim->Compile(*spec, "f32", configs->front());
  const Shape shape{{{"N", 1 << 20}}};
  TimingPolicy p;
  p.target_rel_ci = 1e-9;    // unreachable: a contender runs to max_samples
  p.rank_rel_ci = 0.5;       // met by the minimum samples
  p.early_stop_factor = 0;   // no early stop: only the CI targets differ
  Measurement contender = sim->Measure(*spec, "f32", k, shape, p, 0);
  ASSERT_TRUE(contender.Valid());
  EXPECT_EQ(contender.samples, uint32_t(p.max_samples));
  Measurement behind = sim->Measure(*spec, "f32", k, shape, p, 0.8 * contender.median_us);
  ASSERT_TRUE(behind.Valid());
  EXPECT_EQ(behind.samples, uint32_t(p.min_samples));
}

}  // namespace
}  // namespace tune
