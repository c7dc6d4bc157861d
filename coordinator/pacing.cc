#include "pacing.h"

#include <algorithm>

namespace tune {

void Pacing::Record(const std::string& worker, const std::string& sweep_id, const std::string& model,
                    const std::string& shape, double pairs, double seconds) {
  if (!(pairs > 0) || !(seconds > 0)) return;
  auto [slot, fresh] = pair_rate_.emplace(RateKey{worker, shape}, pairs / seconds);
  if (!fresh) slot->second = 0.5 * slot->second + 0.5 * pairs / seconds;  // smooth out one odd unit
  Pace& pace = pace_[{sweep_id, RateKey{model, shape}}];
  pace.seconds_per_pair.push_back(seconds / pairs);
  pace.stale = true;
}

uint32_t Pacing::UnitSize(const std::string& worker, const std::string& shape, uint32_t first,
                          double target_seconds, uint32_t min, uint32_t max) const {
  auto it = pair_rate_.find(RateKey{worker, shape});
  if (it == pair_rate_.end()) return first;
  return static_cast<uint32_t>(std::clamp<double>(it->second * target_seconds, min, max));
}

double Pacing::SecondsPerPair(const std::string& sweep_id, const std::string& model, const std::string& shape,
                              const std::string& holder) {
  if (auto it = pace_.find({sweep_id, RateKey{model, shape}}); it != pace_.end()) {
    Pace& pace = it->second;
    if (pace.stale) {
      std::vector<double> sorted = pace.seconds_per_pair;
      auto mid = sorted.begin() + sorted.size() / 2;
      std::nth_element(sorted.begin(), mid, sorted.end());
      pace.median = *mid;
      pace.stale = false;
    }
    return pace.median;
  }
  auto rate = pair_rate_.find(RateKey{holder, shape});
  return rate != pair_rate_.end() && rate->second > 0 ? 1 / rate->second : 0;
}

}  // namespace tune
