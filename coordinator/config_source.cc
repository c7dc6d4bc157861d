// A sweep's per-key config sources (config_source.h).
#include "config_source.h"

#include <algorithm>

#include "opspec/config_space.h"
#include "search/features.h"
#include "search/registry.h"
#include "search/search_space.h"
#include "base/target.h"

namespace tune {

namespace {

// How much work a shape is, to order the screening: the product of its dims
// (M*N*K for a GEMM, ROWS*N for a row-wise op).
double ShapeWork(const Shape& shape) {
  double work = 1;
  for (const auto& [dim, value] : shape.dims) work *= static_cast<double>(value);
  return work;
}

// A sweep's config list (SweepSubmit::configs, checked against the op by
// CheckListedSweep) on `device`: each config must pass the op's
// constraints there. Errors name the config's index and the model; a list
// over `max_legal` configs is over the sweep's pairs bound.
Result<std::vector<Config>> ListedConfigsOn(const std::vector<Config>& listed, const OpSpec& spec,
                                            const DeviceInfo& device, uint64_t max_legal, uint64_t max_pairs) {
  if (listed.size() > max_legal)
    return Status::Error("op '" + spec.name + "' on " + device.model + ": " + std::to_string(listed.size()) +
                         " listed configs, over the limit of " + std::to_string(max_pairs) +
                         " (config, shape) pairs per sweep and GPU model (--max-sweep-pairs)");
  auto space = SearchSpace::Create(spec, device, spec.dtypes.empty() ? std::string() : spec.dtypes.front());
  if (!space.ok()) return Status::Error("op '" + spec.name + "': " + space.status().message());
  for (size_t i = 0; i < listed.size(); ++i) {
    const std::optional<SpacePoint> p = space->PointOf(listed[i]);
    if (!p) return Status::Error("configs[" + std::to_string(i) + "] " + listed[i].Canonical() + " is no config of op '" +
                                 spec.name + "'");
    if (!space->Legal(*p))
      return Status::Error("configs[" + std::to_string(i) + "] " + listed[i].Canonical() + " breaks a constraint of op '" +
                           spec.name + "' on " + device.model + " (`tunefarm op check` lists them)");
  }
  return listed;
}

// The plan of a key measured from a config list: `listed` of the key's
// legal configs, so that its coverage says "searched" (a part of the
// space, never ground truth for `search replay`) rather than "exhausted".
KeyPlan ListedPlan(const OpSpec& spec, const DeviceInfo& device, const std::string& dtype, const Shape& shape,
                   uint64_t listed) {
  KeyPlan plan{listed, true, "listed/1", listed, true};
  auto space = SearchSpace::Create(spec, device, dtype, &shape);
  if (space.ok()) plan.legal = std::max(listed, space->LegalCount(&plan.legal_exact));
  return plan;
}

// The defaults a searched key measures first (SearchOptions::first): the
// op's, which publish sets beside the winner (BundleEntry::
// default_median_us), and the one its [arch_defaults] declares for the
// device's architecture ("sm_90" or "sm_90a"), which a deployment there
// falls back to.
std::vector<Config> DefaultsOn(const OpSpec& spec, const DeviceInfo& device) {
  std::vector<Config> out;
  if (!spec.default_config.params.empty()) out.push_back(spec.default_config);
  const std::string arch = TargetOf(device).arch;
  for (const std::string& a : {arch, arch + "a"}) {
    auto it = spec.arch_defaults.find(a);
    if (it != spec.arch_defaults.end() && it->second.Id() != spec.default_config.Id()) {
      out.push_back(it->second);
      break;
    }
  }
  return out;
}

// The keys of `spec` that a searching strategy serves (SpaceExpansion::
// search): a pool with a SearchedKey per (dtype, shape), added to `out`.
// False when the op's keys are measured whole instead: the strategy
// measures whole (search/registry.h MeasuresWhole), or auto resolves to one
// over the op's space on the device (ResolveAuto, with the budget the keys
// would get).
Result<bool> SearchKeys(const SpaceExpansion& job, const OpSpec& spec, const std::vector<Shape>& shapes,
                        ExpandedSpace* out) {
  SearchOptions options = job.search;
  if (MeasuresWhole(options.strategy) || job.dtypes.empty()) return false;
  options.budget = options.budget > 0 ? options.budget : kDefaultSearchBudget;
  auto strategy = ResolveStrategy(options.strategy, options.budget, options.exhaustive_up_to,
                                  [&]() -> Result<uint64_t> {
                                    auto whole = SearchSpace::Create(spec, job.device, job.dtypes.front());
                                    if (!whole.ok())
                                      return Status::Error("op '" + spec.name + "': " + whole.status().message());
                                    return whole->LegalCount();
                                  });
  if (!strategy.ok()) return strategy.status();
  if (MeasuresWhole(*strategy)) return false;
  options.strategy = *strategy;
  for (const std::string& dtype : job.dtypes) {
    for (const Shape& shape : shapes) {
      auto space = SearchSpace::Create(spec, job.device, dtype, &shape);
      if (!space.ok()) return Status::Error("op '" + spec.name + "': " + space.status().message());
      SearchOptions key_options = options;
      key_options.first = DefaultsOn(spec, job.device);
      std::vector<PriorTrial> priors;
      if (job.priors) priors = job.priors(job.device, spec, dtype, shape);
      auto key = KeySearch::Create(std::make_shared<const SearchSpace>(std::move(space).value()), key_options,
                                   std::move(priors), KeyFeatures(shape, job.device.model, &job.device));
      if (!key.ok()) return Status::Error("op '" + spec.name + "': " + key.status().message());
      auto ks = std::make_shared<SearchedKey>();
      ks->key = std::move(key).value();
      ks->budget_seconds = job.budget_seconds;
      const KeySearch& k = *ks->key;
      out->pairs_total += k.budget();
      out->pool_unsliced[PoolKey{job.device.model, spec.name, dtype, shape.Canonical()}] += k.budget();
      out->plans[PoolKey{job.device.model, spec.name, dtype, shape.Canonical()}] =
          KeyPlan{k.legal(), k.legal_exact(), k.proposer(), k.budget(), true};
      if (k.budget() == 0) continue;
      ConfigPool pool{job.sweep_id, spec.name, dtype, shape, std::make_shared<const std::vector<Config>>(), 0, ks, nullptr};
      out->pools.push_back(std::move(pool));
    }
  }
  return true;
}

}  // namespace

Result<ExpandedSpace> ExpandSpace(const SpaceExpansion& job) {
  // Screening goes shape by shape, the least work first, each shape for
  // every (op, dtype) before the next. A kernel timed straight after a
  // larger one runs at the clock that the larger one's power draw left
  // behind: on an H100 at its power limit, a 1024^3 GEMM timed after an
  // 8192^3 one ran at 1170-1470 MHz instead of 1980, came out 30% slow and
  // was left out of the refine pass (bench/gpu_h100.md, seventh session).
  // A run of one shape's kernels sets its own clocks.
  ExpandedSpace out;
  const DeviceInfo& device = job.device;
  uint64_t pairs = 0;  // legal configs x shapes x dtypes of the specs so far
  for (size_t i = 0; i < job.specs.size(); ++i) {
    const OpSpec& spec = job.specs[i];
    const uint64_t pairs_before = out.pairs_total;
    const bool listed = !job.listed.empty();
    auto searched = listed ? Result<bool>(false) : SearchKeys(job, spec, job.shapes[i], &out);
    if (!searched.ok()) return searched.status();
    if (*searched) {
      pairs += out.pairs_total - pairs_before;
      if (pairs > job.max_pairs)
        return Status::Error("op '" + spec.name + "' on " + device.model + ": over " + std::to_string(job.max_pairs) +
                             " (config, shape) pairs of budgets per sweep and GPU model (--max-sweep-pairs)");
      continue;
    }
    // The pairs bound caps the legal configs this op may have, so that the
    // enumeration stops before it holds more than the bound allows.
    const uint64_t per_config = std::max<uint64_t>(1, uint64_t(job.dtypes.size()) * job.shapes[i].size());
    const uint64_t pairs_left = job.max_pairs > pairs ? job.max_pairs - pairs : 0;
    const uint64_t max_legal = std::min(job.max_legal_configs, pairs_left / per_config);
    SpaceStats stats;
    auto enumerated = listed ? ListedConfigsOn(job.listed, spec, device, max_legal, job.max_pairs)
                             : EnumerateConfigs(spec, device, &stats, max_legal);
    if (!enumerated.ok()) {
      if (listed) return enumerated.status();
      if (stats.legal > max_legal && max_legal < job.max_legal_configs) {
        return Status::Error("op '" + spec.name + "' on " + device.model + ": over " +
                             std::to_string(pairs + stats.legal * per_config) + " (config, shape) pairs (" +
                             (pairs ? std::to_string(pairs) + " of the ops before it + " : std::string()) +
                             "more than " + std::to_string(max_legal) + " legal configs x " +
                             std::to_string(job.shapes[i].size()) + " shapes x " + std::to_string(job.dtypes.size()) +
                             " dtypes), more than the limit of " + std::to_string(job.max_pairs) +
                             " pairs per sweep and GPU model (--max-sweep-pairs)");
      }
      const bool over = stats.legal > job.max_legal_configs;
      return Status::Error("op '" + spec.name + "': " + enumerated.status().message() +
                           (over ? " (this coordinator's limit, --max-legal-configs)" : ""));
    }
    pairs += enumerated->size() * per_config;
    // Shared by the pools of every (dtype, shape) that has none stored.
    auto all_configs = std::make_shared<const std::vector<Config>>(std::move(enumerated).value());
    for (const auto& dtype : job.dtypes) {
      for (const auto& shape : job.shapes[i]) {
        // A config is timed only on the shapes its shape rules allow.
        auto legal_here = all_configs;
        if (!spec.shape_constraints.empty()) {
          auto kept = ConfigsForShape(spec, device, dtype, *all_configs, shape);
          if (!kept.ok()) return Status::Error("op '" + spec.name + "': " + kept.status().message());
          legal_here = std::make_shared<const std::vector<Config>>(std::move(kept).value());
        }
        ConfigPool pool{job.sweep_id, spec.name, dtype, shape, legal_here, 0, nullptr, nullptr};
        if (job.measured) {
          std::vector<Config> unmeasured;
          std::map<std::string, std::vector<std::string>> reusable;
          for (const auto& c : *legal_here) {
            std::optional<StoredPair> stored = job.measured(device, spec, dtype, c, shape);
            if (!stored || !stored->host_digests.empty()) {
              unmeasured.push_back(c);
              if (stored) reusable.emplace(c.Id(), std::move(stored->host_digests));
            } else if (stored->failed) {
              out.pairs_failed++;
              if (stored->failure != FailureClass::kNone) out.failed_by_class[FailureClassName(stored->failure)]++;
            }
          }
          out.pairs_done += legal_here->size() - unmeasured.size();
          pool.configs = std::make_shared<const std::vector<Config>>(std::move(unmeasured));
          if (!reusable.empty())
            pool.reusable = std::make_shared<const std::map<std::string, std::vector<std::string>>>(std::move(reusable));
        }
        const size_t left = pool.configs->size();
        out.pairs_total += legal_here->size();
        out.pool_unsliced[PoolKey{device.model, spec.name, dtype, shape.Canonical()}] += left;
        out.plans[PoolKey{device.model, spec.name, dtype, shape.Canonical()}] =
            listed ? ListedPlan(spec, device, dtype, shape, legal_here->size())
                   : KeyPlan{legal_here->size(), true, WholeProposer(), 0, false};
        if (left > 0) out.pools.push_back(std::move(pool));
      }
    }
  }
  std::stable_sort(out.pools.begin(), out.pools.end(),
                   [](const ConfigPool& a, const ConfigPool& b) { return ShapeWork(a.shape) < ShapeWork(b.shape); });
  return out;
}

SearchBatch ProposeSearchBatch(SearchedKey& ks, const std::function<std::vector<Measurement>()>& rows, size_t batch,
                               const std::vector<std::string>& retry, const std::string& sweep_id,
                               const std::vector<Config>& compiled) {
  SearchBatch out;
  for (const Config& c : compiled) ks.key->NoteCompiled(c);
  // What the key measured: this run's batches, and what a run before a
  // restart stored.
  if (rows) {
    std::vector<Measurement> observed = rows();
    // An earlier sweep's failure of a class this one retries is not a
    // result: the strategy may propose it again (its own failures are).
    std::erase_if(observed, [&](const Measurement& m) {
      return !m.Valid() && m.sweep_id != sweep_id &&
             std::find(retry.begin(), retry.end(), FailureClassName(m.failure)) != retry.end();
    });
    out.stored = ks.key->ObserveRows(observed);
  }
  // The budget left, as the scheduler will count it once the stored rows
  // are taken off (on a first proposal).
  const uint64_t proposed = ks.resumed ? ks.proposed : ks.proposed + std::min(out.stored, ks.budget() - ks.proposed);
  const size_t want = std::min<uint64_t>(batch, ks.key->Left(proposed));
  std::string broken;
  if (want > 0 && !ks.key->op_wide_failure().empty()) {
    broken = "the search stops: its first " + std::to_string(out.stored) +
             " configs all failed the same way, the op's failure rather than a config's: " +
             ks.key->op_wide_failure();
  } else if (want > 0) {
    auto got = ks.key->ProposeConfigs(want);
    if (got.ok()) out.configs = std::move(got).value();
    else broken = "the search stops: " + got.status().message();
  }
  out.warnings = ks.key->TakeWarnings();
  if (!broken.empty()) out.warnings.push_back(std::move(broken));
  return out;
}

}  // namespace tune
