#include "base/stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tune {
namespace {

TEST(Stats, EmptyAndSingle) {
  SampleStats e = ComputeStats({});
  EXPECT_EQ(e.n, 0u);
  EXPECT_EQ(e.median, 0);
  EXPECT_EQ(e.mean, 0);
  EXPECT_EQ(e.RelativeCi(), 0);
  SampleStats one = ComputeStats({4.5});
  EXPECT_EQ(one.n, 1u);
  EXPECT_EQ(one.median, 4.5);
  EXPECT_EQ(one.mean, 4.5);
  EXPECT_EQ(one.min, 4.5);
  EXPECT_EQ(one.max, 4.5);
  EXPECT_EQ(one.stdev, 0);
  EXPECT_EQ(one.ci95, 0);
}

TEST(Stats, KnownValuesOddCount) {
  SampleStats s = ComputeStats({5, 1, 4, 2, 3});
  EXPECT_EQ(s.n, 5u);
  EXPECT_EQ(s.median, 3);
  EXPECT_EQ(s.mean, 3);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 5);
  EXPECT_NEAR(s.stdev, std::sqrt(2.5), 1e-12);
  EXPECT_NEAR(s.ci95, 2.7764 * std::sqrt(2.5) / std::sqrt(5.0), 1e-9);
  EXPECT_NEAR(s.RelativeCi(), s.ci95 / 3, 1e-12);
}

TEST(Stats, KnownValuesEvenCount) {
  SampleStats s = ComputeStats({10, 2, 8, 4});
  EXPECT_EQ(s.median, 6);
  EXPECT_EQ(s.mean, 6);
  EXPECT_NEAR(s.stdev, std::sqrt(40.0 / 3.0), 1e-12);
  EXPECT_NEAR(s.ci95, 3.1824 * std::sqrt(40.0 / 3.0) / 2.0, 1e-9);
}

TEST(Stats, StdevSurvivesALargeMean) {
  SampleStats s = ComputeStats({1e9 + 1, 1e9 + 2, 1e9 + 3});
  EXPECT_NEAR(s.stdev, 1.0, 1e-6);
  EXPECT_EQ(s.median, 1e9 + 2);
}

TEST(Stats, StudentT) {
  EXPECT_TRUE(std::isinf(StudentT95(0)));
  EXPECT_NEAR(StudentT95(1), 12.706, 1e-3);
  EXPECT_NEAR(StudentT95(4), 2.776, 1e-3);
  EXPECT_NEAR(StudentT95(10), 2.228, 1e-3);
  EXPECT_NEAR(StudentT95(30), 2.042, 1e-3);
  EXPECT_NEAR(StudentT95(40), 2.021, 1e-3);
  EXPECT_NEAR(StudentT95(50), 2.009, 2e-3);
  EXPECT_NEAR(StudentT95(100), 1.984, 2e-3);
  EXPECT_NEAR(StudentT95(1000000), 1.960, 1e-3);
  for (size_t dof = 1; dof < 5000; ++dof) {
    ASSERT_GT(StudentT95(dof), StudentT95(dof + 1)) << dof;
    ASSERT_GT(StudentT95(dof), 1.96) << dof;
  }
}

TEST(Stats, CiShrinksWithMoreSamples) {
  std::vector<double> few = {1, 2, 3, 1, 2, 3};
  std::vector<double> many;
  for (int i = 0; i < 50; ++i) many.insert(many.end(), few.begin(), few.end());
  EXPECT_LT(ComputeStats(many).ci95, ComputeStats(few).ci95 / 5);
}

TEST(Stats, TrimmedMeanDropsTheEndsAndFollowsTheClusters) {
  EXPECT_EQ(TrimmedMean({}, 0.1), 0);
  // Fewer than ten values: nothing is trimmed at 10%.
  EXPECT_DOUBLE_EQ(TrimmedMean({1, 2, 3, 10}, 0.1), 4);
  // One stray value in ten is dropped, with one from the other end.
  EXPECT_DOUBLE_EQ(TrimmedMean({9, 5, 5, 5, 5, 5, 5, 5, 5, 1}, 0.1), 5);
  // Two clusters: the median sits in one of them, the trimmed mean between
  // them in proportion to their sizes.
  std::vector<double> two = {9.5, 9.5, 9.5, 9.5, 9.5, 9.5, 9.7, 9.7, 9.7, 9.7};
  EXPECT_DOUBLE_EQ(ComputeStats(two).median, 9.5);
  EXPECT_NEAR(TrimmedMean(two, 0.1), (5 * 9.5 + 3 * 9.7) / 8, 1e-12);
  // The trim share is clamped below a half: something always remains.
  EXPECT_DOUBLE_EQ(TrimmedMean({1, 2, 3}, 0.9), 2);
}

}  // namespace
}  // namespace tune
