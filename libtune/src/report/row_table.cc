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
  const size_t n = t.columns.size();
  switch (format) {
    case RowFormat::kTable: {
      std::vector<size_t> width(n);
      for (size_t i = 0; i < n; ++i) {
        width[i] = t.columns[i].name.size();
        for (const auto& row : t.rows) width[i] = std::max(width[i], CellAt(row, i).text.size());
      }
      auto line = [&](auto&& text_of) {
        std::string s = indent;
        for (size_t i = 0; i < n; ++i) {
          const std::string text = text_of(i);
          const std::string pad(width[i] - std::min(width[i], text.size()), ' ');
          const bool last = i + 1 == n;
          if (t.columns[i].right) s += pad + text;
          else s += text + (last ? "" : pad);
          if (!last) s += "  ";
        }
        s.erase(s.find_last_not_of(' ') + 1);  // an empty last cell leaves no trailing blanks
        out << s << '\n';
      };
      line([&](size_t i) { return t.columns[i].name; });
      for (const auto& row : t.rows) line([&](size_t i) { return CellAt(row, i).text; });
      break;
    }
    case RowFormat::kCsv: {
      for (size_t i = 0; i < n; ++i) out << (i ? "," : "") << CsvField(t.columns[i].name);
      out << '\n';
      for (const auto& row : t.rows) {
        for (size_t i = 0; i < n; ++i) out << (i ? "," : "") << CsvField(CellAt(row, i).text);
        out << '\n';
      }
      break;
    }
    case RowFormat::kJson: {
      out << "[";
      for (size_t r = 0; r < t.rows.size(); ++r) {
        nlohmann::ordered_json o = nlohmann::ordered_json::object();
        for (size_t i = 0; i < n; ++i) o[t.columns[i].name] = CellAt(t.rows[r], i).value;
        out << (r ? ",\n " : "\n ") << o.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      }
      out << (t.rows.empty() ? "]\n" : "\n]\n");
      break;
    }
    case RowFormat::kMarkdown: {
      out << "|";
      for (const RowColumn& c : t.columns) out << ' ' << MarkdownText(c.name) << " |";
      out << "\n|";
      for (const RowColumn& c : t.columns) out << (c.right ? " ---: |" : " --- |");
      out << '\n';
      for (const auto& row : t.rows) {
        out << "|";
        for (size_t i = 0; i < n; ++i) out << ' ' << MarkdownText(CellAt(row, i).text) << " |";
        out << '\n';
      }
      break;
    }
  }
  return out.str();
}

}  // namespace tune
