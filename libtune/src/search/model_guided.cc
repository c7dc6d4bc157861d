// model: a search led by a gradient-boosted classifier, after Helion's LFBO
// (likelihood-free Bayesian optimisation). The configs measured so far are
// labelled: the fastest tenth 1, the rest and every failure 0 (so the model
// learns where configs break too). Candidates are the unmeasured neighbours
// of the best (one step along an axis, two around the very best), children
// of the best by crossover and mutation, and uniform samples; the model
// ranks them, and a config whose kernel exists already (compiled for another
// shape: NoteCompiled) is a candidate too and goes first where the model
// scores it about as high as another (it costs no compile, so a multi-shape
// sweep compiles fewer distinct configs). A batch takes the best's
// unmeasured neighbourhood (one-axis
// steps, and the nearest repair of an illegal one) first, in the model's
// order; what it leaves is mostly what the model likes best,
// the rest random candidates, for diversity. Priors (other shapes, other GPU
// models) join the training rows with their key's features and a lower
// weight. A model that fails to train makes that batch random, with a
// warning. With configs in flight (proposed, not yet measured), the initial
// samples are counted as proposed, and the pending config the model likes
// best is believed a measured best: its neighbourhood joins the best's
// (bench/search.md, "Proposals in flight").
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "search/boosted_model.h"
#include "search/strategy_base.h"

namespace tune::search_detail {
namespace {

constexpr double kTopFraction = 0.10;   // labelled 1
constexpr double kExploreFraction = 0.2;  // of a batch: random candidates
constexpr size_t kRandomCandidates = 512;
constexpr size_t kChildCandidates = 256;
constexpr float kPriorWeight = 0.5f;
constexpr float kPriorFadeOver = 100.f;  // own observations after which priors weigh a tenth
constexpr double kPriorNear = 1.10;      // a prior within 10% of its key's best is labelled 1
constexpr size_t kBelieved = 1;          // configs in flight whose neighbourhoods are searched now
// A config whose kernel exists (NoteCompiled) costs no compile: among
// candidates the model scores within this of each other (a probability of
// being among the fastest tenth), it goes first. At most kCompiledCandidates
// of them join the candidates.
constexpr float kCompiledBonus = 0.03f;
constexpr size_t kCompiledCandidates = 1024;

// An integer reads on a log scale (tile sizes double); a boolean as 0 or 1;
// a string as its place among the axis's values (-1 when the axis lacks it,
// as a neighbour key's prior may), which trees split as well as any code.
float ValueFeature(const ParamValue& v, const Axis& axis) {
  if (v.kind() == ParamValue::Kind::kString) {
    const auto it = std::find(axis.values.begin(), axis.values.end(), v);
    return it == axis.values.end() ? -1.f : static_cast<float>(it - axis.values.begin());
  }
  const int64_t n = v.Number();
  return v.IsInt() && n > 0 ? static_cast<float>(std::log2(static_cast<double>(n))) : static_cast<float>(n);
}

class ModelGuided final : public StrategyBase {
 public:
  explicit ModelGuided(StrategyInputs in)
      : StrategyBase(in), priors_(std::move(in.priors)), key_features_(std::move(in.key_features)) {}

  void NoteCompiled(const SpacePoint& p) override { compiled_.insert(p); }

