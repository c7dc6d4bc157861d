#include "dashboard.h"

#include <string_view>

#include "base/html.h"

// The dashboard's files (coordinator/assets/), embedded at build time.
namespace tune::assets {
extern const char kDashboardHtml[], kDashboardCss[], kDashboardJs[];
}  // namespace tune::assets

namespace tune {

std::string DashboardPage() {
  std::string page = assets::kDashboardHtml;
  auto put = [&page](std::string_view marker, const std::string& element) {
    const size_t at = page.find(marker);
    if (at != std::string::npos) page.replace(at, marker.size(), element);
  };
  put("<!--TUNEFARM_STYLE-->", std::string("<style>\n") + assets::kDashboardCss + "</style>");
  put("<!--TUNEFARM_SCRIPT-->", "<script>\n" + EscapeInlineScript(assets::kDashboardJs) + "</script>");
  return page;
}

std::vector<std::string> DashboardDocuments() { return {"sweeps", "workers", "best", "compare"}; }

}  // namespace tune
