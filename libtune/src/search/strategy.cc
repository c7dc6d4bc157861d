#include "search/strategy.h"

#include <algorithm>

#include "search/strategy_base.h"

namespace tune {
namespace search_detail {

StrategyBase::StrategyBase(const StrategyInputs& in)
    : space_(in.space), options_(in.options), rng_(in.options.seed), name_(in.proposer) {
  const SearchOptions& options = in.options;
  std::vector<const PriorTrial*> order;
  for (const PriorTrial& t : in.priors) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(),
                   [](const PriorTrial* a, const PriorTrial* b) { return a->relative < b->relative; });
  // The neighbours' winners and near-winners are measured first: on a new
  // GPU model the old one's top configs usually hold the new best.
  constexpr double kFirstWithin = 1.05;
  constexpr size_t kFirstAtMost = 16;
  std::set<SpacePoint> have;
  for (const Config& c : options.first) {
    const std::optional<SpacePoint> p = space_.PointOf(c);
    if (p && space_.Legal(*p) && have.insert(*p).second) priors_best_.push_back(*p);
  }
  const size_t firsts = priors_best_.size();
  for (const PriorTrial* t : order) {
    if (t->relative > kFirstWithin || priors_best_.size() - firsts >= kFirstAtMost) break;
    const std::optional<SpacePoint> p = space_.PointOf(t->config);
    if (p && space_.Legal(*p) && have.insert(*p).second) priors_best_.push_back(*p);
  }
}

void StrategyBase::Observe(const SpacePoint& p, std::optional<double> us) {
  if (observed_.count(p)) return;
  seen_.insert(p);
  observed_.emplace(p, us);
  if (us) valid_.emplace(*us, p);
}

std::vector<std::string> StrategyBase::TakeWarnings() { return std::exchange(warnings_, {}); }

std::vector<SpacePoint> StrategyBase::TakePriors(size_t n) {
  std::vector<SpacePoint> out;
  while (out.size() < n && priors_taken_ < priors_best_.size()) {
    const SpacePoint& p = priors_best_[priors_taken_++];
    if (Take(p)) out.push_back(p);
  }
  return out;
}

std::optional<SpacePoint> StrategyBase::FreshSample() {
  if (!listed_ && space_.RawSize() <= kListRawPointsUpTo) {
    listed_ = true;
    auto all = space_.Enumerate(kListLegalUpTo);
    if (all.ok()) {
      shuffled_ = std::move(all).value();
      std::shuffle(shuffled_.begin(), shuffled_.end(), rng_);
    }
  }
  if (!shuffled_.empty()) {
    while (shuffled_next_ < shuffled_.size()) {
      const SpacePoint& p = shuffled_[shuffled_next_++];
      if (Fresh(p)) return p;
    }
    return std::nullopt;
  }
  for (int tries = 0; tries < 64; ++tries) {
    std::optional<SpacePoint> p = space_.Sample(rng_);
    if (!p) return std::nullopt;
    if (Fresh(*p)) return p;
  }
  return std::nullopt;
}

std::vector<std::pair<double, SpacePoint>> StrategyBase::Best(size_t k) const {
  std::vector<std::pair<double, SpacePoint>> out;
  for (auto it = valid_.begin(); it != valid_.end() && out.size() < k; ++it) out.push_back(*it);
  return out;
}

}  // namespace search_detail

}  // namespace tune