  std::vector<SpacePoint> Propose(size_t n) override {
    std::vector<SpacePoint> out = TakePriors(std::min<size_t>(n, 8));
    if (out.size() >= n) return out;
    const size_t want = n - out.size();
    // The initial samples are paced by what is proposed, not by what came
    // back: with configs in flight, waiting for their figures would make
    // every batch proposed meanwhile random too. With no valid figure yet
    // there is nothing to train on either. (This call's priors are pending
    // too, and not counted.)
    const size_t in_flight = Pending() - out.size();
    if (ValidObserved() + in_flight < InitialSamples() || ValidObserved() == 0) return Fill(std::move(out), want, {});
    std::vector<SpacePoint> local;
    std::vector<SpacePoint> candidates = Candidates(&local);
    auto model = Train();
    if (!model.ok()) {
      warnings_.push_back("search model: " + model.status().message() + "; this batch is random");
      return Fill(std::move(out), want, {});
    }
    // Configs in flight, believed as good as the model predicts (a kriging
    // believer): the neighbourhoods of those it likes best are searched now
    // as if they were measured bests, rather than a pipeline's depth later.
    std::vector<SpacePoint> believed;
    if (in_flight > 0) {
      std::vector<SpacePoint> pending = PendingPoints();
      const std::set<SpacePoint> taken_now(out.begin(), out.end());
      std::erase_if(pending, [&](const SpacePoint& p) { return taken_now.count(p) > 0; });
      std::vector<float> pending_scores;
      if (Status s = Predict(model.value(), pending, &pending_scores); !s.ok()) {
        warnings_.push_back("search model: " + s.message() + "; this batch is random");
        return Fill(std::move(out), want, {});
      }
      std::vector<size_t> by_score(pending.size());
      for (size_t i = 0; i < by_score.size(); ++i) by_score[i] = i;
      std::stable_sort(by_score.begin(), by_score.end(),
                       [&](size_t a, size_t b) { return pending_scores[a] > pending_scores[b]; });
      std::set<SpacePoint> more;
      for (size_t k = 0; k < by_score.size() && k < kBelieved; ++k) {
        believed.push_back(pending[by_score[k]]);
        for (SpacePoint& q : space_.Neighbours(believed.back()))
          if (Fresh(q)) more.insert(std::move(q));
        AddRepairedSteps(believed.back(), true, [&](const SpacePoint& q) {
          if (Fresh(q)) more.insert(q);
        });
      }
      const std::set<SpacePoint> have(candidates.begin(), candidates.end());
      for (const SpacePoint& q : more)
        if (!have.count(q)) candidates.push_back(q);
    }
    {
      const std::set<SpacePoint> have(candidates.begin(), candidates.end());
      size_t added = 0;
      for (const SpacePoint& q : compiled_) {
        if (added >= kCompiledCandidates) break;
        if (Fresh(q) && !have.count(q)) {
          candidates.push_back(q);
          ++added;
        }
      }
    }
    std::vector<float> scores;
    if (Status s = Predict(model.value(), candidates, &scores); !s.ok()) {
      warnings_.push_back("search model: " + s.message() + "; this batch is random");
      return Fill(std::move(out), want, {});
    }
    for (size_t i = 0; i < candidates.size(); ++i)
      if (compiled_.count(candidates[i])) scores[i] += kCompiledBonus;
    std::vector<size_t> order(candidates.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });

    // The best's neighbourhood goes first, in the model's order: the
    // one-axis steps of the best three and the nearest repair of each
    // illegal step of the very best. A local search the model steers finds
    // the narrow best regions (replayed: a K-heavy key whose two or three
    // best configs lie a two-axis move from where the model first looks) in
    // a third fewer evaluations than a batch the model picks from all
    // candidates, and the nearest repairs alone (a few dozen configs, not
    // every value of the repairing axis) cut the slowest keys' medians by a
    // quarter more (bench/search.md).
    {
      std::set<SpacePoint> near;
      const auto best3 = Best(3);
      for (const auto& [us, p] : best3)
        for (SpacePoint& q : space_.Neighbours(p)) near.insert(std::move(q));
      if (!best3.empty()) AddRepairedSteps(best3.front().second, true, [&](const SpacePoint& q) { near.insert(q); });
      for (const SpacePoint& b : believed) {
        for (SpacePoint& q : space_.Neighbours(b)) near.insert(std::move(q));
        AddRepairedSteps(b, true, [&](const SpacePoint& q) { near.insert(q); });
      }
      for (size_t i : order)
        if (out.size() < n && near.count(candidates[i]) && Take(candidates[i])) out.push_back(candidates[i]);
    }
    const size_t by_model = out.size() + static_cast<size_t>(std::ceil((n - out.size()) * (1 - kExploreFraction)));
    for (size_t i : order) {
      if (out.size() >= by_model) break;
      if (Take(candidates[i])) out.push_back(candidates[i]);
    }
    return Fill(std::move(out), n - out.size(), std::move(local));
  }

