// Bundles: the JSON form, for people (publish/bundle.h).
#include <nlohmann/json.hpp>

#include "publish/bundle_checks.h"
#include "publish/bundle.h"
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

NamedValues NamedValuesFromJson(const Json& j, const char* what) {
  if (!j.is_object()) throw std::runtime_error(std::string(what) + " must be an object");
  NamedValues out;
  for (const auto& [name, value] : j.items()) {
    if (!value.is_number_integer()) {
      throw std::runtime_error(std::string(what) + "." + name + " must be an integer");
    }
    out.emplace_back(name, value.get<int64_t>());
  }
  return out;
}

Json ProgramToJson(const LaunchProgram& p) {
  return Json{{"text", p.text}, {"code", p.code}, {"operands", p.operands}};
}

LaunchProgram ProgramFromJson(const Json& j) {
  LaunchProgram p;
  p.text = j.value("text", std::string());
  p.code = j.at("code").get<std::vector<uint8_t>>();
  p.operands = j.at("operands").get<std::vector<double>>();
  return p;
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

Result<Bundle> BundleFromJson(const std::string& text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Error("bundle JSON does not parse");
  if (!j.is_object()) return Status::Error("bundle JSON must be an object");
  try {
    Bundle b;
    b.format_version = j.at("format_version").get<uint32_t>();
    TUNE_RETURN_IF_ERROR(CheckVersion(b.format_version));
    b.name = j.value("name", std::string());
    b.farm_version = j.value("farm_version", std::string());
    b.created_unix = j.value("created_unix", int64_t{0});
    if (j.contains("defaults")) {
      const Json& defaults = j.at("defaults");
      if (!defaults.is_object()) return Status::Error("bundle JSON: defaults must be an object");
      for (const auto& [op, config] : defaults.items()) {
        b.defaults[op] = Config{ParamsFromJson(config, "defaults." + op)};
      }
    }
    if (j.contains("entries")) {
      const Json& entries = j.at("entries");
      if (!entries.is_array()) return Status::Error("bundle JSON: entries must be an array");
      for (size_t i = 0; i < entries.size(); ++i) {
        const Json& je = entries[i];
        const std::string where = "entries[" + std::to_string(i) + "]";
        if (!je.is_object()) return Status::Error("bundle JSON: " + where + " must be an object");
        BundleEntry e;
        e.op = je.at("op").get<std::string>();
        e.dtype = je.at("dtype").get<std::string>();
        e.gpu_model = je.at("gpu_model").get<std::string>();
        e.shape.dims = NamedValuesFromJson(je.at("shape"), (where + ".shape").c_str());
        e.config.params = ParamsFromJson(je.at("config"), where + ".config");
        e.config_id = je.value("config_id", std::string());
        e.kernel_hash = je.value("kernel_hash", std::string());
        e.median_us = je.value("median_us", 0.0);
        e.stdev_us = je.value("stdev_us", 0.0);
        e.ci95_us = je.value("ci95_us", 0.0);
        e.samples = je.value("samples", uint32_t{0});
        e.default_median_us = je.value("default_median_us", 0.0);
        e.baseline = je.value("baseline", std::string());
        e.baseline_median_us = je.value("baseline_median_us", 0.0);
        e.backend = je.value("backend", std::string());
        e.device_name = je.value("device_name", std::string());
        e.nvrtc_version = je.value("nvrtc_version", std::string());
        e.driver_version = je.value("driver_version", std::string());
        e.arch = je.value("arch", std::string());
        if (je.contains("coverage")) {
          const auto& jc = je.at("coverage");
          e.coverage = {jc.at("state").get<std::string>(), jc.value("strategy", std::string()),
                        jc.value("legal", uint64_t{0}), jc.value("evaluated", uint64_t{0}), jc.value("budget", uint64_t{0})};
        }
        b.entries.push_back(std::move(e));
      }
    }
    for (const Json& jp : j.value("launch_plans", Json::array())) {
      BundleLaunchPlan p;
      p.op = jp.at("op").get<std::string>();
      p.kernel_hash = jp.at("kernel_hash").get<std::string>();
      p.function = jp.at("function").get<std::string>();
      p.vars = jp.at("vars").get<std::vector<std::string>>();
      if (jp.at("grid").size() != 3 || jp.at("block").size() != 3)
        return Status::Error("bundle JSON: launch plan " + p.op + ": grid and block take 3 programs each");
      for (size_t d = 0; d < 3; ++d) {
        p.grid[d] = ProgramFromJson(jp.at("grid")[d]);
        p.block[d] = ProgramFromJson(jp.at("block")[d]);
      }
      p.smem = ProgramFromJson(jp.at("smem"));
      for (const Json& ja : jp.at("args")) {
        BundleLaunchArg a;
        a.name = ja.at("name").get<std::string>();
        a.buffer = ja.at("buffer").get<bool>();
        a.dtype = ja.value("dtype", std::string());
        a.dir = ja.value("dir", std::string());
        a.scalar_type = ja.value("scalar_type", std::string());
        a.map_of = ja.value("map_of", -1);
        if (a.tensor_map()) {
          a.swizzle = ja.value("swizzle", 0);
          for (const Json& e : ja.at("extents")) a.extents.push_back(ProgramFromJson(e));
          for (const Json& e : ja.at("box")) a.box.push_back(ProgramFromJson(e));
        } else if (!a.buffer) {
          a.value = ProgramFromJson(ja.at("value"));
        }
        p.args.push_back(std::move(a));
      }
      b.launch_plans.push_back(std::move(p));
    }
    for (const Json& jd : j.value("model_defaults", Json::array())) {
      ModelDefault d;
      d.op = jd.at("op").get<std::string>();
      d.dtype = jd.at("dtype").get<std::string>();
      d.gpu_model = jd.at("gpu_model").get<std::string>();
      d.config.params = ParamsFromJson(jd.at("config"), "model_defaults.config");
      d.config_id = jd.value("config_id", std::string());
      d.kernel_hash = jd.value("kernel_hash", std::string());
      d.arch = jd.value("arch", std::string());
      d.median_us = jd.value("median_us", 0.0);
      b.model_defaults.push_back(std::move(d));
    }
    for (const Json& jd : j.value("arch_defaults", Json::array())) {
      b.arch_defaults.push_back(ArchDefault{jd.at("op").get<std::string>(), jd.at("arch").get<std::string>(),
                                            Config{ParamsFromJson(jd.at("config"), "arch_defaults.config")}});
    }
    const Json buckets = j.value("buckets", Json::object());
    if (!buckets.is_object()) return Status::Error("bundle JSON: buckets: expected an object");
    for (const auto& [op, dims] : buckets.items()) {
      if (!dims.is_object()) return Status::Error("bundle JSON: buckets." + op + ": expected an object");
      for (const auto& [dim, v] : dims.items()) {
        DimBucket d;
        if (v.is_array()) {
          d.kind = DimBucket::Kind::kList;
          d.values = v.get<std::vector<int64_t>>();
        } else if (v == "pow2") {
          d.kind = DimBucket::Kind::kPow2;
        } else if (v != "exact") {
          return Status::Error("bundle JSON: buckets." + op + "." + dim + ": expected \"exact\", \"pow2\" or a list");
        }
        b.buckets[op][dim] = std::move(d);
      }
    }
    const Json shape_rules = j.value("shape_rules", Json::object());
    if (!shape_rules.is_object()) return Status::Error("bundle JSON: shape_rules: expected an object");
    for (const auto& [op, jr] : shape_rules.items()) {
      BundleShapeRules r;
      r.vars = jr.at("vars").get<std::vector<std::string>>();
      r.params = jr.at("params").get<size_t>();
      for (const Json& p : jr.at("rules")) r.rules.push_back(ProgramFromJson(p));
      b.shape_rules[op] = std::move(r);
    }
    const Json selectors = j.value("selectors", Json::array());
    if (!selectors.is_array()) return Status::Error("bundle JSON: selectors: expected an array");
    for (const Json& js : selectors) {
      BundleSelector s{js.at("op").get<std::string>(), js.at("dtype").get<std::string>(),
                       js.at("gpu_model").get<std::string>(), js.at("dims").get<std::vector<std::string>>(),
                       js.at("entries").get<std::vector<uint32_t>>(), {}};
      for (const Json& jn : js.at("nodes")) {
        s.nodes.push_back(jn.contains("candidate")
                              ? SelectorNode{true, 0, 0, 0, 0, jn.at("candidate").get<uint32_t>()}
                              : SelectorNode{false, jn.at("feature").get<uint32_t>(), jn.at("threshold").get<double>(),
                                             jn.at("left").get<uint32_t>(), jn.at("right").get<uint32_t>(), 0});
      }
      b.selectors.push_back(std::move(s));
    }
    if (Status st = CheckBundleBounds(b); !st.ok()) return st.WithPrefix("bundle JSON: ");
    if (Status st = CheckBundleParts(b); !st.ok()) return st.WithPrefix("bundle JSON: ");
    return b;
  } catch (const std::exception& e) {
    return Status::Error(std::string("bundle JSON: ") + e.what());
  }
}

}  // namespace tune
