// CompareArchitectures and its printers against a real RocksDB store filled
// with hand-made measurements, and read-only store handles.
#include "report/compare.h"
#include "base/html.h"
#include "store/records.h"
#include "store/result_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/temp_dir.h"
#include "opspec/op_definition.h"
#include "opspec/sweep_file.h"

namespace tune {
namespace {

namespace fs = std::filesystem;

using tune::testing::TempDir;

const std::string kH100 = "h100-80gb-hbm3";
const std::string kA100 = "a100-sxm4-80gb";
const std::string kBig = "M=4096,N=4096,K=4096";
const std::string kSmall = "M=1024,N=1024,K=1024";

Config GemmConfig(int64_t bm, int64_t bn, int64_t stages) {
  Config c;
  c.params = {{"BM", bm}, {"BN", bn}, {"BK", 32}, {"WM", 2}, {"WN", 2}, {"STAGES", stages}, {"GROUP_M", 8}};
  return c;
}
// Three configs of the shipped gemm op; every model measures all of them.
const Config kC1 = GemmConfig(128, 128, 3);
const Config kC2 = GemmConfig(128, 64, 4);
const Config kC3 = GemmConfig(64, 64, 2);

Measurement Row(const std::string& gpu, const std::string& op, const std::string& shape,
                const std::string& kernel_hash, const Config& config, double median_us,
                FailureClass failure = FailureClass::kNone, int64_t unix_time = 2000) {
  Measurement m;
  m.gpu_model = gpu;
  m.op = op;
  m.dtype = "f16";
  m.shape = shape;
  m.kernel_hash = kernel_hash;
  m.config = config;
  m.config_id = config.Id();
  m.failure = failure;
  m.failure_message = failure == FailureClass::kNone ? "" : "max abs error 3.5 at [17]";
  m.check_passed = failure == FailureClass::kNone;
  m.samples = failure == FailureClass::kNone ? 25 : 0;
  m.median_us = failure == FailureClass::kNone ? median_us : 0;
  m.mean_us = m.median_us;
  m.ci95_us = m.median_us / 100;
  const bool sim = gpu.rfind("sim-", 0) == 0;
  m.backend = sim ? "sim" : "cuda";
  m.device_name = sim ? "Simulated " + gpu : "NVIDIA " + gpu;
  m.unix_time = unix_time;
  return m;
}

// Records `op_dirs`' packages so that OpsFromStore (and so throughput)
// knows the ops.
void PutOps(ResultStore& store, const std::vector<std::string>& op_dirs) {
  for (const auto& dir : op_dirs) {
    auto pkg = ReadOpPackage(dir);
    ASSERT_TRUE(pkg.ok()) << pkg.status().message();
    auto spec = ParseOpSpec(*pkg, dir);
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    ASSERT_TRUE(store.PutOp(spec->name, 1, *pkg).ok());
  }
}

const std::string kGemmDir = std::string(TUNEFARM_SOURCE_DIR) + "/ops/gemm";
const std::string kSyntheticDir = std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops/synthetic";

// Two hardware models, two gemm shapes:
//   big:   h100 (kernel khH): c1 200, c2 240, c3 300; an older kernel hash
//          with c3 at 100 that a newer hash supersedes.
//          a100 (kernel khA): c1 700, c2 560, c3 wrong result.
//   small: h100: c1 12, c3 10 (c2 never ran); a100: c1 20, c3 wrong result.
void FillTwoModels(ResultStore& store) {
  PutOps(store, {kGemmDir});
  size_t stored = 0;
  ASSERT_TRUE(store
                  .PutBatch({Row(kH100, "gemm", kBig, "khH", kC1, 200),
                             Row(kH100, "gemm", kBig, "khH", kC2, 240),
                             Row(kH100, "gemm", kBig, "khH", kC3, 300),
                             Row(kH100, "gemm", kBig, "khOld", kC3, 100, FailureClass::kNone, 1000),
                             Row(kA100, "gemm", kBig, "khA", kC1, 700),
                             Row(kA100, "gemm", kBig, "khA", kC2, 560),
                             Row(kA100, "gemm", kBig, "khA", kC3, 0, FailureClass::kWrongResult),
                             Row(kH100, "gemm", kSmall, "khH", kC1, 12),
                             Row(kH100, "gemm", kSmall, "khH", kC3, 10),
                             Row(kA100, "gemm", kSmall, "khA", kC1, 20),
                             Row(kA100, "gemm", kSmall, "khA", kC3, 0, FailureClass::kWrongResult)},
                            &stored)
                  .ok());
  ASSERT_EQ(stored, 11u);
}

std::unique_ptr<ResultStore> OpenOrDie(const std::string& path, const StoreOpenOptions& options = {}) {
  auto s = ResultStore::Open(path, options);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(s).value() : nullptr;
}

constexpr double kGemmFlopsBig = 2.0 * 4096 * 4096 * 4096;

class CompareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Held in memory: compare reads a ResultReader, wherever its rows are.
    store_ = OpenOrDie("compare", {.in_memory = true});
    ASSERT_TRUE(store_);
    FillTwoModels(*store_);
  }
  Comparison CompareOrDie(const CompareOptions& options) {
    auto c = CompareArchitectures(*store_, options);
    EXPECT_TRUE(c.ok()) << c.status().message();
    return c.ok() ? std::move(c).value() : Comparison{};
  }
  TempDir dir_;
  std::unique_ptr<ResultStore> store_;
};

