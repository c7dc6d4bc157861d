// MeasureTogether's rounds over the sim backend: how many windows each
// config gets in the wall time asked for, the order of the results, and a config that fails keeping
// its failure. (On a GPU: tests/gpu/cuda_backend_test.cc.)
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "measure/backend.h"
#include "opspec/config_space.h"
#include "opspec/op_definition.h"

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

TEST_F(MeasureTogetherTest, RoundsFillTheWallTimeAndEveryConfigGetsOneWindowPerRound) {
  // Each Measure takes 10 ms of real time, as a device would.
  SimFaults slow;
  slow.seconds_per_measure = 0.01;
  auto sim = MakeSimBackend("h100-sxm", 0, slow);
  std::vector<CompiledKernel> kernels = Compile(*sim, 3);
  ASSERT_EQ(kernels.size(), 3u);
  TimingPolicy p;
  for (ConfirmTiming timing : {ConfirmTiming::kSustained, ConfirmTiming::kBurst}) {
    // A short confirm still gets three rounds (90 ms); a longer one fills
    // its time with rounds of 30 ms.
    for (double seconds : {0.01, 0.3}) {
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<Measurement> got = MeasureTogether(*sim, spec_, "f32", kernels, shape_, p, seconds, timing);
      const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const std::string what = std::string(ConfirmTimingName(timing)) + " " + std::to_string(seconds) + " s";
      ASSERT_EQ(got.size(), 3u);
      EXPECT_GE(took, seconds) << what;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_TRUE(got[i].Valid()) << what << " config " << i;
        Measurement alone = sim->Measure(spec_, "f32", kernels[i], shape_, p, 0);
        EXPECT_NEAR(got[i].median_us, alone.median_us, 0.02 * alone.median_us) << what << " config " << i;
      }
      if (timing == ConfirmTiming::kSustained) {
        // The sim's sustained window: the minimum 5 samples.
        const uint32_t rounds = got[0].samples / 5;
        EXPECT_EQ(got[0].samples % 5, 0u) << what;
        EXPECT_GE(rounds, 3u) << what;
        // Rounds take at least 30 ms, and a round starts only while time is left.
        EXPECT_LE(rounds, std::max(3u, uint32_t(std::ceil(seconds / 0.03)))) << what;
        for (const Measurement& m : got) EXPECT_EQ(m.samples, got[0].samples) << what;
      } else {
        // A burst: samples until 10 ms of them, in every round.
        for (const Measurement& m : got) {
          const double timed = m.mean_us * m.samples * 1e-6;
          EXPECT_GE(timed, 3 * 0.01) << what;
          EXPECT_LT(timed, std::max(3.0, std::ceil(seconds / 0.03)) * (0.01 + 2 * m.max_us * 1e-6)) << what;
        }
      }
    }
  }
}

// Passes every call to the sim backend and keeps the policies it was given.
class PolicyLog : public Backend {
 public:
  explicit PolicyLog(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  const DeviceInfo& device() const override { return inner_->device(); }
  std::string toolchain() const override { return inner_->toolchain(); }
  CompiledKernel Compile(const OpSpec& spec, const std::string& dtype, const Config& config) override {
    return inner_->Compile(spec, dtype, config);
  }
  Measurement Measure(const OpSpec& spec, const std::string& dtype, const CompiledKernel& kernel, const Shape& shape,
                      const TimingPolicy& policy, double best_so_far_us) override {
    policies.push_back(policy);
    return inner_->Measure(spec, dtype, kernel, shape, policy, best_so_far_us);
  }
  std::vector<TimingPolicy> policies;

 private:
  std::unique_ptr<Backend> inner_;
};

TEST_F(MeasureTogetherTest, EveryRoundStartsARunnerAndPlacesBuffersForItsFirstConfigOnly) {
  PolicyLog log(MakeSimBackend("h100-sxm", 0, SimFaults{}));
  std::vector<CompiledKernel> kernels = Compile(log, 3);
  ASSERT_EQ(kernels.size(), 3u);
  std::vector<Measurement> got =
      MeasureTogether(log, spec_, "f32", kernels, shape_, TimingPolicy{}, 0.01, ConfirmTiming::kSustained);
  ASSERT_EQ(got.size(), 3u);
  ASSERT_GE(log.policies.size(), 9u) << "three rounds of three";
  ASSERT_EQ(log.policies.size() % 3, 0u);
  for (size_t i = 0; i < log.policies.size(); ++i) {
    const bool first_of_round = i % 3 == 0;
    EXPECT_EQ(log.policies[i].new_runner, first_of_round) << "measure " << i;
    EXPECT_EQ(log.policies[i].new_buffers, first_of_round) << "measure " << i;
    EXPECT_EQ(log.policies[i].placements, 8) << "measure " << i;
  }
}

TEST_F(MeasureTogetherTest, AutoTimesARoundOfEachAndKeepsSustainedWhereLoadDoesNotSlowTheConfigs) {
  // The sim has no power limit: a burst and a sustained window give the
  // same figure, so auto keeps sustained windows and says so.
  SimFaults slow;
  slow.seconds_per_measure = 0.01;
  auto sim = MakeSimBackend("h100-sxm", 0, slow);
  std::vector<CompiledKernel> kernels = Compile(*sim, 3);
  TimingPolicy p;
  std::vector<Measurement> got = MeasureTogether(*sim, spec_, "f32", kernels, shape_, p, 0.2, ConfirmTiming::kAuto);
  ASSERT_EQ(got.size(), 3u);
  for (const Measurement& m : got) {
    ASSERT_TRUE(m.Valid());
    EXPECT_EQ(m.confirm_timing, ConfirmTiming::kSustained);
    // Sustained windows only (5 samples each in the sim), the probe's among them.
    EXPECT_EQ(m.samples % 5, 0u);
    EXPECT_GE(m.samples, 15u);
  }
  for (ConfirmTiming t : {ConfirmTiming::kSustained, ConfirmTiming::kBurst}) {
    for (const Measurement& m : MeasureTogether(*sim, spec_, "f32", kernels, shape_, p, 0.01, t))
      EXPECT_EQ(m.confirm_timing, t);
  }
}

TEST_F(MeasureTogetherTest, AConfigThatFailsKeepsItsFailureAndTheOthersGoOn) {
  auto faults = SimFaults::Parse("wrong=0.5");
  ASSERT_TRUE(faults.ok());
  auto sim = MakeSimBackend("h100-sxm", 0, *faults);
  std::vector<CompiledKernel> kernels = Compile(*sim, 20);
  TimingPolicy p;
  std::vector<Measurement> got = MeasureTogether(*sim, spec_, "f32", kernels, shape_, p, 0.01, ConfirmTiming::kSustained);
  ASSERT_EQ(got.size(), kernels.size());
  size_t failed = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    Measurement alone = sim->Measure(spec_, "f32", kernels[i], shape_, p, 0);
    EXPECT_EQ(got[i].failure, alone.failure) << "config " << i;
    if (!got[i].Valid()) {
      ++failed;
      EXPECT_EQ(got[i].failure, FailureClass::kWrongResult);
    } else {
      EXPECT_EQ(got[i].samples % 5, 0u);
      EXPECT_GE(got[i].samples, 15u) << "three or more rounds of five samples";
    }
  }
  EXPECT_GT(failed, 0u);
  EXPECT_LT(failed, got.size());
}

}  // namespace
}  // namespace tune
