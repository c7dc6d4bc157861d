// The simulated GPU: a deterministic cost model per GPU model with noise and
// injectable faults. It exists for tests without a GPU, chaos tests and fleet
// scale studies. Every measurement it makes says backend = "sim" and its
// models are named "sim-<model>", so that no simulated figure can pass for a
// hardware result. Given a real compiler (SimOptions::compiler) it compiles
// every config for real, so that a farm's compile side (pool, cubin cache,
// images) runs as on GPUs while only the timing is simulated; given a
// ground-truth table, it times the configs the table holds at its figures.
#include <sodium.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <sstream>
#include <thread>

#include "measure/backend.h"
#include "opspec/config_space.h"
#include "base/known_gpus.h"
#include "measure/sampling.h"
#include "base/stats.h"

namespace tune {
namespace {

// How much faster the sim reads a problem that a hot L2 holds than DRAM
// (an H100: about 10 TB/s of L2 against 3.35 TB/s of HBM3).
constexpr double kSimL2Speedup = 3.0;


// Uniform [0,1) from a keyed hash: the same inputs give the same number in
// every process and run.
double Unit01(const std::string& key) {
  unsigned char out[8];
  crypto_generichash(out, sizeof out, reinterpret_cast<const unsigned char*>(key.data()),
                     key.size(), nullptr, 0);
  uint64_t v;
  std::memcpy(&v, out, sizeof v);
  return static_cast<double>(v >> 11) * (1.0 / 9007199254740992.0);
}

class SimBackend final : public Backend {
 public:
  SimBackend(const SimGpu& m, const std::string& model_key, int index, SimOptions options)
      : model_(m), faults_(options.faults), compiler_(std::move(options.compiler)), truth_(std::move(options.truth)) {
    device_ = *FindKnownGpu(m.known);
    device_.index = index;
    device_.name = m.name;
    device_.model = "sim-" + model_key;
    device_.backend = "sim";
    device_.sm_clock_mhz = 1700;
    device_.mem_clock_mhz = 2600;
    device_.power_limit_w = m.power_limit_w;
    device_.driver_version = "sim";
    // The toolchain of the kernel hash: the coordinator expects a device's
    // rows under OpHash(spec, its nvrtc_version).
    device_.nvrtc_version = toolchain();
  }

  const DeviceInfo& device() const override { return device_; }
  std::string toolchain() const override { return compiler_ ? compiler_->toolchain : "sim"; }

  Result<std::string> HostDigest(const OpSpec& spec) override {
    if (compiler_ && compiler_->host_digest) return compiler_->host_digest(spec);
    return std::string();
  }

  CompiledKernel Compile(const OpSpec& spec, const std::string& dtype,
                         const Config& config) override {
    // The real compile: its image, arch, resources, time and errors as a
    // GPU worker's; only the simulated compile faults are not drawn.
    if (compiler_) return compiler_->compile(spec, dtype, config, device_);
    CompiledKernel k;
    k.config = config;
    k.config_id = config.Id();
    k.kernel_hash = OpHash(spec, toolchain());
    k.arch = "sim";
    if (Fault("compile", k.config_id) < faults_.compile_error) {
      k.failure = FailureClass::kCompileError;
      k.failure_message = "simulated compile error";
      k.log = spec.source_file + "(1): error: simulated compile error for " + dtype;
      return k;
    }
    k.resources.registers = 32 + static_cast<int>(Fault("regs", k.config_id) * 200);
    k.resources.max_threads_per_block = 1024;
    k.resources.occupancy = 0.25 + 0.75 * Fault("occ", k.config_id);
    return k;
  }

  // Simulated figures, seeded per (model, config, shape) so that a rerun
  // reproduces them; never a reading of hardware (tool "sim").
  Result<KernelProfile> ProfileKernel(const OpSpec& spec, const std::string& dtype, const CompiledKernel& kernel,
                                      const Shape& shape) override {
    auto plan = PlanLaunch(spec, dtype, kernel.config, shape, device_);
    if (!plan.ok()) return plan.status();
    const std::string seed = device_.model + "|" + kernel.config_id + "|" + shape.Canonical() + "|profile|";
    KernelProfile p;
    p.tool = "sim";
    p.duration_us = ModelTimeUs(*plan, kernel.config_id, shape, spec.timing);
    p.memory_pct = 20 + 75 * Unit01(seed + "memory");
    p.compute_pct = 10 + 80 * Unit01(seed + "compute");
    p.occupancy_pct = 100 * kernel.resources.occupancy;
    p.dram_bytes = p.memory_pct / 100 * 2e12 * p.duration_us * 1e-6;
    p.stalls = {{"long_scoreboard", 5 + 20 * Unit01(seed + "long")}, {"wait", 1 + 3 * Unit01(seed + "wait")}};
    ClassifyBottleneck(&p);
    return p;
  }

