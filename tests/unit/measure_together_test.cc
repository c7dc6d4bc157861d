// MeasureTogether's rounds over the sim backend: how many windows each
// config gets, the order of the results, and a config that fails keeping
// its failure. (On a GPU: tests/gpu/cuda_backend_test.cc.)
#include <gtest/gtest.h>

#include "tune/backend.h"
#include "tune/config_space.h"
#include "tune/op_spec.h"

namespace tune {
namespace {

class MeasureTogetherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto spec = LoadOpSpec(std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops/synthetic");
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    spec_ = *spec;
  }
  std::vector<CompiledKernel> Compile(Backend& b, size_t n) {
    auto configs = EnumerateConfigs(spec_, b.device());
    EXPECT_TRUE(configs.ok());
    std::vector<CompiledKernel> out;
    for (size_t i = 0; i < n && configs.ok() && i < configs->size(); ++i)
      out.push_back(b.Compile(spec_, "f32", (*configs)[i]));
    return out;
  }
  OpSpec spec_;
  const Shape shape_{{{"N", 1 << 20}}};
};

TEST_F(MeasureTogetherTest, EachConfigGetsOneWindowPerRoundInOrder) {
  auto sim = MakeSimBackend("h100-sxm", 0, SimFaults{});
  std::vector<CompiledKernel> kernels = Compile(*sim, 3);
  ASSERT_EQ(kernels.size(), 3u);
  TimingPolicy p;
  // A short confirm still gets three rounds; a long one is cut into 50 ms
  // windows (4 s / 3 configs / 50 ms = 27 rounds). The sim takes the
  // minimum five samples per window.
  for (auto [seconds, rounds] : {std::pair{0.1, 3u}, std::pair{4.0, 27u}}) {
    std::vector<Measurement> got = MeasureTogether(*sim, spec_, "f32", kernels, shape_, p, seconds);
    ASSERT_EQ(got.size(), 3u);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(got[i].Valid()) << i;
      EXPECT_EQ(got[i].samples, rounds * 5) << seconds;
      Measurement alone = sim->Measure(spec_, "f32", kernels[i], shape_, p, 0);
      EXPECT_NEAR(got[i].median_us, alone.median_us, 0.02 * alone.median_us) << "config " << i;
    }
  }
}

TEST_F(MeasureTogetherTest, AConfigThatFailsKeepsItsFailureAndTheOthersGoOn) {
  auto faults = SimFaults::Parse("wrong=0.5");
  ASSERT_TRUE(faults.ok());
  auto sim = MakeSimBackend("h100-sxm", 0, *faults);
  std::vector<CompiledKernel> kernels = Compile(*sim, 20);
  TimingPolicy p;
  std::vector<Measurement> got = MeasureTogether(*sim, spec_, "f32", kernels, shape_, p, 0.1);
  ASSERT_EQ(got.size(), kernels.size());
  size_t failed = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    Measurement alone = sim->Measure(spec_, "f32", kernels[i], shape_, p, 0);
    EXPECT_EQ(got[i].failure, alone.failure) << "config " << i;
    if (!got[i].Valid()) {
      ++failed;
      EXPECT_EQ(got[i].failure, FailureClass::kWrongResult);
    } else {
      EXPECT_EQ(got[i].samples, 15u);
    }
  }
  EXPECT_GT(failed, 0u);
  EXPECT_LT(failed, got.size());
}

}  // namespace
}  // namespace tune
