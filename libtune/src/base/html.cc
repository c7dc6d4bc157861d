#include "base/html.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace tune {

std::string HtmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string EscapeInlineScript(std::string_view js) {
  auto lower_at = [&js](size_t i, std::string_view word) {
    if (i + word.size() > js.size()) return false;
    for (size_t k = 0; k < word.size(); ++k) {
      const char c = js[i + k];
      if ((c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c) != word[k]) return false;
    }
    return true;
  };
  std::string out;
  out.reserve(js.size() + 16);
  for (size_t i = 0; i < js.size(); ++i) {
    out += js[i];
    if (js[i] == '<' && (lower_at(i, "</script") || lower_at(i, "<!--"))) out += '\\';
  }
  return out;
}

std::vector<std::string> DefaultChartJsPaths() {
  std::vector<std::string> paths = {"/usr/share/javascript/chart.js/chart.umd.js",
                                    "/usr/share/javascript/chart.js/chart.min.js",
                                    "/usr/share/javascript/chart.js/Chart.min.js"};
  // A packed tunefarm (scripts/pack.sh) ships its own copy: GPU hosts have
  // no Debian package to take it from.
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) paths.push_back((exe.parent_path().parent_path() / kPackedChartJs).string());
  return paths;
}

std::string ReadFirstFile(const std::vector<std::string>& candidates, std::string* tried) {
  for (const auto& path : candidates) {
    if (tried) *tried += (tried->empty() ? "" : ", ") + path;
    std::ifstream in(path, std::ios::binary);
    if (!in) continue;
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad() || text.str().empty()) continue;
    return text.str();
  }
  return "";
}

}  // namespace tune
