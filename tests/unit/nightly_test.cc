// CompareBundles: last night's bundle against tonight's.
#include "report/nightly.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

namespace tune {
namespace {

Config Cfg(int64_t bm) {
  Config c;
  c.params = {{"BM", bm}, {"BN", 128}};
  return c;
}

BundleEntry Entry(const std::string& gpu, const std::string& shape, const Config& config,
                  double median_us, double ci95_us, const std::string& kernel_hash = "kh1") {
  BundleEntry e;
  e.op = "gemm";
  e.dtype = "f16";
  e.gpu_model = gpu;
  EXPECT_TRUE(ParseNamedValues(shape, &e.shape.dims));
  e.config = config;
  e.config_id = config.Id();
  e.kernel_hash = kernel_hash;
  e.median_us = median_us;
  e.ci95_us = ci95_us;
  e.samples = 30;
  e.backend = gpu.rfind("sim-", 0) == 0 ? "sim" : "cuda";
  return e;
}

Bundle Make(const std::string& name, int64_t created, std::vector<BundleEntry> entries) {
  Bundle b;
  b.name = name;
  b.created_unix = created;
  b.entries = std::move(entries);
  return b;
}

const NightlyEntry* Find(const NightlyReport& r, const std::string& gpu, const std::string& shape) {
  for (const auto& e : r.entries) {
    if (e.gpu_model == gpu && e.shape == shape) return &e;
  }
  return nullptr;
}

const std::string kS1 = "M=1024,N=1024,K=1024";
const std::string kS2 = "M=2048,N=2048,K=2048";
const std::string kS3 = "M=4096,N=4096,K=4096";

using V = NightlyEntry::Verdict;

TEST(NightlyTest, RegressionOnlyAboveTheMeasuredNoise) {
  // Previous: 100 us +- 3, current ci95 4: noise = hypot(3, 4) = 5 us, above
  // the 2% floor (2 us).
  const Bundle prev = Make("n1", 1000, {Entry("h100", kS1, Cfg(128), 100, 3),
                                        Entry("h100", kS2, Cfg(128), 100, 3),
                                        Entry("h100", kS3, Cfg(128), 100, 3)});
  const Bundle cur = Make("n2", 2000, {Entry("h100", kS1, Cfg(128), 104.9, 4),   // within noise
                                       Entry("h100", kS2, Cfg(128), 105.1, 4),   // regression
                                       Entry("h100", kS3, Cfg(128), 94.0, 4)});  // improvement
  auto r = CompareBundles(prev, cur);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->regressions, 1u);
  EXPECT_EQ(r->improvements, 1u);
  EXPECT_TRUE(r->HasRegressions());
  ASSERT_EQ(r->entries.size(), 3u);
  // Regressions first, then improvements, then the rest.
  EXPECT_EQ(r->entries[0].shape, kS2);
  EXPECT_EQ(r->entries[1].shape, kS3);
  EXPECT_EQ(r->entries[2].shape, kS1);

  const NightlyEntry* within = Find(*r, "h100", kS1);
  ASSERT_TRUE(within);
  EXPECT_EQ(within->verdict, V::kUnchanged);
  EXPECT_DOUBLE_EQ(within->noise_us, 5.0);
  EXPECT_NEAR(within->delta_us, 4.9, 1e-9);
  EXPECT_FALSE(within->winner_changed);
  const NightlyEntry* slower = Find(*r, "h100", kS2);
  EXPECT_EQ(slower->verdict, V::kRegression);
  EXPECT_NEAR(slower->delta_rel, 0.051, 1e-9);
  EXPECT_EQ(Find(*r, "h100", kS3)->verdict, V::kImprovement);
  EXPECT_TRUE(r->added.empty());
  EXPECT_TRUE(r->removed.empty());
}

TEST(NightlyTest, NoiseFloorAppliesWhenIntervalsAreTight) {
  // ci95 of 0.1 us each: the 2% floor (2 us) decides.
  const Bundle prev = Make("n1", 0, {Entry("h100", kS1, Cfg(128), 100, 0.1),
                                     Entry("h100", kS2, Cfg(128), 100, 0.1)});
  const Bundle cur = Make("n2", 0, {Entry("h100", kS1, Cfg(128), 101.9, 0.1),
                                    Entry("h100", kS2, Cfg(128), 102.1, 0.1)});
  auto r = CompareBundles(prev, cur);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Find(*r, "h100", kS1)->verdict, V::kUnchanged);
  EXPECT_DOUBLE_EQ(Find(*r, "h100", kS1)->noise_us, 2.0);
  EXPECT_EQ(Find(*r, "h100", kS2)->verdict, V::kRegression);

