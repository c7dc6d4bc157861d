#include "tune/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tune {

double StudentT95(size_t dof) {
  // Two-sided 95% critical values, dof 1..30.
  static constexpr double kSmall[] = {12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060,
                                      2.2622, 2.2281, 2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199,
                                      2.1098, 2.1009, 2.0930, 2.0860, 2.0796, 2.0739, 2.0687, 2.0639,
                                      2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423};
  // Beyond 30, tabulated anchors; t is close to linear in 1/dof between them.
  struct Anchor {
    double dof, t;
  };
  static constexpr Anchor kLarge[] = {{30, 2.0423},  {40, 2.0211},  {60, 2.0003},
                                      {120, 1.9799}, {1000, 1.9623}};
  constexpr double kNormal = 1.9600;
  if (dof == 0) return std::numeric_limits<double>::infinity();
  if (dof <= 30) return kSmall[dof - 1];
  const double inv = 1.0 / static_cast<double>(dof);
  for (size_t i = 0; i + 1 < std::size(kLarge); ++i) {
    const Anchor& lo = kLarge[i];
    const Anchor& hi = kLarge[i + 1];
    if (static_cast<double>(dof) <= hi.dof) {
      const double f = (1.0 / lo.dof - inv) / (1.0 / lo.dof - 1.0 / hi.dof);
      return lo.t + f * (hi.t - lo.t);
    }
  }
  const Anchor& last = kLarge[std::size(kLarge) - 1];
  return kNormal + (last.t - kNormal) * inv * last.dof;
}

SampleStats ComputeStats(const std::vector<double>& samples) {
  SampleStats s;
  s.n = samples.size();
  if (s.n == 0) return s;
  std::vector<double> v = samples;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = s.n % 2 ? v[s.n / 2] : 0.5 * (v[s.n / 2 - 1] + v[s.n / 2]);
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(s.n);
  if (s.n > 1) {
    // Two passes: the one-pass formula loses everything to cancellation when
    // the spread is tiny next to the mean, which is the usual case for timings.
    double ss = 0;
    for (double x : v) ss += (x - s.mean) * (x - s.mean);
    s.stdev = std::sqrt(ss / static_cast<double>(s.n - 1));
    s.ci95 = StudentT95(s.n - 1) * s.stdev / std::sqrt(static_cast<double>(s.n));
  }
  return s;
}

double TrimmedMean(std::vector<double> values, double trim) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t cut = size_t(std::clamp(trim, 0.0, 0.499) * double(values.size()));
  double sum = 0;
  for (size_t i = cut; i < values.size() - cut; ++i) sum += values[i];
  return sum / double(values.size() - 2 * cut);
}

}  // namespace tune
