// Bundles: the JSON form, for people (bundle/bundle.h).
#include <nlohmann/json.hpp>

#include "bundle/bundle_checks.h"
#include "bundle/bundle.h"
#include "base/json_text.h"

namespace tune {
namespace {

using Json = nlohmann::ordered_json;

// JSON objects keep the insertion order (ordered_json), so params and dims
// read in the op's declared order, as in the spec file.
Json NamedValuesToJson(const NamedValues& v) {
  Json j = Json::object();
  for (const auto& [name, value] : v) j[name] = value;
  return j;
}

Json ProgramToJson(const LaunchProgram& p) {
  return Json{{"text", p.text}, {"code", p.code}, {"operands", p.operands}};
}

}  // namespace

std::string BundleToJson(const Bundle& b) {
  Json j;
  j["format_version"] = FormatVersionOf(b);
  j["name"] = b.name;
  j["farm_version"] = b.farm_version;
  j["created_unix"] = b.created_unix;
  Json defaults = Json::object();
  for (const auto& [op, config] : b.defaults) defaults[op] = ParamsJson<Json>(config.params);
  j["defaults"] = std::move(defaults);
  Json entries = Json::array();
  for (const BundleEntry& e : b.entries) {
    Json je;
    je["op"] = e.op;
    je["dtype"] = e.dtype;
    je["gpu_model"] = e.gpu_model;
    je["shape"] = NamedValuesToJson(e.shape.dims);
    je["config"] = ParamsJson<Json>(e.config.params);
    je["config_id"] = e.config_id;
    je["kernel_hash"] = e.kernel_hash;
    je["median_us"] = e.median_us;
    je["stdev_us"] = e.stdev_us;
    je["ci95_us"] = e.ci95_us;
    je["samples"] = e.samples;
    je["default_median_us"] = e.default_median_us;
    if (!e.baseline.empty()) {
      je["baseline"] = e.baseline;
      je["baseline_median_us"] = e.baseline_median_us;
    }
    je["backend"] = e.backend;
    je["device_name"] = e.device_name;
    je["nvrtc_version"] = e.nvrtc_version;
    je["driver_version"] = e.driver_version;
    je["arch"] = e.arch;
    if (!e.coverage.state.empty())
      je["coverage"] = {{"state", e.coverage.state}, {"legal", e.coverage.legal}, {"evaluated", e.coverage.evaluated},
                        {"strategy", e.coverage.strategy}, {"budget", e.coverage.budget}};
    if (!e.checked_against.empty()) je["checked_against"] = e.checked_against;
    if (e.energy_uj > 0) {
      je["energy_uj"] = e.energy_uj;
      je["power_w"] = e.power_w;
      je["power_limit_w"] = e.power_limit_w;
    }
    if (!e.objective.empty()) je["objective"] = e.objective;
    entries.push_back(std::move(je));
  }
  j["entries"] = std::move(entries);
  Json plans = Json::array();
  for (const BundleLaunchPlan& p : b.launch_plans) {
    Json jp{{"op", p.op}, {"kernel_hash", p.kernel_hash}, {"function", p.function}, {"vars", p.vars}};
    auto three = [](const LaunchProgram (&programs)[3]) {
      return Json::array({ProgramToJson(programs[0]), ProgramToJson(programs[1]), ProgramToJson(programs[2])});
    };
    jp["grid"] = three(p.grid);
    jp["block"] = three(p.block);
    jp["smem"] = ProgramToJson(p.smem);
    Json args = Json::array();
    for (const BundleLaunchArg& a : p.args) {
      Json ja{{"name", a.name}, {"buffer", a.buffer}};
      if (a.buffer) {
        ja["dtype"] = a.dtype;
        ja["dir"] = a.dir;
      } else if (a.tensor_map()) {
        ja["scalar_type"] = a.scalar_type;
        ja["map_of"] = a.map_of;
        ja["swizzle"] = a.swizzle;
        Json extents = Json::array(), box = Json::array();
        for (const LaunchProgram& e : a.extents) extents.push_back(ProgramToJson(e));
        for (const LaunchProgram& e : a.box) box.push_back(ProgramToJson(e));
        ja["extents"] = std::move(extents);
        ja["box"] = std::move(box);
      } else {
        ja["scalar_type"] = a.scalar_type;
        ja["value"] = ProgramToJson(a.value);
      }
      args.push_back(std::move(ja));
    }
    jp["args"] = std::move(args);
    plans.push_back(std::move(jp));
  }
  j["launch_plans"] = std::move(plans);
  Json model_defaults = Json::array();
  for (const ModelDefault& d : b.model_defaults) {
    model_defaults.push_back(Json{{"op", d.op}, {"dtype", d.dtype}, {"gpu_model", d.gpu_model},
                                  {"config", ParamsJson<Json>(d.config.params)}, {"config_id", d.config_id},
                                  {"kernel_hash", d.kernel_hash}, {"arch", d.arch}, {"median_us", d.median_us}});
  }
  j["model_defaults"] = std::move(model_defaults);
  Json arch_defaults = Json::array();
  for (const ArchDefault& d : b.arch_defaults)
    arch_defaults.push_back(Json{{"op", d.op}, {"arch", d.arch}, {"config", ParamsJson<Json>(d.config.params)}});
  j["arch_defaults"] = std::move(arch_defaults);
  // {"gemm": {"M": "pow2", "K": [1024, 4096]}}
  Json buckets = Json::object();
  for (const auto& [op, dims] : b.buckets) {
    for (const auto& [dim, bucket] : dims) {
      buckets[op][dim] = bucket.kind == DimBucket::Kind::kList ? Json(bucket.values)
                         : bucket.kind == DimBucket::Kind::kPow2 ? Json("pow2")
                                                                 : Json("exact");
    }
  }
  j["buckets"] = std::move(buckets);
  Json shape_rules = Json::object();
  for (const auto& [op, r] : b.shape_rules) {
    Json programs = Json::array();
    for (const LaunchProgram& p : r.rules) programs.push_back(ProgramToJson(p));
    shape_rules[op] = Json{{"vars", r.vars}, {"params", r.params}, {"rules", std::move(programs)}};
  }
  j["shape_rules"] = std::move(shape_rules);
  Json selectors = Json::array();
  for (const BundleSelector& s : b.selectors) {
    Json nodes = Json::array();
    for (const SelectorNode& n : s.nodes) {
      nodes.push_back(n.leaf ? Json{{"candidate", n.candidate}}
                             : Json{{"feature", n.feature}, {"threshold", n.threshold}, {"left", n.left}, {"right", n.right}});
    }
    selectors.push_back(Json{{"op", s.op}, {"dtype", s.dtype}, {"gpu_model", s.gpu_model}, {"dims", s.dims},
                             {"entries", s.entries}, {"nodes", std::move(nodes)}});
  }
  j["selectors"] = std::move(selectors);
  Json kernels = Json::array();
  for (const KernelImage& k : b.kernels) {
    kernels.push_back(Json{{"kernel_hash", k.kernel_hash}, {"config_id", k.config_id}, {"dtype", k.dtype},
                           {"arch", k.arch}, {"sha256", k.sha256}, {"bytes", k.image.size()}});
  }
  j["kernels"] = std::move(kernels);
  // Invalid UTF-8 in a name must not make the printer throw.
  return DumpJson(j, 2) + "\n";
}

}  // namespace tune
