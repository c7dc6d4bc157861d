#include "search/replay.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace tune {
namespace {

constexpr uint64_t kUnreached = std::numeric_limits<uint64_t>::max();

// The nearest-rank q-quantile of `v` (sorted in place).
uint64_t Quantile(std::vector<uint64_t>& v, double q) {
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * v.size()));
  return v[std::max<size_t>(rank, 1) - 1];
}

}  // namespace

Result<ReplayResult> Replay(const GroundTruth& truth, const ReplayOptions& options) {
  if (truth.configs.size() != truth.us.size())
    return Status::InvalidArgument(truth.key + ": figures do not match configs");
  auto space = SearchSpace::OfConfigs(truth.configs);
  if (!space.ok()) return Status::InvalidArgument(truth.key + ": " + space.status().message());
  std::map<SpacePoint, std::optional<double>> table;
  ReplayResult out;
  out.key = truth.key;
  out.best_us = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < truth.configs.size(); ++i) {
    const std::optional<SpacePoint> p = space.value().PointOf(truth.configs[i]);
    if (!p) return Status::InvalidArgument(truth.key + ": config " + truth.configs[i].Canonical() + " fits no point");
    table[*p] = truth.us[i];
    if (truth.us[i]) {
      ++out.valid;
      out.best_us = std::min(out.best_us, *truth.us[i]);
    }
  }
  out.legal = table.size();
  if (out.valid == 0) return Status::InvalidArgument(truth.key + ": no valid figure to search for");
  const uint64_t budget = options.search.budget > 0 ? options.search.budget : out.legal;

  std::vector<std::vector<uint64_t>> needed(options.within.size());
  std::set<std::string> warnings;
  for (uint32_t seed = 0; seed < options.seeds; ++seed) {
    SearchOptions so = options.search;
    so.seed = options.search.seed + seed;
    auto strategy = MakeStrategy(space.value(), so, options.priors, options.key_features);
    if (!strategy.ok()) return Status::InvalidArgument(truth.key + ": " + strategy.status().message());
    SearchStrategy& s = *strategy.value();
    out.strategy = s.Name();
    std::vector<uint64_t> first(options.within.size(), kUnreached);
    uint64_t evaluations = 0;
    double best = std::numeric_limits<double>::infinity();
    while (evaluations < budget) {
      if (options.stop && options.stop->load())
        return Status::Error(truth.key + ": stopped (SIGINT or SIGTERM)");
      const size_t n = static_cast<size_t>(std::min<uint64_t>(options.batch, budget - evaluations));
      const std::vector<SpacePoint> batch = s.Propose(n);
      if (batch.empty()) break;
      for (const SpacePoint& p : batch) {
        const auto it = table.find(p);
        const std::optional<double> us = it == table.end() ? std::nullopt : it->second;
        ++evaluations;
        if (us) best = std::min(best, *us);
        for (size_t w = 0; w < options.within.size(); ++w)
          if (first[w] == kUnreached && best <= out.best_us * (1 + options.within[w])) first[w] = evaluations;
      }
      for (const SpacePoint& p : batch) {
        const auto it = table.find(p);
        s.Observe(p, it == table.end() ? std::nullopt : it->second);
      }
      for (std::string& w : s.TakeWarnings()) warnings.insert(std::move(w));
    }
    for (size_t w = 0; w < options.within.size(); ++w) needed[w].push_back(first[w]);
  }
  for (size_t w = 0; w < options.within.size(); ++w) {
    ReplayFigure f;
    f.within = options.within[w];
    for (uint64_t n : needed[w]) f.reached += n != kUnreached ? 1 : 0;
    if (!needed[w].empty()) {
      const uint64_t median = Quantile(needed[w], 0.5), p90 = Quantile(needed[w], 0.9);
      f.median_reached = median != kUnreached;
      f.p90_reached = p90 != kUnreached;
      f.median = f.median_reached ? median : 0;
      f.p90 = f.p90_reached ? p90 : 0;
    }
    out.figures.push_back(f);
  }
  out.warnings.assign(warnings.begin(), warnings.end());
  return out;
}

}  // namespace tune
