// What every HTML page the farm writes shares (the coordinator's dashboard,
// `compare --format html`, nightly reports): escaping, inlining a script,
// and where Chart.js is found. The one home of these rules.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tune {

// `s` as HTML text or attribute value: & < > " ' replaced by entities.
std::string HtmlEscape(std::string_view s);

// JavaScript as the body of an inline <script> element. The element ends at
// the first "</script" whatever the JavaScript around it means, and after
// "<!--" a later "<script" nests; both can only occur inside strings,
// regular expressions or comments, where "<\/" and "<\!--" mean the same, so
// only those two are rewritten.
std::string EscapeInlineScript(std::string_view js);

// The files tried, in order, for Chart.js: Debian's libjs-chart.js (Chart.js
// 4 ships a UMD build as chart.umd.js, Chart.js 3 as chart.min.js; pages use
// only what both provide), then the copy a packed tunefarm ships
// (kPackedChartJs under the folder above the running binary's).
std::vector<std::string> DefaultChartJsPaths();
// Where a packed tunefarm keeps Chart.js, relative to its prefix (the folder
// above the running binary's).
inline constexpr const char* kPackedChartJs = "share/tunefarm/js/chart.min.js";

// The contents of the first of `candidates` that reads whole and non-empty;
// "" when none does. `tried` (if given) receives the paths looked at,
// comma-separated, for a message that says where to install it.
std::string ReadFirstFile(const std::vector<std::string>& candidates, std::string* tried = nullptr);

}  // namespace tune
