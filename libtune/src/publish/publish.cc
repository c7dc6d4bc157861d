#include "publish/publish.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "base/clock.h"
#include "base/known_gpus.h"
#include "opspec/config_space.h"
#include "opspec/expr.h"
#include "opspec/kernel_hash.h"
#include "store/records.h"
#include "opspec/sweep_file.h"
#include "bundle/shape_selector.h"

namespace tune {

namespace {

// Every stored op package that parses, each parsed once, with when it was
// submitted.
std::vector<std::pair<int64_t, OpSpec>> StoredSpecs(ResultReader& store) {
  std::vector<std::pair<int64_t, OpSpec>> out;
  (void)store.ForEachOp([&](const OpRecord& op) {
    auto spec = SharedOpSpec(op.package, "stored op '" + op.name + "'");
    if (spec.ok()) out.emplace_back(op.submitted_unix, **spec);
  });
  return out;
}

// By name: the spec of the most recently submitted package (on a tie, the
// later record in the store's key order).
std::map<std::string, OpSpec> Latest(const std::vector<std::pair<int64_t, OpSpec>>& stored) {
  std::map<std::string, const std::pair<int64_t, OpSpec>*> latest;
  for (const auto& entry : stored) {
    auto& slot = latest[entry.second.name];
    if (!slot || entry.first >= slot->first) slot = &entry;
  }
  std::map<std::string, OpSpec> out;
  for (const auto& [name, entry] : latest) out.emplace(name, entry->second);
  return out;
}

}  // namespace

std::map<std::string, OpSpec> OpsFromStore(ResultReader& store) { return Latest(StoredSpecs(store)); }

namespace {

// A row's (GPU model, op, dtype, shape): the key a bundle entry answers.
struct GroupKey {
  std::string gpu_model, op, dtype, shape;
  explicit GroupKey(const Measurement& m) : gpu_model(m.gpu_model), op(m.op), dtype(m.dtype), shape(m.shape) {}
  bool operator<(const GroupKey& o) const {
    return std::tie(gpu_model, op, dtype, shape) < std::tie(o.gpu_model, o.op, o.dtype, o.shape);
  }
};

}  // namespace

std::vector<Measurement> NewestKernelOnly(std::vector<Measurement> rows) {
  std::map<GroupKey, const Measurement*> newest;
  for (const auto& m : rows) {
    auto& slot = newest[GroupKey(m)];
    if (!slot || m.unix_time > slot->unix_time ||
        (m.unix_time == slot->unix_time && m.kernel_hash < slot->kernel_hash)) {
      slot = &m;
    }
  }
  std::set<std::pair<GroupKey, std::string>> keep;  // (key, hash)
  for (const auto& [key, m] : newest) keep.emplace(key, m->kernel_hash);
  std::vector<Measurement> out;
  for (auto& m : rows) {
    if (keep.count({GroupKey(m), m.kernel_hash})) out.push_back(std::move(m));
  }
  return out;
}

// The op's shape rules as programs over params, dims and dsize; a rule that
// reads a device limit is left out with a note (a lookup does not know it).
BundleShapeRules ShapeRulesOf(const OpSpec& spec, const std::function<void(const std::string&)>& note) {
  BundleShapeRules out;
  for (const Axis& a : spec.axes) out.vars.push_back(a.name);
  out.params = out.vars.size();
  for (const std::string& d : spec.dims) out.vars.push_back(d);
  out.vars.push_back("dsize");
  for (const std::string& rule : spec.shape_constraints) {
    auto p = CompileLaunchProgram(rule, out.vars, spec.name + " shape rule");
    if (p.ok()) out.rules.push_back(std::move(p).value());
    else note(spec.name + ": shape rule '" + rule + "' stays out of the bundle (" + p.status().message() + ")");
  }
  return out;
}

Result<BundleLaunchPlan> MakeLaunchPlan(const OpSpec& spec, const std::string& kernel_hash) {
  BundleLaunchPlan plan;
  plan.op = spec.name;
  plan.kernel_hash = kernel_hash;
  plan.function = spec.kernel;
  for (const Axis& a : spec.axes) plan.vars.push_back(a.name);
  for (const std::string& d : spec.dims) plan.vars.push_back(d);
  for (const char* v : kLaunchDeviceVars) plan.vars.emplace_back(v);
  const std::string where = spec.origin + ": ";
  auto compile = [&](const std::string& text, const std::string& field, LaunchProgram* out) -> Status {
    auto p = CompileLaunchProgram(text, plan.vars, where + field);
    if (!p.ok()) return p.status();
    *out = std::move(p).value();
    return Status::OK();
  };
  for (size_t i = 0; i < 3; ++i) {
    const std::string ix = "[" + std::to_string(i) + "]";
    TUNE_RETURN_IF_ERROR(compile(i < spec.grid.size() ? spec.grid[i] : "1", "[launch] grid" + ix, &plan.grid[i]));
    TUNE_RETURN_IF_ERROR(compile(i < spec.block.size() ? spec.block[i] : "1", "[launch] block" + ix, &plan.block[i]));
  }
  TUNE_RETURN_IF_ERROR(compile(spec.smem, "[launch] smem", &plan.smem));
  for (const ArgSpec& a : spec.args) {
    BundleLaunchArg arg;
    arg.name = a.name;
    arg.buffer = a.kind == ArgSpec::Kind::kBuffer;
    if (a.kind == ArgSpec::Kind::kTensorMap) {
      arg.scalar_type = kTensorMapArg;
      arg.swizzle = a.swizzle;
      for (size_t b = 0; b < plan.args.size(); ++b)
        if (plan.args[b].name == a.map_of && plan.args[b].buffer) arg.map_of = int(b);
      // op_definition.cc: a map follows the buffer it describes, one box dim per dim.
      if (!arg.tensor_map() || spec.args[size_t(arg.map_of)].shape.size() != a.box.size())
        return Status::InvalidArgument(where + "[[args]] " + a.name + " tensor_map: '" + a.map_of +
                                       "' is not a buffer before it with a dim per box dim");
      const ArgSpec& of = spec.args[size_t(arg.map_of)];
      for (size_t d = 0; d < a.box.size(); ++d) {
        const std::string ix = "[" + std::to_string(d) + "]";
        arg.extents.emplace_back();
        arg.box.emplace_back();
        TUNE_RETURN_IF_ERROR(compile(of.shape[d], "[[args]] " + of.name + " shape" + ix, &arg.extents.back()));
        TUNE_RETURN_IF_ERROR(compile(a.box[d], "[[args]] " + a.name + " box" + ix, &arg.box.back()));
      }
    } else if (arg.buffer) {
      arg.dtype = a.dtype;
      arg.dir = a.dir;
    } else {
      arg.scalar_type = a.scalar_type;
      TUNE_RETURN_IF_ERROR(compile(a.value, "[[args]] " + a.name + " value", &arg.value));
    }
    plan.args.push_back(std::move(arg));
  }
  return plan;
}

namespace {

// Whether `plan` launches `m`'s config on `m`'s shape as the farm did.
Status PlanAgrees(const BundleLaunchPlan& plan, const OpSpec& spec, const Measurement& m) {
  Shape shape;
  ParseNamedValues(m.shape, &shape.dims);
  DeviceInfo dev;  // launch expressions of the shipped ops read no limits; any fixed device compares alike
  dev.smem_per_block_optin = 227 * 1024;
  dev.max_threads_per_block = 1024;
  dev.num_sms = 132;
  dev.cc_major = 9;
  dev.l2_bytes = 50 << 20;
  auto want = PlanLaunch(spec, m.dtype, m.config, shape, dev);
  if (!want.ok()) return want.status();
  const LaunchDevice ld{dev.smem_per_block_optin, dev.max_threads_per_block, dev.num_sms, 90, dev.l2_bytes};
  auto vars = LaunchVariables(plan, m.config.params, shape.dims, m.dtype, ld);
  if (!vars.ok()) return vars.status();
  auto got = EvaluateLaunchPlan(plan, *vars);
  if (!got.ok()) return got.status();
  bool same = got->smem_bytes == want->smem_bytes;
  for (int i = 0; i < 3; ++i) same = same && got->grid[i] == want->grid[i] && got->block[i] == want->block[i];
  for (size_t i = 0; i < spec.args.size(); ++i) {
    if (spec.args[i].kind == ArgSpec::Kind::kScalar) same = same && got->scalars[i] == want->scalar_values[i];
    if (spec.args[i].kind == ArgSpec::Kind::kTensorMap)
      same = same && got->map_box[i] == want->arg_extents[i] &&
             got->map_extents[i] == want->arg_extents[size_t(plan.args[i].map_of)];
  }
  if (!same) return Status::Error("its launch plan evaluates otherwise than the farm on " + m.shape + " " + m.config.Canonical());
  return Status::OK();
}

// The stored specs by (op, op hash) for the toolchains of `rows`: which
// package each row was measured with.
SpecsByOpHash SpecsOfRows(const std::vector<std::pair<int64_t, OpSpec>>& stored, const std::vector<Measurement>& rows) {
  std::set<std::string> toolchains;
  for (const Measurement& m : rows) toolchains.insert(m.nvrtc_version);
  std::vector<const OpSpec*> specs;
  for (const auto& [submitted, spec] : stored) specs.push_back(&spec);
  return SpecsByOpHash(specs, toolchains);
}

// Picks the ModelDefault of (model, op, dtype) from the rows of its newest
// kernel hash (see ModelDefault in bundle/bundle.h). False when no config of
// them passed its check.
bool PickModelDefault(const std::vector<Measurement>& rows, const Config& op_default, ModelDefault* out) {
  std::map<std::string, double> best;  // shape -> fastest valid median
  for (const Measurement& m : rows)
    if (m.Valid()) best[m.shape] = best.count(m.shape) ? std::min(best[m.shape], m.median_us) : m.median_us;
  struct Score {
    size_t shapes = 0;
    double log_ratio = 0, log_median = 0;
    const Measurement* row = nullptr;
  };
  std::map<std::string, Score> scores;  // config id
  for (const Measurement& m : rows) {
    if (!m.Valid()) continue;
    Score& s = scores[m.config_id];
    ++s.shapes;
    s.log_ratio += std::log(m.median_us / best[m.shape]);
    s.log_median += std::log(m.median_us);
    s.row = &m;
  }
  if (scores.empty()) return false;
  const Score* pick = nullptr;
  if (auto it = scores.find(op_default.Id()); it != scores.end() && it->second.shapes == best.size()) {
    pick = &it->second;
  } else {
    for (const auto& [id, s] : scores) {
      if (!pick || s.shapes > pick->shapes ||
          (s.shapes == pick->shapes && s.log_ratio / double(s.shapes) < pick->log_ratio / double(pick->shapes)))
        pick = &s;
    }
  }
  const Measurement& m = *pick->row;
  *out = ModelDefault{m.op, m.dtype, m.gpu_model, m.config, m.config_id, m.kernel_hash, m.arch,
                      std::exp(pick->log_median / double(pick->shapes))};
  return true;
}

}  // namespace

namespace {

// Winners' rule under an energy objective, for each of `best` (time winners).
Status ByObjective(ResultReader& store, Objective objective, const RankFilter& rank, std::vector<Measurement>* best) {
  for (Measurement& b : *best) {
    std::vector<Measurement> rows;
    double least = 0;
    Status st = store.Scan(ResultFilter{b.gpu_model, b.op, b.dtype, b.shape, b.kernel_hash}, [&](const Measurement& m) {
      const double v = m.ObjectiveValue(objective);
      if (m.Valid() && m.unchecked == b.unchecked && m.pass == b.pass && std::isfinite(v) && v > 0 && (!rank || rank(m))) {
        rows.push_back(m);
        least = least > 0 ? std::min(least, v) : v;
      }
      return true;
    });
    if (!st.ok()) return st;
    const Measurement* pick = nullptr;
    for (const Measurement& m : rows)
      if (m.ObjectiveValue(objective) <= least * (1 + kTieWithin) && (!pick || m.config_id < pick->config_id)) pick = &m;
    if (pick) b = *pick;
  }
  return Status::OK();
}

}  // namespace

Result<std::vector<Measurement>> Winners(ResultReader& store, const ResultFilter& filter, const RankFilter& rank,
                                         Objective objective) {
  auto best = store.Best(filter);
  if (!best.ok()) return best.status();
  auto valid = [](const Measurement& m) { return m.Valid() && std::isfinite(m.median_us) && m.median_us > 0; };
  std::erase_if(*best, [&](const Measurement& m) { return !valid(m); });
  if (rank) {
    // The store's index ranks every row: a key whose best the filter leaves
    // out is ranked again over the rows it keeps.
    for (Measurement& b : *best) {
      if (rank(b)) continue;
      std::optional<Measurement> pick;
      Status st = store.Scan(ResultFilter{b.gpu_model, b.op, b.dtype, b.shape, b.kernel_hash}, [&](const Measurement& m) {
        if (valid(m) && rank(m) && (!pick || m.RanksAhead(*pick))) pick = m;
        return true;
      });
      if (!st.ok()) return st;
      if (pick) b = std::move(*pick);
      else b.median_us = 0;  // no row of the key ranks: no winner
    }
    std::erase_if(*best, [&](const Measurement& m) { return !valid(m); });
  }
  std::vector<Measurement> winners = StableWinners(store, NewestKernelOnly(std::move(best).value()), rank);
  if (objective != Objective::kTime) TUNE_RETURN_IF_ERROR(ByObjective(store, objective, rank, &winners));
  return winners;
}

std::vector<Measurement> StableWinners(ResultReader& store, std::vector<Measurement> best, const RankFilter& rank) {
  for (Measurement& b : best) {
    std::vector<Measurement> tied;
    Status st = store.Scan(ResultFilter{b.gpu_model, b.op, b.dtype, b.shape, b.kernel_hash}, [&](const Measurement& m) {
      const bool same_rank = m.Valid() && m.unchecked == b.unchecked && m.pass == b.pass && std::isfinite(m.median_us) &&
                             (!rank || rank(m));
      if (same_rank && m.median_us <= b.median_us * (1 + kTieWithin)) tied.push_back(m);
      return true;
    });
    if (!st.ok() || tied.size() < 2) continue;
    // A row without a CI (0: not computed) tells nothing of its precision:
    // it is not kept out. Where none is precise, all take part.
    auto precise = [](const Measurement& m) { return m.ci95_us <= 0 || m.ci95_us <= kTiePrecise * m.median_us; };
    const bool any_precise = std::any_of(tied.begin(), tied.end(), precise);
    const Measurement* pick = nullptr;
    for (const Measurement& m : tied)
      if ((!any_precise || precise(m)) && (!pick || m.config_id < pick->config_id)) pick = &m;
    b = *pick;
  }
  return best;
}

// The selector of one (GPU model, op, dtype) over its tuned entries (of
// `b`) and their rows (`rows`, of the newest kernel): the entries' configs
// are the candidates, each judged on each tuned shape by its screening
// figure, which every config measured there has and which ranks alike
// across configs (refined and confirmed figures shift with their timing).
// Nothing when fewer than two shapes were tuned.
std::optional<BundleSelector> FitBundleSelector(const Bundle& b, const std::string& model, const std::string& op,
                                                const std::string& dtype, const std::vector<Measurement>& rows) {
  SelectorInput in;
  std::vector<uint32_t> entry_of;                // per candidate: its first entry
  std::map<std::string, size_t> shape_at, candidate_at;
  std::vector<std::string> dims;
  for (uint32_t i = 0; i < b.entries.size(); ++i) {
    const BundleEntry& e = b.entries[i];
    if (e.gpu_model != model || e.op != op || e.dtype != dtype) continue;
    std::vector<std::string> names;
    for (const auto& [n, v] : e.shape.dims) names.push_back(n);
    if (in.shapes.empty()) dims = names;
    if (names != dims) continue;  // another op version's dims
    shape_at.emplace(e.shape.Canonical(), in.shapes.size());
    in.shapes.push_back(e.shape);
    if (candidate_at.emplace(e.config_id, in.candidates.size()).second) {
      in.candidates.push_back(e.config);
      entry_of.push_back(i);
    }
  }
  if (in.shapes.size() < 2) return std::nullopt;
  in.us.assign(in.candidates.size(), std::vector<double>(in.shapes.size(), INFINITY));
  for (const Measurement& m : rows) {
    const auto s = shape_at.find(m.shape);
    const auto c = candidate_at.find(m.config_id);
    if (s == shape_at.end() || c == candidate_at.end() || !m.Valid()) continue;
    // A refine or confirm row carries the screening figure it replaced.
    const double us = m.pass == Measurement::Pass::kScreen || !(m.screen_us > 0) ? m.median_us : m.screen_us;
    if (std::isfinite(us) && us > 0) in.us[c->second][s->second] = std::min(in.us[c->second][s->second], us);
  }
  ShapeSelector fitted = FitShapeSelector(in);
  if (fitted.nodes.empty()) return std::nullopt;
  BundleSelector out{op, dtype, model, fitted.dims, {}, std::move(fitted.nodes)};
  for (size_t c : fitted.candidates) out.entries.push_back(entry_of[c]);
  return out;
}

namespace {

using Note = std::function<void(const std::string&)>;

// What each op's newest package gives the bundle besides entries: its
// default, buckets, shape rules and architecture defaults.
void AddOpParts(const std::map<std::string, OpSpec>& ops, Bundle* b, const Note& note) {
  for (const auto& [op, spec] : ops) {
    b->defaults[op] = spec.default_config;
    if (!spec.buckets.empty()) b->buckets[op] = spec.buckets;
    if (!spec.shape_constraints.empty()) {
      auto rules = ShapeRulesOf(spec, note);
      if (!rules.rules.empty()) b->shape_rules[op] = std::move(rules);
    }
    for (const auto& [arch, config] : spec.arch_defaults) b->arch_defaults.push_back(ArchDefault{op, arch, config});
  }
}

// The entry of a key's winner `m`, with what the store says beside it: its
// coverage, the op default's median and the vendor baseline's on that key.
BundleEntry EntryOf(ResultReader& store, const Measurement& m, const std::map<std::string, OpSpec>& ops) {
  BundleEntry e;
  e.op = m.op;
  e.dtype = m.dtype;
  e.gpu_model = m.gpu_model;
  ParseNamedValues(m.shape, &e.shape.dims);
  e.config = m.config;
  e.config_id = m.config_id;
  e.kernel_hash = m.kernel_hash;
  e.median_us = m.median_us;
  e.stdev_us = m.stdev_us;
  e.ci95_us = m.ci95_us;
  e.samples = m.samples;
  e.backend = m.backend;
  e.device_name = m.device_name;
  e.nvrtc_version = m.nvrtc_version;
  e.driver_version = m.driver_version;
  e.arch = m.arch;
  e.checked_against = m.CheckedAgainst();
  e.energy_uj = m.energy_uj;
  e.power_w = m.power_w;
  e.power_limit_w = m.power_limit_w;
  if (auto c = store.GetCoverage(m.gpu_model, m.op, m.dtype, m.shape, m.kernel_hash); c.ok() && *c) {
    e.coverage = {CoverageStateName((*c)->state), (*c)->strategy, (*c)->legal, (*c)->evaluated, (*c)->budget};
  }
  auto spec = ops.find(m.op);
  if (spec != ops.end()) {
    auto def = store.Get(m.gpu_model, m.op, m.dtype, m.shape, m.kernel_hash, spec->second.default_config.Id());
    // The default is one of the candidates the winner beat (or is the
    // winner), so the bundle never ships a config slower than it.
    if (def && def->Valid()) e.default_median_us = def->median_us;
  }
  if (auto b = store.GetBaseline(m.gpu_model, m.op, m.dtype, m.shape); b.ok() && b->Valid()) {
    e.baseline = b->baseline;
    e.baseline_median_us = b->median_us;
  }
  return e;
}

// The launch plans of the winners' kernels, one per (op, kernel hash), or
// why there is none; a program op's entries are configs only.
struct PlanTable {
  std::map<std::pair<std::string, std::string>, Result<BundleLaunchPlan>> plans;  // (op, kernel hash)
  std::set<std::string> program_ops;

