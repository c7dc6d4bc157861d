#include "opspec/config_space.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>

#include "opspec/expr.h"

namespace tune {
namespace {

std::string SpecFile(const OpSpec& spec) {
  const std::string& o = spec.origin;
  if (o.size() >= 5 && o.compare(o.size() - 5, 5, ".toml") == 0) return o;
  if (o.empty()) return "op.toml";
  return o.back() == '/' ? o + "op.toml" : o + "/op.toml";
}


struct Constraint {
  Expr expr;
  int deepest_axis;  // highest axis index the rule reads; -1: none
};

}  // namespace

uint64_t RawSpaceSize(const OpSpec& spec) {
  uint64_t raw = 1;
  for (const Axis& a : spec.axes) {
    const uint64_t k = a.values.size();
    raw = (k != 0 && raw > UINT64_MAX / k) ? UINT64_MAX : raw * k;
  }
  return raw;
}

namespace {

Result<std::vector<Config>> Enumerate(const OpSpec& spec, const DeviceInfo& device, int dsize,
                                      SpaceStats* stats, uint64_t max_legal) {
  const size_t n = spec.axes.size();
  const uint64_t raw = RawSpaceSize(spec);
  if (stats) *stats = SpaceStats{raw, 0};
  if (raw > kMaxRawConfigPoints)
    return Status::Error(SpecFile(spec) + ": [params]: the config space has " +
                         (raw == UINT64_MAX ? std::string("over 2^64") : std::to_string(raw)) +
                         " raw points, more than the limit of " + std::to_string(kMaxRawConfigPoints));
  std::vector<Config> out;
  if (raw == 0) return out;

  ExprScope scope;
  scope.SetDevice(device);
  scope.Set("dsize", dsize);
  std::vector<double*> slots(n);
  for (size_t i = 0; i < n; ++i) {
    scope.Set(spec.axes[i].name, static_cast<double>(spec.axes[i].values[0].Number()));
    slots[i] = scope.Slot(spec.axes[i].name);
  }

  std::vector<Constraint> rules;
  for (size_t c = 0; c < spec.constraints.size(); ++c) {
    auto e = Expr::Compile(spec.constraints[c], &scope,
                           SpecFile(spec) + ": [constraints] rules[" + std::to_string(c) + "]");
    if (!e.ok()) return e.status();
    const std::set<std::string> names = ExprIdentifiers(spec.constraints[c]);
    int deepest = -1;
    for (size_t i = 0; i < n; ++i)
      if (names.count(spec.axes[i].name)) deepest = static_cast<int>(i);
    rules.push_back(Constraint{std::move(e).value(), deepest});
  }
  // Rules over the outer axes first: when one fails, every point sharing that
  // prefix fails too, and the odometer skips the whole subtree.
  std::stable_sort(rules.begin(), rules.end(),
                   [](const Constraint& a, const Constraint& b) { return a.deepest_axis < b.deepest_axis; });

  std::vector<size_t> idx(n, 0);
  uint64_t legal = 0;
  int changed_from = -1;  // lowest axis whose value changed since the last point; -1: first point
  while (true) {
    // Rules whose axes all lie above `changed_from` passed on this prefix
    // already (a failure would have skipped it), so they are not re-evaluated.
    int failed_at = -2;  // -2: legal
    for (const Constraint& r : rules) {
      if (r.deepest_axis < changed_from) continue;
      if (!(std::fabs(r.expr.Eval()) > 0)) {  // zero or NaN
        failed_at = r.deepest_axis;
        break;
      }
    }
    if (failed_at == -1) break;  // a rule over device limits alone: nothing is legal
    if (failed_at == -2) {
      if (++legal > max_legal) {
        if (stats) stats->legal = legal;
        return Status::Error(SpecFile(spec) + ": more than " + std::to_string(max_legal) + " legal configs on " +
                             device.model);
      }
      Config cfg;
      cfg.params.reserve(n);
      for (size_t i = 0; i < n; ++i) cfg.params.emplace_back(spec.axes[i].name, spec.axes[i].values[idx[i]]);
      out.push_back(std::move(cfg));
    }
    // Advance: past the last axis for a legal point, past the failing rule's
    // deepest axis (the whole subtree) for an illegal one.
    int pos = failed_at == -2 ? static_cast<int>(n) - 1 : failed_at;
    for (size_t i = static_cast<size_t>(pos) + 1; i < n; ++i) idx[i] = 0;
    while (pos >= 0 && ++idx[pos] == spec.axes[pos].values.size()) {
      idx[pos] = 0;
      --pos;
    }
    if (pos < 0) break;
    changed_from = pos;
    for (size_t i = static_cast<size_t>(pos); i < n; ++i)
      *slots[i] = static_cast<double>(spec.axes[i].values[idx[i]].Number());
  }
  if (stats) stats->legal = legal;
  return out;
}

}  // namespace

Result<SpaceExplanation> ExplainSpace(const OpSpec& spec, const DeviceInfo& device) {
  const uint64_t raw = RawSpaceSize(spec);
  if (raw > kMaxExplainedPoints)
    return Status::InvalidArgument(SpecFile(spec) + ": [params]: " + std::to_string(raw) +
                                   " raw points, more than the " + std::to_string(kMaxExplainedPoints) +
                                   " a rule-by-rule count looks at");
  int dsize = 0;
  for (const std::string& d : spec.dtypes) dsize = std::max(dsize, DTypeSize(d));
  ExprScope scope;
  scope.SetDevice(device);
  scope.Set("dsize", dsize > 0 ? dsize : 4);
  std::vector<double*> slots;
  for (const Axis& a : spec.axes) {
    scope.Set(a.name, static_cast<double>(a.values.empty() ? 0 : a.values[0].Number()));
    slots.push_back(scope.Slot(a.name));
  }
  std::vector<Expr> rules;
  for (size_t c = 0; c < spec.constraints.size(); ++c) {
    auto e = Expr::Compile(spec.constraints[c], &scope,
                           SpecFile(spec) + ": [constraints] rules[" + std::to_string(c) + "]");
    if (!e.ok()) return e.status();
    rules.push_back(std::move(e).value());
  }
  SpaceExplanation out;
  out.raw = raw;
  out.rejected.assign(rules.size(), 0);
  out.first_rejecting.assign(rules.size(), 0);
  if (raw == 0) return out;
  std::vector<size_t> idx(spec.axes.size(), 0);
  for (uint64_t point = 0; point < raw; ++point) {
    for (size_t i = 0; i < slots.size(); ++i) *slots[i] = static_cast<double>(spec.axes[i].values[idx[i]].Number());
    bool legal = true;
    for (size_t r = 0; r < rules.size(); ++r) {
      if (std::fabs(rules[r].Eval()) > 0) continue;  // zero or NaN rejects
      ++out.rejected[r];
      if (legal) ++out.first_rejecting[r];
      legal = false;
    }
    out.legal += legal ? 1 : 0;
    for (size_t i = idx.size(); i-- > 0;) {
      if (++idx[i] < spec.axes[i].values.size()) break;
      idx[i] = 0;
    }
  }
  return out;
}

Result<std::vector<Config>> ConfigsForShape(const OpSpec& spec, const DeviceInfo& device, const std::string& dtype,
                                            const std::vector<Config>& configs, const Shape& shape,
                                            std::vector<uint64_t>* first_rejecting) {
  if (first_rejecting) first_rejecting->assign(spec.shape_constraints.size(), 0);
  if (spec.shape_constraints.empty()) return configs;
  const int dsize = DTypeSize(dtype);
  if (dsize <= 0) return Status::Error(SpecFile(spec) + ": unknown dtype '" + dtype + "'");
  ExprScope scope;
  scope.SetDevice(device);
  scope.Set("dsize", dsize);
  for (const Axis& a : spec.axes) scope.Set(a.name, 0);
  for (const std::string& d : spec.dims) {
    bool given = false;
    for (const auto& [name, value] : shape.dims) given = given || name == d;
    if (!given) return Status::Error(SpecFile(spec) + ": shape " + shape.Canonical() + " lacks dim " + d);
    scope.Set(d, static_cast<double>(ValueOf(shape.dims, d)));
  }
  std::vector<Expr> rules;
  for (size_t r = 0; r < spec.shape_constraints.size(); ++r) {
    auto e = Expr::Compile(spec.shape_constraints[r], &scope, SpecFile(spec) + ": [constraints] shape rule " +
                                                                 spec.shape_constraints[r]);
    if (!e.ok()) return e.status();
    rules.push_back(std::move(e).value());
  }
  std::vector<Config> out;
  for (const Config& c : configs) {
    for (const auto& [name, value] : c.params) {
      if (double* slot = scope.Slot(name)) *slot = static_cast<double>(value.Number());
    }
    size_t r = 0;
    while (r < rules.size() && std::fabs(rules[r].Eval()) > 0) ++r;  // zero or NaN rejects
    if (r == rules.size()) out.push_back(c);
    else if (first_rejecting) ++(*first_rejecting)[r];
  }
  return out;
}

Result<std::vector<Config>> EnumerateConfigs(const OpSpec& spec, const DeviceInfo& device,
                                             SpaceStats* stats, uint64_t max_legal) {
  int dsize = 0;
  for (const std::string& d : spec.dtypes) dsize = std::max(dsize, DTypeSize(d));
  return Enumerate(spec, device, dsize > 0 ? dsize : 4, stats, max_legal);
}

Result<std::vector<Config>> EnumerateConfigs(const OpSpec& spec, const DeviceInfo& device,
                                             const std::string& dtype, SpaceStats* stats) {
  const int dsize = DTypeSize(dtype);
  if (dsize <= 0) return Status::Error(SpecFile(spec) + ": unknown dtype '" + dtype + "'");
  return Enumerate(spec, device, dsize, stats, UINT64_MAX);
}

struct LaunchPlanner::Impl {
  std::string file;
  ExprScope scope;
  std::vector<std::string> axis_names, dim_names;
  std::vector<double*> axis_slots, dim_slots;
  // Name -> index in axis_names / dim_names: a config binds in time linear
  // in its size, whatever its size (a row or a bundle entry is not bounded
  // by the spec's parser).
  std::unordered_map<std::string, size_t> axis_index, dim_index;
  std::vector<uint8_t> bound;  // scratch of Plan: which names a config gave
  struct Field {
    std::string name;  // "[launch] grid[0]"
    Expr expr;
    std::string written;  // the expression as op.toml has it (OpSpec::Written)
  };
  std::map<std::string, std::string> written;  // OpSpec::written
  std::vector<Field> grid, block, ref_grid, ref_block;
  std::vector<Field> smem;
  std::vector<std::vector<Field>> arg_shape;  // per arg: a buffer's shape, a tensor map's box; empty for scalars
  std::vector<Field> arg_value;               // per arg; unused entries for buffers
  std::vector<ArgSpec::Kind> arg_kind;
  std::vector<Field> metrics;                 // flops, bytes

