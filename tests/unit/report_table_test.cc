// The CLI's result tables (cli/report.cc): the row a table stars is the one
// publish ships.
#include "report.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "support/temp_dir.h"
#include "store/result_store.h"

namespace tune {
namespace {

Measurement Row(const std::string& config_id, int bm, double us) {
  Measurement m;
  m.gpu_model = "h100";
  m.op = "gemm";
  m.dtype = "f16";
  m.shape = "M=1";
  m.kernel_hash = "kh1";
  m.config_id = config_id;
  m.config.params = {{"BM", bm}};
  m.check_passed = true;
  m.samples = 20;
  m.median_us = us;
  m.ci95_us = 0.2;
  m.backend = "sim";
  m.worker = "w1";
  return m;
}

std::string Table(ResultStore& store, RowFormat format = RowFormat::kTable) {
  std::vector<Measurement> rows;
  (void)store.Scan(ResultFilter{}, [&](const Measurement& m) {
    rows.push_back(m);
    return true;
  });
  return RenderReport(MeasurementReport(rows, {}, NotesOf(store, rows)), format);
}

// The starred line's config.
std::string Starred(const std::string& table) {
  const size_t star = table.find("\n  *");
  if (star == std::string::npos) return "";
  const size_t begin = table.find_first_not_of(' ', star + 4), end = table.find(' ', begin);
  return table.substr(begin, end - begin);
}

TEST(ReportTable, TheStarredRowIsTheWinnerPublishShipsNotANearTieFasterByNoise) {
  testing::TempDir dir;
  auto store = ResultStore::Open(dir.path() + "/db");
  ASSERT_TRUE(store.ok()) << store.status().message();
  ASSERT_TRUE((*store)->Put(Row("bbbb", 128, 100.0)).ok());  // the fastest
  ASSERT_TRUE((*store)->Put(Row("aaaa", 64, 100.6)).ok());   // 0.6% behind: a tie, and the smaller id
  EXPECT_EQ(Starred(Table(**store)), "BM=64");
  EXPECT_NE(Table(**store).find("tie: * ties the fastest (100.00 us, BM=128) within 1%"), std::string::npos)
      << Table(**store);
  // 3% faster is no tie: it wins, and the table says so.
  ASSERT_TRUE((*store)->Put(Row("cccc", 256, 97.0)).ok());
  EXPECT_EQ(Starred(Table(**store)), "BM=256");
  EXPECT_EQ(Table(**store).find("ties the fastest"), std::string::npos) << "the fastest wins: no note";
}

// A config wider than most widens its column: the star stays with the
// config and every figure stays right-aligned under its header.
TEST(ReportTable, ALongConfigKeepsTheColumnsAligned) {
  testing::TempDir dir;
  auto store = ResultStore::Open(dir.path() + "/db");
  ASSERT_TRUE(store.ok()) << store.status().message();
  Measurement wide = Row("ffff", 128, 50.0);
  for (const char* axis : {"BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_stages"})
    wide.config.params.emplace_back(axis, 64);
  ASSERT_TRUE((*store)->Put(wide).ok());
  ASSERT_TRUE((*store)->Put(Row("gggg", 64, 60.0)).ok());
  const std::string table = Table(**store);
  const std::string config = wide.config.Canonical();
  ASSERT_GT(config.size(), 48u);
  EXPECT_EQ(Starred(table), config) << table;
  auto line_of = [&](const std::string& text) {
    const size_t at = table.find(text);
    if (at == std::string::npos) return std::string();
    const size_t begin = table.rfind('\n', at) + 1;
    return table.substr(begin, table.find('\n', at) - begin);
  };
  const std::string header = line_of("median_us"), wide_row = line_of(config), narrow_row = line_of("BM=64 ");
  ASSERT_FALSE(header.empty() || wide_row.empty() || narrow_row.empty()) << table;
  const size_t end = header.find("median_us") + 9;
  EXPECT_EQ(wide_row.find("50.00") + 5, end) << "right-aligned under its header:\n" << table;
  EXPECT_EQ(narrow_row.find("60.00") + 5, end) << table;
}

// Scripts get the same rows: JSON keeps numbers as numbers, nests the
// key's notes and leaves out what a row lacks; CSV spreads them flat.
TEST(ReportTable, JsonAndCsvCarryTheSameRowsAsTheTable) {
  testing::TempDir dir;
  auto store = ResultStore::Open(dir.path() + "/db");
  ASSERT_TRUE(store.ok()) << store.status().message();
  ASSERT_TRUE((*store)->Put(Row("aaaa", 64, 100.0)).ok());
  ASSERT_TRUE((*store)->Put(Row("bbbb", 128, 120.0)).ok());
  const auto rows = nlohmann::json::parse(Table(**store, RowFormat::kJson));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["config"], "BM=64");
  EXPECT_EQ(rows[0]["winner"], true);
  EXPECT_EQ(rows[1]["winner"], false);
  EXPECT_DOUBLE_EQ(rows[0]["median_us"].get<double>(), 100.0);
  EXPECT_EQ(rows[0]["check_passed"], true);
  EXPECT_FALSE(rows[0].contains("reason")) << rows[0];     // sparse: no failure, no key
  EXPECT_FALSE(rows[0].contains("bottleneck")) << rows[0];  // a CSV column, not JSON's
  const std::string csv = Table(**store, RowFormat::kCsv);
  EXPECT_EQ(csv.substr(0, csv.find('\n')).find("check_passed"), std::string::npos) << csv;  // JSON's only
  EXPECT_NE(csv.find(",BM=64,aaaa,kh1,ok,reference,100.000,"), std::string::npos) << csv;
  EXPECT_EQ(rows[0]["checked_against"], "reference");
  EXPECT_FALSE(rows[0].contains("energy_uj")) << rows[0];  // sparse: not measured
  const std::string md = Table(**store, RowFormat::kMarkdown);
  EXPECT_NE(md.find("### h100  gemm/f16  M=1"), std::string::npos) << md;
  EXPECT_NE(md.find("| * | BM=64 | 100.00 |"), std::string::npos) << md;
}

// A failed row's status names why: a compiler's first error, a traceback's
// exception, not only the message's first line.
TEST(ReportTable, AFailedRowSaysWhyNotOnlyItsFirstLine) {
  testing::TempDir dir;
  auto store = ResultStore::Open(dir.path() + "/db");
  ASSERT_TRUE(store.ok()) << store.status().message();
  Measurement compile = Row("dddd", 32, 0);
  compile.check_passed = false;
  compile.samples = 0;
  compile.failure = FailureClass::kCompileError;
  compile.failure_message =
      "nvrtc: compiling gemm.cu for sm_90 failed (3 lines of log)\n\ngemm.cu(41): error: identifier \"BKK\" is "
      "undefined\n1 error detected in the compilation of \"gemm.cu\".";
  Measurement crash = Row("eeee", 16, 0);
  crash.check_passed = false;
  crash.samples = 0;
  crash.failure = FailureClass::kCrash;
  crash.failure_message =
      "the serve process stopped answering (its output ended; exit code 1)\nTraceback (most recent call last):\n"
      "  File \"k.py\", line 9, in <module>\n    import triton_standin\nModuleNotFoundError: No module named 'x'\n";
  ASSERT_TRUE((*store)->Put(compile).ok());
  ASSERT_TRUE((*store)->Put(crash).ok());
  const std::string table = Table(**store);
  EXPECT_NE(table.find("failed (3 lines of log) | gemm.cu(41): error: identifier \"BKK\" is undefined"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("exit code 1) | ModuleNotFoundError: No module named 'x'"), std::string::npos) << table;
}

}  // namespace
}  // namespace tune