 private:
  size_t InitialSamples() const {
    const size_t base = options_.budget > 0 ? std::clamp<size_t>(options_.budget / 10, 10, 32) : 24;
    return priors_.empty() ? base : std::min<size_t>(base, 8);
  }

  // Adds up to `n` points: random ones among `pool` first (exploration),
  // then fresh uniform samples.
  std::vector<SpacePoint> Fill(std::vector<SpacePoint> out, size_t n, std::vector<SpacePoint> pool) {
    const size_t goal = out.size() + n;
    std::shuffle(pool.begin(), pool.end(), rng_);
    for (const SpacePoint& p : pool) {
      if (out.size() >= goal) break;
      if (Take(p)) out.push_back(p);
    }
    while (out.size() < goal) {
      std::optional<SpacePoint> p = FreshSample();
      if (!p) break;
      Take(*p);
      out.push_back(std::move(*p));
    }
    return out;
  }

  // The candidates the model ranks; `local` gets those near the best
  // (neighbours, children), from which a batch's exploration share is drawn.
  std::vector<SpacePoint> Candidates(std::vector<SpacePoint>* local) {
    std::set<SpacePoint> c;
    auto add = [&](const SpacePoint& p) {
      if (Fresh(p)) c.insert(p);
    };
    const auto best = Best(8);
    for (size_t b = 0; b < best.size(); ++b) {
      for (const SpacePoint& q : space_.Neighbours(best[b].second)) add(q);
      if (b < 1) AddRepairedSteps(best[b].second, false, add);
    }
    std::uniform_int_distribution<size_t> pick(0, best.size() - 1);
    std::uniform_real_distribution<double> u(0, 1);
    for (size_t t = 0; t < kChildCandidates && !best.empty(); ++t) {
      const SpacePoint& a = best[pick(rng_)].second;
      const SpacePoint& b = best[pick(rng_)].second;
      SpacePoint child(a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        child[i] = u(rng_) < 0.5 ? a[i] : b[i];
        const int size = static_cast<int>(space_.AxisAt(i).values.size());
        if (size > 1 && u(rng_) < 1.0 / a.size())
          child[i] = static_cast<uint16_t>(std::clamp(child[i] + (u(rng_) < 0.5 ? -1 : 1), 0, size - 1));
      }
      if (space_.Legal(child)) add(child);
    }
    local->assign(c.begin(), c.end());
    for (size_t t = 0; t < kRandomCandidates; ++t) {
      std::optional<SpacePoint> p = space_.Sample(rng_, 2000);
      if (!p) break;
      add(*p);
    }
    return {c.begin(), c.end()};
  }

  // Steps along one axis of `p` with one other axis changed too: what
  // reaches a config whose one-step neighbours are all illegal (a larger K
  // tile needs fewer pipeline stages to fit in shared memory). `nearest`:
  // only the steps illegal on their own, each with the nearest values of
  // the other axis that make it legal (both sides at the same distance), a
  // few dozen configs; else every value of the other axis, for the model to
  // rank among its candidates.
  template <typename Add>
  void AddRepairedSteps(const SpacePoint& p, bool nearest, const Add& add) const {
    for (size_t i = 0; i < p.size(); ++i) {
      for (int step : {-1, 1}) {
        const int v = static_cast<int>(p[i]) + step;
        if (v < 0 || v >= static_cast<int>(space_.AxisAt(i).values.size())) continue;
        SpacePoint q = p;
        q[i] = static_cast<uint16_t>(v);
        if (nearest && space_.Legal(q)) continue;
        for (size_t j = 0; j < p.size(); ++j) {
          if (j == i) continue;
          const int size = static_cast<int>(space_.AxisAt(j).values.size()), at = static_cast<int>(p[j]);
          for (int d = 0; d < size; ++d) {  // the other axis's values by their distance from p's
            const int sides[2] = {at - d, at + d};
            bool found = false;
            for (int k = 0; k < (d == 0 ? 1 : 2); ++k) {
              const int w = sides[k];
              if (w < 0 || w >= size) continue;
              SpacePoint r = q;
              r[j] = static_cast<uint16_t>(w);
              if (space_.Legal(r)) {
                add(r);
                found = true;
              }
            }
            if (nearest && found) break;
          }
        }
      }
    }
  }

