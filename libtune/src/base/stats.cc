#include "base/stats.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "base/sampling_rule.h"

namespace tune {

// The table is python/tunefarm/sampling_rule.json (base/sampling_rule.h is
// generated from it); tunefarm.harness's student_t95 interpolates it alike.
double StudentT95(size_t dof) {
  using sampling_rule::kT95;
  using sampling_rule::kT95Anchors;
  using sampling_rule::kT95Normal;
  if (dof == 0) return std::numeric_limits<double>::infinity();
  if (dof <= std::size(kT95)) return kT95[dof - 1];
  // Beyond the table, t is close to linear in 1/dof between the anchors.
  const double inv = 1.0 / static_cast<double>(dof);
  for (size_t i = 0; i + 1 < std::size(kT95Anchors); ++i) {
    const sampling_rule::T95Anchor& lo = kT95Anchors[i];
    const sampling_rule::T95Anchor& hi = kT95Anchors[i + 1];
    if (static_cast<double>(dof) <= hi.dof) {
      const double f = (1.0 / lo.dof - inv) / (1.0 / lo.dof - 1.0 / hi.dof);
      return lo.t + f * (hi.t - lo.t);
    }
  }
  const sampling_rule::T95Anchor& last = kT95Anchors[std::size(kT95Anchors) - 1];
  return kT95Normal + (last.t - kT95Normal) * inv * last.dof;
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
