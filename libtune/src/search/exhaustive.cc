// exhaustive: every legal config, in the space's order (the priors' best
// first). What the farm did before it searched; `auto` keeps it for small
// spaces, where measuring all costs little and proves the winner.
#include "search/strategy_base.h"

namespace tune::search_detail {
namespace {

class Exhaustive final : public StrategyBase {
 public:
  Exhaustive(const StrategyInputs& in, std::vector<SpacePoint> all) : StrategyBase(in), all_(std::move(all)) {}

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

Result<std::unique_ptr<SearchStrategy>> MakeExhaustive(StrategyInputs in) {
  auto all = in.space.Enumerate(kListLegalUpTo);
  if (!all.ok())
    return Status::InvalidArgument("strategy exhaustive: " + all.status().message() +
                                   "; name a budget and another strategy");
  return std::unique_ptr<SearchStrategy>(std::make_unique<Exhaustive>(in, std::move(all).value()));
}

}  // namespace tune::search_detail
