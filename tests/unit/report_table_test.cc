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
  // 3% faster is no tie: it wins, and the table says so.
  ASSERT_TRUE((*store)->Put(Row("cccc", 256, 97.0)).ok());
  EXPECT_EQ(Starred(Table(**store)), "BM=256");
}

}  // namespace
}  // namespace tune
