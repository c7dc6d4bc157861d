// The CLI's result tables (cli/report.cc): the row a table stars is the one
// publish ships.
#include "report.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

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

std::string Table(ResultStore& store) {
  std::vector<Measurement> rows;
  (void)store.Scan(ResultFilter{}, [&](const Measurement& m) {
    rows.push_back(m);
    return true;
  });
  char* buf = nullptr;
  size_t size = 0;
  FILE* out = open_memstream(&buf, &size);
  const RowNotes notes = NotesOf(store, rows);
  PrintMeasurements(out, rows, {}, OutputFormat::kTable, notes);
  std::fclose(out);
  std::string text(buf, size);
  std::free(buf);
  return text;
}

// The starred line's config.
std::string Starred(const std::string& table) {
  const size_t star = table.find("\n  * ");
  if (star == std::string::npos) return "";
  const size_t begin = star + 5, end = table.find(' ', begin);
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

// A config wider than its column sits on a line of its own: the figures
// below it keep their columns, and the star stays with the config.
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
  const size_t at = table.find("\n  * " + config + "\n");
  ASSERT_NE(at, std::string::npos) << table;
  const size_t figures = at + 6 + config.size();  // the next line: the figures in their columns
  const size_t header = table.find("    config");
  ASSERT_NE(header, std::string::npos) << table;
  const std::string line = table.substr(figures, table.find('\n', figures) - figures);
  const size_t median = line.find("50.00");
  ASSERT_NE(median, std::string::npos) << table;
  const std::string header_line = table.substr(header, table.find('\n', header) - header);
  EXPECT_EQ(median + 5, header_line.find("median_us") + 9) << "right-aligned under its header:\n" << table;
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
