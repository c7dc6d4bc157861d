// The checker (private to measure/runner): the builtin kernels per dtype
// (fill, compare, L2 flush: Toolchain::CompileBuiltins), seeded input fills,
// and the correctness check of a config against the problem's reference
// outputs. Where the builtin kernels do not compile, fills and comparisons
// run on the host instead.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "measure/runner/problem_cache.h"
#include "base/types.h"

namespace tune::runner {

constexpr int kBuiltinBlock = 256;  // a multiple of 32: the compare reduction uses whole warps

struct BuiltinKernels {
  Image module = nullptr;
  Function compare = nullptr;  // nullptr: compare on the host instead
  Function fill = nullptr;     // nullptr: draw inputs on the host instead
  Function flush_l2 = nullptr; // nullptr: flush with a fill instead
  Function hold = nullptr;     // nullptr: a hot batch is enqueued unheld
};

// One output buffer's comparison, plus where it first failed.
struct OutputCheck {
  int64_t mismatches = 0, nans = 0, first_bad = -1;
  double max_abs_error = 0;
};

class Checker {
 public:
  // `stats`: a device buffer of four 64-bit words the builtin kernels report
  // through; `index`: the device's index, for log lines.
  Checker(RunnerDevice& device, Toolchain& toolchain, std::string cache_dir, DevicePtr stats, int index)
      : dev_(device),
        api_(device.api()),
        toolchain_(toolchain),
        cache_dir_(std::move(cache_dir)),
        stats_(stats),
        index_(index) {}
  Checker(const Checker&) = delete;
  Checker& operator=(const Checker&) = delete;

  // Runs `launch` once on `p` (inputs restored, outputs poisoned, guards
  // filled) and compares every output with the reference. A changed guard
  // or a NaN fails; so do mismatches beyond spec.check.max_mismatch. Fills
  // m's error figures and check_passed; `*seconds` is the checked run's
  // wall time.
  Failure Check(const MeasuredLaunch& launch, const OpSpec& spec, const LaunchPlan& plan, Problem* p, void** params,
                Measurement* m, double* seconds);
  // [check] default: runs the default config's `launch` once on `p` as
  // Check runs a config and keeps its outputs, widened to fp32, as the
  // problem's reference (ArgData::ref). A NaN in them or a changed guard
  // fails: no config can be checked then.
  Failure AdoptDefault(const MeasuredLaunch& launch, Problem* p, void** params);
  // Fills an input buffer with its seeded draw (and, when as_f32 is set, a
  // float copy of the stored values), on the device where it can.
  Failure FillInput(const ArgData& a, const std::string& init, uint64_t seed, DevicePtr as_f32);
  // Fills an input buffer with `bytes` (its dtype's, a.bytes of them: a
  // file input's data), and `as_f32` as FillInput does.
  Failure UploadInput(const ArgData& a, const std::string& bytes, DevicePtr as_f32);
  // Compares `elems` elements of `out` (dtype) with the fp32 `ref`.
  Failure CompareOutput(const std::string& dtype, DevicePtr out, DevicePtr ref, int64_t elems, double atol,
                        double rtol, OutputCheck* oc);
  const BuiltinKernels& Builtins(const std::string& dtype);

 private:
  // Runs `launch` once on `p`: inputs restored, outputs poisoned, guards
  // filled before; guards compared after. `*seconds`: its wall time.
  Failure RunOnce(const MeasuredLaunch& launch, Problem* p, void** params, double* seconds);
  // [check] checker: the op's checker kernel on the kernel's arguments
  // after its run, counting failing elements into a device word.
  Failure RunChecker(const OpSpec& spec, const LaunchPlan& plan, const Problem& p, void** params, Measurement* m);
  // Each buffer's guard (problem_cache.h kGuardBytes) as it was filled.
  Failure CheckGuards(const Problem& p);
  // Element `index` of a dtype buffer, as a float (for messages).
  double ElementAt(const std::string& dtype, DevicePtr buf, int64_t index);

  RunnerDevice& dev_;
  DeviceApi& api_;
  Toolchain& toolchain_;
  const std::string cache_dir_;
  const DevicePtr stats_;
  const int index_;
  std::map<std::string, BuiltinKernels> builtins_;  // by dtype
};

}  // namespace tune::runner