TEST_F(CompareTest, BestThroughputRatiosAndPortability) {
  const Comparison c = CompareOrDie({});
  // Default: every model of the store, sorted; the first is the reference.
  ASSERT_EQ(c.models.size(), 2u);
  EXPECT_EQ(c.models[0].gpu_model, kA100);
  EXPECT_EQ(c.models[1].gpu_model, kH100);
  EXPECT_FALSE(c.AnySimulated());
  ASSERT_TRUE(c.models[1].peak);
  EXPECT_EQ(c.models[1].peak->tflops, 989);
  EXPECT_EQ(c.models[1].device_name, "NVIDIA " + kH100);

  // Shapes sort by their dims' values.
  ASSERT_EQ(c.rows.size(), 2u);
  EXPECT_EQ(c.rows[0].shape, kSmall);
  const ComparisonRow& big = c.rows[1];
  EXPECT_EQ(big.op, "gemm");
  EXPECT_EQ(big.dtype, "f16");
  EXPECT_EQ(big.shape, kBig);

  const ModelWinner& a100 = big.winners[0];
  const ModelWinner& h100 = big.winners[1];
  ASSERT_TRUE(a100.present);
  ASSERT_TRUE(h100.present);
  EXPECT_EQ(a100.best.config_id, kC2.Id());
  EXPECT_EQ(a100.best.median_us, 560);
  // The older kernel's 100 us is superseded by the newer hash.
  EXPECT_EQ(h100.best.config_id, kC1.Id());
  EXPECT_EQ(h100.best.kernel_hash, "khH");
  EXPECT_EQ(h100.best.median_us, 200);

  EXPECT_EQ(h100.unit, "TFLOP/s");
  EXPECT_DOUBLE_EQ(h100.throughput, kGemmFlopsBig / (200 * 1e6));
  EXPECT_DOUBLE_EQ(a100.throughput, kGemmFlopsBig / (560 * 1e6));
  EXPECT_DOUBLE_EQ(h100.roofline_share, kGemmFlopsBig / (200 * 1e6) / 989);
  EXPECT_DOUBLE_EQ(a100.roofline_share, kGemmFlopsBig / (560 * 1e6) / 312);
  EXPECT_DOUBLE_EQ(a100.speedup, 1.0);
  EXPECT_DOUBLE_EQ(h100.speedup, 560.0 / 200.0);

  // [from][on]: models order a100, h100.
  using S = PortabilityCell::State;
  const auto& p = big.portability;
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0][0].state, S::kMeasured);
  EXPECT_DOUBLE_EQ(p[0][0].slowdown, 1.0);
  EXPECT_EQ(p[0][1].state, S::kMeasured);  // a100's winner c2 on h100: 240 vs 200
  EXPECT_DOUBLE_EQ(p[0][1].median_us, 240);
  EXPECT_DOUBLE_EQ(p[0][1].slowdown, 1.2);
  EXPECT_EQ(p[1][0].state, S::kMeasured);  // h100's winner c1 on a100: 700 vs 560
  EXPECT_DOUBLE_EQ(p[1][0].median_us, 700);
  EXPECT_DOUBLE_EQ(p[1][0].slowdown, 1.25);
  EXPECT_DOUBLE_EQ(p[1][1].slowdown, 1.0);

  const ComparisonRow& small = c.rows[0];
  EXPECT_EQ(small.winners[0].best.config_id, kC1.Id());
  EXPECT_EQ(small.winners[1].best.config_id, kC3.Id());
  EXPECT_DOUBLE_EQ(small.winners[1].speedup, 2.0);
  // h100's winner c3 fails its check on the a100.
  EXPECT_EQ(small.portability[1][0].state, S::kFailed);
  EXPECT_EQ(small.portability[1][0].failure, FailureClass::kWrongResult);
  EXPECT_EQ(small.portability[1][0].failure_message, "max abs error 3.5 at [17]");
  EXPECT_EQ(small.portability[0][1].state, S::kMeasured);
  EXPECT_DOUBLE_EQ(small.portability[0][1].slowdown, 1.2);
}

