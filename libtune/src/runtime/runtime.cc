// The deployment runtime: a verified bundle turned into lookup plans.
//
// Every (op, dtype, GPU model) of the bundle, every (op, dtype, family) and
// every op gets a Plan at load time: the candidates of its fallback chain as
// flat arrays of dims and log2(dims) in the op's dim order, plus the answer
// when none fits. A lookup only picks the plan (a hash of the strings) and
// scans it; a PreparedLookup holds the plan itself. Both call Evaluate, so
// they cannot disagree.
#include "tune/runtime.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "bundle/bundle.h"
#include "bundle/signing.h"

namespace tune::runtime {
namespace detail {

struct Plan {
  std::vector<std::string> dim_names;  // the order of the dims a lookup passes
  size_t ndims = 0;
  // Per dim, how lookups bucket it (the op's [op] buckets); `bucketed` when
  // any is not exact. Candidates are stored bucketed, queries bucketed first.
  std::vector<DimBucket> buckets;
  bool bucketed = false;
  // The op's shape rules (bundle/bundle.h BundleShapeRules): a candidate
  // answers only at dims where every one holds. rule_params holds candidate
  // i's params at [i * rules->params, ...); rule_dims maps the rules' dims
  // to this plan's dim order (-1: not a dim of the plan).
  const BundleShapeRules* rules = nullptr;
  std::vector<double> rule_params;
  std::vector<int> rule_dims;
  double dsize = 0;
  bool own = false;                    // candidates are the queried model's: exact hits count
  Level tuned_level = Level::kNearestShape;
  std::vector<int64_t> dims;           // candidate i at [i * ndims, (i + 1) * ndims)
  std::vector<double> log2;            // same layout
  std::vector<const Entry*> entries;   // bundle order, which breaks ties
  // Open addressing over the candidates' dims, for exact hits in O(1):
  // candidate index + 1, 0 = empty slot. Only for `own` plans.
  std::vector<uint32_t> exact_slots;
  unsigned exact_shift = 0;            // slot = hash >> exact_shift
  // The model's shape selector (own plans with one): per selector dim the
  // plan's dim index (-1: absent, read as 1), per leaf answer the candidate
  // index (SIZE_MAX: `usable` refused it), and the answers as entries.
  const BundleSelector* selector = nullptr;
  std::vector<int> selector_dims;
  std::vector<size_t> selector_at;
  std::vector<const Entry*> selector_entries;
  Answer fallback;                     // kDefault or kMiss
};

// What a miss was asked for: the strings of a lookup, and the dim names
// of its plan, in the order its dims are counted.
struct MissKey {
  std::string op, dtype, gpu_model;
  std::vector<std::string> dim_names;
};

// The miss counts (runtime.h, "Misses"): open addressing over kMaxMissKeys
// slots, allocated at the first miss. A slot is claimed by a CAS on its
// hash, filled, then published; counting is an atomic add. No lock.
class MissTable {
 public:
  void Count(const MissKey* key, const int64_t* dims, size_t ndims, Level level) {
    if (ndims > kMaxDims) return;
    uint64_t h = reinterpret_cast<uintptr_t>(key) * 0x9e3779b97f4a7c15ull;
    for (size_t j = 0; j < ndims; ++j) h = (h ^ static_cast<uint64_t>(dims[j])) * 0x100000001b3ull;
    h |= 1;  // 0 marks an empty slot
    Slot* slots = Slots();
    if (!slots) return;
    for (size_t probe = 0; probe < kProbes; ++probe) {
      Slot& slot = slots[(h + probe) & (kMaxMissKeys - 1)];
      uint64_t seen = slot.hash.load(std::memory_order_acquire);
      if (seen == 0 && slot.hash.compare_exchange_strong(seen, h, std::memory_order_acq_rel)) {
        slot.key = key;
        slot.ndims = ndims;
        slot.level = level;
        std::copy(dims, dims + ndims, slot.dims);
        slot.count.store(1, std::memory_order_relaxed);
        slot.ready.store(true, std::memory_order_release);
        return;
      }
      if (seen != h) continue;
      if (!slot.ready.load(std::memory_order_acquire)) break;  // being filled: not worth a wait
      if (slot.key == key && slot.ndims == ndims && std::equal(dims, dims + ndims, slot.dims)) {
        slot.count.fetch_add(1, std::memory_order_relaxed);
        return;
      }
    }
    dropped_.fetch_add(1, std::memory_order_relaxed);
  }

  std::vector<Miss> List(uint64_t* dropped) const {
    if (dropped) *dropped = dropped_.load(std::memory_order_relaxed);
    std::vector<Miss> out;
    const Slot* slots = slots_.load(std::memory_order_acquire);
    for (size_t i = 0; slots && i < kMaxMissKeys; ++i) {
      const Slot& slot = slots[i];
      if (!slot.ready.load(std::memory_order_acquire)) continue;
      std::vector<int64_t> values(slot.dims, slot.dims + slot.ndims);
      out.push_back(Miss{slot.key->op, slot.key->dtype, slot.key->gpu_model,
                         NamedInts(slot.key->dim_names, std::move(values)), slot.level,
                         slot.count.load(std::memory_order_relaxed)});
    }
    std::sort(out.begin(), out.end(), [](const Miss& a, const Miss& b) {
      if (a.count != b.count) return a.count > b.count;
      return std::tie(a.op, a.dtype, a.gpu_model) < std::tie(b.op, b.dtype, b.gpu_model) ||
             (std::tie(a.op, a.dtype, a.gpu_model) == std::tie(b.op, b.dtype, b.gpu_model) &&
              a.shape.ToString() < b.shape.ToString());
    });
    return out;
  }

  ~MissTable() { delete[] slots_.load(); }

