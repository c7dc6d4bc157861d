// random: uniform legal samples without replacement (the priors' best
// first): the baseline every other strategy is scored against.
#include "search/strategy_base.h"

namespace tune::search_detail {
namespace {

class Random final : public StrategyBase {
 public:
  Random(const SearchSpace& space, const SearchOptions& options, const std::vector<PriorTrial>& priors)
      : StrategyBase(space, options, priors) {}
  std::string Name() const override { return "random/1"; }

  std::vector<SpacePoint> Propose(size_t n) override {
    std::vector<SpacePoint> out = TakePriors(n);
    while (out.size() < n) {
      std::optional<SpacePoint> p = FreshSample();
      if (!p) break;
      Take(*p);
      out.push_back(std::move(*p));
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<SearchStrategy> MakeRandom(const SearchSpace& space, const SearchOptions& options,
                                           const std::vector<PriorTrial>& priors) {
  return std::make_unique<Random>(space, options, priors);
}

}  // namespace tune::search_detail
