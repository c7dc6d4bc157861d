// The row model's printers: the same rows as aligned text, CSV, JSON and
// markdown, whatever their cells hold.
#include "report/row_table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace tune {
namespace {

RowTable Sample() {
  RowTable t;
  t.columns = {{"key"}, {"median_us", true}, {"note"}};
  t.rows.push_back({TextCell("gemm f16"), NumberCell(12.5, "%.2f"), TextCell("a|b, \"c\"")});
  t.rows.push_back({TextCell("rmsnorm"), NumberCell(std::numeric_limits<double>::quiet_NaN(), "%.2f")});
  return t;
}

TEST(RowTable, TextAlignsColumnsAndNumbersRight) {
  EXPECT_EQ(RenderRows(Sample(), RowFormat::kTable, "  "),
            "  key       median_us  note\n"
            "  gemm f16      12.50  a|b, \"c\"\n"
            "  rmsnorm           -\n");
}

TEST(RowTable, CsvQuotesWhatNeedsIt) {
  EXPECT_EQ(RenderRows(Sample(), RowFormat::kCsv),
            "key,median_us,note\n"
            "gemm f16,12.50,\"a|b, \"\"c\"\"\"\n"
            "rmsnorm,-,\n");
}

TEST(RowTable, JsonKeepsNumbersAndNullsAShortRow) {
  const auto j = nlohmann::json::parse(RenderRows(Sample(), RowFormat::kJson));
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["median_us"], 12.5);
  EXPECT_EQ(j[0]["note"], "a|b, \"c\"");
  EXPECT_TRUE(j[1]["median_us"].is_null());
  EXPECT_TRUE(j[1]["note"].is_null());
  EXPECT_EQ(RenderRows(RowTable{{{"a"}}, {}}, RowFormat::kJson), "[]\n");
}

TEST(RowTable, MarkdownEscapesPipesAndAlignsNumbers) {
  EXPECT_EQ(RenderRows(Sample(), RowFormat::kMarkdown),
            "| key | median_us | note |\n"
            "| --- | ---: | --- |\n"
            "| gemm f16 | 12.50 | a\\|b, \"c\" |\n"
            "| rmsnorm | - |  |\n");
}

TEST(RowTable, FormatNamesParse) {
  RowFormat f;
  EXPECT_TRUE(ParseRowFormat("markdown", &f));
  EXPECT_EQ(f, RowFormat::kMarkdown);
  EXPECT_FALSE(ParseRowFormat("html", &f));
}

}  // namespace
}  // namespace tune
