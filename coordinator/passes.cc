#include "passes.h"

#include <algorithm>
#include <cmath>

#include "base/stats.h"

namespace tune {

bool KeyPasses::RefineNow(bool device_idle) {
  if (device_idle) {
    if (unsliced > 0 || refine_created || refine_early) return false;
    refine_early = true;
    return true;
  }
  if (!Screened()) return false;
  if (!refine_created) {
    refine_created = true;
    return true;
  }
  if (!refine_stale) return false;
  refine_stale = false;
  return true;
}

void SweepPasses::Unsliced(const PoolKey& k, int64_t n) {
  model[k.model].unsliced += uint64_t(n);  // wraps back for n < 0, as the counts never go below 0
  key[k].unsliced += uint64_t(n);
}

void SweepPasses::Opened(const Unit& u) {
  model[u.gpu_model].open_units++;
  if (u.kind != UnitKind::kScreen) return;
  KeyPasses& k = key[KeyOf(u)];
  k.open_screen_units++;
  k.open_screen_configs += u.configs.size();
}

void SweepPasses::Closed(const Unit& u) {
  model[u.gpu_model].open_units--;
  KeyPasses& k = key[KeyOf(u)];
  if (u.kind == UnitKind::kScreen) {
    k.open_screen_units--;
    k.open_screen_configs -= std::min<uint64_t>(k.open_screen_configs, u.configs.size());
  }
  if (u.kind == UnitKind::kRefine) k.refine_stale = true;
}

std::vector<Config> ContendersOf(std::vector<Measurement> valid, uint32_t top) {
  std::sort(valid.begin(), valid.end(), [](const Measurement& a, const Measurement& b) { return a.RanksAhead(b); });
  const size_t most = std::min<size_t>({valid.size(), size_t{2} * top, kMaxConfirmTop});
  std::vector<Config> configs;
  for (size_t i = 0; i < most; ++i) {
    const Measurement& m = valid[i];
    const bool near = m.pass == valid.front().pass && m.median_us <= (1 + kConfirmAlsoWithin) * valid.front().median_us;
    if (i >= top && !near) break;
    configs.push_back(m.config);
  }
  return configs;
}

NearBest NearBestOf(const std::vector<Measurement>& valid, double within) {
  constexpr size_t kShiftFrom = 5;
  NearBest near;
  std::vector<double> ratios;
  for (const auto& m : valid) {
    if (m.ReplacesScreening() && m.screen_us > 0) ratios.push_back(m.median_us / m.screen_us);
  }
  double shift = ratios.size() >= kShiftFrom ? ComputeStats(ratios).median : 1.0;
  if (!(shift > 0) || !std::isfinite(shift)) shift = 1.0;
  bool any = false;
  for (const auto& m : valid) {
    const double us = m.ReplacesScreening() ? m.median_us / shift : m.median_us;
    if (!std::isfinite(us)) continue;
    if (!any || us < near.best_us) near.best_us = us;
    any = true;
  }
  for (const auto& m : valid) {
    if (!m.ReplacesScreening() && m.median_us <= (1.0 + within) * near.best_us) near.configs.push_back(m.config);
  }
  return near;
}

}  // namespace tune
