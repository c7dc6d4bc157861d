// The real CUDA backend: NVRTC compiles, a per-GPU runner process checks and
// times on the device through the Driver API.
//
// Nothing here needs a GPU or a driver to start: libcuda.so.1 and
// libnvidia-ml.so.1 are opened at run time, so a binary built with this
// backend runs (and compiles cubins) on hosts without either. Only compiled
// when the CUDA toolkit was found (TUNEFARM_WITH_CUDA).
//
// Process model. A CUDA context poisoned by an illegal address is unusable
// for good, and a kernel that never returns can only be stopped by killing
// its process, so the device is never touched by the worker process itself.
// Each CudaBackend owns one runner process (RunnerMain) per device, started
// with fork+exec, talked to over a socket pair with length-prefixed frames.
// The backend enforces the per-config wall-clock limit from outside (SIGKILL
// on expiry), turns a runner that dies into a kCrash result, and starts a new
// runner for the next config.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "measure/backend.h"
#include "measure/runner/runner_client.h"
#include "tune/status.h"
#include "base/types.h"

namespace tune {

// Lists CUDA devices via the Driver API: name, normalised model
// (NormaliseGpuModel), compute capability, SMs, memory, L2, shared memory
// opt-in per block, max threads per block, clocks, driver and NVRTC versions.
// backend = "cuda". Returns an error (never crashes) when libcuda.so.1 cannot
// be opened, cuInit fails, or there is no device. Creates no context.
// Thread-safe.
Result<std::vector<DeviceInfo>> DiscoverCudaDevices();

// Version of the NVRTC linked into this binary, "13.0". It enters kernel
// hashes and cubin cache keys.
std::string NvrtcVersionString();

// Architecture a config of `spec` is compiled for on `device`: "sm_90", or
// "sm_90a" when spec.arch_specific and the device has arch-specific features
// (compute capability 9.0 and later).
std::string CudaArchFor(const OpSpec& spec, const DeviceInfo& device);

struct CudaBackendOptions {
  // On-disk cubin cache; empty = no cache. Created on first use. Shared
  // safely between threads and processes (entries are written atomically).
  std::string cache_dir;
  // The runner is started as: runner_exe runner_args... --device <index>.
  // That program must call RunnerMain(index, 0, 1).
  std::string runner_exe = "/proc/self/exe";
  std::vector<std::string> runner_args = {"runner"};
  // Wall-clock limit for a runner to come up (context creation) and for it to
  // build a problem (inputs + reference, first config of each shape/dtype).
  // The per-config limit is TimingPolicy::timeout_seconds.
  double startup_timeout_seconds = 120.0;
  // How long a runner may take to exit once its channel closes, before it
  // is killed.
  double exit_wait_seconds = 2.0;
};

// Profiles (Backend::ProfileKernel) run one checked launch of the config in
// a runner started under Nsight Compute (`ncu`: $TUNEFARM_NCU, else on
// PATH, else <toolkit>/bin/ncu) with the clocks left alone, and read its
// report (kept in the profile). An error names what is missing.

// A backend driving `device` (an entry of DiscoverCudaDevices()).
//  * Compile: CompileConfig for CudaArchFor(spec, device); thread-safe.
//  * Measure: one request to the runner process; not thread-safe. The runner
//    is started on the first Measure and restarted after a crash or timeout.
//    Every failure is a Measurement with failure set: kCompileError and
//    kResources from the compile are passed through; kResources (occupancy 0,
//    shared memory beyond the opt-in, too many threads), kLaunchError,
//    kCrash (sticky context error, runner died), kTimeout (no answer within
//    policy.timeout_seconds; the runner is killed), kWrongResult, kNan.
//    A config stopped early because it is clearly slower than best_so_far_us
//    stays valid (failure kNone) with fewer samples.
// The Measurement comes back with its key fields filled from the arguments
// (gpu_model, op, dtype, shape, kernel_hash, config_id) and backend "cuda";
// the caller may overwrite them.
std::unique_ptr<Backend> MakeCudaBackend(const DeviceInfo& device, const CudaBackendOptions& opts);

// The compile of a backend made by MakeCudaBackend for a sim backend
// (SimOptions::compiler): each config compiled by CompileConfig for
// CudaArchFor(spec, device) with `cache_dir` (empty: no cache), toolchain
// NvrtcVersionString(), HostDigest as the CUDA backend's. No GPU needed.
SimCompiler NvrtcSimCompiler(const std::string& cache_dir);

// Counters of a backend made by MakeCudaBackend (zeros for any other
// backend), for worker metrics and tests.
using CudaRunnerStats = runner::RunnerStats;
CudaRunnerStats GetCudaRunnerStats(const Backend& backend);

// Where this process's compiles find the include roots that ops name
// (`--include-root NAME=PATH`); runners started later are told them. Call
// before the first compile; not thread-safe with compiles.
void SetIncludeRoots(IncludeRoots roots);

// NVRTC only, no GPU needed: compiles one config of `spec` to a cubin for
// `arch` ("sm_80", "sm_90", "sm_90a"). Params arrive as -DNAME=value, the
// dtype as -DTUNE_DTYPE_F16 / _BF16 / _F32 and -DTUNE_T=<type> (cuda_fp16.h /
// cuda_bf16.h are pre-included so that TUNE_T names a declared type), then
// -std=c++17, -I for the op's include roots and the toolkit (and its CCCL
// folder), and the op's options; the op's files are the program's headers,
// those of its [op] include folders also by their path in the folder. An op
// with include roots gets the kernel hash KernelHashWithIncludes (and a
// compile error when a root is not set here). With a non-empty `cache_dir` the cubin is
// looked up first and stored after a successful compile (key: kernel hash,
// config id, dtype, arch, NVRTC version); from_cache says which happened.
// Resources (registers, static shared memory, local bytes) come from ptxas
// and are cached with the cubin. Never fails as a call: a compile error is
// failure = kCompileError with the log (kResources when ptxas rejects the
// kernel's shared memory or registers). Thread-safe.
CompiledKernel CompileConfig(const OpSpec& spec, const std::string& dtype, const Config& config,
                             const std::string& arch, const std::string& cache_dir);

// Whether CompileConfig(spec, dtype, config, arch, cache_dir) would take its
// cubin from the cache (a whole entry under the same key) rather than run
// NVRTC, without compiling: a worker asks its coordinator only for the
// images it lacks. False for an empty `cache_dir`, or an op whose include
// roots are not configured here. Thread-safe.
bool CubinCached(const OpSpec& spec, const std::string& dtype, const Config& config, const std::string& arch,
                 const std::string& cache_dir);

// Compiles the op's reference kernel for (dtype, arch): no params, the op's
// options without fast-math (the reference is the accurate side). Cached like
// configs under the id "reference". Thread-safe.
CompiledKernel CompileReference(const OpSpec& spec, const std::string& dtype, const std::string& arch,
                                const std::string& cache_dir);

// Entry point of the per-GPU runner process: serves requests read from in_fd
// and answers on out_fd until EOF, a protocol error, or a sticky CUDA error
// (reported to the backend first). When out_fd is 1, stdout is redirected to
// stderr so that stray prints cannot corrupt the protocol. The runner exits
// by itself when its parent process goes away. With TUNEFARM_RUNNER_TRACE=1
// in its environment it logs the time of each phase of every request to
// stderr. Returns the process exit code: 0 on EOF, 2 when it could not start
// or lost the protocol, 3 after a sticky CUDA error.
int RunnerMain(int device_index, int in_fd, int out_fd);

}  // namespace tune
