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

// A column may show in JSON only (a nested value) or everywhere but JSON
// (its flat spread); a sparse column's null cells leave JSON's object.
TEST(RowTable, ColumnsShowWhereTheirFormatWantsThem) {
  RowTable t;
  t.columns = {{"key"},
               {"profile", false, true, RowShown::kJsonOnly},
               {"bottleneck", false, false, RowShown::kNotJson},
               {"reason", false, true}};
  t.rows.push_back({TextCell("a"), RowCell{nlohmann::ordered_json{{"x", 1}}, ""}, TextCell("memory"), EmptyCell()});
  EXPECT_EQ(RenderRows(t, RowFormat::kJson), "[\n {\"key\":\"a\",\"profile\":{\"x\":1}}\n]\n");
  EXPECT_EQ(RenderRows(t, RowFormat::kCsv), "key,bottleneck,reason\na,memory,\n");
}

// Lines under a row: beneath it in text, after the table in markdown.
TEST(RowTable, LinesUnderARowFollowIt) {
  RowTable t = Sample();
  t.under[0] = {"profile: memory-bound"};
  const std::string text = RenderRows(t, RowFormat::kTable, "  ");
  const size_t row = text.find("gemm f16"), under = text.find("      profile: memory-bound\n");
  ASSERT_NE(under, std::string::npos) << text;
  EXPECT_LT(row, under);
  EXPECT_LT(under, text.find("rmsnorm")) << text;
  EXPECT_NE(RenderRows(t, RowFormat::kMarkdown).find("\n- row 1: profile: memory-bound\n"), std::string::npos);
  EXPECT_EQ(RenderRows(t, RowFormat::kCsv), RenderRows(Sample(), RowFormat::kCsv));
}

// A report: head, titled sections for people; the flat rows for scripts.
TEST(RowTable, AReportPrintsSectionsForPeopleAndRowsForScripts) {
  RowReport r;
  r.head = {"2 worker(s)"};
  r.sections.push_back({"h100  gemm/f16", {"searched: 3 of 9"}, Sample()});
  r.rows = RowTable{{{"n", true}}, {{IntegerCell(7)}}};
  EXPECT_EQ(RenderReport(r, RowFormat::kTable),
            "2 worker(s)\n\nh100  gemm/f16\n  searched: 3 of 9\n"
            "  key       median_us  note\n  gemm f16      12.50  a|b, \"c\"\n  rmsnorm           -\n");
  EXPECT_NE(RenderReport(r, RowFormat::kMarkdown).find("### h100  gemm/f16\n\nsearched: 3 of 9\n\n| key |"),
            std::string::npos)
      << RenderReport(r, RowFormat::kMarkdown);
  EXPECT_EQ(RenderReport(r, RowFormat::kCsv), "n\n7\n");
  EXPECT_EQ(RenderReport(r, RowFormat::kJson), "[\n {\"n\":7}\n]\n");
}

}  // namespace
}  // namespace tune
