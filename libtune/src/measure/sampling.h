// When to stop timing a (config, shape): the sampling loop's stopping rule
// as a pure function, in the manner of nvbench's stopping criteria (a
// minimum sample count, a target noise, a time cap), so that it is tested
// without a GPU and every backend stops alike.
//
// A backend takes samples in batches: NextSampling(policy, ..., nothing yet)
// says how many to take first; after each batch it is asked again with the
// statistics of all samples so far, and answers either a stop (with the
// criterion that ended the loop) or the next batch. The next batch is what
// the noise target still needs (a CI shrinks with sqrt(n)), bounded by the
// time left and kMaxSampleBatch.
#pragma once

#include "measure/backend.h"
#include "base/sampling_rule.h"
#include "base/stats.h"

namespace tune {

// Samples queued between two synchronisations at most: a batch's kernels
// run back to back, and the events of a batch are read after it
// (python/tunefarm/sampling_rule.json, as the rule's other numbers).
inline constexpr int kMaxSampleBatch = sampling_rule::kMaxBatch;

struct SamplingProgress {
  SampleStats stats;         // of every sample so far (stats.n of them)
  double timed_seconds = 0;  // device time the samples took
  double wall_seconds = 0;   // since the first sample was queued
};

enum class SamplingStop {
  kNo,           // take `batch` more
  kEarly,        // clearly slower than the best so far: enough to rank it
  kNoiseTarget,  // the 95% CI is within the policy's target
  kMaxSamples,   // policy.max_samples taken
  kTimeCap,      // policy.max_seconds of timed work
  kWallCap,      // `wall_cap` seconds of wall time
};
const char* SamplingStopName(SamplingStop stop);

struct SamplingStep {
  SamplingStop stop = SamplingStop::kNo;
  int batch = 0;  // >= 1 when stop is kNo
};

// The next step after `progress`. `best_so_far_us` (0: none) sets the noise
// target and the early stop (TimingPolicy::TargetRelCi, StopsEarly);
// `wall_cap` bounds the loop's wall time whatever the policy (0: none).
// The early stop and the noise target apply from policy.min_samples on.
// Any policy and statistics give a step (a pure function, thread-safe).
//
// tunefarm.harness's next_sampling (python/tunefarm/harness.py) is the same
// rule for Python kernels: both give the same steps from the same
// statistics, bit for bit (tests/python/test_sampling_rule.py). Change them
// together.
SamplingStep NextSampling(const TimingPolicy& policy, double best_so_far_us, double wall_cap,
                          const SamplingProgress& progress);

// A measurement's figures (median, mean, stdev, min, max, ci95, samples)
// from the statistics of its samples.
inline void SetFigures(const SampleStats& stats, Measurement* m) {
  m->median_us = stats.median;
  m->mean_us = stats.mean;
  m->stdev_us = stats.stdev;
  m->min_us = stats.min;
  m->max_us = stats.max;
  m->ci95_us = stats.ci95;
  m->samples = static_cast<uint32_t>(stats.n);
}

}  // namespace tune
