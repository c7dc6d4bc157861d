// The farm's monotonic clock, for deadlines, timeouts and durations.
#pragma once

namespace tune {

// Seconds on std::chrono::steady_clock since its (unspecified) epoch: only
// differences between two readings mean anything, and they never go
// backwards when the wall clock is set. Never fails; thread-safe.
double NowSeconds();

}  // namespace tune