 private:
  static constexpr size_t kProbes = 32;
  static_assert((kMaxMissKeys & (kMaxMissKeys - 1)) == 0, "a power of two");
  struct Slot {
    std::atomic<uint64_t> hash{0};
    std::atomic<bool> ready{false};
    std::atomic<uint64_t> count{0};
    const MissKey* key = nullptr;
    size_t ndims = 0;
    Level level = Level::kMiss;
    int64_t dims[kMaxDims] = {};
  };
  Slot* Slots() {
    Slot* s = slots_.load(std::memory_order_acquire);
    if (s) return s;
    Slot* fresh = new (std::nothrow) Slot[kMaxMissKeys];
    if (!fresh) return nullptr;
    if (slots_.compare_exchange_strong(s, fresh, std::memory_order_acq_rel)) return fresh;
    delete[] fresh;  // another thread's won
    return s;
  }
  std::atomic<Slot*> slots_{nullptr};
  std::atomic<uint64_t> dropped_{0};
};

struct BundleData {
  std::string name, farm_version, signer_key_id;
  int64_t created_unix = 0;
  bool force_defaults = false;
  std::vector<Entry> entries;
  std::vector<Entry> model_defaults;  // ModelDefaults as entries without a shape
  std::map<std::string, NamedInts, std::less<>> arch_defaults;  // op \0 arch
  tune::Bundle source;                // launch plans and cubins (entries moved out)
  std::map<std::string, NamedInts, std::less<>> defaults;
  std::map<std::string, std::vector<std::string>, std::less<>> op_dims;
  // Keys: op \0 dtype \0 model; op \0 dtype \1 family; op. See Resolve.
  std::unordered_map<std::string, std::shared_ptr<const Plan>> plans;
  std::shared_ptr<const Plan> miss;
  // Misses: the keys asked for (interned once, under the lock; lookups
  // that answer kExact never take it), their counts, and where
  // TUNEFARM_MISSES asks for them when the bundle goes.
  mutable MissTable misses;
  mutable std::mutex keys_mu;
  mutable std::map<std::string, std::unique_ptr<MissKey>, std::less<>> keys;
  std::string misses_path;

  const MissKey* KeyOf(std::string_view op, std::string_view dtype, std::string_view model,
                       const std::vector<std::string>& dim_names) const {
    std::string k;
    k.append(op).append(1, '\0').append(dtype).append(1, '\0').append(model);
    for (const std::string& d : dim_names) k.append(1, '\0').append(d);
    std::lock_guard<std::mutex> lock(keys_mu);
    auto it = keys.find(k);
    if (it == keys.end())
      it = keys.emplace(k, std::make_unique<MissKey>(MissKey{std::string(op), std::string(dtype), std::string(model),
                                                             dim_names})).first;
    return it->second.get();
  }
  ~BundleData();
};

}  // namespace detail

// Appends `table`'s misses to `path` as JSON lines (Bundle::WriteMisses).
Status WriteMissLines(const detail::MissTable& table, const std::string& path);

namespace {

// Variables a shape rule of a lookup may read (params, dims, dsize).
constexpr size_t kMaxRuleVars = 64;

using detail::BundleData;
using detail::Plan;

// A dim on the log2 scale of the nearest-shape metric (runtime.h).
double Log2Dim(int64_t v) { return std::log2(static_cast<double>(v < 1 ? 1 : v)); }

// The family token of `model` and whether it is simulated; see GpuFamily.
std::string_view FamilyToken(std::string_view model, bool* sim) {
  constexpr std::string_view kSim = "sim-";
  *sim = model.substr(0, kSim.size()) == kSim;
  std::string_view rest = *sim ? model.substr(kSim.size()) : model;
  std::string_view scan = rest;
  while (!scan.empty()) {
    const size_t dash = scan.find('-');
    const std::string_view token = scan.substr(0, dash);
    if (std::any_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; })) return token;
    if (dash == std::string_view::npos) break;
    scan.remove_prefix(dash + 1);
  }
  return rest;
}

void AppendFamily(std::string* out, std::string_view model) {
  bool sim = false;
  const std::string_view token = FamilyToken(model, &sim);
  if (sim) out->append("sim-");
  out->append(token);
}

std::string ModelKey(std::string_view op, std::string_view dtype, std::string_view model) {
  std::string key;
  key.append(op).append(1, '\0').append(dtype).append(1, '\0').append(model);
  return key;
}

std::string FamilyKey(std::string_view op, std::string_view dtype, std::string_view family) {
  std::string key;
  key.append(op).append(1, '\0').append(dtype).append(1, '\1').append(family);
  return key;
}

using Usable = std::function<bool(const Answer&)>;

// The op's default for `arch` ("sm_90" also takes one declared for "sm_90a"
// and the other way round), or nullptr.
const NamedInts* ArchDefaultOf(const BundleData& data, std::string_view op, std::string_view arch,
                               const std::function<bool(const NamedInts&)>& ok) {
  if (arch.empty()) return nullptr;
  const std::string base(arch.back() == 'a' ? arch.substr(0, arch.size() - 1) : arch);
  for (const std::string& a : {std::string(arch), base, base + "a"}) {
    std::string key(op);
    key.append(1, '\0').append(a);
    if (auto it = data.arch_defaults.find(key); it != data.arch_defaults.end() && ok(it->second)) return &it->second;
  }
  return nullptr;
}

// The default of a query: the model's own (when `model` is set), else the
// first of its family's, else the op's for `arch` (when given), else the
// op's; each only where `usable` takes it.
Answer FallbackOf(const BundleData& data, std::string_view op, std::string_view dtype, const std::string* model,
                  const std::string& family, std::string_view arch, const Usable& usable) {
  auto ok = [&](const Answer& a) { return !usable || usable(a); };
  for (int pass = model ? 0 : 1; pass < 2; ++pass) {
    for (const Entry& d : data.model_defaults) {
      if (d.op != op || d.dtype != dtype) continue;
      if (pass == 0 ? d.gpu_model != *model : GpuFamily(d.gpu_model) != family) continue;
      const Answer a{&d.config, &d, Level::kDefault, {}};
      if (ok(a)) return a;
    }
  }
  if (const NamedInts* c = ArchDefaultOf(data, op, arch, [&](const NamedInts& c) {
        return ok(Answer{&c, nullptr, Level::kDefault, {}});
      })) {
    return Answer{c, nullptr, Level::kDefault, {}};
  }
  if (auto it = data.defaults.find(op); it != data.defaults.end()) {
    const Answer a{&it->second, nullptr, Level::kDefault, {}};
    if (ok(a)) return a;
  }
  return Answer{};
}

