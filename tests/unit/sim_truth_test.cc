// The sim backend's ground truth (SimOptions::truth, `--sim-truth`): a
// config the table holds times at the table's median, under the simulated
// model's name or the model it stands for; any other at the cost model's;
// every row stays labelled sim.
#include <gtest/gtest.h>

#include "base/known_gpus.h"
#include "measure/backend.h"
#include "opspec/config_space.h"
#include "opspec/op_definition.h"

namespace tune {
namespace {

struct Fixture {
  OpSpec spec;
  std::vector<Config> configs;
  Shape shape{{{"N", 1 << 20}}};
};

Fixture Load() {
  Fixture f;
  auto spec = LoadOpSpec(std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops/tiny");
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  if (!spec.ok()) return f;
  f.spec = *spec;
  auto configs = EnumerateConfigs(f.spec, *FindKnownGpu(FindSimGpu("h100").known));
  EXPECT_TRUE(configs.ok());
  if (configs.ok()) f.configs = *configs;
  return f;
}

Measurement MeasureOn(Backend& b, const Fixture& f, const Config& c) {
  CompiledKernel k = b.Compile(f.spec, "f32", c);
  return b.Measure(f.spec, "f32", k, f.shape, TimingPolicy{}, 0);
}

TEST(SimTruth, AConfigInTheTableTimesAtItsMedianOthersAtTheCostModel) {
  Fixture f = Load();
  ASSERT_GE(f.configs.size(), 3u);
  auto truth = std::make_shared<SimTruth>();
  // Under the model the sim model stands for (as a GPU sweep's CSV has it)
  // and under the sim model's own name.
  truth->Add("h100-80gb-hbm3", "tiny", "f32", f.shape, f.configs[0], 123.25);
  truth->Add("sim-h100", "tiny", "f32", f.shape, f.configs[1], 77.5);
  // Another dtype, shape and model: not this key.
  truth->Add("h100-80gb-hbm3", "tiny", "f16", f.shape, f.configs[2], 999);
  truth->Add("h100-80gb-hbm3", "tiny", "f32", Shape{{{"N", 1024}}}, f.configs[2], 999);
  truth->Add("a100-sxm4-80gb", "tiny", "f32", f.shape, f.configs[2], 999);
  SimOptions with;
  with.truth = truth;
  auto sim = MakeSimBackend("h100", 0, with);
  auto model = MakeSimBackend("h100", 0, SimFaults{});

  const Measurement m0 = MeasureOn(*sim, f, f.configs[0]);
  ASSERT_TRUE(m0.Valid()) << m0.failure_message;
  EXPECT_DOUBLE_EQ(m0.median_us, 123.25);
  EXPECT_GT(m0.max_us, m0.min_us) << "the samples keep their spread";
  EXPECT_EQ(m0.backend, "sim");
  EXPECT_EQ(m0.nvrtc_version, "sim");
  EXPECT_NE(sim->device().name.find("Simulated"), std::string::npos) << sim->device().name;
  EXPECT_EQ(sim->device().backend, "sim");

  const Measurement m1 = MeasureOn(*sim, f, f.configs[1]);
  ASSERT_TRUE(m1.Valid());
  EXPECT_DOUBLE_EQ(m1.median_us, 77.5);

  // Not in the table for this key: the cost model's figure, as without one.
  const Measurement m2 = MeasureOn(*sim, f, f.configs[2]);
  const Measurement model2 = MeasureOn(*model, f, f.configs[2]);
  ASSERT_TRUE(m2.Valid());
  EXPECT_DOUBLE_EQ(m2.median_us, model2.median_us);
  EXPECT_NE(m2.median_us, 999);
  EXPECT_EQ(m2.backend, "sim");
  // Rerun: the same figure.
  EXPECT_DOUBLE_EQ(MeasureOn(*sim, f, f.configs[0]).median_us, 123.25);
}

TEST(SimTruth, ASlowNodeScalesTheTablesMedian) {
  Fixture f = Load();
  ASSERT_FALSE(f.configs.empty());
  auto truth = std::make_shared<SimTruth>();
  truth->Add("sim-h100", "tiny", "f32", f.shape, f.configs[0], 40);
  SimOptions slow;
  slow.truth = truth;
  slow.faults.slow_factor = 1.5;
  auto sim = MakeSimBackend("sim-h100", 0, slow);
  const Measurement m = MeasureOn(*sim, f, f.configs[0]);
  ASSERT_TRUE(m.Valid());
  EXPECT_DOUBLE_EQ(m.median_us, 60);
  EXPECT_EQ(truth->Find("sim-h100", "tiny", "f32", f.shape, f.configs[1]), 0);
}

}  // namespace
}  // namespace tune