  // A looser floor absorbs it; a zero floor leaves only the intervals.
  auto loose = CompareBundles(prev, cur, 0.05);
  ASSERT_TRUE(loose.ok());
  EXPECT_EQ(loose->regressions, 0u);
  auto strict = CompareBundles(prev, cur, 0.0);
  ASSERT_TRUE(strict.ok());
  EXPECT_EQ(strict->regressions, 2u);
  EXPECT_DOUBLE_EQ(Find(*strict, "h100", kS1)->noise_us, std::hypot(0.1, 0.1));

  EXPECT_FALSE(CompareBundles(prev, cur, -0.01).ok());
  EXPECT_FALSE(CompareBundles(prev, cur, std::nan("")).ok());
}

TEST(NightlyTest, WinnerAndKernelChanges) {
  const Bundle prev = Make("n1", 0, {Entry("h100", kS1, Cfg(128), 100, 1, "khA"),
                                     Entry("h100", kS2, Cfg(128), 100, 1, "khA")});
  const Bundle cur = Make("n2", 0, {Entry("h100", kS1, Cfg(64), 100.5, 1, "khA"),
                                    Entry("h100", kS2, Cfg(128), 80, 1, "khB")});
  auto r = CompareBundles(prev, cur);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->winners_changed, 1u);
  const NightlyEntry* s1 = Find(*r, "h100", kS1);
  EXPECT_TRUE(s1->winner_changed);
  EXPECT_FALSE(s1->kernel_changed);
  EXPECT_EQ(s1->verdict, V::kUnchanged);
  EXPECT_EQ(s1->previous.config.Canonical(), Cfg(128).Canonical());
  EXPECT_EQ(s1->current.config.Canonical(), Cfg(64).Canonical());
  const NightlyEntry* s2 = Find(*r, "h100", kS2);
  EXPECT_FALSE(s2->winner_changed);
  EXPECT_TRUE(s2->kernel_changed);
  EXPECT_EQ(s2->verdict, V::kImprovement);

  const std::string table = NightlyReportTable(*r);
  EXPECT_NE(table.find("winner changed, latency within noise"), std::string::npos) << table;
  EXPECT_NE(table.find(Cfg(128).Canonical() + " -> " + Cfg(64).Canonical()), std::string::npos) << table;
  EXPECT_NE(table.find("kernel changed"), std::string::npos) << table;
  EXPECT_EQ(table.find("REGRESSIONS"), std::string::npos) << table;
}

TEST(NightlyTest, AddedAndRemovedKeys) {
  const Bundle prev = Make("n1", 0, {Entry("h100", kS1, Cfg(128), 100, 1),
                                     Entry("a100", kS1, Cfg(128), 300, 1)});
  const Bundle cur = Make("n2", 0, {Entry("h100", kS1, Cfg(128), 100, 1),
                                    Entry("h200", kS1, Cfg(128), 90, 1),
                                    Entry("h100", kS3, Cfg(128), 900, 1)});
  auto r = CompareBundles(prev, cur);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->entries.size(), 1u);
  ASSERT_EQ(r->removed.size(), 1u);
  EXPECT_EQ(r->removed[0].gpu_model, "a100");
  ASSERT_EQ(r->added.size(), 2u);
  EXPECT_EQ(r->added[0].gpu_model, "h100");
  EXPECT_EQ(r->added[0].shape.Canonical(), kS3);
  EXPECT_EQ(r->added[1].gpu_model, "h200");
  EXPECT_FALSE(r->HasRegressions());

  const std::string table = NightlyReportTable(*r);
  EXPECT_NE(table.find("2 added, 1 removed"), std::string::npos) << table;
  const size_t removed = table.find("removed (only in the previous bundle)\n  key ");
  ASSERT_NE(removed, std::string::npos) << table;
  EXPECT_NE(table.find("\n  gemm/f16 a100 " + kS1, removed), std::string::npos) << table;
}