// Appends `e` as a candidate when its dims are exactly the plan's names.
void AddCandidate(Plan* plan, const Entry& e) {
  if (e.shape.size() != plan->ndims) return;
  const size_t at = plan->dims.size();
  for (size_t j = 0; j < plan->ndims; ++j) {
    const int i = e.shape.index(plan->dim_names[j]);
    if (i < 0) {
      plan->dims.resize(at);
      plan->log2.resize(at);
      return;
    }
    const int64_t v = plan->buckets[j].Of(e.shape.value(static_cast<size_t>(i)));
    plan->dims.push_back(v);
    plan->log2.push_back(Log2Dim(v));
  }
  if (plan->rules) {
    for (size_t k = 0; k < plan->rules->params; ++k) {
      const int at = e.config.index(plan->rules->vars[k]);
      plan->rule_params.push_back(at < 0 ? std::nan("") : static_cast<double>(e.config.value(static_cast<size_t>(at))));
    }
  }
  plan->entries.push_back(&e);
}

// Each dim is multiplied by its own odd constant, independently of the
// others (a short dependency chain), then mixed once; the slot is taken from
// the high bits, which depend on every dim (the low ones of power-of-two
// dims would cluster).
uint64_t HashDims(const int64_t* dims, size_t n) {
  static constexpr uint64_t kOdd[4] = {0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full, 0x165667b19e3779f9ull,
                                       0xd6e8feb86659fd93ull};
  uint64_t h = 0;
  for (size_t j = 0; j < n; ++j) {
    const uint64_t x = static_cast<uint64_t>(dims[j]) * (kOdd[j & 3] + 2 * (j >> 2));
    h ^= x ^ (x >> 31);
  }
  return h * 0xff51afd7ed558ccdull;
}

// Candidate index of `dims` among the plan's, or -1.
std::ptrdiff_t FindExact(const Plan& plan, const int64_t* dims) {
  const size_t mask = plan.exact_slots.size() - 1;
  const size_t d = plan.ndims;
  for (size_t slot = HashDims(dims, d) >> plan.exact_shift;; slot = (slot + 1) & mask) {
    const uint32_t c = plan.exact_slots[slot];
    if (c == 0) return -1;
    const int64_t* cand = plan.dims.data() + (c - 1) * d;
    uint64_t diff = 0;
    for (size_t j = 0; j < d; ++j) diff |= static_cast<uint64_t>(cand[j] ^ dims[j]);
    if (diff == 0) return c - 1;
  }
}

// Whether candidate i was tuned at its bucket's own value (every dim).
bool AtBucketValue(const Plan& plan, size_t i) {
  for (size_t j = 0; j < plan.ndims; ++j) {
    const int at = plan.entries[i]->shape.index(plan.dim_names[j]);
    if (at < 0 || plan.entries[i]->shape.value(static_cast<size_t>(at)) != plan.dims[i * plan.ndims + j]) return false;
  }
  return true;
}

// At most a quarter full, so that a probe rarely goes past its first slot.
// A duplicate shape keeps the first candidate, as nearest-shape ties do;
// of shapes that share a bucket, the one tuned at the bucket's value.
void BuildExactIndex(Plan* plan) {
  unsigned bits = 2;
  while ((size_t{1} << bits) < 4 * plan->entries.size()) ++bits;
  plan->exact_slots.assign(size_t{1} << bits, 0);
  plan->exact_shift = 64 - bits;
  const size_t mask = plan->exact_slots.size() - 1;
  for (size_t i = 0; i < plan->entries.size(); ++i) {
    const int64_t* dims = plan->dims.data() + i * plan->ndims;
    if (const std::ptrdiff_t held = FindExact(*plan, dims); held >= 0) {
      if (plan->bucketed && !AtBucketValue(*plan, static_cast<size_t>(held)) && AtBucketValue(*plan, i)) {
        for (uint32_t& slot : plan->exact_slots)
          if (slot == static_cast<uint32_t>(held) + 1) slot = static_cast<uint32_t>(i + 1);
      }
      continue;
    }
    size_t slot = HashDims(dims, plan->ndims) >> plan->exact_shift;
    while (plan->exact_slots[slot] != 0) slot = (slot + 1) & mask;
    plan->exact_slots[slot] = static_cast<uint32_t>(i + 1);
  }
}

// The op's shape rules, with their dims in the plan's order.
void SetRules(const BundleData& data, std::string_view op, std::string_view dtype, Plan* plan) {
  auto it = data.source.shape_rules.find(std::string(op));
  if (it == data.source.shape_rules.end() || it->second.rules.empty()) return;
  const BundleShapeRules& r = it->second;
  if (r.vars.size() > kMaxRuleVars) return;  // more than a lookup evaluates: not held against configs
  plan->rules = &r;
  plan->dsize = DTypeSize(std::string(dtype));
  plan->rule_dims.clear();
  for (size_t k = r.params; k + 1 < r.vars.size(); ++k) {
    auto at = std::find(plan->dim_names.begin(), plan->dim_names.end(), r.vars[k]);
    plan->rule_dims.push_back(at == plan->dim_names.end() ? -1 : static_cast<int>(at - plan->dim_names.begin()));
  }
}