TEST_F(CompareTest, ModelOrderFilterAndErrors) {
  CompareOptions o;
  o.gpu_models = {kH100, kA100};
  o.shape = kBig;
  const Comparison c = CompareOrDie(o);
  ASSERT_EQ(c.models.size(), 2u);
  EXPECT_EQ(c.models[0].gpu_model, kH100);
  ASSERT_EQ(c.rows.size(), 1u);
  EXPECT_DOUBLE_EQ(c.rows[0].winners[0].speedup, 1.0);
  EXPECT_DOUBLE_EQ(c.rows[0].winners[1].speedup, 200.0 / 560.0);
  EXPECT_DOUBLE_EQ(c.rows[0].portability[0][1].slowdown, 1.25);

  // A model with a key the reference lacks: no speed-up, no portability.
  ASSERT_TRUE(store_->Put(Row(kA100, "gemm", "M=2048,N=2048,K=2048", "khA", kC1, 90)).ok());
  o.shape.clear();
  const Comparison c2 = CompareOrDie(o);
  ASSERT_EQ(c2.rows.size(), 3u);
  const ComparisonRow& mid = c2.rows[1];
  EXPECT_EQ(mid.shape, "M=2048,N=2048,K=2048");
  EXPECT_FALSE(mid.winners[0].present);
  EXPECT_TRUE(mid.winners[1].present);
  EXPECT_EQ(mid.winners[1].speedup, 0);
  EXPECT_EQ(mid.portability[1][0].state, PortabilityCell::State::kNoWinner);
  EXPECT_EQ(mid.portability[1][1].state, PortabilityCell::State::kMeasured);

  o.gpu_models = {"h100"};
  auto missing = CompareArchitectures(*store_, o);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'h100'"), std::string::npos) << missing.status().message();
  EXPECT_NE(missing.status().message().find(kA100 + ", " + kH100), std::string::npos)
      << missing.status().message();

  o.gpu_models = {kH100, kH100};
  EXPECT_FALSE(CompareArchitectures(*store_, o).ok());

  CompareOptions none;
  none.op = "rmsnorm";
  auto empty = CompareArchitectures(*store_, none);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("no valid measurement"), std::string::npos);
}

// A near-tie is shown as publish ships it: the tie rule's winner (the
// smaller config id within 1%), not the store's fastest.
TEST_F(CompareTest, ANearTieShowsTheWinnerABundleWouldShip) {
  const std::string shape = "M=1536,N=1536,K=1536";
  const Config fastest = kC1.Id() > kC2.Id() ? kC1 : kC2, smaller_id = kC1.Id() > kC2.Id() ? kC2 : kC1;
  ASSERT_TRUE(store_->Put(Row(kH100, "gemm", shape, "khH", fastest, 100.0)).ok());
  ASSERT_TRUE(store_->Put(Row(kH100, "gemm", shape, "khH", smaller_id, 100.5)).ok());
  CompareOptions o;
  o.gpu_models = {kH100};
  o.shape = shape;
  const Comparison c = CompareOrDie(o);
  ASSERT_EQ(c.rows.size(), 1u);
  EXPECT_EQ(c.rows[0].winners[0].best.config_id, smaller_id.Id());
}

