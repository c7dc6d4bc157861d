#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "tune/backend.h"
#include "tune/stats.h"

namespace tune {
namespace {

// Windows this long are many samples of any kernel worth tuning, and short
// enough that a few seconds hold many rounds: the clock states a round sees
// are what the figures average over.
constexpr double kWindowSeconds = 0.05;
constexpr int kMinRounds = 3;
constexpr int kMaxRounds = 100;

Measurement Combine(const std::vector<Measurement>& windows) {
  Measurement m = windows.back();  // check, resources and clocks of the last window
  std::vector<double> medians;
  double weighted_mean = 0;
  uint64_t samples = 0;
  for (const auto& w : windows) {
    medians.push_back(w.median_us);
    weighted_mean += w.mean_us * w.samples;
    samples += w.samples;
    m.min_us = std::min(m.min_us, w.min_us);
    m.max_us = std::max(m.max_us, w.max_us);
    m.throttled = m.throttled || w.throttled;
  }
  const SampleStats across = ComputeStats(medians);
  m.median_us = across.median;
  m.stdev_us = across.stdev;
  m.ci95_us = across.ci95;
  m.mean_us = samples > 0 ? weighted_mean / double(samples) : across.mean;
  m.samples = uint32_t(std::min<uint64_t>(samples, UINT32_MAX));
  return m;
}

}  // namespace

std::vector<Measurement> MeasureTogether(Backend& backend, const OpSpec& spec, const std::string& dtype,
                                         const std::vector<CompiledKernel>& kernels, const Shape& shape,
                                         const TimingPolicy& policy, double seconds) {
  const size_t n = kernels.size();
  std::vector<Measurement> out(n);
  if (n == 0) return out;
  const int rounds =
      std::clamp(int(std::lround(seconds / (double(n) * kWindowSeconds))), kMinRounds, kMaxRounds);
  TimingPolicy window = policy;
  window.refine_seconds = seconds / (double(rounds) * double(n));
  // A window may be longer than an ordinary config's time caps.
  window.max_seconds = std::max(policy.max_seconds, window.refine_seconds);
  window.timeout_seconds = policy.timeout_seconds + 2 * window.refine_seconds;
  window.target_rel_ci = 1.0;     // the window is the figure: rank on the minimum samples only
  window.early_stop_factor = 0;   // and never stop one early
  std::vector<std::vector<Measurement>> windows(n);
  std::vector<bool> failed(n, false);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::mt19937 rng(0x5eed);  // the same orders on every run
  for (int r = 0; r < rounds; ++r) {
    // Each round on buffers of its own; every config of the round on them.
    window.new_buffers = true;
    // A new order every round: a window's figure depends on what ran just
    // before it (a config that follows a cooler one starts at a higher
    // clock), so no config may keep one place or one predecessor.
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      if (failed[i]) continue;
      // No best so far: every window is a contender's window.
      Measurement m = backend.Measure(spec, dtype, kernels[i], shape, window, 0);
      window.new_buffers = false;
      if (!m.Valid()) {
        out[i] = std::move(m);
        failed[i] = true;
        continue;
      }
      windows[i].push_back(std::move(m));
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (!failed[i]) out[i] = Combine(windows[i]);
  }
  return out;
}

}  // namespace tune
