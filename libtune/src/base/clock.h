// The farm's clocks: the one home of every reading of the time.
//
// Production code outside libtune/src/base reads the time only here or
// through an Env (base/env.h), never through std::chrono's clocks,
// std::time, gettimeofday or clock_gettime (tests/layering_test.py checks
// it). One home is what lets a test or a replay control time: code handed
// an Env or a `now` can be driven by a fake clock, and what is left reads
// the host's clock in this one place, where a change of clock (or of the
// rule wall time versus monotonic time) is made once.
//
// Two clocks, not to be mixed:
// - monotonic (NowSeconds, NowNanos): deadlines, timeouts, durations and
//   rates; never goes backwards when the wall clock is set, and its epoch
//   means nothing;
// - wall (NowUnixSeconds, NowUnixSecondsPrecise): stamps that outlive the
//   process or are read by people (stored rows, bundles, logs); may jump
//   when the clock is set, so never used to measure a duration.
#pragma once

#include <cstdint>

namespace tune {

// Seconds on std::chrono::steady_clock since its (unspecified) epoch: only
// differences between two readings mean anything, and they never go
// backwards when the wall clock is set. Never fails; thread-safe.
double NowSeconds();
// The same clock in whole nanoseconds, for differences finer than a double
// of seconds keeps after a long uptime. Never fails; thread-safe.
int64_t NowNanos();

// Whole seconds since the Unix epoch on the wall clock (std::time). Never
// fails; thread-safe.
int64_t NowUnixSeconds();
// Seconds since the Unix epoch on the wall clock with their fraction
// (std::chrono::system_clock), for traces and logs. Never fails;
// thread-safe.
double NowUnixSecondsPrecise();

}  // namespace tune
