// KeySearch: the search of one key (GPU model, op, dtype, shape) by a
// strategy, as the farm runs it and `search replay` scores it: the
// coordinator's scheduler and Replay (search/replay.h) both drive a
// KeySearch, so what replay scores is what the farm does.
//
// It holds the key's space, its legal count and budget (its coverage), and
// its strategy, made through the registry (search/registry.h: auto resolved
// by ResolveAuto over the key's legal count, the configs to measure first,
// the priors); it maps configs to points and back, observes what was
// measured (a figure, or a failure), sizes and checks proposals against the
// strategy contract (search/strategy.h: never more than asked, never a
// point twice) and gathers the strategy's warnings.
//
// Not thread-safe: one caller at a time (the scheduler hands a key's search
// to one proposal at a time).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/types.h"
#include "search/search_space.h"
#include "search/strategy.h"
#include "tune/status.h"

namespace tune {

// An op-wide failure: the key's first kOpWideFailureRows measured configs
// all failed with one class of those a whole op fails with (a compile error,
// a launch error, a crash) and the same cause (WhyFailed: its first line
// and the line that says why), and none ran. It is the
// op's failure, not a config's (a program op's version command, a missing
// import, a package that breaks every compile the same way): the search
// stops there instead of spending its budget on the same error.
inline constexpr size_t kOpWideFailureRows = 16;

// A key's legal configs, when the caller knows them already (replay's
// table), so that the space is not counted again.
struct KeyCount {
  uint64_t legal = 0;
  bool exact = true;
};

class KeySearch {
 public:
  // The search of `space`'s key by options.strategy (auto: ResolveAuto over
  // the key's legal count and options.budget). options.budget: evaluations
  // the key may take, capped at the legal count where that count is exact
  // (an estimate may miss a sparse space's configs: the strategy ends the
  // search where the space runs out); 0: the whole space, and no bound for
  // the strategy's pacing. options.first, `priors`, `key_features`: as
  // MakeStrategy. `count`: the key's legal count if known. Errors:
  // MakeStrategy's.
  static Result<std::unique_ptr<KeySearch>> Create(std::shared_ptr<const SearchSpace> space, SearchOptions options,
                                                   std::vector<PriorTrial> priors = {},
                                                   std::vector<float> key_features = {},
                                                   std::optional<KeyCount> count = std::nullopt);

  const SearchSpace& space() const { return *space_; }
  // "name/version" of the strategy: what rows and coverage record.
  const std::string& proposer() const { return proposer_; }
  uint64_t legal() const { return count_.legal; }
  bool legal_exact() const { return count_.exact; }
  uint64_t budget() const { return budget_; }
  // Points proposed so far.
  uint64_t proposed() const { return asked_.size(); }
  // True once the strategy, asked for configs, had none (it ran dry).
  bool dry() const { return dry_; }

  // Evaluations the budget leaves once `spent` are counted (the caller's
  // count: its proposals, and what it found stored).
  uint64_t Left(uint64_t spent) const { return budget_ - std::min(budget_, spent); }
  // How many configs to ask for now, with `in_flight` proposed and not yet
  // measured and `measured` measured: a batch where the in-flight rule
  // (ProposalNow) leaves room for one, within what the budget leaves.
  size_t Want(size_t in_flight, size_t measured, size_t depth, size_t batch, uint64_t spent) const;

  // Tells the strategy what `p` measured (nullopt: a failure). A point seen
  // before keeps its first word.
  void Observe(const SpacePoint& p, std::optional<double> us);
  // Observes stored rows of the key: a valid row's figure under the
  // options' objective (its median, energy or EDP), a failed row (or one
  // without that figure) as a failure; rows of configs outside the space's legal points are left
  // out. Returns how many legal configs the rows name (each once). Rows
  // that show an op-wide failure (kOpWideFailureRows) set op_wide_failure().
  uint64_t ObserveRows(const std::vector<Measurement>& rows);
  // "compile_error: version: exit code 3: torch is missing" once the
  // observed rows show an op-wide failure; empty otherwise. A key that has
  // one proposes no more (ProposeConfigs returns none).
  const std::string& op_wide_failure() const { return op_wide_failure_; }
  // A config whose kernel exists already (SearchStrategy::NoteCompiled);
  // one outside the space's legal points is ignored.
  void NoteCompiled(const Config& c);

  // Up to n points never proposed before (fewer or none: the strategy has
  // no more; dry() then). Errors: the strategy broke its contract (more
  // points than asked, a point it proposed before).
  Result<std::vector<SpacePoint>> Propose(size_t n);
  // Propose, as configs.
  Result<std::vector<Config>> ProposeConfigs(size_t n);
  // The strategy's warnings since the last call, to log once.
  std::vector<std::string> TakeWarnings();

 private:
  KeySearch() = default;

  std::shared_ptr<const SearchSpace> space_;
  std::unique_ptr<SearchStrategy> strategy_;  // refers to *space_
  std::string proposer_;
  KeyCount count_;
  uint64_t budget_ = 0;
  std::set<SpacePoint> asked_;
  bool dry_ = false;
  std::string op_wide_failure_;
  Objective objective_ = Objective::kTime;  // what ObserveRows feeds the strategy (SearchOptions::objective)
};

}  // namespace tune
