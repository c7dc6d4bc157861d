// The sampling loop's stopping rule (measure/sampling.h), without a GPU.
#include "measure/sampling.h"

#include <gtest/gtest.h>

namespace tune {
namespace {

// Progress after `n` samples of median = mean = `median_us` whose 95% CI is
// `rel_ci` of the mean, `timed` seconds of device time.
SamplingProgress After(int n, double median_us, double rel_ci, double timed = 0, double wall = 0) {
  SamplingProgress p;
  p.stats.n = static_cast<size_t>(n);
  p.stats.median = p.stats.mean = median_us;
  p.stats.ci95 = rel_ci * median_us;
  p.timed_seconds = timed;
  p.wall_seconds = wall;
  return p;
}

TEST(NextSampling, FirstBatchIsTheMinimumWithinTheBounds) {
  TimingPolicy policy;  // min 5, max 100
  EXPECT_EQ(NextSampling(policy, 0, 0, {}).batch, 5);
  policy.min_samples = 50;
  EXPECT_EQ(NextSampling(policy, 0, 0, {}).batch, kMaxSampleBatch);
  policy.max_samples = 3;  // the minimum never exceeds the maximum
  EXPECT_EQ(NextSampling(policy, 0, 0, {}).batch, 3);
  EXPECT_EQ(NextSampling(policy, 0, 0, {}).stop, SamplingStop::kNo);
}

TEST(NextSampling, TheNoiseTargetAndTheEarlyStopWaitForTheMinimum) {
  TimingPolicy policy;
  policy.min_samples = 10;
  // Quiet from the start, but 4 < 10 samples: 6 more.
  SamplingStep s = NextSampling(policy, 0, 0, After(4, 100, 0.001));
  EXPECT_EQ(s.stop, SamplingStop::kNo);
  EXPECT_EQ(s.batch, 6);
  EXPECT_EQ(NextSampling(policy, 0, 0, After(10, 100, 0.001)).stop, SamplingStop::kNoiseTarget);
  // Twice the best so far: clearly slower, but only from the minimum on.
  EXPECT_EQ(NextSampling(policy, 50, 0, After(4, 100, 0.2)).stop, SamplingStop::kNo);
  EXPECT_EQ(NextSampling(policy, 50, 0, After(10, 100, 0.2)).stop, SamplingStop::kEarly);
}

TEST(NextSampling, AConfigFarBehindTheBestOnlyNeedsToBeRanked) {
  TimingPolicy policy;  // 1% for contenders, 3% to rank the others
  // 2% noise: done for a config 20% behind the best (not a contender, not
  // slow enough to stop early), not for one within refine_within of it.
  EXPECT_EQ(NextSampling(policy, 100, 0, After(20, 120, 0.02)).stop, SamplingStop::kNoiseTarget);
  EXPECT_EQ(NextSampling(policy, 100, 0, After(20, 101, 0.02)).stop, SamplingStop::kNo);
}

TEST(NextSampling, CapsEndTheLoop) {
  TimingPolicy policy;
  EXPECT_EQ(NextSampling(policy, 0, 0, After(100, 100, 0.5)).stop, SamplingStop::kMaxSamples);
  EXPECT_EQ(NextSampling(policy, 0, 0, After(20, 100, 0.5, policy.max_seconds)).stop, SamplingStop::kTimeCap);
  EXPECT_EQ(NextSampling(policy, 0, 2.0, After(20, 100, 0.5, 0, 2.0)).stop, SamplingStop::kWallCap);
  EXPECT_EQ(NextSampling(policy, 0, 0, After(20, 100, 0.5, 0, 1e9)).stop, SamplingStop::kNo);  // no wall cap
}

TEST(NextSampling, TheNextBatchIsWhatTheTargetNeedsWithinTheTimeLeft) {
  TimingPolicy policy;  // target 1%
  // 2% at n = 8: the CI shrinks with sqrt(n), so 8 * 2^2 = 32 samples in
  // all, 24 more.
  SamplingStep s = NextSampling(policy, 0, 0, After(8, 10, 0.02));
  EXPECT_EQ(s.stop, SamplingStop::kNo);
  EXPECT_EQ(s.batch, 24);
  // 10% at n = 10 needs 990 more: one batch of the most at a time.
  EXPECT_EQ(NextSampling(policy, 0, 0, After(10, 10, 0.1)).batch, kMaxSampleBatch);
  // 10 ms samples with 0.05 s of the 0.1 s cap left: 5 more at most.
  EXPECT_EQ(NextSampling(policy, 0, 0, After(10, 10000, 0.1, 0.05)).batch, 5);
  // Never past max_samples.
  policy.max_samples = 12;
  EXPECT_EQ(NextSampling(policy, 0, 0, After(10, 10, 0.1)).batch, 2);
}

TEST(NextSampling, StopNamesAreStable) {
  EXPECT_STREQ(SamplingStopName(SamplingStop::kNoiseTarget), "noise_target");
  EXPECT_STREQ(SamplingStopName(SamplingStop::kTimeCap), "time_cap");
}

}  // namespace
}  // namespace tune
