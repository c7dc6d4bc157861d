// The registry of search strategies: the table of search/strategy_table.h
// as C++ (name, version, one line of help, factory), the `auto` rule, and
// the texts that list the strategies. MakeStrategy (search/strategy.h) and
// KeySearch (search/key_search.h) make strategies through it; nothing
// outside search/ names a strategy (tests/layering_test.py checks it).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "search/strategy.h"
#include "search/strategy_table.h"
#include "tune/status.h"

namespace tune {

// What a factory gets: the key's space (which must outlive the strategy),
// the options, the priors and the key's features (MakeStrategy), and the
// "name/version" the strategy reports as its Name().
struct StrategyInputs {
  const SearchSpace& space;
  SearchOptions options;
  std::vector<PriorTrial> priors;
  std::vector<float> key_features;
  std::string proposer;
};
// Errors: the strategy cannot serve this space (exhaustive over a space too
// large to list).
using StrategyFactory = Result<std::unique_ptr<SearchStrategy>> (*)(StrategyInputs);

struct StrategyEntry {
  std::string name;
  uint32_t version = 0;
  bool searches = true;  // false: measures the key's space whole (strategy_table.h)
  std::string help;
  StrategyFactory make = nullptr;

  std::string Proposer() const { return name + "/" + std::to_string(version); }
};

// The table, in its order (auto is a rule, not an entry).
const std::vector<StrategyEntry>& Strategies();
// The entry named `name`; null for an unknown name and for auto.
const StrategyEntry* FindStrategy(const std::string& name);

// The `auto` rule: the strategy that serves a key of `legal` legal configs
// with `budget` evaluations (0: no bound): one that measures it whole at or
// below `exhaustive_up_to` configs or where the budget covers them,
// kAutoSearches above.
std::string ResolveAuto(uint64_t legal, uint64_t budget, uint64_t exhaustive_up_to);
// The strategy that serves keys asked for by `name`: `name` itself, or, for
// auto, ResolveAuto over `legal()`, which is called only then (its error is
// returned). Errors: an unknown name (CheckStrategyName's message).
Result<std::string> ResolveStrategy(const std::string& name, uint64_t budget, uint64_t exhaustive_up_to,
                                    const std::function<Result<uint64_t>()>& legal);
// True when the strategy `name` (not auto) measures a key's space whole:
// its caller may list the space itself rather than ask for proposals.
bool MeasuresWhole(const std::string& name);
// "name/version" of the entry that measures a space whole: what a key
// measured whole records as its proposer.
std::string WholeProposer();

// The strategies that search (every entry but those measuring whole), in
// the table's order: what `search replay` scores by default.
std::vector<std::string> SearchingStrategyNames();
// What `search replay` weighs every strategy against ("vs random").
inline constexpr const char kBaselineStrategy[] = "random";

// The strategies with their help, for flags' help texts: "exhaustive (every
// legal config), random (...), ..., or auto (...)".
std::string StrategyHelp();

}  // namespace tune