TEST(NightlyTest, JsonAndSimulatedLabels) {
  const Bundle prev = Make("n1", 1700000000, {Entry("sim-h100", kS1, Cfg(128), 100, 1),
                                              Entry("h100", kS1, Cfg(128), 50, 1)});
  const Bundle cur = Make("n2", 1700086400, {Entry("sim-h100", kS1, Cfg(64), 120, 1),
                                             Entry("h100", kS2, Cfg(128), 60, 1)});
  auto r = CompareBundles(prev, cur);
  ASSERT_TRUE(r.ok());
  const auto j = nlohmann::json::parse(NightlyReportJson(*r));
  EXPECT_EQ(j["previous"]["name"], "n1");
  EXPECT_EQ(j["current"]["created_unix"], 1700086400);
  EXPECT_EQ(j["noise_floor_rel"], 0.02);
  EXPECT_EQ(j["summary"]["regressions"], 1);
  EXPECT_EQ(j["summary"]["added"], 1);
  EXPECT_EQ(j["summary"]["removed"], 1);
  EXPECT_EQ(j["simulated"], true);
  ASSERT_EQ(j["entries"].size(), 1u);
  const auto& e = j["entries"][0];
  EXPECT_EQ(e["gpu_model"], "sim-h100");
  EXPECT_EQ(e["label"], "SIMULATED");
  EXPECT_EQ(e["verdict"], "regression");
  EXPECT_EQ(e["winner_changed"], true);
  EXPECT_DOUBLE_EQ(e["delta_rel"].get<double>(), 0.2);
  EXPECT_EQ(e["previous"]["config"], Cfg(128).Canonical());
  EXPECT_EQ(e["current"]["median_us"], 120.0);
  EXPECT_EQ(j["added"][0]["shape"], kS2);
  EXPECT_FALSE(j["added"][0].contains("label"));

  const std::string table = NightlyReportTable(*r);
  EXPECT_NE(table.find("REGRESSIONS"), std::string::npos) << table;
  EXPECT_NE(table.find("gemm/f16 sim-h100 " + kS1 + " [SIMULATED]"), std::string::npos) << table;
  EXPECT_NE(table.find("+20.0%"), std::string::npos) << table;
  EXPECT_NE(table.find("2023-11-14"), std::string::npos) << table;

  // The same sections as markdown: headings over tables, a row per key.
  const std::string md = NightlyReportMarkdown(*r);
  EXPECT_EQ(md.rfind("**nightly**: `", 0), 0u) << md;
  EXPECT_NE(md.find("\n### REGRESSIONS\n\n| key | previous_us | current_us | change | noise | winner |\n"
                    "| --- | ---: | ---: | ---: | ---: | --- |\n| gemm/f16 sim-h100 " + kS1 + " [SIMULATED] | 100.00 | "
                    "120.00 | +20.0% |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("### added (only in the current bundle)"), std::string::npos) << md;
}

TEST(NightlyTest, MalformedBundlesAreRefused) {
  const Bundle ok = Make("n1", 0, {Entry("h100", kS1, Cfg(128), 100, 1)});
  const Bundle dup = Make("dup", 0, {Entry("h100", kS1, Cfg(128), 100, 1), Entry("h100", kS1, Cfg(64), 90, 1)});
  auto r = CompareBundles(ok, dup);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("current bundle 'dup'"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("twice"), std::string::npos) << r.status().message();
  const Bundle zero = Make("zero", 0, {Entry("h100", kS1, Cfg(128), 0, 1)});
  auto z = CompareBundles(zero, ok);
  ASSERT_FALSE(z.ok());
  EXPECT_NE(z.status().message().find("previous bundle 'zero'"), std::string::npos) << z.status().message();
  // Empty bundles compare cleanly: everything added.
  auto empty = CompareBundles(Make("e", 0, {}), ok);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->added.size(), 1u);
}

}  // namespace
}  // namespace tune
