#include "measure/sampling.h"

#include <algorithm>
#include <cmath>

namespace tune {

const char* SamplingStopName(SamplingStop stop) {
  switch (stop) {
    case SamplingStop::kNo: return "no";
    case SamplingStop::kEarly: return "early";
    case SamplingStop::kNoiseTarget: return "noise_target";
    case SamplingStop::kMaxSamples: return "max_samples";
    case SamplingStop::kTimeCap: return "time_cap";
    case SamplingStop::kWallCap: return "wall_cap";
  }
  return "unknown";
}

// The same rule as next_sampling in python/tunefarm/harness.py, operation
// for operation (and compiled without fused multiply-adds) so that both give
// the same steps; tests/python/test_sampling_rule.py holds them to it.
SamplingStep NextSampling(const TimingPolicy& policy, double best_so_far_us, double wall_cap,
                          const SamplingProgress& progress) {
  const int max_samples = std::max(1, policy.max_samples);
  const int min_samples = std::clamp(policy.min_samples, 1, max_samples);
  const SampleStats& stats = progress.stats;
  const int n = static_cast<int>(stats.n);
  // `need` stays a double until bounded here: a tiny target or mean makes it
  // overflow an int (or infinite, or NaN: then one sample).
  auto step = [&](double need) {
    const int most = std::min(kMaxSampleBatch, max_samples - n);
    return SamplingStep{SamplingStop::kNo, need >= most ? most : need >= 1 ? static_cast<int>(need) : 1};
  };
  if (n == 0) return step(min_samples);
  if (n >= max_samples) return {SamplingStop::kMaxSamples, 0};
  const double target = policy.TargetRelCi(stats.median, best_so_far_us);
  if (n >= min_samples) {
    if (policy.StopsEarly(stats.median, best_so_far_us)) return {SamplingStop::kEarly, 0};
    if (stats.mean > 0 && stats.ci95 <= target * stats.mean) return {SamplingStop::kNoiseTarget, 0};
  }
  if (progress.timed_seconds >= policy.max_seconds) return {SamplingStop::kTimeCap, 0};
  if (wall_cap > 0 && progress.wall_seconds >= wall_cap) return {SamplingStop::kWallCap, 0};
  double need = kMaxSampleBatch;
  const double rel = stats.RelativeCi();
  if (n < min_samples) {
    need = min_samples - n;
  } else if (rel > 0 && target > 0) {
    need = std::ceil(double(n) * (rel / target) * (rel / target)) - n;
  }
  if (stats.mean > 0) {
    const double left = (policy.max_seconds - progress.timed_seconds) / (stats.mean * 1e-6);
    need = std::min(need, std::max(1.0, std::ceil(left)));
  }
  return step(need);
}

}  // namespace tune
