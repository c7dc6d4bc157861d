// CudaBackend: compiles in the caller's thread, measures through a runner
// process that it restarts whenever the process dies or hangs.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "base/clock.h"
#include "measure/cuda/nvrtc_compile.h"
#include "measure/runner/runner_client.h"
#include "measure/runner/runner_process.h"
#include "measure/cuda/cuda_backend.h"
#include "base/target.h"

namespace tune {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxLogInMessage = 8000;

std::string Clip(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n) + "\n[log clipped]"; }

// One config for `device`: what a CUDA backend and a sim backend that
// compiles for real (NvrtcSimCompiler) both do.
CompiledKernel CompileFor(const OpSpec& spec, const std::string& dtype, const Config& config, const DeviceInfo& device,
                          const std::string& cache_dir) {
  return CompileConfig(spec, dtype, config, CudaArchFor(spec, device), cache_dir);
}

Result<std::string> HostDigestOf(const OpSpec& spec) {
  if (spec.include_roots.empty()) return std::string();
  return IncludeRootsDigest(spec, cuda::ConfiguredIncludeRoots());
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(const DeviceInfo& device, const CudaBackendOptions& opts)
      : device_(device), opts_(opts), arch_suffixless_(TargetOf(device).arch), runner_(ClientOptions(device, opts)) {}

  const DeviceInfo& device() const override { return device_; }
  std::string toolchain() const override { return NvrtcVersionString(); }

  CompiledKernel Compile(const OpSpec& spec, const std::string& dtype, const Config& config) override {
    return CompileFor(spec, dtype, config, device_, opts_.cache_dir);
  }

  Result<std::string> HostDigest(const OpSpec& spec) override { return HostDigestOf(spec); }

  Status Prepare() override { return runner_.EnsureReady(); }

  Measurement Measure(const OpSpec& spec, const std::string& dtype, const CompiledKernel& kernel,
                      const Shape& shape, const TimingPolicy& policy, double best_so_far_us) override;

  Result<KernelProfile> ProfileKernel(const OpSpec& spec, const std::string& dtype, const CompiledKernel& kernel,
                                      const Shape& shape) override;

  CudaRunnerStats stats() const { return runner_.stats(); }

 private:
  static runner::RunnerClientOptions ClientOptions(const DeviceInfo& device, const CudaBackendOptions& opts) {
    runner::RunnerClientOptions o;
    o.exe = opts.runner_exe;
    o.args = opts.runner_args;
    o.args.push_back("--device");
    o.args.push_back(std::to_string(device.index));
    o.device_label = "GPU " + std::to_string(device.index);
    o.device_name = device.name;
    o.cache_dir = opts.cache_dir;
    o.include_roots = cuda::ConfiguredIncludeRoots();
    o.startup_timeout_seconds = opts.startup_timeout_seconds;
    o.exit_wait_seconds = opts.exit_wait_seconds;
    return o;
  }

  // [check] default: the op's default config compiled for this device, the
  // kernel measured when it is that config (fetched or compiled alike).
  const CompiledKernel& DefaultKernel(const OpSpec& spec, const std::string& dtype, const CompiledKernel& kernel) {
    const std::string key = kernel.kernel_hash + "/" + dtype + "/" + kernel.arch;
    auto it = defaults_.find(key);
    if (it != defaults_.end()) return it->second;
    if (defaults_.size() >= 64) defaults_.clear();
    CompiledKernel def = kernel.config.Id() == spec.default_config.Id() && !kernel.image.empty()
                             ? kernel
                             : Compile(spec, dtype, spec.default_config);
    return defaults_.emplace(key, std::move(def)).first->second;
  }

  DeviceInfo device_;
  CudaBackendOptions opts_;
  std::string arch_suffixless_;
  runner::RunnerClient runner_;
  std::map<std::string, CompiledKernel> defaults_;  // DefaultKernel's, by kernel hash, dtype and arch
};