// Whether candidate i's config may run at `dims` (the query's own dims,
// not its buckets'): every shape rule holds.
bool Holds(const Plan& plan, size_t i, const int64_t* dims) {
  if (!plan.rules) return true;
  double vars[kMaxRuleVars];
  const size_t np = plan.rules->params;
  for (size_t k = 0; k < np; ++k) vars[k] = plan.rule_params[i * np + k];
  for (size_t k = 0; k < plan.rule_dims.size(); ++k)
    vars[np + k] = plan.rule_dims[k] < 0 ? std::nan("") : static_cast<double>(dims[plan.rule_dims[k]]);
  vars[plan.rules->vars.size() - 1] = plan.dsize;
  const std::span<const double> in(vars, plan.rules->vars.size());
  for (const LaunchProgram& rule : plan.rules->rules) {
    if (!(std::fabs(EvalLaunchProgram(rule, in)) > 0)) return false;  // zero or NaN rejects, as the farm's rules
  }
  return true;
}

// The model's selector, its dims in the plan's order and its answers
// among the plan's candidates.
void SetSelector(const BundleData& data, std::string_view op, std::string_view dtype, const std::string& model,
                 Plan* plan) {
  for (const BundleSelector& s : data.source.selectors) {
    if (s.op != op || s.dtype != dtype || s.gpu_model != model) continue;
    plan->selector = &s;
    plan->selector_dims.clear();
    for (const std::string& d : s.dims) {
      const auto at = std::find(plan->dim_names.begin(), plan->dim_names.end(), d);
      plan->selector_dims.push_back(at == plan->dim_names.end() ? -1 : static_cast<int>(at - plan->dim_names.begin()));
    }
    for (uint32_t e : s.entries) {
      const Entry* entry = &data.entries[e];
      const auto at = std::find(plan->entries.begin(), plan->entries.end(), entry);
      plan->selector_at.push_back(at == plan->entries.end() ? SIZE_MAX : static_cast<size_t>(at - plan->entries.begin()));
      plan->selector_entries.push_back(entry);
    }
    return;
  }
}

// The op's buckets in the plan's dim order.
void SetBuckets(const BundleData& data, std::string_view op, Plan* plan) {
  plan->buckets.assign(plan->ndims, DimBucket{});
  auto it = data.source.buckets.find(std::string(op));
  if (it == data.source.buckets.end()) return;
  for (size_t j = 0; j < plan->ndims; ++j) {
    auto b = it->second.find(plan->dim_names[j]);
    if (b == it->second.end()) continue;
    plan->buckets[j] = b->second;
    plan->bucketed = plan->bucketed || b->second.kind != DimBucket::Kind::kExact;
  }
}

// `model` is null for a plan that serves models absent from the bundle.
std::shared_ptr<const Plan> BuildPlan(const BundleData& data, const std::string& op, const std::string& dtype,
                                      const std::vector<size_t>& same_op_dtype, const std::string* model,
                                      const std::string& family, const std::vector<std::string>& names,
                                      std::string_view arch = {}, const Usable& usable = nullptr) {
  auto plan = std::make_shared<Plan>();
  plan->dim_names = names;
  plan->ndims = names.size();
  SetBuckets(data, op, plan.get());
  SetRules(data, op, dtype, plan.get());
  // Forced defaults skip the model defaults too: the switch rules out
  // everything the farm picked.
  plan->fallback = data.force_defaults ? FallbackOf(data, op, dtype, nullptr, "\x01", {}, usable)
                                       : FallbackOf(data, op, dtype, model, family, arch, usable);
  if (data.force_defaults) return plan;
  auto take = [&](const Entry& e, Level level) {
    if (!usable || usable(Answer{&e.config, &e, level, {}})) AddCandidate(plan.get(), e);
  };
  if (model) {
    plan->own = true;
    plan->tuned_level = Level::kNearestShape;
    for (size_t i : same_op_dtype) {
      if (data.entries[i].gpu_model == *model) take(data.entries[i], Level::kNearestShape);
    }
  }
  if (plan->entries.empty()) {
    plan->own = false;
    plan->tuned_level = Level::kFamily;
    for (size_t i : same_op_dtype) {
      if (GpuFamily(data.entries[i].gpu_model) == family) take(data.entries[i], Level::kFamily);
    }
  }
  if (plan->own) {
    BuildExactIndex(plan.get());
    SetSelector(data, op, dtype, *model, plan.get());
  }
  return plan;
}

std::shared_ptr<const Plan> FallbackPlan(const BundleData& data, std::string_view op) {
  auto plan = std::make_shared<Plan>();
  if (auto it = data.op_dims.find(op); it != data.op_dims.end()) plan->dim_names = it->second;
  plan->ndims = plan->dim_names.size();
  plan->fallback = FallbackOf(data, op, "", nullptr, "\x01", {}, nullptr);
  return plan;
}

