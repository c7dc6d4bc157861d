// The checker (checker.h).
#include "measure/runner/checker.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "measure/runner/host_data.h"

namespace tune::runner {

Failure Checker::RunOnce(const MeasuredLaunch& launch, Problem* p, void** params, double* seconds) {
  for (ArgData& a : p->args) {
    if (a.spec->kind != ArgSpec::Kind::kBuffer) continue;
    DeviceStatus st;
    if (a.pristine) {
      st = api_.CopyOnDevice(a.dev, a.pristine, a.bytes);  // undo what earlier configs wrote
    } else if (a.IsOutput()) {
      st = api_.Fill(a.dev, 0xFF, a.bytes);  // NaN in every float format
    }
    if (st.ok()) st = api_.Fill(a.dev + a.bytes, kGuardByte, kGuardBytes);
    if (!st.ok()) return dev_.FromDevice(st, "preparing " + a.spec->name);
  }
  const double t0 = NowSeconds();
  if (DeviceStatus st = launch(nullptr, params); !st.ok()) return dev_.FromDevice(st, "launch");
  if (DeviceStatus st = api_.Synchronize(); !st.ok()) return dev_.FromDevice(st, "checked run");
  *seconds = Seconds(t0);
  return CheckGuards(*p);
}

Failure Checker::AdoptDefault(const MeasuredLaunch& launch, Problem* p, void** params) {
  double seconds = 0;
  if (Failure f = RunOnce(launch, p, params, &seconds); f.failed()) return f;
  for (ArgData& a : p->args) {
    if (a.spec->kind != ArgSpec::Kind::kBuffer || !a.IsOutput()) continue;
    // Once per problem: read back and widened on the host.
    std::string bytes(a.bytes, '\0');
    if (DeviceStatus st = api_.CopyToHost(bytes.data(), a.dev, a.bytes); !st.ok())
      return dev_.FromDevice(st, "reading " + a.spec->name);
    const std::vector<float> wide = DecodeToFloat(a.dtype, bytes);
    const int64_t nans = std::count_if(wide.begin(), wide.end(), [](float v) { return std::isnan(v); });
    if (nans > 0)
      return Fail(FailureClass::kLaunchError, "it produced " + std::to_string(nans) + " NaNs in " + a.spec->name);
    if (DeviceStatus st = api_.CopyToDevice(a.ref, wide.data(), wide.size() * sizeof(float)); !st.ok())
      return dev_.FromDevice(st, "keeping " + a.spec->name);
  }
  return {};
}

Failure Checker::Check(const MeasuredLaunch& launch, const OpSpec& spec, const LaunchPlan& plan, Problem* p,
                       void** params, Measurement* m, double* seconds) {
  if (Failure f = RunOnce(launch, p, params, seconds); f.failed()) return f;
  if (spec.check.mode == CheckSpec::Mode::kSkip) {
    m->unchecked = true;
    return {};
  }
  if (spec.check.mode == CheckSpec::Mode::kChecker) return RunChecker(spec, plan, *p, params, m);
  m->against_default = spec.check.mode == CheckSpec::Mode::kDefault;
  const char* const against = m->against_default ? "the default config's" : "reference";

  Comparison c;
  const ArgData* first_arg = nullptr;
  int64_t first_index = -1;
  for (ArgData& a : p->args) {
    if (a.spec->kind != ArgSpec::Kind::kBuffer || !a.IsOutput()) continue;
    OutputCheck oc;
    if (Failure f = CompareOutput(a.dtype, a.dev, a.ref, a.elems, spec.check.atol, spec.check.rtol, &oc); f.failed())
      return f;
    c.elements += a.elems;
    c.mismatches += oc.mismatches;
    c.nans += oc.nans;
    c.max_abs_error = std::max(c.max_abs_error, oc.max_abs_error);
    if (!first_arg && oc.first_bad >= 0) {
      first_arg = &a;
      first_index = oc.first_bad;
    }
  }
  m->max_abs_error = c.max_abs_error;
  m->mismatch_ratio = c.MismatchRatio();
  auto where = [&] {
    if (!first_arg) return std::string();
    char buf[200];
    snprintf(buf, sizeof(buf), "first at %s[%lld]: %g vs %s %g", first_arg->spec->name.c_str(),
             static_cast<long long>(first_index), ElementAt(first_arg->dtype, first_arg->dev, first_index), against,
             ElementAt("f32", first_arg->ref, first_index));
    return std::string(buf);
  };
  if (c.nans > 0) {
    return Fail(FailureClass::kNan, std::to_string(c.nans) + " of " + std::to_string(c.elements) +
                                        " output elements are NaN (" + where() + ")");
  }
  if (m->mismatch_ratio > spec.check.max_mismatch) {
    char buf[200];
    snprintf(buf, sizeof(buf), "%lld of %lld elements outside atol %g + rtol %g (ratio %.3g > %.3g), max abs error %g; ",
             static_cast<long long>(c.mismatches), static_cast<long long>(c.elements), spec.check.atol, spec.check.rtol,
             m->mismatch_ratio, spec.check.max_mismatch, c.max_abs_error);
    return Fail(FailureClass::kWrongResult, buf + where());
  }
  m->check_passed = true;
  return {};
}

Failure Checker::CheckGuards(const Problem& p) {
  std::vector<unsigned char> guard(kGuardBytes);
  for (const ArgData& a : p.args) {
    if (a.spec->kind != ArgSpec::Kind::kBuffer) continue;
    if (DeviceStatus st = api_.CopyToHost(guard.data(), a.dev + a.bytes, kGuardBytes); !st.ok())
      return dev_.FromDevice(st, "reading the guard after " + a.spec->name);
    size_t changed = 0, first = 0;
    for (size_t i = 0; i < guard.size(); ++i)
      if (guard[i] != kGuardByte && changed++ == 0) first = i;
    if (changed > 0)
      return Fail(FailureClass::kWrongResult,
                  "wrote past the end of " + a.spec->name + " (" + std::to_string(a.bytes) + " bytes): " +
                      std::to_string(changed) + " of the " + std::to_string(kGuardBytes) +
                      " guard bytes after it changed, the first at +" + std::to_string(first));
  }
  return {};
}

const BuiltinKernels& Checker::Builtins(const std::string& dtype) {
  auto it = builtins_.find(dtype);
  if (it != builtins_.end()) return it->second;
  BuiltinKernels k;
  const device::CompiledImage ck = toolchain_.CompileBuiltins(dtype, dev_.info(), cache_dir_);
  if (ck.ok() && api_.LoadImage(ck.image, &k.module).ok()) {
    if (!api_.GetFunction(k.module, "tunefarm_compare", &k.compare).ok()) k.compare = nullptr;
    if (!api_.GetFunction(k.module, "tunefarm_fill", &k.fill).ok()) k.fill = nullptr;
    if (!api_.GetFunction(k.module, "tunefarm_flush_l2", &k.flush_l2).ok()) k.flush_l2 = nullptr;
    if (!api_.GetFunction(k.module, "tunefarm_hold", &k.hold).ok()) k.hold = nullptr;
  }
  if (!k.compare || !k.fill) {
    fprintf(stderr, "tunefarm runner[%d]: %s inputs and checks on the host: %s\n", index_, dtype.c_str(),
            ck.ok() ? "the builtin kernels did not load" : ck.error.c_str());
  }
  return builtins_.emplace(dtype, k).first->second;
}

Failure Checker::FillInput(const ArgData& a, const std::string& init_text, uint64_t seed, DevicePtr as_f32) {
  const std::string what = "arg " + a.spec->name;
  const BuiltinKernels& k = Builtins(a.dtype);
  if (!k.fill) {
    auto data = MakeInput(a.dtype, init_text, a.elems, seed);
    if (!data.ok()) return Fail(FailureClass::kLaunchError, what + ": " + data.status().message());
    return UploadInput(a, *data, as_f32);
  }
  auto init = ParseInit(init_text);
  if (!init.ok()) return Fail(FailureClass::kLaunchError, what + ": " + init.status().message());
  unsigned int nonzero = 0;
  if (DeviceStatus st = api_.CopyToDevice(stats_, &nonzero, sizeof(nonzero)); !st.ok())
    return dev_.FromDevice(st, what);
  DevicePtr out = a.pristine, stats = stats_;
  long long n = a.elems;
  unsigned long long s = seed;
  int kind = int(init->kind);
  double lo = init->a, hi = init->b;
  void* params[] = {&out, &as_f32, &n, &s, &kind, &lo, &hi, &stats};
  int64_t blocks = std::clamp<int64_t>((a.elems + kBuiltinBlock - 1) / kBuiltinBlock, 1, int64_t(dev_.info().num_sms) * 8);
  const int64_t grid[3] = {blocks, 1, 1}, block[3] = {kBuiltinBlock, 1, 1};
  if (DeviceStatus st = dev_.Launch(k.fill, grid, block, 0, nullptr, params); !st.ok()) return dev_.FromDevice(st, what + " fill");
  if (DeviceStatus st = api_.CopyToHost(&nonzero, stats_, sizeof(nonzero)); !st.ok())
    return dev_.FromDevice(st, what + " fill");
  // Zeros hide kernels that never read their inputs (MakeInput refuses them
  // too), unless the op asked for them.
  if (a.elems > 0 && !nonzero && !ZerosAllowed(*init))
    return Fail(FailureClass::kLaunchError, what + ": init '" + init_text + "' gives all zeros for " + a.dtype);
  return {};
}

Failure Checker::RunChecker(const OpSpec& spec, const LaunchPlan& plan, const Problem& p, void** params,
                            Measurement* m) {
  const std::string who = "checker " + spec.check.reference_kernel;
  unsigned long long bad = 0;
  if (DeviceStatus st = api_.CopyToDevice(stats_, &bad, sizeof bad); !st.ok()) return dev_.FromDevice(st, who);
  // The kernel's own arguments, then the counter of failing elements.
  std::vector<void*> args;
  for (size_t i = 0; i < spec.args.size(); ++i)
    if (spec.args[i].kind != ArgSpec::Kind::kTensorMap) args.push_back(params[i]);
  DevicePtr counter = stats_;
  args.push_back(&counter);
  auto failed = [&](const DeviceStatus& st, const char* step) {
    Failure f = dev_.FromDevice(st, step);
    f.message = who + ": " + f.message;
    return f;
  };
  if (DeviceStatus st = dev_.Launch(p.checker, plan.ref_grid, plan.ref_block, 0, nullptr, args.data()); !st.ok())
    return failed(st, "launch");
  if (DeviceStatus st = api_.Synchronize(); !st.ok()) return failed(st, "run");
  if (DeviceStatus st = api_.CopyToHost(&bad, stats_, sizeof bad); !st.ok()) return failed(st, "result");
  int64_t total = 0;
  for (const ArgData& a : p.args)
    if (a.spec->kind == ArgSpec::Kind::kBuffer && a.IsOutput()) total += a.elems;
  if (bad > static_cast<unsigned long long>(std::max<int64_t>(total, 1)))
    return Fail(FailureClass::kWrongResult, who + " counted " + std::to_string(bad) + " failures in " +
                                                std::to_string(total) + " output elements");
  m->mismatch_ratio = total > 0 ? double(bad) / double(total) : 0.0;
  if (m->mismatch_ratio > spec.check.max_mismatch) {
    char buf[160];
    snprintf(buf, sizeof buf, ": %llu of %lld output elements fail (ratio %.3g > %.3g)", bad,
             static_cast<long long>(total), m->mismatch_ratio, spec.check.max_mismatch);
    return Fail(FailureClass::kWrongResult, who + buf);
  }
  m->check_passed = true;
  return {};
}

Failure Checker::UploadInput(const ArgData& a, const std::string& bytes, DevicePtr as_f32) {
  const std::string what = "arg " + a.spec->name;
  if (bytes.size() != a.bytes) return Fail(FailureClass::kLaunchError, what + ": data of the wrong size");
  if (DeviceStatus st = api_.CopyToDevice(a.pristine, bytes.data(), a.bytes); !st.ok()) return dev_.FromDevice(st, what);
  if (as_f32) {
    std::vector<float> wide = DecodeToFloat(a.dtype, bytes);
    if (DeviceStatus st = api_.CopyToDevice(as_f32, wide.data(), wide.size() * sizeof(float)); !st.ok())
      return dev_.FromDevice(st, what);
  }
  return {};
}

Failure Checker::CompareOutput(const std::string& dtype, DevicePtr out, DevicePtr ref, int64_t elems,
                               double atol, double rtol, OutputCheck* oc) {
  if (elems <= 0) return {};
  const BuiltinKernels& k = Builtins(dtype);
  if (!k.compare) {
    std::string host_out(static_cast<size_t>(elems) * DTypeSize(dtype), '\0');
    std::vector<float> host_ref(static_cast<size_t>(elems));
    if (DeviceStatus st = api_.CopyToHost(host_out.data(), out, host_out.size()); !st.ok())
      return dev_.FromDevice(st, "reading the output");
    if (DeviceStatus st = api_.CopyToHost(host_ref.data(), ref, host_ref.size() * sizeof(float)); !st.ok())
      return dev_.FromDevice(st, "reading the reference");
    Comparison c;
    Compare(DecodeToFloat(dtype, host_out), host_ref, atol, rtol, &c);
    oc->mismatches = c.mismatches;
    oc->nans = c.nans;
    oc->max_abs_error = c.max_abs_error;
    oc->first_bad = c.first_bad;
    return {};
  }
  unsigned long long stats[4] = {0, 0, 0, ~0ull};
  if (DeviceStatus st = api_.CopyToDevice(stats_, stats, sizeof(stats)); !st.ok())
    return dev_.FromDevice(st, "compare set-up");
  long long n = elems;
  float a = float(atol), r = float(rtol);
  DevicePtr stats_ptr = stats_;
  void* params[] = {&out, &ref, &n, &a, &r, &stats_ptr};
  int64_t blocks = std::min<int64_t>((elems + kBuiltinBlock - 1) / kBuiltinBlock, int64_t(dev_.info().num_sms) * 8);
  const int64_t grid[3] = {blocks, 1, 1}, block[3] = {kBuiltinBlock, 1, 1};
  if (DeviceStatus st = dev_.Launch(k.compare, grid, block, 0, nullptr, params); !st.ok()) return dev_.FromDevice(st, "compare launch");
  if (DeviceStatus st = api_.CopyToHost(stats, stats_, sizeof(stats)); !st.ok())
    return dev_.FromDevice(st, "compare");
  oc->mismatches = int64_t(stats[0]);
  oc->nans = int64_t(stats[1]);
  uint32_t bits = uint32_t(stats[2] & 0xFFFFFFFFu);
  float maxerr;
  std::memcpy(&maxerr, &bits, sizeof(maxerr));
  oc->max_abs_error = maxerr;
  oc->first_bad = stats[3] == ~0ull ? -1 : int64_t(stats[3]);
  return {};
}

double Checker::ElementAt(const std::string& dtype, DevicePtr buf, int64_t index) {
  int width = DTypeSize(dtype);
  std::string bytes(size_t(width), '\0');
  if (index < 0 || !api_.CopyToHost(bytes.data(), buf + DevicePtr(index) * width, size_t(width)).ok())
    return std::nan("");
  std::vector<float> v = DecodeToFloat(dtype, bytes);
  return v.empty() ? std::nan("") : v[0];
}

}  // namespace tune::runner
