// evolution: a genetic algorithm over the axes' value indices. The
// population is the best configs measured so far; children come from
// tournament-picked parents by uniform crossover and mutation (a step to a
// neighbouring value, now and then a jump to any value), kept only when
// legal and never seen. Random samples seed the first population and fill
// in whenever breeding finds nothing fresh.
#include <algorithm>

#include "search/strategy_base.h"

namespace tune::search_detail {
namespace {

constexpr size_t kPopulation = 24;
constexpr int kBreedTries = 64;

class Evolution final : public StrategyBase {
 public:
  explicit Evolution(const StrategyInputs& in) : StrategyBase(in) {}

  std::vector<SpacePoint> Propose(size_t n) override {
    std::vector<SpacePoint> out = TakePriors(n);
    const auto parents = Best(kPopulation);
    while (out.size() < n) {
      std::optional<SpacePoint> child;
      if (parents.size() >= kPopulation / 2) child = Breed(parents);
      if (!child) child = FreshSample();
      if (!child) break;
      Take(*child);
      out.push_back(std::move(*child));
    }
    return out;
  }

 private:
  const SpacePoint& Tournament(const std::vector<std::pair<double, SpacePoint>>& parents) {
    std::uniform_int_distribution<size_t> pick(0, parents.size() - 1);
    const size_t a = pick(rng_), b = pick(rng_);
    return parents[std::min(a, b)].second;  // parents are sorted fastest first
  }

  std::optional<SpacePoint> Breed(const std::vector<std::pair<double, SpacePoint>>& parents) {
    const size_t axes = space_.Axes();
    std::uniform_real_distribution<double> u(0, 1);
    for (int t = 0; t < kBreedTries; ++t) {
      const SpacePoint& a = Tournament(parents);
      const SpacePoint& b = Tournament(parents);
      SpacePoint child(axes);
      for (size_t i = 0; i < axes; ++i) child[i] = u(rng_) < 0.5 ? a[i] : b[i];
      // At least one mutation per child, one per axis on average.
      const size_t forced = std::uniform_int_distribution<size_t>(0, axes - 1)(rng_);
      for (size_t i = 0; i < axes; ++i) {
        if (i != forced && u(rng_) >= 1.0 / static_cast<double>(axes)) continue;
        const int size = static_cast<int>(space_.AxisAt(i).values.size());
        if (size < 2) continue;
        int v = child[i];
        if (u(rng_) < 0.2) {
          v = std::uniform_int_distribution<int>(0, size - 1)(rng_);
        } else {
          v += u(rng_) < 0.5 ? -1 : 1;
          v = std::clamp(v, 0, size - 1);
        }
        child[i] = static_cast<uint16_t>(v);
      }
      if (Fresh(child) && space_.Legal(child)) return child;
    }
    return std::nullopt;
  }
};

}  // namespace

Result<std::unique_ptr<SearchStrategy>> MakeEvolution(StrategyInputs in) {
  return std::unique_ptr<SearchStrategy>(std::make_unique<Evolution>(in));
}

}  // namespace tune::search_detail