Measurement CudaBackend::Measure(const OpSpec& spec, const std::string& dtype, const CompiledKernel& kernel,
                                 const Shape& shape, const TimingPolicy& policy, double best_so_far_us) {
  Measurement m;
  m.gpu_model = device_.model;
  m.op = spec.name;
  m.dtype = dtype;
  m.shape = shape.Canonical();
  m.kernel_hash = kernel.kernel_hash;
  m.config_id = kernel.config_id;
  m.config = kernel.config;
  m.backend = "cuda";
  m.device_name = device_.name;
  m.driver_version = device_.driver_version;
  m.nvrtc_version = device_.nvrtc_version.empty() ? NvrtcVersionString() : device_.nvrtc_version;
  m.unix_time = NowUnixSeconds();
  m.resources = kernel.resources;
  m.baseline = kernel.baseline;

  if (kernel.failure != FailureClass::kNone) {
    std::string msg = kernel.failure_message;
    if (!kernel.log.empty()) msg += "\n" + Clip(kernel.log, kMaxLogInMessage);
    return Failed(m, kernel.failure, msg);
  }
  if (kernel.image.empty() && kernel.baseline.empty())
    return Failed(m, FailureClass::kLaunchError, "compiled kernel has no cubin");
  if (kernel.baseline.empty() && kernel.arch.rfind(arch_suffixless_, 0) != 0) {
    return Failed(m, FailureClass::kLaunchError,
                "cubin is for " + kernel.arch + ", device " + device_.name + " needs " + arch_suffixless_);
  }

  runner::MeasureRequest req;
  req.dtype = dtype;
  req.config = kernel.config;
  req.config_id = kernel.config_id;
  req.shape = shape;
  req.image_key = kernel.kernel_hash + "/" + kernel.config_id + "/" + dtype + "/" + kernel.arch;
  req.baseline = kernel.baseline;
  runner::RunnerImages images;
  if (kernel.baseline.empty()) images.image = &kernel.image;
  if (spec.check.mode == CheckSpec::Mode::kDefault) {
    const CompiledKernel& def = DefaultKernel(spec, dtype, kernel);
    if (def.failure != FailureClass::kNone) {
      return Failed(m, FailureClass::kCompileError,
                  "the default config " + spec.default_config.Canonical() +
                      " (what [check] default compares with) does not compile; no config can be checked: " +
                      def.failure_message);
    }
    req.default_image_key = def.kernel_hash + "/" + def.config_id + "/" + dtype + "/" + def.arch;
    images.default_image = &def.image;
  }
  req.compile_resources = kernel.resources;
  req.policy = policy;
  req.best_so_far_us = best_so_far_us;
  return runner_.Measure(spec, std::move(req), images, policy.new_runner, std::move(m));
}

}  // namespace

