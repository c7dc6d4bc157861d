#include "search/registry.h"

#include "opspec/sweep_file.h"

namespace tune {
namespace search_detail {

// Each strategy's factory, defined in its own file.
#define TUNE_DECLARE_FACTORY(name, version, searches, factory, help) \
  Result<std::unique_ptr<SearchStrategy>> factory(StrategyInputs in);
TUNE_SEARCH_STRATEGIES(TUNE_DECLARE_FACTORY)
#undef TUNE_DECLARE_FACTORY

}  // namespace search_detail

const std::vector<StrategyEntry>& Strategies() {
  static const std::vector<StrategyEntry> table = {
#define TUNE_ENTRY(name, version, searches, factory, help) {name, version, searches, help, &search_detail::factory},
      TUNE_SEARCH_STRATEGIES(TUNE_ENTRY)
#undef TUNE_ENTRY
  };
  return table;
}

const StrategyEntry* FindStrategy(const std::string& name) {
  for (const StrategyEntry& e : Strategies())
    if (e.name == name) return &e;
  return nullptr;
}

namespace {

// The entry auto takes for a key measured whole.
const std::string& Whole() {
  for (const StrategyEntry& e : Strategies())
    if (!e.searches) return e.name;
  static const std::string none;  // a table with no such entry fails RegistryTest
  return none;
}

}  // namespace

std::string ResolveAuto(uint64_t legal, uint64_t budget, uint64_t exhaustive_up_to) {
  // Measured whole where that is cheap or the budget covers the space anyway.
  const bool covered = budget > 0 && budget >= legal;
  return legal <= exhaustive_up_to || covered ? Whole() : std::string(kAutoSearches);
}

Result<std::string> ResolveStrategy(const std::string& name, uint64_t budget, uint64_t exhaustive_up_to,
                                    const std::function<Result<uint64_t>()>& legal) {
  TUNE_RETURN_IF_ERROR(CheckStrategyName(name, "strategy"));
  if (name != kAutoStrategy) return name;
  Result<uint64_t> count = legal();
  if (!count.ok()) return count.status();
  return ResolveAuto(*count, budget, exhaustive_up_to);
}

bool MeasuresWhole(const std::string& name) {
  const StrategyEntry* e = FindStrategy(name);
  return e && !e->searches;
}

std::string WholeProposer() {
  const StrategyEntry* e = FindStrategy(Whole());
  return e ? e->Proposer() : std::string();
}

std::vector<std::string> SearchingStrategyNames() {
  std::vector<std::string> out;
  for (const StrategyEntry& e : Strategies())
    if (e.searches) out.push_back(e.name);
  return out;
}

std::string StrategyHelp() {
  std::string out;
  for (const StrategyEntry& e : Strategies()) out += e.name + " (" + e.help + "), ";
  return out + "or " + kAutoStrategy + " (" + Whole() + " up to " +
         std::to_string(kAutoExhaustiveUpTo) + " legal configs or where the budget covers them, " + kAutoSearches +
         " above)";
}

Result<std::unique_ptr<SearchStrategy>> MakeStrategy(const SearchSpace& space, const SearchOptions& options,
                                                     std::vector<PriorTrial> priors,
                                                     std::vector<float> key_features) {
  auto name = ResolveStrategy(options.strategy, options.budget, options.exhaustive_up_to,
                              [&]() -> Result<uint64_t> { return space.LegalCount(); });
  if (!name.ok()) return name.status();
  const StrategyEntry* entry = FindStrategy(*name);
  if (!entry) return Status::InvalidArgument("strategy: '" + *name + "' has no factory");
  return entry->make(StrategyInputs{space, options, std::move(priors), std::move(key_features), entry->Proposer()});
}

}  // namespace tune
