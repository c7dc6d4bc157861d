#include "op_check.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "coordinator_client.h"
#include "opspec/config_space.h"
#include "search/search_space.h"
#include "base/target.h"
#include "base/known_gpus.h"
#include "opspec/op_definition.h"
#include "measure/program/program_backend.h"
#include "protocol/protocol.h"
#include "base/json_text.h"
#include "base/text.h"
#include "report/row_table.h"
#ifdef TUNEFARM_WITH_CUDA
#include "measure/cuda/cuda_backend.h"
#endif

namespace tune {
namespace {

using Json = nlohmann::ordered_json;

// Where the findings go: lines for people, or (--format json) one JSON
// document with the same facts, printed at the end.
struct CheckOut {
  bool json = false;
  Json doc = Json::object();
  // Legal configs per GPU model: a row each, its findings under it.
  RowTable spaces;
  // printf, for the table format only.
  template <typename... A>
  void Say(const char* format, A... a) const {
    if (!json) std::printf(format, a...);
  }
  // A finding under the last row of `spaces`.
  template <typename... A>
  void Under(const char* format, A... a) {
    spaces.under[spaces.rows.size() - 1].push_back(Fmt(format, a...));
  }
};

// Up to `n` configs spread over `all` (first, last and evenly between).
std::vector<Config> Sample(const std::vector<Config>& all, size_t n) {
  if (all.size() <= n || n == 0) return all;
  if (n == 1) return {all.front()};
  std::vector<Config> out;
  for (size_t i = 0; i < n; ++i) out.push_back(all[i * (all.size() - 1) / (n - 1)]);
  return out;
}

// The configs of `device`'s space legal at each --shape (the op's rules that
// read dims), with the rule that rejects the rest first.
bool CheckShapes(const OpSpec& spec, const OpCheckArgs& args, const DeviceInfo& device, CheckOut& out, Json* model) {
  if (args.shapes.empty()) return true;
  auto configs = EnumerateConfigs(spec, device);
  if (!configs.ok()) return false;
  bool ok = true;
  for (const std::string& text : args.shapes) {
    Shape shape;
    if (!ParseNamedValues(text, &shape.dims)) {
      out.Under("at %s: not a shape (NAME=value,...)", text.c_str());
      (*model)["shapes"].push_back(Json{{"shape", text}, {"error", "not a shape (NAME=value,...)"}});
      ok = false;
      continue;
    }
    std::string dtype = spec.dtypes.front();  // the largest, as the space's count uses
    for (const std::string& d : spec.dtypes)
      if (DTypeSize(d) > DTypeSize(dtype)) dtype = d;
    std::vector<uint64_t> rejected;
    auto legal = ConfigsForShape(spec, device, dtype, *configs, shape, &rejected);
    if (!legal.ok()) {
      out.Under("at %s: %s", text.c_str(), legal.status().message().c_str());
      (*model)["shapes"].push_back(Json{{"shape", text}, {"error", legal.status().message()}});
      ok = false;
      continue;
    }
    out.Under("at %-28s %8zu legal", text.c_str(), legal->size());
    Json at{{"shape", text}, {"legal", legal->size()}, {"rejected_by", Json::array()}};
    for (size_t r = 0; r < rejected.size(); ++r) {
      if (rejected[r] == 0) continue;
      const std::string& rule = spec.Written(spec.shape_constraints[r]);
      out.Under("  shape rule %-46s rejects %llu", rule.c_str(), static_cast<unsigned long long>(rejected[r]));
      at["rejected_by"].push_back(Json{{"rule", rule}, {"rejects", rejected[r]}});
    }
    (*model)["shapes"].push_back(std::move(at));
  }
  return ok;
}

// Counts legal configs per known model; false when a space could not be
// explained (a rule that does not compile).
// `models`: the known GPUs, then the live ones of a farm (marked "live").
bool CheckSpaces(const OpSpec& spec, const OpCheckArgs& args, const std::vector<DeviceInfo>& models, CheckOut& out) {
  out.Say("legal configs per GPU model (of %llu raw points; dsize of the largest dtype):\n",
          static_cast<unsigned long long>(RawSpaceSize(spec)));
  out.spaces.columns = {{"gpu_model"}, {"arch"}, {"configs", true}, {""}};
  out.doc["raw_configs"] = RawSpaceSize(spec);
  out.doc["models"] = Json::array();
  bool ok = true;
  size_t models_checked = 0, models_empty = 0;
  const size_t known = KnownGpus().size();
  for (size_t i = 0; i < models.size(); ++i) {
    const DeviceInfo& d = models[i];
    if (!args.gpus.empty() && std::find(args.gpus.begin(), args.gpus.end(), d.model) == args.gpus.end()) continue;
    Json model{{"gpu_model", d.model}, {"arch", TargetOf(d).arch},
               {"live", i >= known}};
    auto ex = ExplainSpace(spec, d);
    if (!ex.ok()) {
      out.spaces.rows.push_back({TextCell(d.model), TextCell(TargetOf(d).arch), TextCell("-"),
                                 TextCell(ex.status().message())});
      model["error"] = ex.status().message();
      out.doc["models"].push_back(std::move(model));
      ok = false;
      continue;
    }
    out.spaces.rows.push_back({TextCell(d.model), TextCell(TargetOf(d).arch), TextCell(std::to_string(ex->legal) + " legal"),
                               TextCell(i >= known ? "(live in the farm)" : "")});
    ++models_checked;
    models_empty += ex->legal == 0 ? 1 : 0;
    // A default the rules prune here: no searched key can measure it first,
    // and a bundle falls back to a config no device of the model can run.
    if (!spec.dtypes.empty()) {
      auto space = SearchSpace::Create(spec, d, spec.dtypes.back());
      const auto point = space.ok() ? space->PointOf(spec.default_config) : std::nullopt;
      if (space.ok() && (!point || !space->Legal(*point))) {
        out.Under("the default config %s is outside the space here: the rules reject it",
                  spec.default_config.Canonical().c_str());
        model["default_legal"] = false;
      }
    }
    model["legal"] = ex->legal;
    model["pruned_by"] = Json::array();
    for (size_t r = 0; r < spec.constraints.size(); ++r) {
      if (ex->rejected[r] == 0) continue;
      const std::string& rule = spec.Written(spec.constraints[r]);
      out.Under("rule[%zu] %-50s prunes %llu (first to reject %llu)", r, rule.c_str(),
              static_cast<unsigned long long>(ex->rejected[r]), static_cast<unsigned long long>(ex->first_rejecting[r]));
      model["pruned_by"].push_back(
          Json{{"rule", r}, {"text", rule}, {"prunes", ex->rejected[r]}, {"first_to_reject", ex->first_rejecting[r]}});
    }
    if (ex->legal == 0 && ex->raw > 0) {
      bool named = false;
      for (size_t r = 0; r < spec.constraints.size(); ++r) {
        if (ex->rejected[r] != ex->raw) continue;
        out.Under("the space is empty: rule[%zu] '%s' rejects every config here", r,
                spec.Written(spec.constraints[r]).c_str());
        model["emptied_by"].push_back(r);
        named = true;
      }
      if (!named) out.Under("%s", "the space is empty: no rule alone empties it; the rules above do together");
    }
    model["shapes"] = Json::array();
    ok &= CheckShapes(spec, args, d, out, &model);
    out.doc["models"].push_back(std::move(model));
  }
  if (!out.json) std::fputs(RenderRows(out.spaces, RowFormat::kTable, "  ").c_str(), stdout);
  if (models_checked > 0 && models_empty == models_checked) {
    out.Say("no GPU model checked has a legal config: the op cannot be tuned (the rules above say why)\n");
    ok = false;
  }
  return ok;
}

// One compile's (or build's) outcome, with the whole log on failure.
// `where`: arch (or "" for a build), dtype, and the config or reference.
bool Report(CheckOut& out, const std::string& arch, const std::string& dtype, const std::string& what,
            const CompiledKernel& k) {
  const std::string line = (arch.empty() ? "" : arch + " ") + dtype + " " + what;
  Json j{{"arch", arch}, {"dtype", dtype}, {"what", what},
         {"status", k.failure == FailureClass::kNone ? "ok" : FailureClassName(k.failure)},
         {"seconds", k.compile_seconds}};
  if (k.failure == FailureClass::kNone && k.image.empty()) {
    out.Say("  %-60s ok (%.2f s)\n", line.c_str(), k.compile_seconds);
  } else if (k.failure == FailureClass::kNone) {
    out.Say("  %-60s ok (%d registers, %lld B static smem, %.2f s)\n", line.c_str(), k.resources.registers,
            static_cast<long long>(k.resources.static_smem_bytes), k.compile_seconds);
    j["registers"] = k.resources.registers;
    j["static_smem_bytes"] = k.resources.static_smem_bytes;
  } else {
    out.Say("  %-60s %s: %s\n", line.c_str(), FailureClassName(k.failure), k.failure_message.c_str());
    if (!k.log.empty()) out.Say("%s\n", k.log.c_str());
    j["message"] = k.failure_message;
    if (!k.log.empty()) j["log"] = k.log;
  }
  out.doc["compiles"].push_back(std::move(j));
  return k.failure == FailureClass::kNone;
}

// A program op: its build command on a sample of configs (or all), in a
// scratch folder, as a worker would run it. Nothing is measured.
bool CheckBuilds(const OpSpec& spec, const OpCheckArgs& args, CheckOut& out) {
  out.doc["compiles"] = Json::array();
  if (spec.program->build.empty()) {
    out.Say("build: none ([program] has no build command)\n");
    return true;
  }
  char scratch[] = "/tmp/tunefarm-op-check-XXXXXX";
  if (!mkdtemp(scratch)) {
    out.Say("build: cannot create a scratch folder: %s\n", std::strerror(errno));
    out.doc["error"] = std::string("cannot create a scratch folder: ") + std::strerror(errno);
    return false;
  }
  out.Say("build ([program] build), %s per dtype, in %s:\n",
          args.all ? "every legal config" : ("a sample of " + std::to_string(args.sample)).c_str(), scratch);
  ProgramBackendOptions options;
  options.work_dir = scratch;
  options.allowed = true;
  const DeviceInfo& device = KnownGpus().front();
  auto backend = MakeProgramBackend(device, "op-check", options);
  auto configs = EnumerateConfigs(spec, device);
  if (!configs.ok()) {
    out.Say("  %s\n", configs.status().message().c_str());
    out.doc["error"] = configs.status().message();
    return false;
  }
  bool ok = true;
  size_t built = 0, failed = 0;
  for (const std::string& dtype : spec.dtypes) {
    for (const Config& c : args.all ? *configs : Sample(*configs, size_t(std::max(1, args.sample)))) {
      const bool passed = Report(out, "", dtype, c.Canonical(), backend->Compile(spec, dtype, c));
      ok &= passed;
      ++built;
      failed += passed ? 0 : 1;
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(scratch, ec);
  out.Say("%zu configs built, %zu failed\n", built, failed);
  return ok;
}

#ifdef TUNEFARM_WITH_CUDA

bool CheckCompiles(const OpSpec& spec, const OpCheckArgs& args, CheckOut& out) {
  out.Say("compile (NVRTC %s), %s per dtype and architecture, and the reference:\n", NvrtcVersionString().c_str(),
          args.all ? "every legal config" : ("a sample of " + std::to_string(args.sample)).c_str());
  out.doc["nvrtc"] = NvrtcVersionString();
  out.doc["compiles"] = Json::array();
  bool ok = true;
  size_t compiled = 0, failed = 0;
  for (std::string arch : args.archs) {
    // An op that needs the architecture-specific features gets the "a" target.
    if (spec.arch_specific && arch.back() != 'a' && arch >= "sm_90") arch += "a";
    DeviceInfo target;  // the spaces' limits: a known GPU of this architecture, else the largest
    for (const DeviceInfo& d : KnownGpus()) {
      const std::string a = TargetOf(d).arch;
      if (arch.rfind(a, 0) == 0 && target.model.empty()) target = d;
    }
    if (target.model.empty()) target = KnownGpus().front();
    auto configs = EnumerateConfigs(spec, target);
    if (!configs.ok()) {
      out.Say("  %s: %s\n", arch.c_str(), configs.status().message().c_str());
      out.doc["compiles"].push_back(Json{{"arch", arch}, {"status", "error"}, {"message", configs.status().message()}});
      ok = false;
      continue;
    }
    for (const std::string& dtype : spec.dtypes) {
      if (spec.check.HasKernel()) {
        const char* what = spec.check.mode == CheckSpec::Mode::kChecker ? "checker " : "reference ";
        ok &= Report(out, arch, dtype, what + spec.check.reference_kernel, CompileReference(spec, dtype, arch, ""));
      }
      for (const Config& c : args.all ? *configs : Sample(*configs, size_t(std::max(1, args.sample)))) {
        const CompiledKernel k = CompileConfig(spec, dtype, c, arch, "");
        const bool passed = Report(out, arch, dtype, c.Canonical(), k);
        ok &= passed;
        ++compiled;
        failed += passed ? 0 : 1;
      }
    }
  }
  out.Say("%zu configs compiled, %zu failed\n", compiled, failed);
  return ok;
}
#endif

}  // namespace

int RunOpCheck(const OpCheckArgs& args) {
  auto spec = LoadOpSpec(args.dir);
  if (!spec.ok()) {
    std::fprintf(stderr, "tunefarm: %s\n", spec.status().message().c_str());
    return 1;
  }
  CheckOut out;
  out.json = args.format == "json";
  out.Say("op %s (%s): %zu params, dims %s, dtypes %s, %zu rules, %zu shape rules (rules that read dims)\n",
          spec->name.c_str(), args.dir.c_str(), spec->axes.size(), Join(spec->dims).c_str(), Join(spec->dtypes).c_str(),
          spec->constraints.size(), spec->shape_constraints.size());
  out.doc["op"] = spec->name;
  out.doc["dir"] = args.dir;
  out.doc["params"] = Json::array();
  for (const Axis& a : spec->axes) {
    Json values = Json::array();
    for (const ParamValue& v : a.values) values.push_back(ParamsJson<Json>({{"v", v}})["v"]);
    out.doc["params"].push_back(Json{{"name", a.name}, {"values", values}});
  }
  out.doc["dims"] = spec->dims;
  out.doc["dtypes"] = spec->dtypes;
  out.doc["rules"] = Json::array();
  for (const std::string& r : spec->constraints) out.doc["rules"].push_back(spec->Written(r));
  out.doc["shape_rules"] = Json::array();
  for (const std::string& r : spec->shape_constraints) out.doc["shape_rules"].push_back(spec->Written(r));
  if (spec->baseline) out.doc["baseline"] = spec->baseline->library;
  // The document, printed once whatever path ends the check.
  const auto finish = [&](int code) {
    if (out.json) {
      out.doc["ok"] = code == 0;
      std::printf("%s\n", DumpJson(out.doc, 2).c_str());
    }
    return code;
  };
  std::vector<DeviceInfo> models = KnownGpus();
  if (!args.coordinator.empty()) {
    CoordinatorClient client(args.coordinator, 10, args.curve_key, args.coordinator_key);
    auto reply = client.Call(SweepStatusRequest{});
    const auto* status = reply.ok() ? std::get_if<SweepStatus>(&*reply) : nullptr;
    if (!status) {
      std::fprintf(stderr, "tunefarm: --coordinator %s: %s\n", args.coordinator.c_str(),
                   reply.ok() ? "unexpected reply" : reply.status().message().c_str());
      return 1;
    }
    if (status->devices.empty()) out.Say("the farm at %s has no live worker\n", args.coordinator.c_str());
    models.insert(models.end(), status->devices.begin(), status->devices.end());
  }
  bool ok = CheckSpaces(*spec, args, models, out);
  if (spec->program) return finish(CheckBuilds(*spec, args, out) && ok ? 0 : 1);
  auto roots = ParseIncludeRoots(args.include_roots);
  if (!roots.ok()) {
    std::fprintf(stderr, "tunefarm: --include-root: %s\n", roots.status().message().c_str());
    return 2;
  }
  if (!spec->include_dirs.empty()) {
    out.Say("include folders (in the package): %s\n", Join(spec->include_dirs).c_str());
    out.doc["include_folders"] = spec->include_dirs;
  }
  if (!spec->include_roots.empty()) {
    // The headers a compile reads there are part of the kernel hash.
    auto digest = IncludeRootsDigest(*spec, *roots);
    out.Say("include roots: %s: %s\n", Join(spec->include_roots).c_str(),
            digest.ok() ? ("headers digest " + *digest).c_str() : digest.status().message().c_str());
    out.doc["include_roots"] = Json{{"names", spec->include_roots},
                                    {digest.ok() ? "digest" : "error", digest.ok() ? *digest : digest.status().message()}};
    ok &= digest.ok();
  }
#ifdef TUNEFARM_WITH_CUDA
  SetIncludeRoots(*roots);
  ok &= CheckCompiles(*spec, args, out);
#else
  out.Say("compile: skipped: this tunefarm was built without NVRTC\n");
  out.doc["compiles"] = nullptr;
#endif
  return finish(ok ? 0 : 1);
}

}  // namespace tune
