#include "search/replay.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <deque>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "search/key_search.h"

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
  auto made = SearchSpace::OfConfigs(truth.configs);
  if (!made.ok()) return Status::InvalidArgument(truth.key + ": " + made.status().message());
  const auto space = std::make_shared<const SearchSpace>(std::move(made).value());
  std::map<SpacePoint, std::optional<double>> table;
  ReplayResult out;
  out.key = truth.key;
  out.best_us = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < truth.configs.size(); ++i) {
    const std::optional<SpacePoint> p = space->PointOf(truth.configs[i]);
    if (!p) return Status::InvalidArgument(truth.key + ": config " + truth.configs[i].Canonical() + " fits no point");
    table[*p] = truth.us[i];
    if (truth.us[i]) {
      ++out.valid;
      out.best_us = std::min(out.best_us, *truth.us[i]);
    }
  }
  out.legal = table.size();
  if (out.valid == 0) return Status::InvalidArgument(truth.key + ": no valid figure to search for");

  if (options.batch == 0) return Status::InvalidArgument(truth.key + ": a batch of 0 configs");
  if (options.in_flight != 0 && options.in_flight < options.batch)
    return Status::InvalidArgument(truth.key + ": " + std::to_string(options.in_flight) +
                                   " configs in flight, fewer than a batch of " + std::to_string(options.batch));
  const size_t batch_size = options.batch;
  const size_t depth = options.in_flight == 0 ? batch_size : options.in_flight;
  const size_t devices = std::max<size_t>(1, depth / batch_size);

  std::vector<std::vector<uint64_t>> needed(options.within.size());
  std::set<std::string> warnings;
  for (uint32_t seed = 0; seed < options.seeds; ++seed) {
    SearchOptions so = options.search;
    so.seed = options.search.seed + seed;
    // The key's search as the farm runs it (search/key_search.h).
    auto made_search = KeySearch::Create(space, so, options.priors, options.key_features, KeyCount{out.legal, true});
    if (!made_search.ok()) return Status::InvalidArgument(truth.key + ": " + made_search.status().message());
    KeySearch& ks = *made_search.value();
    out.strategy = ks.proposer();
    // The modelled finishing order: its own generator, so that the
    // strategy's draws stay what they are in lock-step.
    std::mt19937_64 finishing(so.seed ^ 0x9e3779b97f4a7c15ULL);
    std::vector<uint64_t> first(options.within.size(), kUnreached);
    size_t unreached = options.within.size();
    uint64_t evaluations = 0;
    size_t in_flight = 0;
    double best = std::numeric_limits<double>::infinity();
    std::deque<std::vector<SpacePoint>> units;  // proposed, not measured; in proposal order
    while (unreached > 0) {
      if (options.stop && options.stop->load())
        return Status::Error(truth.key + ": stopped (SIGINT or SIGTERM)");
      // Propose while the depth leaves room for a batch within the budget.
      // A strategy with nothing to propose now is asked again when the next
      // unit finishes; with nothing in flight either, it is done.
      for (;;) {
        const size_t n = ks.Want(in_flight, static_cast<size_t>(evaluations), depth, batch_size, ks.proposed());
        if (n == 0) break;
        auto unit = ks.Propose(n);
        for (std::string& w : ks.TakeWarnings()) warnings.insert(std::move(w));
        if (!unit.ok()) return Status::Error(truth.key + ": " + unit.status().message());
        if (unit->empty()) break;
        in_flight += unit->size();
        units.push_back(std::move(unit).value());
      }
      if (units.empty()) break;
      const size_t measuring = std::min(units.size(), devices);
      const size_t next = measuring == 1 ? 0 : static_cast<size_t>(finishing() % measuring);
      const std::vector<SpacePoint> unit = std::move(units[next]);
      units.erase(units.begin() + static_cast<std::ptrdiff_t>(next));
      in_flight -= unit.size();
      for (const SpacePoint& p : unit) {
        const auto it = table.find(p);
        const std::optional<double> us = it == table.end() ? std::nullopt : it->second;
        ++evaluations;
        if (us) best = std::min(best, *us);
        for (size_t w = 0; w < options.within.size(); ++w)
          if (first[w] == kUnreached && best <= out.best_us * (1 + options.within[w])) {
            first[w] = evaluations;
            --unreached;
          }
      }
      for (const SpacePoint& p : unit) {
        const auto it = table.find(p);
        ks.Observe(p, it == table.end() ? std::nullopt : it->second);
      }
      for (std::string& w : ks.TakeWarnings()) warnings.insert(std::move(w));
    }
    for (size_t w = 0; w < options.within.size(); ++w) needed[w].push_back(first[w]);
    if (options.on_seed) options.on_seed(seed + 1);
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
