#include "op_check.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "client.h"
#include "opspec/config_space.h"
#include "base/known_gpus.h"
#include "opspec/op_spec.h"
#include "measure/program/program_backend.h"
#include "codec/protocol.h"
#include "base/text.h"
#ifdef TUNEFARM_WITH_CUDA
#include "measure/cuda/cuda_backend.h"
#endif

namespace tune {
namespace {

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
bool CheckShapes(const OpSpec& spec, const OpCheckArgs& args, const DeviceInfo& device) {
  if (args.shapes.empty()) return true;
  auto configs = EnumerateConfigs(spec, device);
  if (!configs.ok()) return false;
  bool ok = true;
  for (const std::string& text : args.shapes) {
    Shape shape;
    if (!ParseNamedValues(text, &shape.dims)) {
      std::printf("      at %s: not a shape (NAME=value,...)\n", text.c_str());
      ok = false;
      continue;
    }
    std::string dtype = spec.dtypes.front();  // the largest, as the space's count uses
    for (const std::string& d : spec.dtypes)
      if (DTypeSize(d) > DTypeSize(dtype)) dtype = d;
    std::vector<uint64_t> rejected;
    auto legal = ConfigsForShape(spec, device, dtype, *configs, shape, &rejected);
    if (!legal.ok()) {
      std::printf("      at %s: %s\n", text.c_str(), legal.status().message().c_str());
      ok = false;
      continue;
    }
    std::printf("      at %-28s %8zu legal\n", text.c_str(), legal->size());
    for (size_t r = 0; r < rejected.size(); ++r) {
      if (rejected[r] > 0)
        std::printf("        shape rule %-46s rejects %llu\n", spec.shape_constraints[r].c_str(),
                    static_cast<unsigned long long>(rejected[r]));
    }
  }
  return ok;
}

// Counts legal configs per known model; false when a space could not be
// explained (a rule that does not compile).
// `models`: the known GPUs, then the live ones of a farm (marked "live").
bool CheckSpaces(const OpSpec& spec, const OpCheckArgs& args, const std::vector<DeviceInfo>& models) {
  std::printf("legal configs per GPU model (of %llu raw points; dsize of the largest dtype):\n",
              static_cast<unsigned long long>(RawSpaceSize(spec)));
  bool ok = true;
  const size_t known = KnownGpus().size();
  for (size_t i = 0; i < models.size(); ++i) {
    const DeviceInfo& d = models[i];
    if (!args.gpus.empty() && std::find(args.gpus.begin(), args.gpus.end(), d.model) == args.gpus.end()) continue;
    auto ex = ExplainSpace(spec, d);
    if (!ex.ok()) {
      std::printf("  %-22s %s\n", d.model.c_str(), ex.status().message().c_str());
      ok = false;
      continue;
    }
    std::printf("  %-22s sm_%d%d  %8llu legal%s\n", d.model.c_str(), d.cc_major, d.cc_minor,
                static_cast<unsigned long long>(ex->legal), i >= known ? "  (live in the farm)" : "");
    for (size_t r = 0; r < spec.constraints.size(); ++r) {
      if (ex->rejected[r] == 0) continue;
      std::printf("      rule[%zu] %-50s prunes %llu (first to reject %llu)\n", r, spec.Written(spec.constraints[r]).c_str(),
                  static_cast<unsigned long long>(ex->rejected[r]),
                  static_cast<unsigned long long>(ex->first_rejecting[r]));
    }
    if (ex->legal == 0 && ex->raw > 0) {
      bool named = false;
      for (size_t r = 0; r < spec.constraints.size(); ++r) {
        if (ex->rejected[r] != ex->raw) continue;
        std::printf("      the space is empty: rule[%zu] '%s' rejects every config here\n", r,
                    spec.constraints[r].c_str());
        named = true;
      }
      if (!named) std::printf("      the space is empty: no rule alone empties it; the rules above do together\n");
    }
    ok &= CheckShapes(spec, args, d);
  }
  return ok;
}

// Prints one compile's (or build's) outcome, with the whole log on failure.
bool Report(const std::string& what, const CompiledKernel& k) {
  if (k.failure == FailureClass::kNone && k.image.empty()) {
    std::printf("  %-60s ok (%.2f s)\n", what.c_str(), k.compile_seconds);
    return true;
  }
  if (k.failure == FailureClass::kNone) {
    std::printf("  %-60s ok (%d registers, %lld B static smem, %.2f s)\n", what.c_str(), k.resources.registers,
                static_cast<long long>(k.resources.static_smem_bytes), k.compile_seconds);
    return true;
  }
  std::printf("  %-60s %s: %s\n", what.c_str(), FailureClassName(k.failure), k.failure_message.c_str());
  if (!k.log.empty()) std::printf("%s\n", k.log.c_str());
  return false;
}

// A program op: its build command on a sample of configs (or all), in a
// scratch folder, as a worker would run it. Nothing is measured.
bool CheckBuilds(const OpSpec& spec, const OpCheckArgs& args) {
  if (spec.program->build.empty()) {
    std::printf("build: none ([program] has no build command)\n");
    return true;
  }
  char scratch[] = "/tmp/tunefarm-op-check-XXXXXX";
  if (!mkdtemp(scratch)) {
    std::printf("build: cannot create a scratch folder: %s\n", std::strerror(errno));
    return false;
  }
  std::printf("build ([program] build), %s per dtype, in %s:\n",
              args.all ? "every legal config" : ("a sample of " + std::to_string(args.sample)).c_str(), scratch);
  ProgramBackendOptions options;
  options.work_dir = scratch;
  options.allowed = true;
  const DeviceInfo& device = KnownGpus().front();
  auto backend = MakeProgramBackend(device, "op-check", options);
  auto configs = EnumerateConfigs(spec, device);
  if (!configs.ok()) {
    std::printf("  %s\n", configs.status().message().c_str());
    return false;
  }
  bool ok = true;
  size_t built = 0, failed = 0;
  for (const std::string& dtype : spec.dtypes) {
    for (const Config& c : args.all ? *configs : Sample(*configs, size_t(std::max(1, args.sample)))) {
      const bool passed = Report(dtype + " " + c.Canonical(), backend->Compile(spec, dtype, c));
      ok &= passed;
      ++built;
      failed += passed ? 0 : 1;
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(scratch, ec);
  std::printf("%zu configs built, %zu failed\n", built, failed);
  return ok;
}

#ifdef TUNEFARM_WITH_CUDA

bool CheckCompiles(const OpSpec& spec, const OpCheckArgs& args) {
  std::printf("compile (NVRTC %s), %s per dtype and architecture, and the reference:\n",
              NvrtcVersionString().c_str(), args.all ? "every legal config" : ("a sample of " +
                                                                              std::to_string(args.sample)).c_str());
  bool ok = true;
  size_t compiled = 0, failed = 0;
  for (std::string arch : args.archs) {
    // An op that needs the architecture-specific features gets the "a" target.
    if (spec.arch_specific && arch.back() != 'a' && arch >= "sm_90") arch += "a";
    DeviceInfo target;  // the spaces' limits: a known GPU of this architecture, else the largest
    for (const DeviceInfo& d : KnownGpus()) {
      const std::string a = "sm_" + std::to_string(d.cc_major) + std::to_string(d.cc_minor);
      if (arch.rfind(a, 0) == 0 && target.model.empty()) target = d;
    }
    if (target.model.empty()) target = KnownGpus().front();
    auto configs = EnumerateConfigs(spec, target);
    if (!configs.ok()) {
      std::printf("  %s: %s\n", arch.c_str(), configs.status().message().c_str());
      ok = false;
      continue;
    }
    for (const std::string& dtype : spec.dtypes) {
      if (spec.check.mode != CheckSpec::Mode::kSkip) {
        const char* what = spec.check.mode == CheckSpec::Mode::kChecker ? " checker " : " reference ";
        ok &= Report(arch + " " + dtype + what + spec.check.reference_kernel, CompileReference(spec, dtype, arch, ""));
      }
      for (const Config& c : args.all ? *configs : Sample(*configs, size_t(std::max(1, args.sample)))) {
        const CompiledKernel k = CompileConfig(spec, dtype, c, arch, "");
        const bool passed = Report(arch + " " + dtype + " " + c.Canonical(), k);
        ok &= passed;
        ++compiled;
        failed += passed ? 0 : 1;
      }
    }
  }
  std::printf("%zu configs compiled, %zu failed\n", compiled, failed);
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
  std::printf("op %s (%s): %zu params, dims %s, dtypes %s, %zu rules, %zu shape rules (rules that read dims)\n",
              spec->name.c_str(), args.dir.c_str(), spec->axes.size(), Join(spec->dims).c_str(),
              Join(spec->dtypes).c_str(), spec->constraints.size(), spec->shape_constraints.size());
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
    if (status->devices.empty()) std::printf("the farm at %s has no live worker\n", args.coordinator.c_str());
    models.insert(models.end(), status->devices.begin(), status->devices.end());
  }
  bool ok = CheckSpaces(*spec, args, models);
  if (spec->program) return CheckBuilds(*spec, args) && ok ? 0 : 1;
  auto roots = ParseIncludeRoots(args.include_roots);
  if (!roots.ok()) {
    std::fprintf(stderr, "tunefarm: --include-root: %s\n", roots.status().message().c_str());
    return 2;
  }
  if (!spec->include_dirs.empty()) std::printf("include folders (in the package): %s\n", Join(spec->include_dirs).c_str());
  if (!spec->include_roots.empty()) {
    // The headers a compile reads there are part of the kernel hash.
    auto digest = IncludeRootsDigest(*spec, *roots);
    std::printf("include roots: %s: %s\n", Join(spec->include_roots).c_str(),
                digest.ok() ? ("headers digest " + *digest).c_str() : digest.status().message().c_str());
    ok &= digest.ok();
  }
#ifdef TUNEFARM_WITH_CUDA
  SetIncludeRoots(*roots);
  ok &= CheckCompiles(*spec, args);
#else
  std::printf("compile: skipped: this tunefarm was built without NVRTC\n");
#endif
  return ok ? 0 : 1;
}

}  // namespace tune
