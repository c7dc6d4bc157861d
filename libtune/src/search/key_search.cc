#include "search/key_search.h"

#include <algorithm>
#include <cmath>

#include "base/text.h"
#include "search/registry.h"

namespace tune {

Result<std::unique_ptr<KeySearch>> KeySearch::Create(std::shared_ptr<const SearchSpace> space, SearchOptions options,
                                                     std::vector<PriorTrial> priors,
                                                     std::vector<float> key_features,
                                                     std::optional<KeyCount> count) {
  std::unique_ptr<KeySearch> ks(new KeySearch());
  ks->space_ = std::move(space);
  if (count) {
    ks->count_ = *count;
  } else {
    ks->count_.legal = ks->space_->LegalCount(&ks->count_.exact);
  }
  const uint64_t legal = ks->count_.legal;
  auto name = ResolveStrategy(options.strategy, options.budget, options.exhaustive_up_to,
                              [legal]() -> Result<uint64_t> { return legal; });
  if (!name.ok()) return name.status();
  options.strategy = *name;
  if (options.budget == 0) {
    ks->budget_ = legal;
  } else {
    ks->budget_ = ks->count_.exact ? std::min(options.budget, legal) : options.budget;
    options.budget = ks->budget_;
  }
  auto strategy = MakeStrategy(*ks->space_, options, std::move(priors), std::move(key_features));
  if (!strategy.ok()) return strategy.status();
  ks->strategy_ = std::move(strategy).value();
  ks->proposer_ = ks->strategy_->Name();
  ks->objective_ = options.objective;
  return ks;
}

size_t KeySearch::Want(size_t in_flight, size_t measured, size_t depth, size_t batch, uint64_t spent) const {
  const size_t now = ProposalNow(in_flight, measured, depth, batch);
  return static_cast<size_t>(std::min<uint64_t>(now, Left(spent)));
}

void KeySearch::Observe(const SpacePoint& p, std::optional<double> us) { strategy_->Observe(p, us); }

namespace {

// The classes a whole op fails with; the others (resources, timeouts, wrong
// results, NaNs, skipped) depend on the config by nature.
bool OpWideClass(FailureClass c) {
  return c == FailureClass::kCompileError || c == FailureClass::kLaunchError || c == FailureClass::kCrash;
}

}  // namespace

uint64_t KeySearch::ObserveRows(const std::vector<Measurement>& rows) {
  std::set<SpacePoint> counted;
  // The op-wide rule's tally: one cause shared by every row so far.
  std::string cause;
  bool one_cause = true;
  for (const Measurement& m : rows) {
    const auto p = space_->PointOf(m.config);
    if (!p || !space_->Legal(*p) || !counted.insert(*p).second) continue;
    const double value = m.ObjectiveValue(objective_);
    const bool ran = m.Valid() && std::isfinite(value) && value > 0;
    strategy_->Observe(*p, ran ? std::optional<double>(value) : std::nullopt);
    const std::string why = std::string(FailureClassName(m.failure)) + ": " + WhyFailed(m.failure_message);
    if (ran || !OpWideClass(m.failure) || (!cause.empty() && why != cause)) one_cause = false;
    cause = why;
  }
  if (one_cause && counted.size() >= kOpWideFailureRows) op_wide_failure_ = cause;
  return counted.size();
}

void KeySearch::NoteCompiled(const Config& c) {
  if (const auto p = space_->PointOf(c); p && space_->Legal(*p)) strategy_->NoteCompiled(*p);
}

Result<std::vector<SpacePoint>> KeySearch::Propose(size_t n) {
  if (!op_wide_failure_.empty()) return std::vector<SpacePoint>{};
  std::vector<SpacePoint> out = strategy_->Propose(n);
  if (out.size() > n)
    return Status::Error("strategy " + proposer_ + " proposed " + std::to_string(out.size()) +
                         " configs when asked for " + std::to_string(n));
  for (const SpacePoint& p : out)
    if (!asked_.insert(p).second)
      return Status::Error("strategy " + proposer_ + " proposed " + space_->ToConfig(p).Canonical() +
                           " a second time");
  if (out.empty() && n > 0) dry_ = true;
  return out;
}

Result<std::vector<Config>> KeySearch::ProposeConfigs(size_t n) {
  auto points = Propose(n);
  if (!points.ok()) return points.status();
  std::vector<Config> out;
  out.reserve(points->size());
  for (const SpacePoint& p : *points) out.push_back(space_->ToConfig(p));
  return out;
}

std::vector<std::string> KeySearch::TakeWarnings() { return strategy_->TakeWarnings(); }

}  // namespace tune
