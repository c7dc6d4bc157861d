#include "search/strategy.h"

#include <algorithm>

#include "search/strategy_base.h"

namespace tune {
namespace search_detail {

StrategyBase::StrategyBase(const SearchSpace& space, const SearchOptions& options,
                           const std::vector<PriorTrial>& priors)
    : space_(space), options_(options), rng_(options.seed) {
  std::vector<const PriorTrial*> order;
  for (const PriorTrial& t : priors) order.push_back(&t);
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

Result<std::unique_ptr<SearchStrategy>> MakeStrategy(const SearchSpace& space, const SearchOptions& options,
                                                     std::vector<PriorTrial> priors,
                                                     std::vector<float> key_features) {
  if (Status s = CheckStrategyName(options.strategy, "strategy"); !s.ok()) return s;
  std::string name = options.strategy;
  if (name == "auto") {
    // Exhaustive where it is cheap or the budget covers the space anyway.
    bool exact = false;
    const uint64_t legal = space.LegalCount(&exact);
    const bool covered = options.budget > 0 && options.budget >= legal;
    name = legal <= options.exhaustive_up_to || covered ? "exhaustive" : "model";
  }
  if (name == "exhaustive") {
    std::string error;
    auto s = search_detail::MakeExhaustive(space, options, priors, &error);
    if (!s) return Status::InvalidArgument(error);
    return s;
  }
  if (name == "random") return search_detail::MakeRandom(space, options, priors);
  if (name == "evolution") return search_detail::MakeEvolution(space, options, priors);
  return search_detail::MakeModelGuided(space, options, std::move(priors), std::move(key_features));
}

}  // namespace tune