TEST_F(CompareTest, JsonCarriesEveryFigure) {
  CompareOptions o;
  o.gpu_models = {kH100, kA100};
  const Comparison c = CompareOrDie(o);
  const auto j = nlohmann::json::parse(ComparisonJson(c));
  EXPECT_EQ(j["reference_model"], kH100);
  EXPECT_EQ(j["simulated"], false);
  ASSERT_EQ(j["models"].size(), 2u);
  EXPECT_EQ(j["models"][0]["peak"]["tflops"], 989);
  EXPECT_EQ(j["models"][1]["peak"]["gbps"], 2039);
  ASSERT_EQ(j["rows"].size(), 2u);
  const auto& big = j["rows"][1];
  EXPECT_EQ(big["shape"], kBig);
  const auto& h = big["winners"][0];
  EXPECT_EQ(h["gpu_model"], kH100);
  EXPECT_EQ(h["config"], kC1.Canonical());
  EXPECT_EQ(h["config_id"], kC1.Id());
  EXPECT_EQ(h["median_us"], 200.0);
  EXPECT_EQ(h["throughput"]["unit"], "TFLOP/s");
  EXPECT_DOUBLE_EQ(h["throughput"]["value"].get<double>(), kGemmFlopsBig / 200e6);
  EXPECT_DOUBLE_EQ(h["roofline_share"].get<double>(), kGemmFlopsBig / 200e6 / 989);
  EXPECT_DOUBLE_EQ(big["winners"][1]["speedup"].get<double>(), 200.0 / 560.0);
  ASSERT_EQ(big["portability"].size(), 4u);
  const auto& h_on_a = big["portability"][1];
  EXPECT_EQ(h_on_a["winner_of"], kH100);
  EXPECT_EQ(h_on_a["measured_on"], kA100);
  EXPECT_EQ(h_on_a["state"], "measured");
  EXPECT_DOUBLE_EQ(h_on_a["median_us"].get<double>(), 700);
  EXPECT_DOUBLE_EQ(h_on_a["slowdown"].get<double>(), 1.25);
  const auto& failed = j["rows"][0]["portability"][1];
  EXPECT_EQ(failed["state"], "failed");
  EXPECT_EQ(failed["failure"], "wrong_result");
}

TEST_F(CompareTest, CsvIsLongFormWithQuotedShapes) {
  CompareOptions o;
  o.gpu_models = {kH100, kA100};
  o.shape = kBig;
  const std::string csv = ComparisonCsv(CompareOrDie(o));
  std::vector<std::string> lines;
  std::istringstream in(csv);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 5u) << csv;  // header, 2 winners, 2 off-diagonal portability rows
  EXPECT_EQ(lines[0],
            "kind,op,dtype,shape,gpu_model,on_gpu_model,simulated,config,config_id,kernel_hash,"
            "status,median_us,ci95_us,samples,throughput,unit,roofline_share,speedup,slowdown,bottleneck,baseline,baseline_us,"
            "vs_baseline");
  const std::string shape = "\"" + kBig + "\"";
  EXPECT_EQ(lines[1], "winner,gemm,f16," + shape + "," + kH100 + ",,,\"" + kC1.Canonical() + "\"," +
                          kC1.Id() + ",khH,ok,200.000,2.000,25,687.195,TFLOP/s,0.6948,1.0000,,,,,");
  EXPECT_EQ(lines[2], "winner,gemm,f16," + shape + "," + kA100 + ",,,\"" + kC2.Canonical() + "\"," +
                          kC2.Id() + ",khA,ok,560.000,5.600,25,245.427,TFLOP/s,0.7866,0.3571,,,,,");
  EXPECT_EQ(lines[3], "portability,gemm,f16," + shape + "," + kH100 + "," + kA100 + ",,\"" +
                          kC1.Canonical() + "\"," + kC1.Id() + ",khA,ok,700.000,,,,,,,1.2500,,,,");
  EXPECT_EQ(lines[4], "portability,gemm,f16," + shape + "," + kA100 + "," + kH100 + ",,\"" +
                          kC2.Canonical() + "\"," + kC2.Id() + ",khH,ok,240.000,,,,,,,1.2000,,,,");
}