// `plan` with its dims in `names` order; no candidates when `names` is not
// a permutation of the plan's dims.
std::shared_ptr<const Plan> Reorder(const std::shared_ptr<const Plan>& plan,
                                    std::span<const std::string_view> names) {
  if (std::equal(names.begin(), names.end(), plan->dim_names.begin(), plan->dim_names.end())) return plan;
  auto out = std::make_shared<Plan>();
  out->dim_names.assign(names.begin(), names.end());
  out->ndims = names.size();
  out->own = plan->own;
  out->tuned_level = plan->tuned_level;
  out->fallback = plan->fallback;
  out->bucketed = plan->bucketed;
  out->rules = plan->rules;
  out->rule_params = plan->rule_params;
  out->dsize = plan->dsize;
  out->selector = plan->selector;
  out->selector_at = plan->selector_at;
  out->selector_entries = plan->selector_entries;
  if (plan->selector) {
    for (const std::string& d : plan->selector->dims) {
      const auto at = std::find(names.begin(), names.end(), d);
      out->selector_dims.push_back(at == names.end() ? -1 : static_cast<int>(at - names.begin()));
    }
  }
  std::vector<size_t> from;
  for (std::string_view name : names) {
    const auto it = std::find(plan->dim_names.begin(), plan->dim_names.end(), name);
    const size_t at = static_cast<size_t>(it - plan->dim_names.begin());
    out->buckets.push_back(at < plan->buckets.size() ? plan->buckets[at] : DimBucket{});
    if (it == plan->dim_names.end()) return out;
    from.push_back(static_cast<size_t>(it - plan->dim_names.begin()));
  }
  if (names.size() != plan->ndims || std::set<size_t>(from.begin(), from.end()).size() != from.size()) {
    return out;
  }
  for (int d : plan->rule_dims) {
    const auto at = d < 0 ? from.end() : std::find(from.begin(), from.end(), static_cast<size_t>(d));
    out->rule_dims.push_back(at == from.end() ? -1 : static_cast<int>(at - from.begin()));
  }
  out->entries = plan->entries;
  for (size_t c = 0; c < plan->entries.size(); ++c) {
    for (size_t j : from) {
      out->dims.push_back(plan->dims[c * plan->ndims + j]);
      out->log2.push_back(plan->log2[c * plan->ndims + j]);
    }
  }
  if (out->own) BuildExactIndex(out.get());
  return out;
}

// The plan for a query: the model's, else its family's, else the op's.
const std::shared_ptr<const Plan>& Resolve(const BundleData& data, std::string_view op, std::string_view dtype,
                                           std::string_view model) {
  // Reused per thread: no allocation once it has grown to the longest key.
  thread_local std::string key;
  key.assign(op).append(1, '\0').append(dtype);
  const size_t base = key.size();
  key.append(1, '\0').append(model);
  if (auto it = data.plans.find(key); it != data.plans.end()) return it->second;
  key.resize(base);
  key.append(1, '\1');
  AppendFamily(&key, model);
  if (auto it = data.plans.find(key); it != data.plans.end()) return it->second;
  key.assign(op);
  if (auto it = data.plans.find(key); it != data.plans.end()) return it->second;
  return data.miss;
}

// Index of the candidate nearest to `q` among `n` rows of `d` log2 dims.
// D > 0 fixes d at compile time, so that the common shapes of 1 to 4 dims
// get unrolled, branch-free loops; every variant sums in the same order, so
// they rank alike to the last bit.
template <size_t D>
size_t Nearest(const double* rows, size_t n, const double* q, size_t d) {
  if constexpr (D > 0) d = D;
  size_t best_i = 0;
  double best = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < n; ++i, rows += d) {
    double s = 0;
    for (size_t j = 0; j < d; ++j) {
      const double diff = q[j] - rows[j];
      s += diff * diff;
    }
    // Strict: ties go to the first in bundle order.
    const bool nearer = s < best;
    best_i = nearer ? i : best_i;
    best = nearer ? s : best;
  }
  return best_i;
}

Answer Evaluate(const Plan& plan, const int64_t* query) {
  const size_t n = plan.entries.size();
  if (n == 0) return plan.fallback;
  const size_t d = plan.ndims;
  int64_t bucketed[kMaxDims] = {};
  const int64_t* dims = query;
  if (plan.bucketed) {
    for (size_t j = 0; j < d; ++j) bucketed[j] = plan.buckets[j].Of(query[j]);
    dims = bucketed;
  }
  if (plan.own) {
    if (const std::ptrdiff_t i = FindExact(plan, dims); i >= 0 && Holds(plan, static_cast<size_t>(i), query)) {
      return Answer{&plan.entries[static_cast<size_t>(i)]->config, plan.entries[static_cast<size_t>(i)],
                    Level::kExact, {}};
    }
  }
  double q[kMaxDims];
  for (size_t j = 0; j < d; ++j) q[j] = Log2Dim(dims[j]);
  if (plan.selector) {
    double logs[kMaxSelectorDims];
    double features[kMaxSelectorDims * (kMaxSelectorDims + 1) / 2];
    const size_t nd = plan.selector_dims.size();
    for (size_t k = 0; k < nd; ++k) logs[k] = plan.selector_dims[k] < 0 ? 0.0 : q[plan.selector_dims[k]];
    SelectorFeatures(logs, nd, features);
    const size_t i = plan.selector_at[SelectorAnswer(plan.selector->nodes, features)];
    // Its answer, unless refused or illegal at these dims: then the nearest.
    if (i != SIZE_MAX && Holds(plan, i, query)) {
      return Answer{&plan.entries[i]->config, plan.entries[i], Level::kPredicted,
                    std::span<const Entry* const>(plan.selector_entries)};
    }
  }
  size_t best_i;
  switch (d) {
    case 1: best_i = Nearest<1>(plan.log2.data(), n, q, 1); break;
    case 2: best_i = Nearest<2>(plan.log2.data(), n, q, 2); break;
    case 3: best_i = Nearest<3>(plan.log2.data(), n, q, 3); break;
    case 4: best_i = Nearest<4>(plan.log2.data(), n, q, 4); break;
    default: best_i = Nearest<0>(plan.log2.data(), n, q, d); break;
  }
  if (!Holds(plan, best_i, query)) {
    // The nearest tuned config is illegal at these dims (its shape rules):
    // the nearest one that is legal, else the fallback. Rare: a linear scan.
    best_i = n;
    double best_d = std::numeric_limits<double>::infinity();
    for (size_t c = 0; c < n; ++c) {
      double dist = 0;
      for (size_t j = 0; j < d; ++j) dist += (q[j] - plan.log2[c * d + j]) * (q[j] - plan.log2[c * d + j]);
      if (dist < best_d && Holds(plan, c, query)) {
        best_d = dist;
        best_i = c;
      }
    }
    if (best_i == n) return plan.fallback;
  }
  return Answer{&plan.entries[best_i]->config, plan.entries[best_i], plan.tuned_level, {}};
}

