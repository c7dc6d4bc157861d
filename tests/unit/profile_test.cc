// Profiles: reading ncu's raw CSV, classifying bottlenecks, checking values.
#include "base/profile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>

namespace tune {
namespace {

std::string ReadFixture(const std::string& name) {
  std::ifstream in(std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ncu/" + name);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// tests/data/ncu/row_sum_ref_raw.csv: `ncu --import R --csv --page raw` of
// ops/row_sum's reference kernel on an H100 (ROWS=4096, N=4096, f32), a grid
// of 32 blocks: far from either peak, waiting on memory.
TEST(NcuRawCsv, ReadsTheFiguresOfTheFirstLaunch) {
  auto p = ParseNcuRawCsv(ReadFixture("row_sum_ref_raw.csv"));
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_NEAR(p->compute_pct, 1.435454, 1e-6);
  EXPECT_NEAR(p->memory_pct, 22.962064, 1e-6);
  EXPECT_NEAR(p->occupancy_pct, 6.235795, 1e-6);
  EXPECT_NEAR(p->duration_us, 279.648, 1e-6);
  EXPECT_NEAR(p->dram_bytes, 248.598696e9 * 279.648e-6, 1);  // GB/s over the launch
  ASSERT_EQ(p->stalls.size(), kTopStalls);
  EXPECT_EQ(p->stalls[0].first, "long_scoreboard");
  EXPECT_NEAR(p->stalls[0].second, 33.528877, 1e-6);
  EXPECT_EQ(p->stalls[1].first, "wait");
  EXPECT_EQ(p->bottleneck, "latency");
  EXPECT_NE(p->why.find("long_scoreboard"), std::string::npos) << p->why;
  EXPECT_TRUE(CheckProfile(*p).ok()) << CheckProfile(*p).message();
}

TEST(NcuRawCsv, RefusesOutputWithoutItsMetrics) {
  EXPECT_FALSE(ParseNcuRawCsv("").ok());
  EXPECT_FALSE(ParseNcuRawCsv("\"ID\",\"Kernel Name\"\n\"\",\"\"\n\"0\",\"k\"\n").ok());
  auto no_duration = ParseNcuRawCsv(
      "\"sm__throughput.avg.pct_of_peak_sustained_elapsed\",\"gpu__compute_memory_throughput.avg.pct_of_peak_"
      "sustained_elapsed\",\"sm__warps_active.avg.pct_of_peak_sustained_active\"\n\"%\",\"%\",\"%\"\n\"1\",\"2\",\"3\"\n");
  ASSERT_FALSE(no_duration.ok());
  EXPECT_NE(no_duration.status().message().find("gpu__time_duration.sum"), std::string::npos);
}

TEST(Bottleneck, MemoryComputeOrLatencyFromThePeaks) {
  KernelProfile p;
  p.memory_pct = 91;
  p.compute_pct = 30;
  ClassifyBottleneck(&p);
  EXPECT_EQ(p.bottleneck, "memory");
  p.memory_pct = 70;
  p.compute_pct = 85;
  ClassifyBottleneck(&p);
  EXPECT_EQ(p.bottleneck, "compute");
  p.memory_pct = 75;
  p.compute_pct = 75;  // a tie near both peaks reads as memory
  ClassifyBottleneck(&p);
  EXPECT_EQ(p.bottleneck, "memory");
  p.memory_pct = 40;
  p.compute_pct = 20;
  p.stalls = {{"barrier", 12}};
  ClassifyBottleneck(&p);
  EXPECT_EQ(p.bottleneck, "latency");
  EXPECT_NE(p.why.find("barrier"), std::string::npos) << p.why;
}

TEST(Bottleneck, CheckProfileRefusesValuesOutOfRange) {
  KernelProfile good;
  good.bottleneck = "compute";
  ASSERT_TRUE(CheckProfile(good).ok());
  auto spoiled = [&](auto change) {
    KernelProfile p = good;
    change(p);
    return CheckProfile(p);
  };
  EXPECT_FALSE(spoiled([](KernelProfile& p) { p.compute_pct = std::nan(""); }).ok());
  EXPECT_FALSE(spoiled([](KernelProfile& p) { p.memory_pct = 250; }).ok());
  EXPECT_FALSE(spoiled([](KernelProfile& p) { p.dram_bytes = -1; }).ok());
  EXPECT_FALSE(spoiled([](KernelProfile& p) { p.bottleneck = "vibes"; }).ok());
  EXPECT_FALSE(spoiled([](KernelProfile& p) { p.stalls = {{"<script>", 1}}; }).ok());
  EXPECT_FALSE(spoiled([](KernelProfile& p) { p.stalls.assign(kTopStalls + 1, {"wait", 1}); }).ok());
  EXPECT_FALSE(spoiled([](KernelProfile& p) { p.report.assign(kMaxProfileReportBytes + 1, 'x'); }).ok());
}

}  // namespace
}  // namespace tune