  Measurement Measure(const OpSpec& spec, const std::string& dtype, const CompiledKernel& kernel,
                      const Shape& shape, const TimingPolicy& policy,
                      double best_so_far_us) override {
    Measurement m;
    m.backend = "sim";
    m.device_name = device_.name;
    m.nvrtc_version = toolchain();
    m.driver_version = "sim";
    m.resources = kernel.resources;
    m.sm_clock_mhz = device_.sm_clock_mhz;
    // A baseline is simulated as a config of its own: its efficiency is
    // drawn from its library's name.
    m.baseline = kernel.baseline;
    const std::string id = kernel.baseline.empty() ? kernel.config_id : "baseline|" + kernel.baseline;
    // A real compile's kernel is measured as the CUDA backend would take it.
    if (compiler_ && kernel.baseline.empty()) {
      if (kernel.failure != FailureClass::kNone) return Failed(m, kernel.failure, kernel.failure_message);
      if (kernel.image.empty()) return Failed(m, FailureClass::kLaunchError, "compiled kernel has no cubin");
    }
    if (faults_.seconds_per_measure > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(
          faults_.seconds_per_measure * std::max(1.0, faults_.slow_factor)));
    }
    if (Fault("crash", id) < faults_.crash) {
      return Failed(m, FailureClass::kCrash, "simulated crash: illegal memory access");
    }
    if (Fault("hang", id) < faults_.hang) {
      std::ostringstream msg;
      msg << "simulated hang: killed after " << policy.timeout_seconds << " s";
      return Failed(m, FailureClass::kTimeout, msg.str());
    }
    auto plan = PlanLaunch(spec, dtype, kernel.config, shape, device_);
    if (!plan.ok()) return Failed(m, FailureClass::kLaunchError, plan.status().message());
    if (plan->smem_bytes > device_.smem_per_block_optin) {
      return Failed(m, FailureClass::kResources, "dynamic shared memory above the opt-in limit");
    }
    if (Fault("nan", id) < faults_.nan) {
      m.mismatch_ratio = 1;
      return Failed(m, FailureClass::kNan, "simulated NaN in the output");
    }
    // [check] default: the default config's outputs are what the others
    // are compared with, so it is never the wrong one.
    const bool against_default = spec.check.mode == CheckSpec::Mode::kDefault;
    if (Fault("wrong", id) < faults_.wrong_result && !(against_default && id == spec.default_config.Id())) {
      m.mismatch_ratio = 0.5;
      m.max_abs_error = 3.0;
      m.against_default = against_default;
      return Failed(m, FailureClass::kWrongResult, std::string("simulated wrong result: 50% of elements off the ") +
                                                     (against_default ? "default config's" : "reference"));
    }

    // The ground truth's median where it has the config (a baseline is
    // never in it; its figures were timed cold), else the cost model's.
    const double truth_us = truth_ && kernel.baseline.empty() && spec.timing == L2Timing::kCold
                                ? TruthUs(spec.name, dtype, shape, kernel.config)
                                : 0;
    const double base = truth_us > 0 ? truth_us : ModelTimeUs(*plan, id, shape, spec.timing);
    // Samples in batches until the device's stopping rule says stop; the
    // simulated time of the samples counts against the time cap.
    std::vector<double> samples;
    SamplingProgress progress;
    for (SamplingStep step = NextSampling(policy, best_so_far_us, 0, progress); step.stop == SamplingStop::kNo;
         step = NextSampling(policy, best_so_far_us, 0, progress)) {
      for (int b = 0; b < step.batch; ++b) {
        // ~1% multiplicative noise, seeded so that a rerun reproduces it.
        const double u = Unit01(device_.model + "|" + id + "|" + shape.Canonical() + "|" +
                                std::to_string(samples.size()));
        samples.push_back(base * (1.0 + 0.02 * (u - 0.5)) * faults_.slow_factor);
        progress.timed_seconds += samples.back() * 1e-6;
      }
      progress.stats = ComputeStats(samples);
    }
    if (truth_us > 0 && progress.stats.median > 0) {
      // The noise moved the median: scaled back so that the row's median is
      // the table's (times a slow node's factor), its spread kept.
      const double scale = truth_us * faults_.slow_factor / progress.stats.median;
      for (double& v : samples) v *= scale;
      progress.stats = ComputeStats(samples);
    }
    SetFigures(progress.stats, &m);
    if (policy.energy_seconds > 0) {
      // The energy model: a board at its limit while a config runs, times a
      // share of it that differs from config to config (between 45% and
      // 95%: how hard its tiles drive the tensor cores and memory), so that
      // the config of least energy need not be the fastest.
      m.power_limit_w = model_.power_limit_w;
      m.power_w = model_.power_limit_w * (0.45 + 0.5 * Unit01("power|" + device_.model + "|" + id));
      m.energy_uj = m.power_w * m.median_us;
    }
    // An op that skips its check gets unchecked rows here as on a GPU.
    m.unchecked = spec.check.mode == CheckSpec::Mode::kSkip;
    m.check_passed = !m.unchecked;
    m.against_default = against_default;
    return m;
  }