namespace {

// Nsight Compute's command line tool, or "" when this host has none.
std::string FindNcu() {
  if (const char* env = std::getenv("TUNEFARM_NCU"); env && *env) return env;
  if (const char* path = std::getenv("PATH")) {
    std::string dirs = path;
    for (size_t start = 0; start <= dirs.size();) {
      size_t end = dirs.find(':', start);
      if (end == std::string::npos) end = dirs.size();
      const fs::path cand = fs::path(dirs.substr(start, end - start)) / "ncu";
      if (end > start && ::access(cand.c_str(), X_OK) == 0) return cand.string();
      start = end + 1;
    }
  }
  const fs::path toolkit = fs::path(cuda::CudaIncludeDir()).parent_path() / "bin" / "ncu";
  return !cuda::CudaIncludeDir().empty() && ::access(toolkit.c_str(), X_OK) == 0 ? toolkit.string() : "";
}

// Standard output of argv (run without a shell), or an error with its exit.
// The child does only async-signal-safe work (the worker has threads): its
// argv is built before the fork, and it keeps no descriptor of the worker's.
Result<std::string> Output(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return Status::Error("pipe failed");
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    if (null >= 0) ::close(null);
    return Status::Error("fork failed");
  }
  if (pid == 0) {
    ::dup2(pipefd[1], 1);  // dup2 clears close-on-exec on 0, 1 and 2 only
    if (null >= 0) ::dup2(null, 2);
    ::close_range(3, ~0U, 0);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  if (null >= 0) ::close(null);
  ::close(pipefd[1]);
  std::string out;
  char buf[65536];
  for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out.append(buf, size_t(n));
  }
  ::close(pipefd[0]);
  int status = 0;
  pid_t waited;
  while ((waited = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  if (waited != pid) return Status::Error(argv[0] + ": lost track of its process");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Status::Error(argv[0] + " " + argv[1] + ": " + runner::DescribeWaitStatus(status));
  return out;
}

std::string ReadWhole(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

Result<KernelProfile> CudaBackend::ProfileKernel(const OpSpec& spec, const std::string& dtype,
                                                 const CompiledKernel& kernel, const Shape& shape) {
  const std::string ncu = FindNcu();
  if (ncu.empty()) return Status::Error("profiles: no Nsight Compute (ncu) on this host ($TUNEFARM_NCU, PATH, <toolkit>/bin)");
  std::error_code ec;
  const fs::path root = fs::path(opts_.cache_dir.empty() ? fs::temp_directory_path().string() : opts_.cache_dir) / "profiles";
  fs::create_directories(root, ec);
  std::string tmpl = (root / "run.XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) return Status::Error("profiles: cannot make a folder under " + root.string());
  const fs::path dir = tmpl;
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  } cleanup{dir};
  // The runner is this very program: ncu must be given its real path.
  const std::string self = opts_.runner_exe == "/proc/self/exe" ? fs::read_symlink("/proc/self/exe", ec).string()
                                                                : opts_.runner_exe;
  CudaBackendOptions o = opts_;
  o.runner_exe = ncu;
  o.runner_args = {"--clock-control", "none", "--target-processes", "all", "--kernel-name",
                   "regex:^" + spec.kernel + "$", "--launch-count", "1", "--section", "SpeedOfLight",
                   "--section", "Occupancy", "--section", "MemoryWorkloadAnalysis", "--section", "WarpStateStats",
                   "--section", "LaunchStats", "--export", (dir / "report").string(), "--force-overwrite",
                   "--log-file", (dir / "ncu.log").string(), self};
  for (const std::string& a : opts_.runner_args) o.runner_args.push_back(a);
  o.exit_wait_seconds = 120;  // the report is written when the runner exits
  {
    // Its first checked launch is the one profiled; one sample is enough.
    TimingPolicy once;
    once.warmup = 0;
    once.min_samples = 1;
    once.max_samples = 1;
    once.timeout_seconds = 600;  // the profiler replays the kernel once per pass
    CudaBackend profiled(device_, o);
    const Measurement m = profiled.Measure(spec, dtype, kernel, shape, once, 0);
    if (m.failure != FailureClass::kNone)
      return Status::Error("profiles: the run under ncu failed: " + m.failure_message + " (" +
                           Clip(ReadWhole(dir / "ncu.log"), 600) + ")");
  }
  const fs::path report = dir / "report.ncu-rep";
  if (!fs::exists(report, ec))
    return Status::Error("profiles: ncu wrote no report: " + Clip(ReadWhole(dir / "ncu.log"), 600));
  auto csv = Output({ncu, "--import", report.string(), "--csv", "--page", "raw"});
  if (!csv.ok()) return csv.status().WithPrefix("profiles: ");
  auto p = ParseNcuRawCsv(*csv);
  if (!p.ok()) return p.status().WithPrefix("profiles: ");
  auto version = Output({ncu, "--version"});
  p->tool = "ncu";
  if (version.ok()) {
    const size_t v = version->find("Version ");
    if (v != std::string::npos) p->tool += " " + version->substr(v + 8, version->find_first_of(" \n", v + 8) - v - 8);
  }
  p->report = ReadWhole(report);
  if (p->report.size() > kMaxProfileReportBytes) p->report.clear();  // the figures travel without it
  return p;
}

std::unique_ptr<Backend> MakeCudaBackend(const DeviceInfo& device, const CudaBackendOptions& opts) {
  return std::make_unique<CudaBackend>(device, opts);
}

SimCompiler NvrtcSimCompiler(const std::string& cache_dir) {
  SimCompiler c;
  c.toolchain = NvrtcVersionString();
  c.compile = [cache_dir](const OpSpec& spec, const std::string& dtype, const Config& config,
                          const DeviceInfo& device) { return CompileFor(spec, dtype, config, device, cache_dir); };
  c.host_digest = HostDigestOf;
  return c;
}

CudaRunnerStats GetCudaRunnerStats(const Backend& backend) {
  if (const auto* b = dynamic_cast<const CudaBackend*>(&backend)) return b->stats();
  return {};
}

}  // namespace tune