  void Add(const SpecsByOpHash& specs, const Measurement& m, const Note& note) {
    const auto plan_key = std::make_pair(m.op, m.kernel_hash);
    const OpSpec* found = specs.Find(m.op, m.kernel_hash);
    if (found && found->program) {
      // Its own program launches a program op's kernel: the entry is its config.
      if (program_ops.insert(m.op).second) note(m.op + " is a program op: its entries are configs only");
    } else if (!found) {
      plans.emplace(plan_key, Status::NotFound("the store holds no package of this kernel hash"));
    } else {
      auto [it, fresh] = plans.emplace(plan_key, MakeLaunchPlan(*found, m.kernel_hash));
      if (it->second.ok()) {
        if (Status st = PlanAgrees(*it->second, *found, m); !st.ok()) it->second = st;
      }
    }
  }

  void MoveInto(Bundle* b, const Note& note) {
    for (auto& [key, plan] : plans) {
      if (plan.ok()) b->launch_plans.push_back(std::move(plan).value());
      else note("no launch plan for " + key.first + " (kernel " + key.second + "): " + plan.status().message());
    }
  }
};

// Whether `e` stays out of the bundle for --min-vs-baseline (noted so).
bool BelowBaseline(const BundleEntry& e, const PublishOptions& options, const Note& note) {
  const double vs = VsBaseline(e.baseline_median_us, e.median_us);
  if (!(options.min_vs_baseline > 0 && vs > 0 && vs < options.min_vs_baseline)) return false;
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.3fx", vs);
  note(e.gpu_model + " " + e.op + "/" + e.dtype + " " + e.shape.Canonical() + " stays out: its winner is " + ratio +
       " of " + e.baseline + ", below --min-vs-baseline");
  return true;
}

// A default per (op, dtype, GPU model) of the entries, and the shape
// selector fitted on that key's rows.
Status AddModelDefaults(ResultReader& store, const std::map<std::string, OpSpec>& ops, Bundle* b) {
  std::set<std::tuple<std::string, std::string, std::string>> models;
  for (const BundleEntry& e : b->entries) models.emplace(e.gpu_model, e.op, e.dtype);
  for (const auto& [model, op, dtype] : models) {
    std::vector<Measurement> rows;
    Status st = store.Scan(ResultFilter{model, op, dtype, "", ""}, [&](const Measurement& m) {
      rows.push_back(m);
      return true;
    });
    if (!st.ok()) return st;
    rows = NewestKernelOnly(std::move(rows));
    ModelDefault d;
    auto spec = ops.find(op);
    if (PickModelDefault(rows, spec != ops.end() ? spec->second.default_config : Config{}, &d))
      b->model_defaults.push_back(std::move(d));
    if (auto sel = FitBundleSelector(*b, model, op, dtype, rows)) b->selectors.push_back(std::move(*sel));
  }
  return Status::OK();
}

// The cubins of the entries and model defaults that the store holds and
// that two workers (or this host, recompiling) agree on; the others ship
// config-only, counted in the notes by why.
Status AddKernels(ResultReader& store, const SpecsByOpHash& specs, const PublishOptions& options, Bundle* b,
                  const Note& note) {
  std::set<std::string> taken;
  size_t missing = 0, contradicted = 0, recompiled = 0;
  std::map<std::string, size_t> unverified;  // why -> cubins
  auto add_kernel = [&](const std::string& op, const Config& config, const std::string& hash,
                        const std::string& config_id, const std::string& dtype, const std::string& arch) -> Status {
    if (arch.empty() || !taken.insert(hash + "/" + config_id + "/" + dtype + "/" + arch).second) return Status::OK();
    auto k = store.GetKernel(hash, config_id, dtype, arch);
    if (!k.ok()) {
      if (k.status().code() != StatusCode::kNotFound) return k.status();
      ++missing;
      return Status::OK();
    }
    if (!k->conflicts.empty()) {
      ++contradicted;
      return Status::OK();
    }
    if (!k->Corroborated()) {
      // The package of this very kernel hash, not the op's newest.
      const OpSpec* spec = specs.Find(op, hash);
      if (!options.recompile || !spec) {
        ++unverified["measured by one worker and not recompiled here"];
        return Status::OK();
      }
      auto same = options.recompile(*spec, dtype, config, arch, hash);
      if (!same.ok()) {
        ++unverified[same.status().message()];
        return Status::OK();
      }
      if (*same != k->image) {
        ++unverified["what this host compiles differs from the worker's image"];
        return Status::OK();
      }
      ++recompiled;
    }
    b->kernels.push_back(std::move(k).value());
    return Status::OK();
  };
  for (const BundleEntry& e : b->entries)
    TUNE_RETURN_IF_ERROR(add_kernel(e.op, e.config, e.kernel_hash, e.config_id, e.dtype, e.arch));
  for (const ModelDefault& d : b->model_defaults)
    TUNE_RETURN_IF_ERROR(add_kernel(d.op, d.config, d.kernel_hash, d.config_id, d.dtype, d.arch));
  if (missing > 0)
    note(std::to_string(missing) + " measured configs have no cubin in the store (measured before cubins were kept)");
  if (contradicted > 0)
    note(std::to_string(contradicted) + " cubins ship config-only: two workers sent different images of them "
                                        "(tunefarm_kernel_image_conflicts_total)");
  for (const auto& [why, n] : unverified)
    note(std::to_string(n) + " cubins ship config-only: " + why);
  if (recompiled > 0) note(std::to_string(recompiled) + " cubins recompiled here and found byte-identical");
  return Status::OK();
}

}  // namespace

Result<Bundle> BuildBundle(ResultReader& store, const ResultFilter& filter, const std::string& name,
                           const PublishOptions& options, std::vector<std::string>* notes) {
  const Note note = [&](const std::string& line) {
    if (notes) notes->push_back(line);
  };
  auto winners = Winners(store, filter, options.rank, options.objective);
  if (!winners.ok()) return winners.status();
  // Each stored package parsed once for the whole bundle.
  const auto stored = StoredSpecs(store);
  const auto ops = Latest(stored);
  std::map<GroupKey, const Measurement*> pick;  // one best row per key
  const std::vector<Measurement> newest = std::move(winners).value();
  for (const auto& m : newest) pick.emplace(GroupKey(m), &m);
  if (pick.empty()) return Status::Error("publish: no valid measurement matches the filter");
  Bundle b;
  b.name = name;
  b.farm_version = TUNEFARM_VERSION;
  b.created_unix = NowUnixSeconds();
  AddOpParts(ops, &b, note);
  const SpecsByOpHash specs = SpecsOfRows(stored, newest);
  PlanTable plans;
  for (const auto& [key, m] : pick) {
    if (options.keep && !options.keep(*m)) continue;
    BundleEntry e = EntryOf(store, *m, ops);
    e.objective = ObjectiveName(options.objective);
    plans.Add(specs, *m, note);
    if (BelowBaseline(e, options, note)) continue;
    b.entries.push_back(std::move(e));
  }
  plans.MoveInto(&b, note);
  TUNE_RETURN_IF_ERROR(AddModelDefaults(store, ops, &b));
  if (!options.kernels) return b;
  TUNE_RETURN_IF_ERROR(AddKernels(store, specs, options, &b, note));
  return b;
}

double Throughput(const OpSpec* spec, const Measurement& m, std::string* unit) {
  if (!spec || !m.Valid() || m.median_us <= 0) return 0;
  Shape shape;
  if (!ParseNamedValues(m.shape, &shape.dims)) return 0;
  // Metrics depend on dims and dtype only, but the launch they are planned
  // with may read device limits (a grid of num_sms blocks): a real GPU's.
  const DeviceInfo* known = FindKnownGpu(m.gpu_model);
  const DeviceInfo dev = known ? *known : KnownGpus().front();
  auto plan = PlanLaunch(*spec, m.dtype, m.config, shape, dev);
  if (!plan.ok()) return 0;
  // Below ~50 flops per byte a kernel is bound by memory on every current
  // GPU, so bandwidth is the figure that says how good it is.
  const bool memory_bound = plan->bytes > 0 && plan->flops < 50 * plan->bytes;
  if (plan->flops > 0 && !memory_bound) {
    *unit = "TFLOP/s";
    return plan->flops / (m.median_us * 1e6);
  }
  if (plan->bytes > 0) {
    *unit = "GB/s";
    return plan->bytes / (m.median_us * 1e3);
  }
  return 0;
}

}  // namespace tune