NamedInts ToNamedInts(const NamedValues& v) {
  std::vector<std::string> names;
  std::vector<int64_t> values;
  names.reserve(v.size());
  values.reserve(v.size());
  for (const auto& [name, value] : v) {
    names.push_back(name);
    values.push_back(value);
  }
  return NamedInts(std::move(names), std::move(values));
}

NamedInts ToNamedInts(const ParamValues& v) {
  std::vector<std::string> names, texts;
  std::vector<int64_t> values;
  for (const auto& [name, value] : v) {
    names.push_back(name);
    values.push_back(value.Number());
    texts.push_back(value.IsInt() ? std::string() : value.ToString());
  }
  return NamedInts(std::move(names), std::move(values), std::move(texts));
}

// Key text rather than a path: several lines (a key file's contents), a
// key file header, or the 64 hex digits alone.
bool LooksLikeKeyText(const std::string& s) {
  if (s.find('\n') != std::string::npos) return true;
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return false;
  if (s.compare(b, 17, "tunefarm-ed25519-") == 0) return true;
  const size_t e = s.find_last_not_of(" \t\r");
  return e - b + 1 == 2 * kPublicKeyBytes &&
         std::all_of(s.begin() + static_cast<std::ptrdiff_t>(b), s.begin() + static_cast<std::ptrdiff_t>(e) + 1,
                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

Result<std::vector<PublicKey>> TrustedKeys(const std::vector<std::string>& specs) {
  std::vector<PublicKey> keys;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (LooksLikeKeyText(specs[i])) {
      Result<PublicKey> k = ParsePublicKey(specs[i]);
      if (!k.ok()) return Status::Error("trusted key #" + std::to_string(i + 1) + ": " + k.status().message());
      keys.push_back(*k);
    } else {
      Result<PublicKey> k = ReadPublicKeyFile(specs[i]);
      if (!k.ok()) return Status::Error("trusted key " + k.status().message());
      keys.push_back(*k);
    }
  }
  return keys;
}

bool ForceDefaults(const LoadOptions& options) {
  switch (options.force_defaults) {
    case LoadOptions::ForceDefaults::kNo: return false;
    case LoadOptions::ForceDefaults::kYes: return true;
    case LoadOptions::ForceDefaults::kFromEnvironment: break;
  }
  const char* v = std::getenv("TUNEFARM_FORCE_DEFAULTS");
  return v != nullptr && *v != '\0' && std::string_view(v) != "0";
}

Result<std::unique_ptr<BundleData>> Index(tune::Bundle b, const PublicKey& signer, const LoadOptions& options) {
  auto data = std::make_unique<BundleData>();
  data->name = std::move(b.name);
  data->farm_version = std::move(b.farm_version);
  data->created_unix = b.created_unix;
  data->signer_key_id = signer.Id();
  data->force_defaults = ForceDefaults(options);
  if (const char* misses = std::getenv("TUNEFARM_MISSES")) data->misses_path = misses;
  for (auto& [op, config] : b.defaults) data->defaults.emplace(op, ToNamedInts(config.params));
  data->entries.reserve(b.entries.size());
  for (size_t i = 0; i < b.entries.size(); ++i) {
    BundleEntry& e = b.entries[i];
    if (e.shape.dims.size() > kMaxDims) {
      return Status::Error("entry " + std::to_string(i) + " (" + e.op + " " + e.shape.Canonical() + ") has " +
                           std::to_string(e.shape.dims.size()) + " dims; the runtime reads at most " +
                           std::to_string(kMaxDims));
    }
    Entry r;
    r.op = std::move(e.op);
    r.dtype = std::move(e.dtype);
    r.gpu_model = std::move(e.gpu_model);
    r.shape = ToNamedInts(e.shape.dims);
    r.config = ToNamedInts(e.config.params);
    r.config_id = std::move(e.config_id);
    r.kernel_hash = std::move(e.kernel_hash);
    r.backend = std::move(e.backend);
    r.arch = std::move(e.arch);
    r.median_us = e.median_us;
    r.default_median_us = e.default_median_us;
    r.baseline = std::move(e.baseline);
    r.baseline_median_us = e.baseline_median_us;
    if (!data->op_dims.contains(r.op)) {
      std::vector<std::string> names;
      for (size_t j = 0; j < r.shape.size(); ++j) names.push_back(r.shape.name(j));
      data->op_dims.emplace(r.op, std::move(names));
    }
    data->entries.push_back(std::move(r));
  }

  for (ModelDefault& d : b.model_defaults) {
    Entry r;
    r.op = std::move(d.op);
    r.dtype = std::move(d.dtype);
    r.gpu_model = std::move(d.gpu_model);
    r.config = ToNamedInts(d.config.params);
    r.config_id = std::move(d.config_id);
    r.kernel_hash = std::move(d.kernel_hash);
    r.arch = std::move(d.arch);
    r.median_us = d.median_us;
    data->model_defaults.push_back(std::move(r));
  }
  for (const ArchDefault& d : b.arch_defaults) {
    std::string key = d.op;
    key.append(1, '\0').append(d.arch);
    data->arch_defaults.emplace(std::move(key), ToNamedInts(d.config.params));
  }
  b.entries.clear();
  b.model_defaults.clear();
  data->source = std::move(b);

  // Entries per (op, dtype), in bundle order, then one plan per model and
  // per family that occurs.
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> by_op_dtype;
  for (size_t i = 0; i < data->entries.size(); ++i) {
    by_op_dtype[{data->entries[i].op, data->entries[i].dtype}].push_back(i);
  }
  for (const auto& [op_dtype, indices] : by_op_dtype) {
    const auto& [op, dtype] = op_dtype;
    const std::vector<std::string>& names = data->op_dims.at(op);
    for (size_t i : indices) {
      const std::string& model = data->entries[i].gpu_model;
      const std::string family = GpuFamily(model);
      std::string key = ModelKey(op, dtype, model);
      if (!data->plans.contains(key)) data->plans.emplace(key, BuildPlan(*data, op, dtype, indices, &model, family, names));
      key = FamilyKey(op, dtype, family);
      if (!data->plans.contains(key)) data->plans.emplace(key, BuildPlan(*data, op, dtype, indices, nullptr, family, names));
    }
  }
  for (const auto& [op, names] : data->op_dims) data->plans.emplace(op, FallbackPlan(*data, op));
  for (const auto& [op, config] : data->defaults) {
    if (!data->plans.contains(op)) data->plans.emplace(op, FallbackPlan(*data, op));
  }
  data->miss = std::make_shared<Plan>();
  return data;
}

// `s` as a JSON string: the names may come from a caller.
void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (u < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", u);
      out->append(esc);
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

}  // namespace

Status WriteMissLines(const detail::MissTable& table, const std::string& path) {
  std::string text;
  for (const Miss& m : table.List(nullptr)) {
    text += "{\"op\": ";
    AppendJsonString(&text, m.op);
    text += ", \"dtype\": ";
    AppendJsonString(&text, m.dtype);
    text += ", \"gpu_model\": ";
    AppendJsonString(&text, m.gpu_model);
    text += ", \"shape\": {";
    for (size_t i = 0; i < m.shape.size(); ++i) {
      if (i) text += ", ";
      AppendJsonString(&text, m.shape.name(i));
      text += ": " + std::to_string(m.shape.value(i));
    }
    text += "}, \"level\": ";
    AppendJsonString(&text, LevelName(m.level));
    text += ", \"count\": " + std::to_string(m.count) + "}\n";
  }
  // One write of whole lines, appended: processes that share the file add
  // theirs beside it.
  std::ofstream out(path, std::ios::app | std::ios::binary);
  if (out) out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.flush();
  if (!out) return Status::IOError("misses file " + path + ": cannot append to it");
  return Status::OK();
}

namespace {

const std::shared_ptr<const Plan>& EmptyPlan() {
  static const std::shared_ptr<const Plan> kEmpty = std::make_shared<Plan>();
  return kEmpty;
}

}  // namespace

const char* LevelName(Level level) {
  switch (level) {
    case Level::kExact: return "exact";
    case Level::kPredicted: return "predicted";
    case Level::kNearestShape: return "nearest_shape";
    case Level::kFamily: return "family";
    case Level::kDefault: return "default";
    case Level::kMiss: return "miss";
  }
  return "unknown";
}

std::string GpuFamily(std::string_view gpu_model) {
  std::string out;
  AppendFamily(&out, gpu_model);
  return out;
}

NamedInts::NamedInts(std::vector<std::string> names, std::vector<int64_t> values, std::vector<std::string> texts)
    : names_(std::move(names)), values_(std::move(values)), texts_(std::move(texts)) {
  names_.resize(values_.size());
  if (std::all_of(texts_.begin(), texts_.end(), [](const std::string& t) { return t.empty(); })) texts_.clear();
  if (!texts_.empty()) texts_.resize(values_.size());
}

const std::string& NamedInts::text(size_t i) const {
  static const std::string kNone;
  return i < texts_.size() ? texts_[i] : kNone;
}

int NamedInts::index(std::string_view name) const {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return static_cast<int>(i);
  }
  return -1;
}

