// The problem cache (problem_cache.h).
#include "measure/runner/problem_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "measure/runner/checker.h"
#include "measure/runner/host_data.h"

namespace tune::runner {

DeviceStatus ProblemCache::Alloc(size_t bytes, DevicePtr* p) {
  DeviceStatus st = api_.Alloc(bytes, p);
  if (st.error == DeviceError::kOutOfMemory && !problems_.empty()) {
    // Cached problems are a convenience; the one being built needs the memory.
    while (!problems_.empty()) EvictOldest();
    st = api_.Alloc(bytes, p);
  }
  return st;
}

void ProblemCache::ReleaseBuffers(Problem* p) {
  for (ArgData& a : p->args) {
    for (DevicePtr b : {a.dev, a.pristine, a.ref})
      api_.Free(b);
    a.dev = a.pristine = a.ref = 0;
  }
  for (const auto& set : p->spare)
    for (DevicePtr b : set)
      api_.Free(b);
  p->spare.clear();
}

Failure ProblemCache::NewPlacement(Problem* p, std::vector<DevicePtr>* set) {
  // Each placement after a spacer of a varying number of 2 MiB pages, so
  // that it lands on other physical pages than any earlier one.
  constexpr size_t kPage = size_t(2) << 20;
  DevicePtr spacer = 0;
  const size_t spacer_bytes = kPage * (1 + (moves_++ * 7919) % 31);
  if (!api_.Alloc(spacer_bytes, &spacer).ok()) spacer = 0;
  set->assign(p->args.size(), 0);
  Failure failed;
  bool short_of_memory = false;
  for (size_t i = 0; i < p->args.size() && !failed.failed() && !short_of_memory; ++i) {
    const ArgData& a = p->args[i];
    if (a.spec->kind != ArgSpec::Kind::kBuffer || a.dev == 0) continue;
    if (!api_.Alloc(a.bytes + kGuardBytes, &(*set)[i]).ok()) {
      (*set)[i] = 0;
      short_of_memory = true;
    } else if (a.IsInput()) {
      // Inputs keep their values; outputs are poisoned before every check.
      if (DeviceStatus st = api_.CopyOnDevice((*set)[i], a.pristine, a.bytes); !st.ok())
        failed = dev_.FromDevice(st, "placing arg " + a.spec->name);
    }
  }
  api_.Free(spacer);
  if (failed.failed() || short_of_memory) {
    for (DevicePtr b : *set)
      api_.Free(b);
    set->clear();
  }
  return failed;
}

Failure ProblemCache::PlaceBuffers(Problem* p, int placements, bool move) {
  size_t set_bytes = 0;
  for (const ArgData& a : p->args)
    if (a.spec->kind == ArgSpec::Kind::kBuffer && a.dev) set_bytes += a.bytes + kGuardBytes;
  size_t want = size_t(std::max(1, placements));
  if (set_bytes > 0) want = std::min(want, 1 + budget_ / 4 / set_bytes);
  auto release = [&](const std::vector<DevicePtr>& set) {
    for (DevicePtr b : set)
      api_.Free(b);
  };
  std::vector<std::vector<DevicePtr>> fresh;
  // New placements are allocated while the old ones are held, so that they
  // land elsewhere.
  const size_t keep = move ? 0 : std::min(want, 1 + p->spare.size());
  while (keep + fresh.size() < want) {
    std::vector<DevicePtr> set;
    if (Failure f = NewPlacement(p, &set); f.failed()) {
      for (const auto& s : fresh) release(s);
      return f;
    }
    if (set.empty()) break;
    fresh.push_back(std::move(set));
  }
  if (move && !fresh.empty()) {
    // The first new placement replaces the kernel's buffers.
    for (size_t i = 0; i < p->args.size(); ++i) {
      if (!fresh[0][i]) continue;
      api_.Free(p->args[i].dev);
      p->args[i].dev = fresh[0][i];
    }
    fresh.erase(fresh.begin());
    for (const auto& set : p->spare) release(set);
    p->spare.clear();
  }
  while (!p->spare.empty() && 1 + p->spare.size() + fresh.size() > want) {
    release(p->spare.back());
    p->spare.pop_back();
  }
  for (auto& set : fresh) p->spare.push_back(std::move(set));
  return {};
}

void ProblemCache::EvictOldest() {
  Problem& p = problems_.back();
  ReleaseBuffers(&p);
  bytes_ -= std::min(bytes_, p.device_bytes);
  problems_.pop_back();
}

Failure ProblemCache::GetReference(const OpSpec& spec, const std::string& digest, const std::string& dtype,
                             Reference** out) {
  std::string key = digest + "|" + dtype;
  auto it = references_.find(key);
  if (it == references_.end()) {
    Reference ref;
    const device::CompiledImage ck = toolchain_.CompileReference(spec, dtype, dev_.info(), cache_dir_);
    if (!ck.ok()) {
      std::string log = ck.log.size() > 4000 ? ck.log.substr(0, 4000) + "..." : ck.log;
      // Not the config's fault, but no config can be checked without it.
      ref.failure = Fail(FailureClass::kCompileError, ck.error + (log.empty() ? "" : "\n" + log));
    } else {
      DeviceStatus st = api_.LoadImage(ck.image, &ref.module);
      if (st.ok()) st = api_.GetFunction(ref.module, spec.check.reference_kernel, &ref.function);
      if (!st.ok()) {
        Failure f = dev_.FromDevice(st, "reference " + spec.check.reference_kernel);
        if (f.fatal) return f;
        ref.failure = f;
      }
    }
    it = references_.emplace(key, std::move(ref)).first;
  }
  *out = &it->second;
  return it->second.failure;
}

Failure ProblemCache::Get(const OpSpec& spec, const std::string& digest, const std::string& dtype,
                          const Shape& shape, const LaunchPlan& plan, Problem** out, bool* built_now) {
  *built_now = false;
  // Buffer sizes and scalars may depend on params, so they are part of the key.
  std::string key = digest + "|" + dtype + "|" + shape.Canonical();
  for (int64_t e : plan.arg_elems) key += "|" + std::to_string(e);
  for (double v : plan.scalar_values) key += "|" + std::to_string(v);
  for (auto it = problems_.begin(); it != problems_.end(); ++it) {
    if (it->key == key) {
      problems_.splice(problems_.begin(), problems_, it);
      *out = &problems_.front();
      return {};
    }
  }
  int64_t need = 0;
  for (size_t i = 0; i < spec.args.size(); ++i) {
    if (spec.args[i].kind != ArgSpec::Kind::kBuffer) continue;
    std::string dt = spec.args[i].dtype == "$dtype" ? dtype : spec.args[i].dtype;
    // Kernel buffer and its guard, plus the pristine copy of inputs and the
    // fp32 reference of outputs.
    need += int64_t(kGuardBytes) +
            plan.arg_elems[i] * (DTypeSize(dt) * (spec.args[i].dir == "out" ? 1 : 2) +
                                 (spec.args[i].dir == "in" ? 0 : int64_t(sizeof(float))));
  }
  while (!problems_.empty() && bytes_ + size_t(need) > budget_) EvictOldest();
  Problem built;
  built.key = key;
  Failure f = Build(spec, digest, dtype, shape, plan, &built);
  if (f.failed()) {
    ReleaseBuffers(&built);
    return f;
  }
  bytes_ += built.device_bytes;
  *built_now = true;
  problems_.push_front(std::move(built));
  *out = &problems_.front();
  return {};
}

Failure ProblemCache::Build(const OpSpec& spec, const std::string& digest, const std::string& dtype,
                           const Shape& shape, const LaunchPlan& plan, Problem* p) {
  // The reference kernel, or the checker kernel (compiled alike); nothing
  // for an op that skips its check. With [check] default the outputs'
  // fp32 references are filled later from the default config's run
  // (Runner::RunDefault).
  const CheckSpec::Mode mode = spec.check.mode;
  const bool compares = mode == CheckSpec::Mode::kReference || mode == CheckSpec::Mode::kDefault;
  Reference* ref = nullptr;
  if (spec.check.HasKernel()) {
    if (Failure f = GetReference(spec, digest, dtype, &ref); f.failed()) return f;
    if (mode == CheckSpec::Mode::kChecker) p->checker = ref->function;
  }

  std::vector<ParamSlot> slots(spec.args.size());

  p->args.resize(spec.args.size());
  for (size_t i = 0; i < spec.args.size(); ++i) {
    const ArgSpec& as = spec.args[i];
    ArgData& a = p->args[i];
    a.spec = &as;
    if (as.kind == ArgSpec::Kind::kTensorMap) continue;  // encoded per launch by the runner
    if (as.kind == ArgSpec::Kind::kScalar) {
      double v = plan.scalar_values[i];
      if (as.scalar_type == "i64") slots[i].i64 = std::llround(v);
      else if (as.scalar_type == "f32") slots[i].f32 = float(v);
      else slots[i].i32 = int32_t(std::llround(v));
      continue;
    }
    a.dtype = as.dtype == "$dtype" ? dtype : as.dtype;
    int width = DTypeSize(a.dtype);
    if (width == 0) return Fail(FailureClass::kLaunchError, "arg " + as.name + ": unknown dtype " + a.dtype);
    a.elems = plan.arg_elems[i];
    a.bytes = size_t(a.elems) * width;
    std::string what = "arg " + as.name + " (" + std::to_string(a.bytes) + " bytes)";
    if (DeviceStatus st = Alloc(a.bytes + kGuardBytes, &a.dev); !st.ok()) return dev_.FromDevice(st, what);
    p->device_bytes += a.bytes + kGuardBytes;
    slots[i].ptr = a.dev;
    if (a.IsOutput() && compares) {
      // The reference writes fp32; an inout buffer starts from the same
      // values (FillInput below), an output is poisoned like the kernel's
      // outputs: an element the reference never writes shows up as NaN below
      // instead of passing as zero.
      size_t ref_bytes = size_t(a.elems) * sizeof(float);
      if (DeviceStatus st = Alloc(ref_bytes, &a.ref); !st.ok()) return dev_.FromDevice(st, what + " reference");
      p->device_bytes += ref_bytes;
      if (!a.IsInput()) {
        if (DeviceStatus st = api_.Fill(a.ref, 0xFF, ref_bytes); !st.ok()) return dev_.FromDevice(st, what + " reference");
      }
      slots[i].ptr = a.ref;
    }
    if (a.IsInput()) {
      uint64_t seed = Fnv1a64(spec.name + "|" + as.name + "|" + a.dtype + "|" + shape.Canonical());
      if (DeviceStatus st = Alloc(a.bytes, &a.pristine); !st.ok()) return dev_.FromDevice(st, what);
      p->device_bytes += a.bytes;
      const DevicePtr as_f32 = a.IsOutput() ? a.ref : 0;
      if (as.init.rfind("file(", 0) == 0) {
        // Real data from the package (op_definition.h keeps the name without spaces).
        const std::string name = as.init.substr(5, as.init.size() - 6);
        auto file = spec.package.find(name);
        if (file == spec.package.end()) return Fail(FailureClass::kLaunchError, what + ": " + name + " is not in the package");
        auto bytes = NpyToBuffer(file->second, a.dtype, a.elems);
        if (!bytes.ok()) return Fail(FailureClass::kLaunchError, what + ": " + name + bytes.status().message().substr(4));
        if (Failure f = checker_.UploadInput(a, *bytes, as_f32); f.failed()) return f;
      } else if (Failure f = checker_.FillInput(a, as.init, seed, as_f32); f.failed()) {
        return f;
      }
      if (DeviceStatus st = api_.CopyOnDevice(a.dev, a.pristine, a.bytes); !st.ok()) return dev_.FromDevice(st, what);
    }
  }
  if (mode != CheckSpec::Mode::kReference) return {};
  std::vector<void*> params;
  for (size_t i = 0; i < slots.size(); ++i)
    if (spec.args[i].kind != ArgSpec::Kind::kTensorMap) params.push_back(&slots[i]);
  if (DeviceStatus st = dev_.Launch(ref->function, plan.ref_grid, plan.ref_block, 0, nullptr, params.data()); !st.ok()) {
    Failure f = dev_.FromDevice(st, "reference launch");
    f.message = "reference " + spec.check.reference_kernel + ": " + f.message;
    return f;
  }
  if (DeviceStatus st = api_.Synchronize(); !st.ok()) {
    Failure f = dev_.FromDevice(st, "reference run");
    f.message = "reference " + spec.check.reference_kernel + ": " + f.message;
    return f;
  }
  for (size_t i = 0; i < spec.args.size(); ++i) {
    ArgData& a = p->args[i];
    if (a.spec->kind != ArgSpec::Kind::kBuffer || !a.IsOutput()) continue;
    // The reference against itself: only its NaNs can fail.
    OutputCheck self;
    if (Failure f = checker_.CompareOutput("f32", a.ref, a.ref, a.elems, 0, 0, &self); f.failed()) return f;
    if (self.nans > 0) {
      return Fail(FailureClass::kLaunchError, "reference " + spec.check.reference_kernel + " produced " +
                                                  std::to_string(self.nans) + " NaNs in " + a.spec->name +
                                                  "; no config can be checked");
    }
  }
  return {};
}

}  // namespace tune::runner
