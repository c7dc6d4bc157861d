#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "measure/backend.h"
#include "base/clock.h"
#include "base/stats.h"

namespace tune {
namespace {

// Sustained windows this long (wall time) are many samples of any kernel
// worth tuning, and short enough that a few seconds hold many rounds: the
// clock states and buffer placements the rounds see are what the figures
// average over.
constexpr double kWindowSeconds = 0.05;
// Placements of the buffers that the samples of one window rotate over
// (TimingPolicy::placements). At 1024^3 on an H100 one placement's samples
// sit in a cluster of their own, up to 6% from the next; rotating over 8
// halved the confirmed figure's CI there and kept the reruns at 4096^3 and
// 8192^3 within 0.3% (bench/gpu_h100.md, sixth session).
constexpr int kPlacements = 8;
// Bursts: an H100 at its power limit runs a GEMM at full clock for the
// first 20-40 ms after 0.4 s idle, the same to 0.3% from one trial to the
// next, and drops 5-15% after that (bench/clock_transient.cu). Ten
// milliseconds of samples stay inside that stretch; the idle time lets the
// power the previous kernel drew die away.
constexpr double kBurstSeconds = 0.01;
constexpr double kBurstIdleSeconds = 0.3;
constexpr int kBurstMinSamples = 3;
constexpr int kMinRounds = 3;
// A stray round (a hiccup of the host or the device) in ten is left out of
// the figure.
constexpr double kTrimShare = 0.1;
constexpr int kMaxRounds = 1000;

// What one round times of each config.
// `window_timed_seconds`: how much timed (kernel) time a sustained window
// asks for; the runner counts windows in timed time, and the L2 flush
// between samples makes a window of a short kernel last several times that.
TimingPolicy RoundPolicy(const TimingPolicy& policy, ConfirmTiming timing, double window_timed_seconds) {
  TimingPolicy round = policy;
  round.target_rel_ci = 1.0;     // the window is the figure: rank on the minimum samples only
  round.early_stop_factor = 0;   // and never stop one early
  round.placements = kPlacements;
  if (timing == ConfirmTiming::kBurst) {
    round.warmup = 0;            // the check run before it paid the first-launch costs
    round.idle_seconds = kBurstIdleSeconds;
    round.min_samples = kBurstMinSamples;
    // As many samples as 10 ms hold: a kernel of microseconds needs hundreds
    // for its median to lie past the first moments out of idle.
    round.max_samples = std::numeric_limits<int>::max();
    round.target_rel_ci = 0;     // every sample the burst has time for
    round.max_seconds = kBurstSeconds;
    round.refine_seconds = 0;
    round.timeout_seconds = policy.timeout_seconds + kBurstIdleSeconds;
  } else {
    round.refine_seconds = window_timed_seconds;
    // A window may be longer than an ordinary config's time caps.
    round.max_seconds = std::max(policy.max_seconds, kWindowSeconds);
    round.timeout_seconds = policy.timeout_seconds + 2 * kWindowSeconds;
  }
  return round;
}

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
  // The rounds' medians fall into clusters, one per state of a runner
  // process (TimingPolicy::new_runner): their trimmed mean weighs the
  // clusters by how often they came up, where their median would sit in
  // one of them.
  m.median_us = TrimmedMean(medians, kTrimShare);
  m.stdev_us = across.stdev;
  m.ci95_us = across.ci95;
  m.mean_us = samples > 0 ? weighted_mean / double(samples) : across.mean;
  m.samples = uint32_t(std::min<uint64_t>(samples, UINT32_MAX));
  return m;
}

}  // namespace

