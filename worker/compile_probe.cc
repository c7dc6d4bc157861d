#include "compile_probe.h"

#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "measure/cuda/cuda_backend.h"
#include "opspec/op_definition.h"

namespace tune {
namespace {

class ProbedBackend final : public Backend {
 public:
  ProbedBackend(std::unique_ptr<Backend> sim, std::string cache_dir)
      : sim_(std::move(sim)), cache_dir_(std::move(cache_dir)) {}

  const DeviceInfo& device() const override { return sim_->device(); }
  std::string toolchain() const override { return sim_->toolchain(); }

  CompiledKernel Compile(const OpSpec& spec, const std::string& dtype, const Config& config) override {
    if (spec.program || spec.source_file.empty()) return sim_->Compile(spec, dtype, config);
    const std::string failed = Probe(spec, dtype);
    if (failed.empty()) return sim_->Compile(spec, dtype, config);
    CompiledKernel ck;
    ck.config = config;
    ck.config_id = config.Id();
    ck.failure = FailureClass::kCompileError;
    ck.failure_message = failed;
    return ck;
  }
  Result<std::string> HostDigest(const OpSpec& spec) override { return sim_->HostDigest(spec); }
  Status Prepare() override { return sim_->Prepare(); }
  void Plan(const OpSpec& spec, const std::string& dtype, const std::vector<Config>& configs,
            const std::vector<Shape>& shapes) override {
    sim_->Plan(spec, dtype, configs, shapes);
  }
  Measurement Measure(const OpSpec& spec, const std::string& dtype, const CompiledKernel& kernel, const Shape& shape,
                      const TimingPolicy& policy, double best_so_far_us) override {
    return sim_->Measure(spec, dtype, kernel, shape, policy, best_so_far_us);
  }
  Result<KernelProfile> ProfileKernel(const OpSpec& spec, const std::string& dtype, const CompiledKernel& kernel,
                                      const Shape& shape) override {
    return sim_->ProfileKernel(spec, dtype, kernel, shape);
  }

 private:
  // "" when the op and dtype compile (or fail only for a reason that is the
  // default config's own); else the failure, once per package and dtype.
  std::string Probe(const OpSpec& spec, const std::string& dtype) {
    const std::string key = KernelHash(spec, "") + '\0' + dtype;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = probed_.find(key); it != probed_.end()) return it->second;
    }
    const std::string arch = CudaArchFor(spec, device());
    std::vector<CompiledKernel> compiled = {CompileConfig(spec, dtype, spec.default_config, arch, cache_dir_)};
    if (spec.check.HasKernel()) compiled.push_back(CompileReference(spec, dtype, arch, cache_dir_));
    std::string failed;
    for (const CompiledKernel& k : compiled) {
      if (k.failure != FailureClass::kCompileError || !failed.empty()) continue;
      failed = "sim: does not compile for " + arch + " (NVRTC " + NvrtcVersionString() + ", the op's default config" +
               (k.config_id == "reference" ? "'s reference" : "") + "): " + k.failure_message;
    }
    std::lock_guard<std::mutex> lock(mu_);
    return probed_.emplace(key, failed).first->second;
  }

  std::unique_ptr<Backend> sim_;
  const std::string cache_dir_;
  std::mutex mu_;
  std::map<std::string, std::string> probed_;
};

}  // namespace

std::unique_ptr<Backend> WithCompileProbe(std::unique_ptr<Backend> sim, std::string cache_dir) {
  return std::make_unique<ProbedBackend>(std::move(sim), std::move(cache_dir));
}

}  // namespace tune
