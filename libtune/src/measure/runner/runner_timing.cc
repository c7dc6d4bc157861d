// The sampling loop: warm-up, an L2 flush before each sample, batches of
// samples timed with events until NextSampling (measure/sampling.h) says stop,
// then a contender's steady-state window.
#include "measure/runner/runner.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "measure/sampling.h"
#include "base/stats.h"

namespace tune::runner {

Failure Runner::Time(const MeasuredLaunch& launch, const TimingPolicy& policy, double best_so_far_us,
                     double checked_seconds, const std::vector<void**>& param_sets, double config_start,
                     Measurement* m) {
  // The checked run already paid for the first-launch costs; a slow kernel
  // gets fewer warm-ups so that its minimum samples fit in the time cap.
  int warmup = std::max(0, policy.warmup);
  if (checked_seconds > 0 && checked_seconds * warmup > policy.max_seconds)
    warmup = std::max(0, int(policy.max_seconds / checked_seconds));
  for (int i = 0; i < warmup; ++i) {
    if (DeviceStatus st = launch(stream_, param_sets[0]); !st.ok())
      return device_ops_->FromDevice(st, "warm-up launch");
  }
  if (DeviceStatus st = api_.SynchronizeStream(stream_); !st.ok()) return device_ops_->FromDevice(st, "warm-up");
  if (policy.idle_seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(policy.idle_seconds));

  const device::ClockReading before = api_.Clocks();
  // Stay well inside the backend's wall-clock limit whatever the policy says.
  const double wall_cap = std::min(2.0 * policy.max_seconds + 1.0,
                                   std::max(0.1, 0.5 * policy.timeout_seconds - Seconds(config_start)));
  const double loop_start = NowSeconds();
  // The L2 flush before each sample: a read of the flush buffer, or where
  // the builtin kernels did not compile, a fill of it; none when the op is
  // timed hot (the warm-up and each sample leave L2 warm for the next).
  long long flush_words = (long long)(flush_bytes_ / 16);
  void* flush_params[] = {&flush_, &flush_words, &builtin_stats_};
  const int64_t flush_grid[3] = {int64_t(std::max(1, device_.num_sms)) * 4, 1, 1};
  const int64_t flush_block[3] = {512, 1, 1};
  auto flush = [&]() -> DeviceStatus {
    if (hot_l2_) return {};
    if (flush_l2_) return device_ops_->Launch(flush_l2_, flush_grid, flush_block, 0, stream_, flush_params);
    return api_.Fill(flush_, 0, flush_bytes_, stream_);
  };
  // Hot, nothing runs between samples: a spin ahead of the batch holds the
  // stream while the host enqueues it (kHoldCyclesPerSample each, about
  // 20 us at 2 GHz: more than a launch and two event records take), so that
  // a kernel shorter than a launch is not timed with the host's gaps.
  constexpr long long kHoldCyclesPerSample = 40'000;
  const int64_t one[3] = {1, 1, 1};
  // Queues `count` samples back to back on the stream, each after an L2
  // flush and on the next placement, and appends their times.
  size_t placement = 0;
  auto take = [&](int count, std::vector<double>* out, double* timed) -> Failure {
    if (hot_l2_ && hold_) {
      long long cycles = kHoldCyclesPerSample * count;
      void* hold_params[] = {&cycles};
      if (DeviceStatus st = device_ops_->Launch(hold_, one, one, 0, stream_, hold_params); !st.ok())
        return device_ops_->FromDevice(st, "hold launch");
    }
    for (int b = 0; b < count; ++b) {
      // Hot: the same buffers each time, so that what a sample leaves in L2
      // is what the next one reads.
      void** params = hot_l2_ ? param_sets[0] : param_sets[placement++ % param_sets.size()];
      DeviceStatus st = flush();
      if (st.ok()) st = api_.Record(ev_start_[b], stream_);
      if (st.ok()) st = launch(stream_, params);
      if (st.ok()) st = api_.Record(ev_stop_[b], stream_);
      if (!st.ok()) return device_ops_->FromDevice(st, "timed launch");
    }
    if (DeviceStatus st = api_.SynchronizeStream(stream_); !st.ok()) return device_ops_->FromDevice(st, "timed run");
    for (int b = 0; b < count; ++b) {
      float ms = 0;
      if (DeviceStatus st = api_.ElapsedMs(ev_start_[b], ev_stop_[b], &ms); !st.ok())
        return device_ops_->FromDevice(st, "event timing");
      out->push_back(double(ms) * 1000.0);
      *timed += double(ms) / 1000.0;
    }
    return {};
  };
  std::vector<double> samples;
  SamplingProgress progress;
  for (SamplingStep step = NextSampling(policy, best_so_far_us, wall_cap, progress);;
       step = NextSampling(policy, best_so_far_us, wall_cap, progress)) {
    if (step.stop != SamplingStop::kNo) {
      stopped_ = step.stop;
      break;
    }
    if (Failure f = take(step.batch, &samples, &progress.timed_seconds); f.failed()) return f;
    progress.stats = ComputeStats(samples);
    progress.wall_seconds = Seconds(loop_start);
  }
  SampleStats stats = progress.stats;
  // A contender for the win is timed again in a window long enough for the
  // clocks to settle; the window's samples replace the ranking ones.
  const bool contender = policy.refine_seconds > 0 && stats.median > 0 && policy.Contender(stats.median, best_so_far_us);
  if (contender) {
    std::vector<double> window;
    double window_seconds = 0;
    while (window_seconds < policy.refine_seconds && Seconds(loop_start) < wall_cap) {
      const double left = (policy.refine_seconds - window_seconds) / (stats.median * 1e-6);
      const int count = int(std::clamp<double>(std::ceil(left), 1, kWindowBatch));
      if (Failure f = take(count, &window, &window_seconds); f.failed()) return f;
    }
    stats = ComputeStats(window);
  }
  const device::ClockReading after = api_.Clocks();
  if (policy.energy_seconds > 0 && stats.median > 0 && Seconds(loop_start) < wall_cap) {
    if (Failure f = MeasureEnergy(launch, policy.energy_seconds, stats.median, param_sets[0], wall_cap - Seconds(loop_start), m);
        f.failed())
      return f;
  }

  SetFigures(stats, m);
  m->throttled = before.throttled || after.throttled;
  m->sm_clock_mhz = after.valid ? after.sm_clock_mhz : before.sm_clock_mhz;
  return {};
}

Failure Runner::MeasureEnergy(const MeasuredLaunch& launch, double seconds, double median_us, void** params,
                              double wall_left, Measurement* m) {
  const device::EnergyReading before = api_.Energy();
  if (!before.valid) return {};
  const double start = NowSeconds();
  double window = 0;  // seconds of kernel time, by events
  int64_t calls = 0;
  while (window < seconds && Seconds(start) < wall_left) {
    const int count = int(std::clamp<double>(std::ceil((seconds - window) / (median_us * 1e-6)), 1, kWindowBatch));
    DeviceStatus st = api_.Record(ev_start_[0], stream_);
    for (int i = 0; i < count && st.ok(); ++i) st = launch(stream_, params);
    if (st.ok()) st = api_.Record(ev_stop_[0], stream_);
    if (st.ok()) st = api_.SynchronizeStream(stream_);
    float ms = 0;
    if (st.ok()) st = api_.ElapsedMs(ev_start_[0], ev_stop_[0], &ms);
    if (!st.ok()) return device_ops_->FromDevice(st, "energy window");
    window += double(ms) / 1000.0;
    calls += count;
  }
  const device::EnergyReading after = api_.Energy();
  const double wall = Seconds(start);
  const double joules = after.joules - before.joules;
  m->power_limit_w = after.power_limit_w;
  // The counter covers the whole board over the wall time between the
  // reads, during which the device ran these calls back to back: its mean
  // power, times a call's share of the window, is a call's energy. A counter
  // that did not move (too short a window for its resolution) gives none.
  if (!after.valid || joules <= 0 || wall <= 0 || calls == 0 || window <= 0) return {};
  m->power_w = joules / wall;
  m->energy_uj = m->power_w * (window / double(calls)) * 1e6;
  return {};
}

}  // namespace tune::runner
