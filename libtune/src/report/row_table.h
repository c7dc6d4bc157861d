// RowTable: one row model for what commands print, and its printers (as
// nvbench's: the same rows as aligned text for people, CSV and JSON for
// scripts, markdown for a pull request or an issue).
//
// A cell keeps its JSON value (a number stays a number) and the text that
// text, CSV and markdown show. Columns are named once; every format prints
// them in order. Rendering never fails: a short row is padded with empty
// cells, text cells are printed as given (CSV quotes, markdown escapes).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tune {

enum class RowFormat { kTable, kCsv, kJson, kMarkdown };

// "table" | "csv" | "json" | "markdown"; false when unknown.
bool ParseRowFormat(const std::string& text, RowFormat* out);
// "table | csv | json | markdown", for help and errors.
const char* RowFormatNames();

struct RowCell {
  nlohmann::ordered_json value;  // what JSON holds (null: empty)
  std::string text;              // what text, CSV and markdown show
};

// Cells of the usual kinds.
RowCell TextCell(const std::string& text);
// `format` is printf's for one double ("%.2f"); JSON holds the number
// itself, or null when it is not finite.
RowCell NumberCell(double value, const char* format);
RowCell IntegerCell(int64_t value);
RowCell EmptyCell();
// NumberCell where `present`, else EmptyCell: a figure a row may lack.
RowCell FigureCell(double value, const char* format, bool present);

// Where a column shows: every format, JSON only (a nested value that CSV
// spreads over flat columns), or every format but JSON (those flat columns).
enum class RowShown { kEverywhere, kJsonOnly, kNotJson };

struct RowColumn {
  std::string name;
  bool right = false;   // right-aligned in text (numbers)
  bool sparse = false;  // JSON leaves out the column's null cells
  RowShown shown = RowShown::kEverywhere;
};

struct RowTable {
  std::vector<RowColumn> columns;
  std::vector<std::vector<RowCell>> rows;
  // Text only: lines shown under a row (by row index), indented beneath it.
  std::map<size_t, std::vector<std::string>> under;
};

// An answer as a whole: for people, lines and titled tables (text and
// markdown); for scripts, the flat rows (CSV and JSON). Every command's
// printed answer is one (results, best, tune, compare, nightly, status, op
// check), so each format is written once, here.
struct RowSection {
  std::string title;               // its line above the table ("" none)
  std::vector<std::string> notes;  // lines between the title and the table
  RowTable table;                  // may be empty: the title and notes alone
};
struct RowReport {
  std::vector<std::string> head;  // lines above the sections (text and markdown)
  std::vector<RowSection> sections;
  RowTable rows;  // what CSV and JSON print
};

// The table in `format`. Text: a header line and aligned columns, each line
// starting with `indent`. CSV: a header row, then a row per row. JSON: an
// array of objects keyed by column name, one line each (ends in a newline).
// Markdown: a header, its rule (numbers right-aligned), `|` escaped.
std::string RenderRows(const RowTable& table, RowFormat format, const std::string& indent = "");

// The report in `format`. Table: the head, then each section's title, notes
// (indented by `indent`) and table (indented by `indent`), sections apart by
// a blank line. Markdown: the same with `### ` titles and markdown tables.
// CSV and JSON: RenderRows of `rows`.
std::string RenderReport(const RowReport& report, RowFormat format, const std::string& indent = "  ");

}  // namespace tune
