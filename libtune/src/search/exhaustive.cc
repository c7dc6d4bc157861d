// exhaustive: every legal config, in the space's order (the priors' best
// first). What the farm did before it searched; `auto` keeps it for small
// spaces, where measuring all costs little and proves the winner.
#include "search/strategy_base.h"

namespace tune::search_detail {
namespace {

class Exhaustive final : public StrategyBase {
 public:
  Exhaustive(const SearchSpace& space, const SearchOptions& options, const std::vector<PriorTrial>& priors,
             std::vector<SpacePoint> all)
      : StrategyBase(space, options, priors), all_(std::move(all)) {}

  std::string Name() const override { return "exhaustive/1"; }

  std::vector<SpacePoint> Propose(size_t n) override {
    std::vector<SpacePoint> out = TakePriors(n);
    while (out.size() < n && next_ < all_.size()) {
      const SpacePoint& p = all_[next_++];
      if (Take(p)) out.push_back(p);
    }
    return out;
  }

 private:
  std::vector<SpacePoint> all_;
  size_t next_ = 0;
};

}  // namespace

std::unique_ptr<SearchStrategy> MakeExhaustive(const SearchSpace& space, const SearchOptions& options,
                                               const std::vector<PriorTrial>& priors, std::string* error) {
  auto all = space.Enumerate(kListLegalUpTo);
  if (!all.ok()) {
    *error = "strategy exhaustive: " + all.status().message() + "; name a budget and another strategy";
    return nullptr;
  }
  return std::make_unique<Exhaustive>(space, options, priors, std::move(all).value());
}

}  // namespace tune::search_detail
