// Pacing: how fast units go, learned from the screening units completed.
//
// Each worker's pairs per second on a shape (smoothed), which sizes its
// next unit, and per sweep, GPU model and shape the seconds per pair of its
// completed units, whose median says how long a unit may go without
// progress before it counts as a straggler. Bookkeeping only: the scheduler
// records units and asks (scheduler.h, SchedulerOptions says the bounds).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace tune {

// The key of a pace: a worker (routing identity) or a GPU model, and a
// shape (Shape::Canonical()): units of different shapes take very
// different times.
struct RateKey {
  std::string who, shape;
  bool operator<(const RateKey& o) const { return std::tie(who, shape) < std::tie(o.who, o.shape); }
};

class Pacing {
 public:
  // A screening unit of `sweep_id` on `model` measured `pairs` (config,
  // shape) pairs of `shape` (those a worker reused left out) in `seconds`
  // on `worker`.
  void Record(const std::string& worker, const std::string& sweep_id, const std::string& model,
              const std::string& shape, double pairs, double seconds);
  // Configs the next fresh unit of `shape` for `worker` holds: `first`
  // before its pace is known, else what lasts `target_seconds` at it,
  // within [min, max].
  uint32_t UnitSize(const std::string& worker, const std::string& shape, uint32_t first, double target_seconds,
                    uint32_t min, uint32_t max) const;
  // Seconds per pair a unit of `sweep_id`, `model` and `shape` should take:
  // the median of its sweep's completed units there, else `holder`'s own
  // pace on the shape; 0 when neither is known.
  double SecondsPerPair(const std::string& sweep_id, const std::string& model, const std::string& shape,
                        const std::string& holder);

 private:
  struct Pace {
    std::vector<double> seconds_per_pair;
    double median = 0;
    bool stale = false;  // median not yet recomputed since the last sample
  };
  std::map<RateKey, double> pair_rate_;  // who: the worker; pairs/s (smoothed)
  std::map<std::pair<std::string, RateKey>, Pace> pace_;  // (sweep, who: the GPU model)
};

}  // namespace tune