std::vector<Measurement> MeasureTogether(Backend& backend, const OpSpec& spec, const std::string& dtype,
                                         const std::vector<CompiledKernel>& kernels, const Shape& shape,
                                         const TimingPolicy& policy, double seconds, ConfirmTiming timing) {
  const size_t n = kernels.size();
  std::vector<Measurement> out(n);
  if (n == 0) return out;
  std::vector<std::vector<Measurement>> windows(n);
  std::vector<bool> failed(n, false);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::mt19937 rng(0x5eed);  // the same orders on every run
  // One round: every config that has not failed, one window each, into
  // `into`. False when none is left.
  // Timed time per sustained window, scaled after each round so that a
  // window lasts about kWindowSeconds of wall time.
  double window_timed_seconds = kWindowSeconds;
  auto round = [&](ConfirmTiming t, std::vector<std::vector<Measurement>>* into) {
    TimingPolicy p = RoundPolicy(policy, t, window_timed_seconds);
    double timed_share = 1.0;  // smallest timed / wall time of this round's windows
    // Each round in a runner process and on buffers of its own; every
    // config of the round in them.
    p.new_runner = true;
    p.new_buffers = true;
    // A new order every round: a window's figure depends on what ran just
    // before it (a config that follows a cooler one starts at a higher
    // clock), so no config may keep one place or one predecessor.
    std::shuffle(order.begin(), order.end(), rng);
    bool any = false;
    for (size_t i : order) {
      if (failed[i]) continue;
      any = true;
      // No best so far: every window is a contender's window.
      const double window_start = NowSeconds();
      Measurement m = backend.Measure(spec, dtype, kernels[i], shape, p, 0);
      const double wall = NowSeconds() - window_start;
      p.new_runner = false;
      p.new_buffers = false;
      if (m.Valid() && wall > 0) timed_share = std::min(timed_share, m.mean_us * m.samples * 1e-6 / wall);
      if (!m.Valid()) {
        out[i] = std::move(m);
        failed[i] = true;
        continue;
      }
      (*into)[i].push_back(std::move(m));
    }
    if (t == ConfirmTiming::kSustained && any)
      window_timed_seconds = std::clamp(kWindowSeconds * timed_share, 0.1 * kWindowSeconds, kWindowSeconds);
    return any;
  };
  // Wall time, not timed time, bounds the rounds: a kernel of microseconds
  // spends most of a window's wall time in the L2 flushes between samples,
  // and the unit's lease counts wall time.
  const double start = NowSeconds();
  int rounds = 0;
  if (timing == ConfirmTiming::kAuto) {
    // A round of each. Where sustained load slows the configs (a GPU at its
    // power limit: 10-15% for large GEMMs on an H100), bursts give the
    // figure that repeats; where it does not (a kernel too short to reach
    // the limit: within a few percent, the noise of one window), sustained
    // windows do, and more of them fit.
    std::vector<std::vector<Measurement>> bursts(n), sustained(n);
    round(ConfirmTiming::kBurst, &bursts);
    round(ConfirmTiming::kSustained, &sustained);
    std::vector<double> slowdown;
    for (size_t i = 0; i < n; ++i) {
      if (!failed[i] && !bursts[i].empty() && !sustained[i].empty() && bursts[i][0].median_us > 0)
        slowdown.push_back(sustained[i][0].median_us / bursts[i][0].median_us);
    }
    std::sort(slowdown.begin(), slowdown.end());
    constexpr double kPowerLimited = 1.05;
    timing = !slowdown.empty() && slowdown[slowdown.size() / 2] > kPowerLimited ? ConfirmTiming::kBurst
                                                                                : ConfirmTiming::kSustained;
    windows = timing == ConfirmTiming::kBurst ? std::move(bursts) : std::move(sustained);
    rounds = 1;
  }
  for (; rounds < kMaxRounds; ++rounds) {
    if (rounds >= kMinRounds && NowSeconds() - start >= seconds) break;
    if (!round(timing, &windows)) break;
  }
  for (size_t i = 0; i < n; ++i) {
    if (failed[i]) continue;
    out[i] = Combine(windows[i]);
    out[i].confirm_timing = timing;
  }
  return out;
}

}  // namespace tune