int64_t NamedInts::get(std::string_view name, int64_t fallback) const {
  const int i = index(name);
  return i < 0 ? fallback : values_[static_cast<size_t>(i)];
}

std::string NamedInts::ToString() const {
  std::string out;
  for (size_t i = 0; i < values_.size(); ++i) {
    if (i) out += ',';
    out += names_[i];
    out += '=';
    out += text(i).empty() ? std::to_string(values_[i]) : text(i);
  }
  return out;
}

PreparedLookup::PreparedLookup() : PreparedLookup(EmptyPlan(), nullptr, nullptr) {}

PreparedLookup::PreparedLookup(std::shared_ptr<const detail::Plan> plan, detail::MissTable* misses,
                               const detail::MissKey* key)
    : plan_(std::move(plan)), misses_(misses), key_(key), ndims_(plan_->ndims) {}

void PreparedLookup::CountMiss(Level level) const {
  if (misses_) misses_->Count(key_, last_, ndims_, level);
}

const std::vector<std::string>& PreparedLookup::dim_names() const { return plan_->dim_names; }

Answer PreparedLookup::Refresh(std::span<const int64_t> dims) {
  if (dims.size() != ndims_) return plan_->fallback;
  const Answer a = Evaluate(*plan_, dims.data());
  if (ndims_ <= kMaxDims) {
    for (size_t i = 0; i < ndims_; ++i) last_[i] = dims[i];
    last_answer_ = a;
    cached_ = true;
    if (a.level != Level::kExact) CountMiss(a.level);
  }
  return a;
}

Bundle::Bundle(std::unique_ptr<detail::BundleData> data) : data_(std::move(data)) {}
Bundle::Bundle(Bundle&&) noexcept = default;
Bundle& Bundle::operator=(Bundle&&) noexcept = default;
Bundle::~Bundle() = default;

detail::BundleData::~BundleData() {
  if (misses_path.empty()) return;
  uint64_t dropped = 0;
  if (misses.List(&dropped).empty() && dropped == 0) return;
  // A Bundle that can no longer be reached: its data, wrapped for the writer.
  Status st = WriteMissLines(misses, misses_path);
  if (!st.ok()) std::fprintf(stderr, "tunefarm: TUNEFARM_MISSES: %s\n", st.message().c_str());
}

Result<Bundle> Bundle::Load(const std::string& path, const std::vector<std::string>& trusted_keys,
                            const LoadOptions& options) {
  Result<std::vector<PublicKey>> keys = TrustedKeys(trusted_keys);
  if (!keys.ok()) return keys.status().WithPrefix("bundle " + path + ": ");
  PublicKey signer;
  Result<tune::Bundle> b = ReadVerifiedBundleFile(path, *keys, &signer);
  if (!b.ok()) return b.status();
  Result<std::unique_ptr<BundleData>> data = Index(std::move(b).value(), signer, options);
  if (!data.ok()) return data.status().WithPrefix("bundle " + path + ": ");
  return Bundle(std::move(data).value());
}