 private:
  // The table's median of (this model, op, dtype, shape, config): under the
  // sim model's own name or the model it simulates; 0 when it has none.
  double TruthUs(const std::string& op, const std::string& dtype, const Shape& shape, const Config& config) const {
    const double own = truth_->Find(device_.model, op, dtype, shape, config);
    return own > 0 ? own : truth_->Find(model_.known, op, dtype, shape, config);
  }

  double Fault(const char* kind, const std::string& config_id) const {
    return Unit01(std::string(kind) + "|" + device_.model + "|" + config_id);
  }


  // Roofline with a per-(model, config) efficiency and wave quantisation, so
  // that the best config differs between models and between shapes.
  // A vendor library (a baseline, id "baseline|...") is a tuned one: near
  // the top of the configs' range, its tiles filling the waves, so that the
  // sim's farm-over-library ratios look like a GPU's (about 0.8-1.2x), not
  // like a random config's.
  // Timed hot, a problem that fits in L2 reads it at L2's bandwidth
  // (kSimL2Speedup times DRAM's) instead of DRAM's.
  double ModelTimeUs(const LaunchPlan& plan, const std::string& id, const Shape& shape, L2Timing timing) const {
    const bool library = id.rfind("baseline|", 0) == 0;
    const double u = Unit01("eff|" + device_.model + "|" + id);
    const double eff = library ? 0.8 + 0.15 * u : 0.25 + 0.7 * u;
    const double shape_fit = (library ? 0.95 : 0.85) + (library ? 0.05 : 0.15) * Unit01("fit|" + device_.model + "|" +
                                                                                      id + "|" + shape.Canonical());
    const double blocks = static_cast<double>(plan.grid[0]) * plan.grid[1] * plan.grid[2];
    const double waves = std::ceil(blocks / device_.num_sms);
    const double wave_util = library ? 1.0 : waves > 0 ? blocks / (waves * device_.num_sms) : 1.0;
    const double compute_us = plan.flops / (model_.tflops * 1e6 * eff * shape_fit * wave_util);
    const bool from_l2 = timing == L2Timing::kHot && plan.bytes <= double(device_.l2_bytes);
    const double gbps = model_.gbps * (from_l2 ? kSimL2Speedup : 1.0);
    const double memory_us = plan.bytes / (gbps * 1e3 * (0.5 + 0.5 * eff));
    return std::max(compute_us, memory_us) + 2.0;
  }

  SimGpu model_;
  SimFaults faults_;
  std::optional<SimCompiler> compiler_;
  std::shared_ptr<const SimTruth> truth_;
  DeviceInfo device_;
};

}  // namespace

Result<SimFaults> SimFaults::Parse(const std::string& text) {
  SimFaults f;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string::npos) return Status::Error("sim faults: expected name=value, got '" + item + "'");
    std::string name = item.substr(0, eq);
    double v = 0;
    try {
      size_t used = 0;
      v = std::stod(item.substr(eq + 1), &used);
      if (used != item.size() - eq - 1) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      return Status::Error("sim faults: '" + name + "' needs a number, got '" + item.substr(eq + 1) + "'");
    }
    if (name == "compile") f.compile_error = v;
    else if (name == "crash") f.crash = v;
    else if (name == "hang") f.hang = v;
    else if (name == "wrong") f.wrong_result = v;
    else if (name == "nan") f.nan = v;
    else if (name == "slow") f.slow_factor = v;
    else if (name == "busy") f.seconds_per_measure = v;
    else return Status::Error("sim faults: unknown fault '" + name +
                              "' (known: compile, crash, hang, wrong, nan, slow, busy)");
  }
  return f;
}

namespace {

std::string TruthKey(const std::string& gpu_model, const std::string& op, const std::string& dtype,
                     const Shape& shape, const Config& config) {
  return gpu_model + '\0' + op + '\0' + dtype + '\0' + shape.Canonical() + '\0' + config.Canonical();
}

}  // namespace

void SimTruth::Add(const std::string& gpu_model, const std::string& op, const std::string& dtype, const Shape& shape,
                   const Config& config, double median_us) {
  median_us_[TruthKey(gpu_model, op, dtype, shape, config)] = median_us;
}

double SimTruth::Find(const std::string& gpu_model, const std::string& op, const std::string& dtype,
                      const Shape& shape, const Config& config) const {
  auto it = median_us_.find(TruthKey(gpu_model, op, dtype, shape, config));
  return it == median_us_.end() ? 0 : it->second;
}

std::unique_ptr<Backend> MakeSimBackend(const std::string& gpu_model, int index, const SimOptions& options) {
  std::string key = gpu_model.rfind("sim-", 0) == 0 ? gpu_model.substr(4) : gpu_model;
  return std::make_unique<SimBackend>(FindSimGpu(key), key, index, options);
}

std::unique_ptr<Backend> MakeSimBackend(const std::string& gpu_model, int index,
                                        const SimFaults& faults) {
  SimOptions options;
  options.faults = faults;
  return MakeSimBackend(gpu_model, index, options);
}

}  // namespace tune
