#include "tune/publish.h"

#include <ctime>
#include <set>


#include "tune/config_space.h"
#include "tune/records.h"
#include "tune/sweep_file.h"

namespace tune {

std::map<std::string, OpSpec> OpsFromStore(ResultStore& store) {
  // By name: the spec of the most recently submitted package that parses
  // (on a tie, the later record in the store's key order).
  std::map<std::string, std::pair<int64_t, OpSpec>> latest;
  (void)store.ForEachOp([&](const OpRecord& op) {
    auto it = latest.find(op.name);
    if (it != latest.end() && op.submitted_unix < it->second.first) return;
    auto spec = ParseOpSpec(op.package, "stored op '" + op.name + "'");
    if (spec.ok()) latest.insert_or_assign(op.name, std::make_pair(op.submitted_unix, std::move(spec).value()));
  });
  std::map<std::string, OpSpec> out;
  for (auto& [name, entry] : latest) out.emplace(name, std::move(entry.second));
  return out;
}

namespace {

// A row's (GPU model, op, dtype, shape): the key a bundle entry answers.
std::string GroupKey(const Measurement& m) { return m.gpu_model + '\0' + m.op + '\0' + m.dtype + '\0' + m.shape; }

}  // namespace

std::vector<Measurement> NewestKernelOnly(std::vector<Measurement> rows) {
  std::map<std::string, const Measurement*> newest;
  for (const auto& m : rows) {
    auto& slot = newest[GroupKey(m)];
    if (!slot || m.unix_time > slot->unix_time ||
        (m.unix_time == slot->unix_time && m.kernel_hash < slot->kernel_hash)) {
      slot = &m;
    }
  }
  std::set<std::pair<std::string, std::string>> keep;  // (key, hash)
  for (const auto& [key, m] : newest) keep.emplace(key, m->kernel_hash);
  std::vector<Measurement> out;
  for (auto& m : rows) {
    if (keep.count({GroupKey(m), m.kernel_hash})) out.push_back(std::move(m));
  }
  return out;
}

Result<Bundle> BuildBundle(ResultStore& store, const ResultFilter& filter, const std::string& name) {
  auto best = store.Best(filter);
  if (!best.ok()) return best.status();
  const auto ops = OpsFromStore(store);
  std::map<std::string, const Measurement*> pick;  // one best row per key
  const std::vector<Measurement> newest = NewestKernelOnly(std::move(best).value());
  for (const auto& m : newest) pick.emplace(GroupKey(m), &m);
  if (pick.empty()) return Status::Error("publish: no valid measurement matches the filter");
  Bundle b;
  b.name = name;
  b.farm_version = TUNEFARM_VERSION;
  b.created_unix = std::time(nullptr);
  for (const auto& [op, spec] : ops) b.defaults[op] = spec.default_config;
  for (const auto& [key, m] : pick) {
    BundleEntry e;
    e.op = m->op;
    e.dtype = m->dtype;
    e.gpu_model = m->gpu_model;
    ParseNamedValues(m->shape, &e.shape.dims);
    e.config = m->config;
    e.config_id = m->config_id;
    e.kernel_hash = m->kernel_hash;
    e.median_us = m->median_us;
    e.stdev_us = m->stdev_us;
    e.ci95_us = m->ci95_us;
    e.samples = m->samples;
    e.backend = m->backend;
    e.device_name = m->device_name;
    e.nvrtc_version = m->nvrtc_version;
    e.driver_version = m->driver_version;
    auto spec = ops.find(m->op);
    if (spec != ops.end()) {
      auto def = store.Get(m->gpu_model, m->op, m->dtype, m->shape, m->kernel_hash,
                           spec->second.default_config.Id());
      // The default is one of the candidates the winner beat (or is the
      // winner), so the bundle never ships a config slower than it.
      if (def && def->Valid()) e.default_median_us = def->median_us;
    }
    b.entries.push_back(std::move(e));
  }
  return b;
}

double Throughput(const OpSpec* spec, const Measurement& m, std::string* unit) {
  if (!spec || !m.Valid() || m.median_us <= 0) return 0;
  Shape shape;
  if (!ParseNamedValues(m.shape, &shape.dims)) return 0;
  DeviceInfo dev;  // metrics depend on dims and dtype only
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