// The op's [baseline] stands beside each model's winner in every printer:
// the ratio where it has a figure, "not measured" where the host lacked it.
TEST_F(CompareTest, WinnersStandBesideTheirBaseline) {
  Measurement b = Row(kH100, "gemm", kBig, "khH", kC2, 250);
  b.baseline = "cublaslt 13.1.0";
  ASSERT_TRUE(store_->PutBaseline(b).ok());
  Measurement missing = Row(kA100, "gemm", kBig, "khA", kC2, 0, FailureClass::kLaunchError);
  missing.baseline = "cublaslt";
  missing.failure_message = "cuBLASLt not available on this host";
  ASSERT_TRUE(store_->PutBaseline(missing).ok());
  CompareOptions o;
  o.gpu_models = {kH100, kA100};
  o.shape = kBig;
  const Comparison c = CompareOrDie(o);
  EXPECT_DOUBLE_EQ(c.rows[0].winners[0].vs_baseline, 250.0 / 200.0);
  EXPECT_EQ(c.rows[0].winners[1].vs_baseline, 0);
  const std::string table = ComparisonTable(c);
  EXPECT_NE(table.find("1.250x"), std::string::npos) << table;
  EXPECT_NE(table.find("not measured"), std::string::npos) << table;
  EXPECT_NE(ComparisonCsv(c).find(",cublaslt 13.1.0,250.000,1.2500\n"), std::string::npos) << ComparisonCsv(c);
  EXPECT_NE(ComparisonJson(c).find("\"vs_baseline\": 1.25"), std::string::npos) << ComparisonJson(c);
  const std::string html = ComparisonHtml(c, "");
  EXPECT_NE(html.find(">1.250x</td>"), std::string::npos);
  EXPECT_NE(html.find("cuBLASLt not available on this host"), std::string::npos);
}

// A winner's profile (a sweep's profile_top) shows its bottleneck class in
// every printer.
TEST_F(CompareTest, WinnersShowTheirBottleneckClassWhenProfiled) {
  KernelProfile p;
  p.gpu_model = kH100;
  p.op = "gemm";
  p.dtype = "f16";
  p.shape = kBig;
  p.kernel_hash = "khH";
  p.config_id = kC1.Id();
  p.compute_pct = 88;
  p.memory_pct = 41;
  p.occupancy_pct = 25;
  p.tool = "ncu 2025.3.1";
  ClassifyBottleneck(&p);
  ASSERT_TRUE(store_->PutProfile(p).ok());
  CompareOptions o;
  o.gpu_models = {kH100, kA100};
  o.shape = kBig;
  const Comparison c = CompareOrDie(o);
  ASSERT_TRUE(c.rows[0].winners[0].profile.has_value());
  EXPECT_FALSE(c.rows[0].winners[1].profile.has_value());
  EXPECT_NE(ComparisonTable(c).find("compute-bound: memory 41%, compute 88% of peak"), std::string::npos)
      << ComparisonTable(c);
  EXPECT_NE(ComparisonCsv(c).find(",1.0000,,compute,,,\n"), std::string::npos) << ComparisonCsv(c);
  EXPECT_NE(ComparisonJson(c).find("\"bottleneck\": \"compute\""), std::string::npos) << ComparisonJson(c);
  EXPECT_NE(ComparisonHtml(c, "").find(">compute</span>"), std::string::npos);
  // A profile of a value out of range never enters the store.
  p.memory_pct = std::nan("");
  EXPECT_FALSE(store_->PutProfile(p).ok());
}

