// Sample statistics of kernel timings.
#pragma once

#include <cstddef>
#include <vector>

namespace tune {

struct SampleStats {
  size_t n = 0;
  double median = 0, mean = 0, stdev = 0, min = 0, max = 0;
  double ci95 = 0;  // half-width of the 95% confidence interval of the mean (Student t)
  double RelativeCi() const { return mean > 0 ? ci95 / mean : 0; }
};

// Statistics of `samples` (any order; copied). n == 0 gives all zeros; n == 1
// gives stdev 0 and ci95 0. Sample stdev uses n-1.
SampleStats ComputeStats(const std::vector<double>& samples);

// The mean of `values` without the lowest and highest `trim` share of them
// (floor(trim * n) from each end; trim in [0, 0.5)): near the mean's
// precision where the values fall into a few clusters (where a median jumps
// between clusters), without letting one stray value move it. 0 for none.
double TrimmedMean(std::vector<double> values, double trim);

// Two-sided 95% Student t critical value for `dof` degrees of freedom:
// tabulated up to 30, interpolated beyond, tending to 1.96; infinity for 0.
double StudentT95(size_t dof);

}  // namespace tune
