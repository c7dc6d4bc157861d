// What the strategies share: the points seen (proposed or observed), the
// figures observed, a seeded generator, fresh uniform samples and the
// priors' best configs measured first. Private to search/.
#pragma once

#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "search/registry.h"
#include "search/strategy.h"

namespace tune::search_detail {

class StrategyBase : public SearchStrategy {
 public:
  // "name/version", as the registry's table gives them (StrategyInputs::proposer).
  std::string Name() const override { return name_; }
  void Observe(const SpacePoint& p, std::optional<double> us) override;
  std::vector<std::string> TakeWarnings() override;

 protected:
  explicit StrategyBase(const StrategyInputs& in);

  // Not proposed nor observed yet.
  bool Fresh(const SpacePoint& p) const { return seen_.count(p) == 0; }
  // Marks `p` proposed; false when it was seen already.
  bool Take(const SpacePoint& p) { return seen_.insert(p).second; }
  // Takes SearchOptions::first, then the priors' best configs, those not
  // seen yet, up to n.
  std::vector<SpacePoint> TakePriors(size_t n);
  // A fresh legal point drawn uniformly; nullopt when none is found (the
  // space is spent, or too sparse for rejection sampling). Not taken.
  std::optional<SpacePoint> FreshSample();
  // The k best valid observations, fastest first (ties: the smaller point).
  std::vector<std::pair<double, SpacePoint>> Best(size_t k) const;
  // Proposed and not observed yet: in flight (0 in lock-step).
  size_t Pending() const { return seen_.size() - observed_.size(); }
  std::vector<SpacePoint> PendingPoints() const {
    std::vector<SpacePoint> out;
    for (const SpacePoint& p : seen_)
      if (!observed_.count(p)) out.push_back(p);
    return out;
  }
  size_t ValidObserved() const { return valid_.size(); }

  const SearchSpace& space_;
  SearchOptions options_;
  std::mt19937_64 rng_;
  std::map<SpacePoint, std::optional<double>> observed_;
  std::set<std::pair<double, SpacePoint>> valid_;
  std::vector<std::string> warnings_;

 private:
  std::string name_;
  std::set<SpacePoint> seen_;
  std::vector<SpacePoint> priors_best_;  // legal here: SearchOptions::first, then the priors' best first
  size_t priors_taken_ = 0;
  // Small spaces are listed once and shuffled, so sampling without
  // replacement ends exactly when the space is spent.
  bool listed_ = false;
  std::vector<SpacePoint> shuffled_;
  size_t shuffled_next_ = 0;
};

// The strategies' factories, one file each, are declared from the table
// (search/strategy_table.h) by search/registry.cc.

// Bounds of listing a space whole (exhaustive, and random's shuffle).
inline constexpr uint64_t kListRawPointsUpTo = 4'000'000;
inline constexpr uint64_t kListLegalUpTo = 1'000'000;

}  // namespace tune::search_detail