Result<Bundle> Bundle::LoadFromMemory(const void* bytes, size_t size, const std::vector<std::string>& trusted_keys,
                                      const std::string& name, const LoadOptions& options) {
  Result<std::vector<PublicKey>> keys = TrustedKeys(trusted_keys);
  if (!keys.ok()) return keys.status().WithPrefix("bundle " + name + ": ");
  PublicKey signer;
  Result<tune::Bundle> b = DecodeVerifiedBundle(bytes, size, *keys, &signer);
  if (!b.ok()) return b.status().WithPrefix("bundle " + name + ": ");
  Result<std::unique_ptr<BundleData>> data = Index(std::move(b).value(), signer, options);
  if (!data.ok()) return data.status().WithPrefix("bundle " + name + ": ");
  return Bundle(std::move(data).value());
}

Result<Bundle> Bundle::LoadUnverified(const std::string& path, const LoadOptions& options) {
  Result<tune::Bundle> b = ReadBundleFile(path);
  if (!b.ok()) return b.status();
  Result<std::unique_ptr<BundleData>> data = Index(std::move(b).value(), PublicKey{}, options);
  if (!data.ok()) return data.status().WithPrefix("bundle " + path + ": ");
  data.value()->signer_key_id.clear();  // nothing was verified
  return Bundle(std::move(data).value());
}

Answer Bundle::lookup(std::string_view op, std::string_view dtype, std::string_view gpu_model,
                      std::span<const Dim> shape) const {
  const Plan& plan = *Resolve(*data_, op, dtype, gpu_model);
  // Dims whose names are not the op's answer the fallback, uncounted: a
  // caller's mistake, not a shape to tune.
  if (shape.size() != plan.ndims || plan.ndims > kMaxDims) return plan.fallback;
  int64_t dims[kMaxDims];
  for (size_t j = 0; j < plan.ndims; ++j) {
    const auto it = std::find_if(shape.begin(), shape.end(),
                                 [&](const Dim& d) { return d.name == plan.dim_names[j]; });
    if (it == shape.end()) return plan.fallback;
    dims[j] = it->value;
  }
  const Answer a = plan.entries.empty() ? plan.fallback : Evaluate(plan, dims);
  if (a.level != Level::kExact && plan.ndims > 0)
    data_->misses.Count(data_->KeyOf(op, dtype, gpu_model, plan.dim_names), dims, plan.ndims, a.level);
  return a;
}

Answer Bundle::lookup(std::string_view op, std::string_view dtype, std::string_view gpu_model,
                      std::span<const Dim> shape, std::string_view arch) const {
  const Answer a = lookup(op, dtype, gpu_model, shape);
  if (a.level != Level::kDefault || a.entry || data_->force_defaults) return a;
  if (const NamedInts* c = ArchDefaultOf(*data_, op, arch, [](const NamedInts&) { return true; }))
    return Answer{c, nullptr, Level::kDefault, {}};
  return a;
}

PreparedLookup Bundle::prepare(std::string_view op, std::string_view dtype, std::string_view gpu_model) const {
  const auto& plan = Resolve(*data_, op, dtype, gpu_model);
  return PreparedLookup(plan, &data_->misses, data_->KeyOf(op, dtype, gpu_model, plan->dim_names));
}

PreparedLookup Bundle::prepare(std::string_view op, std::string_view dtype, std::string_view gpu_model,
                               std::span<const std::string_view> dim_order) const {
  auto plan = Reorder(Resolve(*data_, op, dtype, gpu_model), dim_order);
  const detail::MissKey* key = data_->KeyOf(op, dtype, gpu_model, plan->dim_names);
  return PreparedLookup(std::move(plan), &data_->misses, key);
}

PreparedLookup Bundle::prepare(std::string_view op, std::string_view dtype, std::string_view gpu_model,
                               std::string_view arch, const std::function<bool(const Answer&)>& usable) const {
  const BundleData& data = *data_;
  const std::string op_s(op), dtype_s(dtype), model(gpu_model), family = GpuFamily(gpu_model);
  std::vector<size_t> same_op_dtype;
  for (size_t i = 0; i < data.entries.size(); ++i)
    if (data.entries[i].op == op && data.entries[i].dtype == dtype) same_op_dtype.push_back(i);
  std::vector<std::string> names;
  if (auto it = data.op_dims.find(op); it != data.op_dims.end()) names = it->second;
  auto plan = BuildPlan(data, op_s, dtype_s, same_op_dtype, &model, family, names, arch, usable);
  const detail::MissKey* key = data.KeyOf(op, dtype, gpu_model, plan->dim_names);
  return PreparedLookup(std::move(plan), &data.misses, key);
}

std::vector<Miss> Bundle::misses(uint64_t* dropped) const { return data_->misses.List(dropped); }

Status Bundle::WriteMisses(const std::string& path) const { return WriteMissLines(data_->misses, path); }

const tune::Bundle& Bundle::source() const { return data_->source; }

const std::vector<std::string>* Bundle::dims_of(std::string_view op) const {
  auto it = data_->op_dims.find(op);
  return it == data_->op_dims.end() ? nullptr : &it->second;
}

const std::string& Bundle::name() const { return data_->name; }
const std::string& Bundle::farm_version() const { return data_->farm_version; }
int64_t Bundle::created_unix() const { return data_->created_unix; }
const std::string& Bundle::signer_key_id() const { return data_->signer_key_id; }
const std::vector<Entry>& Bundle::entries() const { return data_->entries; }
bool Bundle::forcing_defaults() const { return data_->force_defaults; }

}  // namespace tune::runtime
