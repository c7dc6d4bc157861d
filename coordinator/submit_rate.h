// SubmitRate: how many sweeps each client may submit in any 60 s (tune/
// limits.h kDefaultMaxSweepsPerMinute), as pure logic over an injected
// clock. A client is what the coordinator can tell apart: its CURVE key,
// or without CURVE its address.
//
// Thread safety: none; the coordinator's loop owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "tune/status.h"

namespace tune {

class SubmitRate {
 public:
  // `per_minute` 0: no limit.
  explicit SubmitRate(uint32_t per_minute) : per_minute_(per_minute) {}

  // Counts a submit of `client` at `now` (seconds, monotonic) and returns
  // OK, or, when `client` has submitted per_minute sweeps in the 60 s
  // before `now`, an error naming the bound, the count and the limit
  // (which counts nothing). Costs O(log clients) amortised; clients whose
  // window is empty are forgotten, so memory is bounded by the clients
  // active in a minute.
  Status Admit(const std::string& client, double now);

 private:
  void ForgetIdle(double now);

  uint32_t per_minute_;
  std::map<std::string, std::deque<double>> recent_;  // client -> its submit times in the window
  double last_sweep_ = 0;                              // when idle clients were last forgotten
};

}  // namespace tune
