// The search strategies' table: one line per strategy, the one place that
// names them. search/registry.h reads it (lookup, factories, help text);
// the stages below search read only the names and the two defaults from it
// (sweep files in opspec, the wire default in codec), which is why this
// header holds no code and includes no stage's header: tests/layering_test.py
// lets every stage include it and checks that it stays so.
//
// Adding a strategy: write search/<name>.cc defining
//   Result<std::unique_ptr<SearchStrategy>> search_detail::Make<Name>(const StrategyInputs&);
// (see search/strategy_base.h), add its line below and its file to
// tune_search's sources in libtune/CMakeLists.txt. Sweep files, `tune
// --strategy`, `search replay --strategy`, the C API and the help texts
// take it from here (docs/architecture.md, "Adding a search strategy").
#pragma once

#include <cstdint>

// X(name, version, searches, factory, help): `name` is what sweep files and
// flags say; rows record "name/version" as their proposer (bump the version
// when the same seed and figures would give other proposals). `searches`:
// false for a strategy that measures the key's space whole (the scheduler
// then lists the space itself, resuming from the store, rather than asking
// for proposals). `factory`: a function of search_detail.
#define TUNE_SEARCH_STRATEGIES(X)                                                                        \
  X("exhaustive", 1, false, MakeExhaustive, "every legal config")                                        \
  X("random", 1, true, MakeRandom, "uniform samples without replacement, the baseline")                 \
  X("evolution", 1, true, MakeEvolution, "a genetic algorithm")                                          \
  X("model", 1, true, MakeModelGuided, "a gradient-boosted model proposes, from what was measured")

namespace tune {

// Not a strategy but a rule over the table (search/registry.h ResolveAuto):
// measure a key whole where it is cheap (at most kAutoExhaustiveUpTo legal
// configs) or the budget covers it, else search it with kAutoSearches.
inline constexpr const char kAutoStrategy[] = "auto";
inline constexpr const char kAutoSearches[] = "model";
inline constexpr uint64_t kAutoExhaustiveUpTo = 1000;  // legal configs

// What sweep files, `tune`, the C API and SearchOptions ask for when they
// name no strategy.
inline constexpr const char kDefaultStrategy[] = "auto";
// What a sweep submitted over the wire without a strategy (a client from
// before searching strategies existed) gets, and SweepSubmit's own
// default: such a client expects every config measured, as sweeps did
// then, so it keeps getting that rather than a search it never asked for.
inline constexpr const char kStrategyForOldClients[] = "exhaustive";

}  // namespace tune