  std::vector<float> Features(const Config& config) const {
    std::vector<float> f;
    f.reserve(space_.Axes() + key_features_.size());
    for (size_t i = 0; i < space_.Axes(); ++i) {
      float v = -1e30f;  // missing
      for (const auto& [name, value] : config.params)
        if (name == space_.AxisAt(i).name) v = ValueFeature(value, space_.AxisAt(i));
      f.push_back(v);
    }
    return f;
  }

  // The model over what is observed (and the priors).
  Result<BoostedClassifier> Train() const {
    std::vector<std::vector<float>> rows;
    std::vector<float> labels, weights;
    // The fastest tenth of the valid figures (at least one) are positives.
    // Positives weigh by how far they beat the threshold (LFBO's
    // expected-improvement weighting): the model learns the very best
    // region, not the top tenth as one.
    const size_t top = std::max<size_t>(1, static_cast<size_t>(std::ceil(kTopFraction * ValidObserved())));
    const auto best = Best(top + 1);
    const double threshold = best.back().first, lead = std::max(threshold - best.front().first, 1e-12);
    std::map<SpacePoint, float> positive;
    for (size_t i = 0; i < top && i < best.size(); ++i)
      positive[best[i].second] = static_cast<float>(0.1 + (threshold - best[i].first) / lead);
    const bool with_key = !priors_.empty() && !key_features_.empty();
    for (const auto& [p, us] : observed_) {
      std::vector<float> f = Features(space_.ToConfig(p));
      if (with_key) f.insert(f.end(), key_features_.begin(), key_features_.end());
      rows.push_back(std::move(f));
      const auto pos = positive.find(p);
      labels.push_back(pos != positive.end() ? 1.f : 0.f);
      weights.push_back(pos != positive.end() ? pos->second : 1.f);
    }
    if (with_key) {
      // Neighbours speak loudest before the key has figures of its own: a
      // shape's best can be another's also-ran.
      const float prior_weight =
          kPriorWeight * std::max(0.1f, 1.f - static_cast<float>(observed_.size()) / kPriorFadeOver);
      for (const PriorTrial& t : priors_) {
        if (t.features.size() != key_features_.size()) continue;
        std::vector<float> f = Features(t.config);
        f.insert(f.end(), t.features.begin(), t.features.end());
        rows.push_back(std::move(f));
        labels.push_back(t.relative <= kPriorNear ? 1.f : 0.f);
        weights.push_back(prior_weight);
      }
    }
    return BoostedClassifier::Train(rows, labels, weights, options_.seed);
  }

  // The model's score of each of `points` (P(among the fastest)).
  Status Predict(const BoostedClassifier& model, const std::vector<SpacePoint>& points,
                 std::vector<float>* scores) const {
    scores->clear();
    if (points.empty()) return Status::OK();
    const bool with_key = !priors_.empty() && !key_features_.empty();
    std::vector<std::vector<float>> x;
    x.reserve(points.size());
    for (const SpacePoint& p : points) {
      std::vector<float> f = Features(space_.ToConfig(p));
      if (with_key) f.insert(f.end(), key_features_.begin(), key_features_.end());
      x.push_back(std::move(f));
    }
    auto predicted = model.Predict(x);
    if (!predicted.ok()) return predicted.status();
    *scores = std::move(predicted).value();
    return Status::OK();
  }

  std::vector<PriorTrial> priors_;
  std::vector<float> key_features_;
  std::set<SpacePoint> compiled_;  // NoteCompiled
};

}  // namespace

Result<std::unique_ptr<SearchStrategy>> MakeModelGuided(StrategyInputs in) {
  return std::unique_ptr<SearchStrategy>(std::make_unique<ModelGuided>(std::move(in)));
}

}  // namespace tune::search_detail
