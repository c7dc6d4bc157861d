#include "search/selector.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tune {

Selector FitSelector(const SelectorInput& in, double slowdown) {
  const size_t ns = in.shapes.size(), nc = in.candidates.size();
  std::vector<double> best(ns, std::numeric_limits<double>::infinity());
  for (size_t c = 0; c < nc; ++c)
    for (size_t s = 0; s < ns; ++s) best[s] = std::min(best[s], in.us[c][s]);
  auto covers = [&](size_t c, size_t s) { return std::isfinite(in.us[c][s]) && in.us[c][s] <= slowdown * best[s]; };
  std::vector<bool> covered(ns, false);
  for (size_t s = 0; s < ns; ++s) covered[s] = !std::isfinite(best[s]);
  Selector out;
  while (std::find(covered.begin(), covered.end(), false) != covered.end()) {
    size_t pick = SIZE_MAX, pick_n = 0;
    double pick_mean = 0;
    for (size_t c = 0; c < nc; ++c) {
      size_t n = 0;
      double log_sum = 0;
      for (size_t s = 0; s < ns; ++s) {
        if (!covered[s] && covers(c, s)) ++n;
        if (covers(c, s)) log_sum += std::log(in.us[c][s] / best[s]);
      }
      if (n == 0) continue;
      const double mean = log_sum / static_cast<double>(n);
      const bool better = n > pick_n || (n == pick_n && (mean < pick_mean ||
                          (mean == pick_mean && in.candidates[c].Id() < in.candidates[pick].Id())));
      if (pick == SIZE_MAX || better) pick = c, pick_n = n, pick_mean = mean;
    }
    if (pick == SIZE_MAX) break;  // cannot happen: each shape's best covers it
    out.chosen.push_back(pick);
    for (size_t s = 0; s < ns; ++s) covered[s] = covered[s] || covers(pick, s);
  }
  out.assign.assign(ns, SIZE_MAX);
  for (size_t s = 0; s < ns; ++s)
    for (size_t c : out.chosen)
      if (covers(c, s) && (out.assign[s] == SIZE_MAX || in.us[c][s] < in.us[out.assign[s]][s])) out.assign[s] = c;
  return out;
}

size_t NearestShape(const std::vector<Shape>& shapes, const Shape& query) {
  auto log_of = [](const Shape& s, const std::string& name) {
    for (const auto& [n, v] : s.dims)
      if (n == name) return std::log2(static_cast<double>(std::max<int64_t>(v, 1)));
    return 0.0;
  };
  size_t best = SIZE_MAX;
  double best_d = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < shapes.size(); ++i) {
    double d = 0;
    for (const auto& [name, v] : query.dims) d += std::pow(log_of(query, name) - log_of(shapes[i], name), 2);
    for (const auto& [name, v] : shapes[i].dims) {
      bool shared = false;
      for (const auto& [qn, qv] : query.dims) shared = shared || qn == name;
      if (!shared) d += std::pow(log_of(shapes[i], name), 2);
    }
    if (d < best_d) best_d = d, best = i;
  }
  return best;
}

}  // namespace tune