TEST_F(CompareTest, TableShowsWinnersAndMatrix) {
  CompareOptions o;
  o.gpu_models = {kH100, kA100};
  const std::string table = ComparisonTable(CompareOrDie(o));
  EXPECT_NE(table.find("reference " + kH100), std::string::npos) << table;
  EXPECT_NE(table.find("gemm/f16 " + kBig), std::string::npos) << table;
  EXPECT_NE(table.find(kC1.Canonical()), std::string::npos) << table;
  EXPECT_NE(table.find("687.2 TFLOP/s"), std::string::npos) << table;
  EXPECT_NE(table.find("69.5%"), std::string::npos) << table;
  EXPECT_NE(table.find("0.36x"), std::string::npos) << table;
  EXPECT_NE(table.find("1.25x"), std::string::npos) << table;
  EXPECT_NE(table.find("failed: wrong_result"), std::string::npos) << table;
  EXPECT_EQ(table.find("SIMULATED"), std::string::npos) << table;
}

TEST_F(CompareTest, HtmlInlinesChartJs) {
  TempDir tmp;
  const std::string chart = tmp.Sub("chart.min.js");
  {
    std::ofstream f(chart);
    f << "/* fake chart library */ window.Chart = function () {}; var tag = '</script>';";
  }
  CompareOptions o;
  o.gpu_models = {kH100, kA100};
  const std::string html = ComparisonHtml(CompareOrDie(o), chart);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  // Inlined, with the closing tag it contained neutralised.
  EXPECT_NE(html.find("/* fake chart library */ window.Chart = function () {}; var tag = '<\\/script>';"),
            std::string::npos);
  EXPECT_NE(html.find("<canvas id=\"tf-chart-speedup\">"), std::string::npos);
  EXPECT_NE(html.find("id=\"tf-data\""), std::string::npos);
  EXPECT_EQ(html.find("Charts unavailable"), std::string::npos);
  EXPECT_EQ(html.find("http"), std::string::npos) << "a report must load nothing from the network";
  // Table rows.
  EXPECT_NE(html.find("<td class=\"text\">" + kH100 + " (ref)</td><td class=\"text\">" + kC1.Canonical() +
                      "</td><td>200.00</td><td>2.00</td><td>25</td><td>687.2 TFLOP/s</td><td>69.5%</td>"
                      "<td>1.00x</td><td>-</td><td class=\"text\">-</td></tr>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find(">1.25x (700.00 us)</td>"), std::string::npos);
  EXPECT_NE(html.find(">failed: wrong_result</td>"), std::string::npos);
  EXPECT_EQ(html.find("SIMULATED"), std::string::npos);
}

TEST_F(CompareTest, HtmlWithoutChartJsStillHasTables) {
  CompareOptions o;
  o.gpu_models = {kH100, kA100};
  const Comparison c = CompareOrDie(o);
  const std::string html = ComparisonHtml(c, dir_.Sub("no-such-chart.js"));
  EXPECT_NE(html.find("Charts unavailable"), std::string::npos);
  EXPECT_NE(html.find("no-such-chart.js"), std::string::npos);
  EXPECT_EQ(html.find("<canvas"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find(">" + kC2.Canonical() + "</td><td>560.00</td>"), std::string::npos);

  // With no path, the page uses Debian's libjs-chart.js where installed.
  bool installed = false;
  for (const auto& path : DefaultChartJsPaths()) installed = installed || fs::exists(path);
  const std::string html_default = ComparisonHtml(c);
  if (installed) {
    EXPECT_NE(html_default.find("Chart.js v"), std::string::npos);
    EXPECT_EQ(html_default.find("Charts unavailable"), std::string::npos);
  } else {
    EXPECT_NE(html_default.find("Charts unavailable"), std::string::npos);
  }
}

// A packed tunefarm (bin/ or libexec/ beside share/) finds the Chart.js it ships.
TEST(ChartJsPaths, APackedTunefarmFindsItsOwnCopyAfterDebians) {
  const std::vector<std::string> paths = DefaultChartJsPaths();
  const fs::path exe = fs::read_symlink("/proc/self/exe");
  ASSERT_FALSE(paths.empty());
  EXPECT_EQ(paths.back(), (exe.parent_path().parent_path() / kPackedChartJs).string());
  EXPECT_EQ(paths.front().rfind("/usr/share/javascript/chart.js/", 0), 0u);
}

TEST(CompareSimulatedTest, SimulatedModelsAreLabelledEverywhere) {
  TempDir dir;
  auto store = OpenOrDie(dir.Sub("db"));
  ASSERT_TRUE(store);
  PutOps(*store, {kSyntheticDir});
  auto cfg = [](int64_t tile) {
    Config c;
    c.params = {{"TILE", tile}, {"UNROLL", 1}, {"SPLIT", 1}, {"PAD", 0}};
    return c;
  };
  const std::string n = "N=1048576";
  size_t stored = 0;
  ASSERT_TRUE(store
                  ->PutBatch({Row("sim-h100", "synthetic", n, "khS", cfg(128), 2.0),
                              Row("sim-h100", "synthetic", n, "khS", cfg(256), 2.5),
                              Row("sim-a100", "synthetic", n, "khS", cfg(256), 4.0),
                              Row(kH100, "synthetic", n, "khH", cfg(128), 1.6)},
                             &stored)
                  .ok());
  CompareOptions o;
  o.gpu_models = {kH100, "sim-h100", "sim-a100"};
  auto c = CompareArchitectures(*store, o);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->AnySimulated());
  EXPECT_FALSE(c->models[0].simulated);
  EXPECT_TRUE(c->models[1].simulated);
  ASSERT_TRUE(c->models[1].peak);
  EXPECT_TRUE(c->models[1].peak->simulated);

  // Memory-bound: GB/s against each model's bandwidth (2*N*2 bytes).
  const auto& row = c->rows.at(0);
  const double bytes = 2.0 * 1048576 * 2;
  EXPECT_EQ(row.winners[1].unit, "GB/s");
  EXPECT_DOUBLE_EQ(row.winners[1].throughput, bytes / (2.0 * 1e3));
  EXPECT_DOUBLE_EQ(row.winners[1].roofline_share, bytes / (2.0 * 1e3) / 3000);
  EXPECT_DOUBLE_EQ(row.winners[0].roofline_share, bytes / (1.6 * 1e3) / 3350);
  EXPECT_DOUBLE_EQ(row.winners[2].speedup, 1.6 / 4.0);
  // The a100's space lacked TILE=128 here: not measured rather than a guess.
  EXPECT_EQ(row.portability[1][2].state, PortabilityCell::State::kNotMeasured);
  EXPECT_DOUBLE_EQ(row.portability[2][1].slowdown, 1.25);

  const std::string table = ComparisonTable(*c);
  EXPECT_NE(table.find("SIMULATED: "), std::string::npos) << table;
  EXPECT_NE(table.find("sim-h100 [SIMULATED]"), std::string::npos) << table;
  EXPECT_NE(table.find("not measured"), std::string::npos) << table;
  const std::string csv = ComparisonCsv(*c);
  EXPECT_NE(csv.find("winner,synthetic,f16,N=1048576,sim-h100,,SIMULATED,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("winner,synthetic,f16,N=1048576," + kH100 + ",,,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("portability,synthetic,f16,N=1048576," + kH100 + ",sim-h100,SIMULATED,"),
            std::string::npos)
      << csv;
  const auto j = nlohmann::json::parse(ComparisonJson(*c));
  EXPECT_EQ(j["simulated"], true);
  EXPECT_NE(j["note"].get<std::string>().find("SIMULATED"), std::string::npos);
  EXPECT_EQ(j["models"][1]["label"], "SIMULATED");
  EXPECT_FALSE(j["models"][0].contains("label"));
  const std::string html = ComparisonHtml(*c, dir.Sub("missing.js"));
  EXPECT_NE(html.find("<title>tunefarm architecture comparison (SIMULATED)</title>"), std::string::npos);
  EXPECT_NE(html.find("class=\"simulated\""), std::string::npos);
  EXPECT_NE(html.find("sim-a100 <span class=\"tag\">SIMULATED</span>"), std::string::npos);
}

TEST(PeakFiguresTest, KnownModelsSimModelsAndUnknown) {
  struct Case {
    std::string model;
    double tflops, gbps;
  };
  for (const Case& k : std::vector<Case>{{"h100-80gb-hbm3", 989, 3350},
                                         {"h100-sxm", 989, 3350},
                                         {"h100", 989, 3350},
                                         {"h100-pcie", 756, 2000},
                                         {"h100-nvl", 835, 3900},
                                         {"h200", 989, 4800},
                                         {"h200-nvl", 835, 4800},
                                         {"a100-sxm4-80gb", 312, 2039},
                                         {"a100-sxm4-40gb", 312, 1555},
                                         {"a100-80gb-pcie", 312, 1935},
                                         {"l40s", 362, 864},
                                         {"sim-h100", 700, 3000},
                                         {"sim-h200", 720, 4300},
                                         {"sim-a100", 290, 1700},
                                         {"sim-l40s", 330, 800},
                                         {"sim-mystery", 120, 900}}) {
    auto p = PeakFiguresFor(k.model);
    ASSERT_TRUE(p) << k.model;
    EXPECT_EQ(p->tflops, k.tflops) << k.model;
    EXPECT_EQ(p->gbps, k.gbps) << k.model;
    EXPECT_EQ(p->simulated, k.model.rfind("sim-", 0) == 0) << k.model;
    EXPECT_FALSE(p->source.empty());
  }
  for (const char* unknown : {"rtx-4090", "h1000", "gh200-480gb", ""}) {
    EXPECT_FALSE(PeakFiguresFor(unknown)) << unknown;
  }
}

// A report reads the store while a coordinator holds it open for writing.
TEST(ReadOnlyStoreTest, ReadsAStoreAnotherHandleHoldsForWriting) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  auto writer = OpenOrDie(path);
  ASSERT_TRUE(writer);
  FillTwoModels(*writer);
  // A second writable open is refused while the writer holds the lock...
  ASSERT_FALSE(ResultStore::Open(path).ok());
  // ...a read-only one is not, and sees rows still only in the writer's WAL.
  auto reader = ResultStore::OpenReadOnly(path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  ResultStore& ro = **reader;
  EXPECT_TRUE(ro.read_only());
  EXPECT_FALSE(writer->read_only());
  EXPECT_EQ(*ro.CountResults(), 11u);
  auto c = CompareArchitectures(ro, {});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->rows.size(), 2u);
  EXPECT_EQ(c->rows[1].winners[1].best.median_us, 200);
  EXPECT_EQ(c->rows[1].winners[1].unit, "TFLOP/s") << "op specs are read from the sweeps family";

  // Writes through the read-only handle are refused and change nothing.
  auto put = ro.Put(Row(kH100, "gemm", kBig, "khH", GemmConfig(256, 64, 2), 50));
  ASSERT_FALSE(put.ok());
  EXPECT_NE(put.status().message().find("store opened read-only"), std::string::npos);
  size_t stored = 7;
  Status batch = ro.PutBatch({Row(kH100, "gemm", kBig, "khH", GemmConfig(256, 64, 2), 50)}, &stored);
  EXPECT_NE(batch.message().find("store opened read-only"), std::string::npos);
  EXPECT_EQ(stored, 0u);
  EXPECT_NE(ro.PutSweep("s", "x").message().find("store opened read-only"), std::string::npos);

  // The writer carries on; the reader keeps the view it opened with.
  ASSERT_TRUE(writer->Put(Row(kH100, "gemm", kBig, "khH", GemmConfig(256, 64, 2), 50)).ok());
  EXPECT_EQ(*ro.CountResults(), 11u);
  reader = Result<std::unique_ptr<ResultStore>>(Status::Error("closed"));
  auto again = ResultStore::OpenReadOnly(path);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(*(*again)->CountResults(), 12u);
}

TEST(ReadOnlyStoreTest, MissingOrForeignStoreIsRefusedAndNothingIsCreated) {
  TempDir dir;
  const std::string missing = dir.Sub("nothing-here");
  auto r = ResultStore::OpenReadOnly(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(missing), std::string::npos) << r.status().message();
  EXPECT_FALSE(fs::exists(missing));
}

}  // namespace
}  // namespace tune
