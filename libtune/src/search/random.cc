// random: uniform legal samples without replacement (the priors' best
// first): the baseline every other strategy is scored against.
#include "search/strategy_base.h"

namespace tune::search_detail {
namespace {

class Random final : public StrategyBase {
 public:
  explicit Random(const StrategyInputs& in) : StrategyBase(in) {}

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

Result<std::unique_ptr<SearchStrategy>> MakeRandom(StrategyInputs in) {
  return std::unique_ptr<SearchStrategy>(std::make_unique<Random>(in));
}

}  // namespace tune::search_detail
