// Backend: how a worker compiles, checks and times configs on one device.
//
// Two implementations: `cuda` (NVRTC + Driver API, measurements of real
// hardware) and `sim` (a deterministic cost model per GPU model with
// injectable faults; every figure it produces is labelled backend="sim" and
// is never reported as a hardware result).
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "opspec/op_definition.h"
#include "base/profile.h"
#include "base/sampling_rule.h"  // generated: python/tunefarm/sampling_rule.json
#include "tune/status.h"
#include "base/types.h"

namespace tune {

// The outcome of compiling one config for one device architecture.
struct CompiledKernel {
  Config config;
  std::string config_id;
  std::string kernel_hash;
  // IncludeRootsDigest of the headers the compile read from include roots
  // (kernel_hash is then KernelHashWithIncludes); empty for other ops.
  std::string include_digest;
  std::string arch;            // "sm_90", "sm_90a", "sim"
  std::string image;           // cubin bytes (empty for sim)
  std::string log;             // compiler log (kept on failure)
  KernelResources resources;
  FailureClass failure = FailureClass::kNone;  // kCompileError / kResources
  std::string failure_message;
  bool from_cache = false;
  // Taken from the fleet's store (the coordinator served it), not compiled
  // by this host: its cubin is not sent back, so a worker never vouches
  // for an image it did not build.
  bool fetched = false;
  double compile_seconds = 0;
  // Not empty: no compiled config but the op's [baseline] library
  // ("cublaslt"), measured on the buffers `config` (the op's default)
  // sizes; the measurement's `baseline` names it (BaselineKernel).
  std::string baseline;
};

// The op's [baseline] as a kernel to Measure under `kernel_hash` (the key
// its figure goes beside). The op must declare a baseline.
CompiledKernel BaselineKernel(const OpSpec& spec, const std::string& kernel_hash);

// How long and how hard to time one (config, shape).
//
// The defaults of the fields that the stopping rule (measure/sampling.h) uses
// are python/tunefarm/sampling_rule.json, shared with tunefarm.harness.
// The longest energy window a policy may ask for (TimingPolicy::energy_seconds).
inline constexpr double kMaxEnergySeconds = 10;

struct TimingPolicy {
  int warmup = sampling_rule::kWarmup;  // untimed launches first
  int min_samples = sampling_rule::kMinSamples;
  int max_samples = sampling_rule::kMaxSamples;
  // Stop when the 95% CI half-width is within this share of the mean.
  double target_rel_ci = sampling_rule::kTargetRelCi;
  // ... or <= this for a config more than refine_within behind the best so
  // far: its figure only has to rank it, and timing it to 1% is most of a
  // sweep's device time on a power-capped GPU (where one sample varies by a
  // few percent), and varies from run to run with how many configs land
  // near the best early.
  double rank_rel_ci = sampling_rule::kRankRelCi;
  // Cap of timed work per (config, shape), as Triton's do_bench (rep=100
  // ms). A large kernel that misses the CI target within it is one whose
  // clocks drift while it is timed on a power-capped GPU: more samples
  // follow the drift rather than narrow the figure. With 0.5 s, 8192^3
  // GEMMs took 69-100 samples (0.2-0.3 s each) in the last refine units of
  // a sweep on four H200s while the other GPUs had nothing left.
  double max_seconds = sampling_rule::kMaxSeconds;
  // Stop after min_samples when the median is > factor * best so far. Such a
  // config cannot win (rerun noise is a few percent), so its figure only
  // needs to rank it; timing it to the CI target would be most of a sweep's
  // device time and, because how many samples that takes varies, make the
  // same sweep's length vary from run to run.
  double early_stop_factor = sampling_rule::kEarlyStopFactor;
  // Steady-state timing of contenders: a config whose median is within
  // refine_within of the best so far (or the first one timed) is timed again
  // for refine_seconds of back-to-back samples, and that window's median is
  // its figure. A GPU at its power limit runs the first milliseconds of a
  // kernel at a higher clock than it holds afterwards, and how much higher
  // depends on what ran before; the short timing that ranks a config lands
  // in that transient, the window does not (bench/gpu_h100.md). 0 = off:
  // the windows cost GPU time (a sweep of the gemm space takes about twice
  // as long with 0.2 s), so a sweep asks for them where stable figures
  // matter. The sim backend does not model clocks and ignores it.
  double refine_within = sampling_rule::kRefineWithin;
  double refine_seconds = 0;
  // Move the kernel's buffers to newly allocated device memory before this
  // timing. Where a buffer lies in physical memory moves a kernel's time by
  // a few percent, differently for each config, and stays put for a whole
  // run (the buffers of a shape are allocated once): MeasureTogether moves
  // them every round so that its figures average over placements rather
  // than carry one run's. The sim backend ignores it.
  bool new_buffers = false;
  // Time in a newly started runner process (a new CUDA context, module
  // loads, stream and buffers) rather than the current one. At 1024^3 on an
  // H100 every config of one runner process sat in the same one of two
  // states about 2% apart, whatever placements its buffers had, so that
  // reruns of a sweep disagreed by that much (bench/gpu_h100.md, seventh
  // session); MeasureTogether starts a runner every round so that its
  // figures average over processes. Costs the runner's start-up (a few
  // hundred ms). The sim backend ignores it.
  bool new_runner = false;
  // Rotate the timed samples over this many placements of the kernel's
  // buffers (the inputs copied to each): at 1024^3 on an H100 the window
  // medians of one config fall into clusters up to 6% apart, one per
  // placement, so a window on one placement carries that placement's
  // figure. With new_buffers every placement is new. The runner holds at
  // most as many as a quarter of its problem memory allows. The sim backend
  // ignores it.
  int placements = 1;
  // Leave the device idle this long (after the check run) before the timed
  // samples, so that they start at the clocks of an idle GPU instead of
  // those the previous kernel's power left behind. With a short time cap it
  // is a burst timing (ConfirmTiming::kBurst). The sim backend ignores it.
  double idle_seconds = 0;
  // Measure energy after the timing: this long of back-to-back calls on
  // one placement (no flush between them), the board's energy counter read
  // around them (Measurement::energy_uj, power_w). 0 = off: the window
  // costs device time. Only read, never a clock or limit set.
  double energy_seconds = 0;