  Status Add(std::vector<Field>* to, const std::string& name, const std::string& text) {
    auto e = Expr::Compile(text, &scope, file + ": " + name);
    if (!e.ok()) return e.status();
    const auto w = written.find(text);
    to->push_back(Field{name, std::move(e).value(), w == written.end() ? text : w->second});
    return Status::OK();
  }
};

LaunchPlanner::LaunchPlanner() : impl_(std::make_unique<Impl>()) {}
LaunchPlanner::LaunchPlanner(LaunchPlanner&&) noexcept = default;
LaunchPlanner& LaunchPlanner::operator=(LaunchPlanner&&) noexcept = default;
LaunchPlanner::~LaunchPlanner() = default;

Result<LaunchPlanner> LaunchPlanner::Create(const OpSpec& spec, const std::string& dtype,
                                            const DeviceInfo& device) {
  LaunchPlanner planner;
  Impl& p = *planner.impl_;
  p.file = SpecFile(spec);
  p.written = spec.written;
  const int dsize = DTypeSize(dtype);
  if (dsize <= 0) return Status::Error(p.file + ": unknown dtype '" + dtype + "'");
  p.scope.SetDevice(device);
  p.scope.Set("dsize", dsize);
  for (const Axis& a : spec.axes) {
    p.scope.Set(a.name, 0);
    p.axis_names.push_back(a.name);
  }
  for (const std::string& d : spec.dims) {
    p.scope.Set(d, 0);
    p.dim_names.push_back(d);
  }
  for (const std::string& a : p.axis_names) p.axis_slots.push_back(p.scope.Slot(a));
  for (const std::string& d : p.dim_names) p.dim_slots.push_back(p.scope.Slot(d));
  for (size_t i = 0; i < p.axis_names.size(); ++i) p.axis_index.emplace(p.axis_names[i], i);
  for (size_t i = 0; i < p.dim_names.size(); ++i) p.dim_index.emplace(p.dim_names[i], i);

  if (spec.grid.size() != 3 || spec.block.size() != 3 || spec.check.grid.size() != 3 ||
      spec.check.block.size() != 3)
    return Status::Error(p.file + ": [launch]/[check] grid and block need 3 expressions each");
  for (int i = 0; i < 3; ++i) {
    const std::string ix = "[" + std::to_string(i) + "]";
    TUNE_RETURN_IF_ERROR(p.Add(&p.grid, "[launch] grid" + ix, spec.grid[i]));
    TUNE_RETURN_IF_ERROR(p.Add(&p.block, "[launch] block" + ix, spec.block[i]));
    TUNE_RETURN_IF_ERROR(p.Add(&p.ref_grid, "[check] grid" + ix, spec.check.grid[i]));
    TUNE_RETURN_IF_ERROR(p.Add(&p.ref_block, "[check] block" + ix, spec.check.block[i]));
  }
  TUNE_RETURN_IF_ERROR(p.Add(&p.smem, "[launch] smem", spec.smem));
  for (const ArgSpec& arg : spec.args) {
    const std::string where = "[[args]] " + arg.name;
    const bool scalar = arg.kind == ArgSpec::Kind::kScalar;
    const bool map = arg.kind == ArgSpec::Kind::kTensorMap;
    p.arg_kind.push_back(arg.kind);
    p.arg_shape.emplace_back();
    TUNE_RETURN_IF_ERROR(p.Add(&p.arg_value, where + " value", scalar ? arg.value : "0"));
    const std::vector<std::string>& extents = map ? arg.box : arg.shape;
    for (size_t i = 0; i < extents.size(); ++i)
      TUNE_RETURN_IF_ERROR(p.Add(&p.arg_shape.back(), where + (map ? " box[" : " shape[") + std::to_string(i) + "]",
                                 extents[i]));
  }
  TUNE_RETURN_IF_ERROR(p.Add(&p.metrics, "[metrics] flops", spec.flops));
  TUNE_RETURN_IF_ERROR(p.Add(&p.metrics, "[metrics] bytes", spec.bytes));
  return planner;
}

Result<LaunchPlan> LaunchPlanner::Plan(const Config& config, const Shape& shape) {
  Impl& p = *impl_;
  // The first value given for a name counts.
  auto bind = [&](const auto& given, const std::vector<std::string>& names,
                  const std::unordered_map<std::string, size_t>& index, const std::vector<double*>& slots,
                  const char* what) -> Status {
    p.bound.assign(names.size(), 0);
    for (const auto& [name, value] : given) {
      auto it = index.find(name);
      if (it == index.end()) return Status::Error(p.file + ": " + what + " '" + name + "' is not in the spec");
      if (p.bound[it->second]) continue;
      p.bound[it->second] = 1;
      *slots[it->second] = static_cast<double>(ParamValue(value).Number());
    }
    for (size_t i = 0; i < names.size(); ++i)
      if (!p.bound[i]) return Status::Error(p.file + ": no value for " + what + " '" + names[i] + "'");
    return Status::OK();
  };
  TUNE_RETURN_IF_ERROR(bind(config.params, p.axis_names, p.axis_index, p.axis_slots, "param"));
  TUNE_RETURN_IF_ERROR(bind(shape.dims, p.dim_names, p.dim_index, p.dim_slots, "dim"));

  auto fail = [&](const Impl::Field& f, double v, const char* want) {
    return Status::Error(p.file + ": " + f.name + ": '" + f.written + "' gives " + std::to_string(v) +
                         ", expected " + want + " (config " + config.Canonical() + ", shape " +
                         shape.Canonical() + ")");
  };
  // Integer-valued fields are rounded toward zero, like Expr::EvalInt.
  auto integer = [&](const Impl::Field& f, int64_t min, const char* want, int64_t* out) -> Status {
    const double v = f.expr.Eval();
    if (!std::isfinite(v) || v < static_cast<double>(min) || v >= 0x1p63) return fail(f, v, want);
    *out = static_cast<int64_t>(v);
    if (*out < min) return fail(f, v, want);
    return Status::OK();
  };

  LaunchPlan plan;
  for (int i = 0; i < 3; ++i) {
    TUNE_RETURN_IF_ERROR(integer(p.grid[i], 1, "an integer >= 1", &plan.grid[i]));
    TUNE_RETURN_IF_ERROR(integer(p.block[i], 1, "an integer >= 1", &plan.block[i]));
    TUNE_RETURN_IF_ERROR(integer(p.ref_grid[i], 1, "an integer >= 1", &plan.ref_grid[i]));
    TUNE_RETURN_IF_ERROR(integer(p.ref_block[i], 1, "an integer >= 1", &plan.ref_block[i]));
  }
  TUNE_RETURN_IF_ERROR(integer(p.smem[0], 0, "an integer >= 0", &plan.smem_bytes));
  const size_t nargs = p.arg_kind.size();
  plan.arg_elems.assign(nargs, 0);
  plan.scalar_values.assign(nargs, 0);
  plan.arg_extents.assign(nargs, {});
  for (size_t a = 0; a < nargs; ++a) {
    if (p.arg_kind[a] == ArgSpec::Kind::kTensorMap) {
      // The copy engine moves boxes of 1 to 256 elements per dim.
      for (const Impl::Field& f : p.arg_shape[a]) {
        int64_t extent = 0;
        TUNE_RETURN_IF_ERROR(integer(f, 1, "an integer from 1 to 256", &extent));
        if (extent > 256) return fail(f, double(extent), "an integer from 1 to 256");
        plan.arg_extents[a].push_back(extent);
      }
      continue;
    }
    if (p.arg_kind[a] == ArgSpec::Kind::kScalar) {
      const double v = p.arg_value[a].expr.Eval();
      if (!std::isfinite(v)) return fail(p.arg_value[a], v, "a finite number");
      plan.scalar_values[a] = v;
      continue;
    }
    int64_t elems = 1;
    for (const Impl::Field& f : p.arg_shape[a]) {
      int64_t extent = 0;
      TUNE_RETURN_IF_ERROR(integer(f, 0, "an integer >= 0", &extent));
      plan.arg_extents[a].push_back(extent);
      if (__builtin_mul_overflow(elems, extent, &elems))
        return Status::Error(p.file + ": " + f.name + ": buffer size overflows 64 bits (shape " +
                             shape.Canonical() + ")");
    }
    plan.arg_elems[a] = elems;
  }
  plan.flops = p.metrics[0].expr.Eval();
  plan.bytes = p.metrics[1].expr.Eval();
  if (!std::isfinite(plan.flops)) return fail(p.metrics[0], plan.flops, "a finite number");
  if (!std::isfinite(plan.bytes)) return fail(p.metrics[1], plan.bytes, "a finite number");
  return plan;
}

namespace {

// Everything a LaunchPlanner is built from: two specs with the same key plan
// identically, whatever else differs between them.
std::string PlannerKey(const OpSpec& spec, const std::string& dtype, const DeviceInfo& d) {
  std::string key;
  auto add = [&key](const std::string& s) {
    key += s;
    key += '\x1f';
  };
  add(spec.origin);
  add(dtype);
  for (int64_t v : {d.smem_per_block_optin, static_cast<int64_t>(d.max_threads_per_block),
                    static_cast<int64_t>(d.num_sms), static_cast<int64_t>(d.cc_major * 10 + d.cc_minor),
                    d.l2_bytes})
    add(std::to_string(v));
  for (const Axis& a : spec.axes) add(a.name);
  key += '\x1e';
  for (const std::string& dim : spec.dims) add(dim);
  key += '\x1e';
  for (const auto* list : {&spec.grid, &spec.block, &spec.check.grid, &spec.check.block})
    for (const std::string& e : *list) add(e);
  add(spec.smem);
  add(spec.flops);
  add(spec.bytes);
  for (const ArgSpec& arg : spec.args) {
    add(arg.name);
    add(std::to_string(int(arg.kind)));
    add(arg.value);
    for (const std::string& e : arg.shape) add(e);
    for (const std::string& e : arg.box) add(e);
    key += '\x1e';
  }
  return key;
}

}  // namespace

Result<LaunchPlan> PlanLaunch(const OpSpec& spec, const std::string& dtype, const Config& config,
                              const Shape& shape, const DeviceInfo& device) {
  // Compiling the expressions costs about a millisecond, evaluating them a
  // microsecond or two; callers plan the same (op, dtype, device) over and
  // over, so each thread keeps the planners it built.
  constexpr size_t kMaxCached = 32;
  thread_local std::map<std::string, LaunchPlanner> cache;
  std::string key = PlannerKey(spec, dtype, device);
  auto it = cache.find(key);
  if (it == cache.end()) {
    auto planner = LaunchPlanner::Create(spec, dtype, device);
    if (!planner.ok()) return planner.status();
    if (cache.size() >= kMaxCached) cache.clear();
    it = cache.emplace(std::move(key), std::move(planner).value()).first;
  }
  return it->second.Plan(config, shape);
}

}  // namespace tune
