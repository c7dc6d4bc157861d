// Search strategies: which configs of a key to measure next.
//
// A strategy serves one key (GPU model, op, dtype, shape) through a batch
// ask/tell contract: Propose asks for up to n configs not proposed before,
// Observe tells what one of them measured (a figure, or a failure: a failure
// is information too). The caller measures, holds the budget and decides
// when to stop; a strategy that proposes nothing more is done.
//
// Deterministic: for a given space, options (seed included) and sequence of
// calls, the proposals are the same (with one C++ standard library: the
// <random> distributions are the library's own). Observations are kept by point, so the
// order in which one batch's results arrive changes nothing.
//
// One file per strategy in this folder, one line each in the registry's
// table (search/strategy_table.h), whose names sweep files, flags and
// scripts use; MakeStrategy looks them up (search/registry.h), and
// KeySearch (search/key_search.h) drives one for a key.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "search/search_space.h"
#include "search/strategy_table.h"
#include "opspec/sweep_file.h"
#include "tune/status.h"

namespace tune {

struct SearchOptions {
  std::string strategy = kDefaultStrategy;
  uint64_t seed = 0;
  // Evaluations per key the caller will allow (0: no bound). Strategies
  // use it to pace exploration and the final polish; they never enforce it.
  uint64_t budget = 0;
  // `auto` measures every config at or below this many legal configs (or
  // when the budget covers the space), and searches with `model` above.
  uint64_t exhaustive_up_to = kAutoExhaustiveUpTo;
  // Configs every strategy proposes first, before the priors' best: the
  // op's default (and its architecture's default), so that a searched key
  // has the figure a tuned config is weighed against, as an exhaustive one
  // has. They count against the budget like any proposal; those not legal
  // in the space are left out.
  std::vector<Config> first;
  // What the strategy minimises: a row's Measurement::ObjectiveValue. A
  // valid row without that figure (no energy measured) is observed as a
  // failure under energy or edp.
  Objective objective = Objective::kTime;
};

// What a key measured for a config elsewhere (another shape, another GPU
// model), to warm-start a search: `relative` is its figure over that key's
// best (1 = that key's winner); `features` are the key's shape and GPU
// features (search/features.h), the same length for every prior. Every
// strategy measures first the priors within 5% of their key's best (16 at
// most); `model` trains on them all.
struct PriorTrial {
  Config config;
  double relative = 0;
  std::vector<float> features;
};

class SearchStrategy {
 public:
  virtual ~SearchStrategy() = default;
  // "name/version": what rows record as the proposer.
  virtual std::string Name() const = 0;
  // A measured point: `us` its figure (lower is better), nullopt a failure.
  // A point observed twice keeps its first word.
  virtual void Observe(const SpacePoint& p, std::optional<double> us) = 0;
  // Up to n legal points never proposed nor observed before; fewer, or
  // none, when the strategy has no more (exhaustive at the end of the
  // space, random when sampling finds no fresh point).
  virtual std::vector<SpacePoint> Propose(size_t n) = 0;
  // Warnings the strategy met (a model that failed to train, and the
  // fallback taken), to log once; cleared by the call.
  virtual std::vector<std::string> TakeWarnings() { return {}; }
  // A point whose kernel exists already (compiled for another key of the
  // same kernel: another shape, in the fleet): it costs no compile, so a
  // strategy may prefer it where it promises as much as another. Only
  // `model` uses it; the others ignore it.
  virtual void NoteCompiled(const SpacePoint&) {}
};

// How many configs a key proposes now, with `in_flight` of its proposals
// not yet measured and `measured` measured: a whole batch once the
// in-flight depth leaves room for one, none otherwise. Batches keep one
// size whatever the devices, so that a seed and an order in which results
// arrive give the same proposals; a depth of one batch is lock-step (each
// batch waits for the one before). The depth opens as figures come in (a
// slow start): no more configs are in flight than half what the key has
// measured (one batch at first), so that its proposals are made on
// figures, nearly as in lock-step, rather than blind while its first
// batches are out (bench/search.md, "Proposals in flight").
inline size_t ProposalNow(size_t in_flight, size_t measured, size_t depth, size_t batch) {
  const size_t open = std::min(std::max(depth, batch), std::max(measured / 2, batch));
  return in_flight + batch <= open ? batch : 0;
}

// The strategy named options.strategy over `space` (which must outlive it),
// from the registry (search/registry.h; auto: ResolveAuto over the space's
// legal count and options.budget). `priors` warm-start it: strategies that
// learn train on them, and every strategy measures the priors' best configs
// first. `key_features`: this key's features, as in the priors. Errors: an
// unknown name (listing the known ones), exhaustive over a space too large
// to list.
Result<std::unique_ptr<SearchStrategy>> MakeStrategy(const SearchSpace& space, const SearchOptions& options,
                                                     std::vector<PriorTrial> priors = {},
                                                     std::vector<float> key_features = {});
// The names MakeStrategy knows are StrategyNames() (opspec/sweep_file.h,
// read from the registry's table).

}  // namespace tune