  // A contender for the win: within refine_within of the best so far, or
  // the first config timed.
  bool Contender(double median_us, double best_so_far_us) const {
    return best_so_far_us <= 0 || median_us <= (1.0 + refine_within) * best_so_far_us;
  }
  // Clearly slower than the best so far: enough samples to rank it.
  bool StopsEarly(double median_us, double best_so_far_us) const {
    return early_stop_factor > 0 && best_so_far_us > 0 && median_us > early_stop_factor * best_so_far_us;
  }
  // The CI target of a config whose median so far is `median_us`.
  double TargetRelCi(double median_us, double best_so_far_us) const {
    return Contender(median_us, best_so_far_us) ? target_rel_ci : std::max(target_rel_ci, rank_rel_ci);
  }
  double timeout_seconds = 10.0;     // wall clock per config, enforced from outside
};

// `m` as a failure of class `c` saying `message` (its check not passed):
// what a backend returns for a config that did not measure.
inline Measurement Failed(Measurement m, FailureClass c, std::string message) {
  m.failure = c;
  m.failure_message = std::move(message);
  m.check_passed = false;
  return m;
}

class Backend {
 public:
  virtual ~Backend() = default;

  // The device this backend instance drives.
  virtual const DeviceInfo& device() const = 0;
  // Toolchain identity that enters the kernel hash: NVRTC version or "sim".
  virtual std::string toolchain() const = 0;

  // Compiles one config. Thread-safe: workers call it from a compile pool.
  // Never fails as a call: a compile error is a CompiledKernel with
  // failure == kCompileError and its log.
  virtual CompiledKernel Compile(const OpSpec& spec, const std::string& dtype,
                                 const Config& config) = 0;

  // What this host adds to `spec`'s kernel hash (OpSpec::HostDigested): the
  // include digest its rows of the op carry (Measurement::include_digest),
  // the same for every config; empty where it adds nothing. An error: the
  // host cannot say (and every config of the op fails to compile with it).
  // Thread-safe.
  virtual Result<std::string> HostDigest(const OpSpec& spec) {
    (void)spec;
    return std::string();
  }

  // Starts what the first Measure would otherwise start, and waits until it
  // is ready (the CUDA backend's runner process and its context), so that a
  // worker pays for it once when it starts rather than inside its first
  // config. Not to be called concurrently with Measure. A failure is not
  // final: the next Measure tries again.
  virtual Status Prepare() { return Status::OK(); }

  // A hint before a unit: the configs the next Measure calls take, in
  // order, and the shapes they take them on, so that a backend that compiles
  // when it measures (a program op's serve process) may start on them
  // ahead. Not to be called concurrently with Measure.
  virtual void Plan(const OpSpec& spec, const std::string& dtype, const std::vector<Config>& configs,
                    const std::vector<Shape>& shapes) {
    (void)spec;
    (void)dtype;
    (void)configs;
    (void)shapes;
  }

  // Checks and times a compiled config on one shape. Not thread-safe (one
  // device). `best_so_far_us` (0 = none) lets clearly slower configs stop
  // early. Failures (launch error, crash, timeout, wrong result, NaN) come
  // back as a Measurement with failure set; key fields are filled by the
  // caller.
  virtual Measurement Measure(const OpSpec& spec, const std::string& dtype,
                              const CompiledKernel& kernel, const Shape& shape,
                              const TimingPolicy& policy, double best_so_far_us) = 0;

