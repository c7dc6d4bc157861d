#include "report/row_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "base/text.h"

namespace tune {

bool ParseRowFormat(const std::string& text, RowFormat* out) {
  static const std::pair<const char*, RowFormat> kNames[] = {
      {"table", RowFormat::kTable}, {"csv", RowFormat::kCsv}, {"json", RowFormat::kJson},
      {"markdown", RowFormat::kMarkdown}};
  for (const auto& [name, format] : kNames) {
    if (text == name) {
      *out = format;
      return true;
    }
  }
  return false;
}

const char* RowFormatNames() { return "table | csv | json | markdown"; }

RowCell TextCell(const std::string& text) { return RowCell{text, text}; }

RowCell NumberCell(double value, const char* format) {
  if (!std::isfinite(value)) return RowCell{nullptr, std::isnan(value) ? "-" : value > 0 ? "inf" : "-inf"};
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return RowCell{value, buf};
}

RowCell IntegerCell(int64_t value) { return RowCell{value, std::to_string(value)}; }

RowCell EmptyCell() { return RowCell{nullptr, ""}; }

RowCell FigureCell(double value, const char* format, bool present) {
  return present ? NumberCell(value, format) : EmptyCell();
}

namespace {

const RowCell& CellAt(const std::vector<RowCell>& row, size_t i) {
  static const RowCell kEmpty = EmptyCell();
  return i < row.size() ? row[i] : kEmpty;
}

std::string MarkdownText(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

}  // namespace

std::string RenderRows(const RowTable& t, RowFormat format, const std::string& indent) {
  std::ostringstream out;
  // The columns this format shows, by index into the rows.
  const bool json = format == RowFormat::kJson;
  std::vector<size_t> cols;
  for (size_t i = 0; i < t.columns.size(); ++i) {
    const RowShown shown = t.columns[i].shown;
    if (shown == RowShown::kEverywhere || (shown == RowShown::kJsonOnly) == json) cols.push_back(i);
  }
  const size_t n = cols.size();
  auto column = [&](size_t k) -> const RowColumn& { return t.columns[cols[k]]; };
  auto cell = [&](const std::vector<RowCell>& row, size_t k) -> const RowCell& { return CellAt(row, cols[k]); };
  switch (format) {
    case RowFormat::kTable: {
      std::vector<size_t> width(n);
      for (size_t k = 0; k < n; ++k) {
        width[k] = column(k).name.size();
        for (const auto& row : t.rows) width[k] = std::max(width[k], cell(row, k).text.size());
      }
      auto line = [&](auto&& text_of) {
        std::string s = indent;
        for (size_t k = 0; k < n; ++k) {
          const std::string text = text_of(k);
          const std::string pad(width[k] - std::min(width[k], text.size()), ' ');
          const bool last = k + 1 == n;
          if (column(k).right) s += pad + text;
          else s += text + (last ? "" : pad);
          if (!last) s += "  ";
        }
        s.erase(s.find_last_not_of(' ') + 1);  // an empty last cell leaves no trailing blanks
        out << s << '\n';
      };
      line([&](size_t k) { return column(k).name; });
      for (size_t r = 0; r < t.rows.size(); ++r) {
        line([&](size_t k) { return cell(t.rows[r], k).text; });
        if (auto it = t.under.find(r); it != t.under.end())
          for (const std::string& text : it->second) out << indent << "    " << text << '\n';
      }
      break;
    }
    case RowFormat::kCsv: {
      for (size_t k = 0; k < n; ++k) out << (k ? "," : "") << CsvField(column(k).name);
      out << '\n';
      for (const auto& row : t.rows) {
        for (size_t k = 0; k < n; ++k) out << (k ? "," : "") << CsvField(cell(row, k).text);
        out << '\n';
      }
      break;
    }
    case RowFormat::kJson: {
      out << "[";
      for (size_t r = 0; r < t.rows.size(); ++r) {
        nlohmann::ordered_json o = nlohmann::ordered_json::object();
        for (size_t k = 0; k < n; ++k) {
          const RowCell& c = cell(t.rows[r], k);
          if (!(column(k).sparse && c.value.is_null())) o[column(k).name] = c.value;
        }
        out << (r ? ",\n " : "\n ") << o.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      }
      out << (t.rows.empty() ? "]\n" : "\n]\n");
      break;
    }
    case RowFormat::kMarkdown: {
      out << "|";
      for (size_t k = 0; k < n; ++k) out << ' ' << MarkdownText(column(k).name) << " |";
      out << "\n|";
      for (size_t k = 0; k < n; ++k) out << (column(k).right ? " ---: |" : " --- |");
      out << '\n';
      for (const auto& row : t.rows) {
        out << "|";
        for (size_t k = 0; k < n; ++k) out << ' ' << MarkdownText(cell(row, k).text) << " |";
        out << '\n';
      }
      // A table row holds no line beneath it: the lines follow the table.
      for (const auto& [r, lines] : t.under)
        for (const std::string& text : lines) out << "\n- row " << r + 1 << ": " << MarkdownText(text);
      if (!t.under.empty()) out << '\n';
      break;
    }
  }
  return out.str();
}

std::string RenderReport(const RowReport& report, RowFormat format, const std::string& indent) {
  if (format == RowFormat::kCsv || format == RowFormat::kJson) return RenderRows(report.rows, format);
  const bool md = format == RowFormat::kMarkdown;
  std::ostringstream out;
  for (const std::string& line : report.head) out << line << '\n';
  for (const RowSection& s : report.sections) {
    out << '\n';
    if (!s.title.empty()) out << (md ? "### " : "") << s.title << '\n' << (md ? "\n" : "");
    for (const std::string& note : s.notes) out << (md ? "" : indent) << note << '\n' << (md ? "\n" : "");
    if (!s.table.columns.empty()) out << RenderRows(s.table, format, md ? "" : indent);
  }
  return out.str();
}

}  // namespace tune