  // Profiles one checked launch of a compiled config on `shape` (Nsight
  // Compute for the CUDA backend; the sim backend's profiles are simulated,
  // tool "sim"): figures and bottleneck class, key fields left to the
  // caller. Not to be called concurrently with Measure. An error says why a
  // backend cannot profile (no profiler on the host, counters not readable,
  // the run failed); the default backend cannot.
  virtual Result<KernelProfile> ProfileKernel(const OpSpec& spec, const std::string& dtype,
                                              const CompiledKernel& kernel, const Shape& shape) {
    (void)spec, (void)dtype, (void)kernel, (void)shape;
    return Status::Error("profiles: the " + device().backend + " backend cannot profile");
  }
};

// Times valid compiled configs of one op and dtype on `shape` together, in
// rounds for about `seconds` of wall time (at least three rounds): every
// round in a new runner process (TimingPolicy::new_runner), in a new order
// and on newly placed buffers (TimingPolicy::new_buffers), so that no config
// keeps one process, one place, one predecessor or one placement, and each
// figure averages over them rather than over one stretch of one run; the samples of a window rotate over 8 placements
// (TimingPolicy::placements). What a round times per config depends on `timing`:
//   kSustained: about 50 ms (wall time) of back-to-back samples;
//   kBurst: 10 ms of samples (at least 3), after the device has idled for
//     0.3 s (TimingPolicy::idle_seconds);
//   kAuto: a round of each first; then bursts if the median config was more
//     than 5% slower in its sustained window than in its burst, else
//     sustained windows (only the chosen kind's windows count).
// Returns one measurement per kernel, in order, with the timing used
// (Measurement::confirm_timing): as median_us the mean of the rounds'
// medians less the highest and lowest tenth (TrimmedMean), stdev and CI of
// the rounds' medians (so they include how much the device drifted), mean, min,
// max and samples over every sample. A config that fails in a round (each
// round checks it again) keeps that failure. What ranks a sweep's fastest
// configs at its end (confirm units).
std::vector<Measurement> MeasureTogether(Backend& backend, const OpSpec& spec, const std::string& dtype,
                                         const std::vector<CompiledKernel>& kernels, const Shape& shape,
                                         const TimingPolicy& policy, double seconds, ConfirmTiming timing);

// Faults the sim backend injects, each a probability per config decided by a
// hash of (config id, seed), so that the same config fails the same way on
// every run. Parsed from "compile=0.02,crash=0.01,hang=0.01,wrong=0.01,nan=0.01".
struct SimFaults {
  double compile_error = 0, crash = 0, hang = 0, wrong_result = 0, nan = 0;
  double slow_factor = 1.0;     // a slow node: every figure multiplied (and real time spent)
  double seconds_per_measure = 0;  // real time spent per Measure, to emulate GPU busy time
  static Result<SimFaults> Parse(const std::string& text);
};

// A real compiler for a sim backend (SimOptions::compiler): the CUDA
// backend's NVRTC compile (measure/cuda/cuda_backend.h NvrtcSimCompiler),
// handed in by a program that links both, so that this stage needs no CUDA.
struct SimCompiler {
  // Enters the kernel hash (Backend::toolchain) and the device's and rows'
  // nvrtc_version: "13.0".
  std::string toolchain;
  // Compiles one config for `device`, whose compute capability picks the
  // architecture, exactly as a CUDA backend on such a device would.
  // Thread-safe; never fails as a call (Backend::Compile).
  std::function<CompiledKernel(const OpSpec& spec, const std::string& dtype, const Config& config,
                               const DeviceInfo& device)>
      compile;
  // Backend::HostDigest of that compiler (the include roots' digest).
  std::function<Result<std::string>(const OpSpec& spec)> host_digest;
};

// Measured medians a sim backend answers with instead of its cost model
// (`--sim-truth`, filled from `tunefarm results --format csv` output by the
// CLI's reader): keyed by GPU model, op, dtype, shape and config, each in
// its canonical text. Immutable once shared; Find is thread-safe.
class SimTruth {
 public:
  // A later figure of the same key replaces an earlier one.
  void Add(const std::string& gpu_model, const std::string& op, const std::string& dtype, const Shape& shape,
           const Config& config, double median_us);
  // The median of the key, or 0 when the table has none.
  double Find(const std::string& gpu_model, const std::string& op, const std::string& dtype, const Shape& shape,
              const Config& config) const;
  size_t size() const { return median_us_.size(); }

 private:
  std::unordered_map<std::string, double> median_us_;
};

struct SimOptions {
  SimFaults faults;
  // Set: every config is compiled for real with it (image = the cubin, arch
  // = the simulated model's, its resources, compile time, errors with
  // their log; the kernel hash's toolchain is the compiler's), and only the
  // timing is simulated. Unset: Compile returns at once with no image
  // (arch "sim", toolchain "sim").
  std::optional<SimCompiler> compiler;
  // Set: a config that the table holds for the simulated model (its
  // "sim-<model>" name, or the model it stands for, "h100-80gb-hbm3") times
  // at the table's median; any other at the cost model's. Either way the
  // rows stay backend "sim".
  std::shared_ptr<const SimTruth> truth;
};

// A simulated device of the given model: "h100-sxm", "h200", "a100-sxm",
// "l40s", or any other name (a generic mid-range model). Every row it
// measures says backend "sim", its device name says simulated.
std::unique_ptr<Backend> MakeSimBackend(const std::string& gpu_model, int index, const SimOptions& options);
std::unique_ptr<Backend> MakeSimBackend(const std::string& gpu_model, int index,
                                        const SimFaults& faults);

}  // namespace tune
