// The runner process (private to measure/cuda): Runner serves the backend's
// requests on one device. Its parts are listed in runner_device.h.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "measure/cuda/checker.h"
#include "measure/cuda/cublaslt.h"
#include "measure/cuda/nvml.h"
#include "measure/cuda/problem_cache.h"
#include "measure/cuda/runner_device.h"
#include "measure/cuda/runner_protocol.h"
#include "measure/sampling.h"

namespace tune::cuda::runner {

constexpr int kWindowBatch = 256;           // the same in a contender's steady-state window
constexpr int64_t kDefaultMaxDynamicSmem = 48 * 1024;

struct Package {
  Status status;
  OpSpec spec;
};

class Runner {
 public:
  Runner(const Driver& d, int device_index, int in_fd, int out_fd)
      : d_(d), index_(device_index), in_(in_fd), out_(out_fd) {
    const char* t = std::getenv("TUNEFARM_RUNNER_TRACE");
    trace_ = t && *t && std::string(t) != "0";
  }
  int Serve();

 private:
  Status Setup();
  void HandlePackage(WireReader* r);
  // False when the runner must exit (sticky error).
  bool HandleMeasure(WireReader* r);
  Failure Measure(const MeasureRequest& req, const OpSpec& spec, const std::string& package_digest,
                  Measurement* m);

  Failure LoadImage(const MeasureRequest& req, const OpSpec& spec);
  // The loaded kernel's resources (into m->resources) and whether the
  // plan's block and shared memory fit them.
  Failure KernelLimits(const MeasureRequest& req, const LaunchPlan& plan, Measurement* m);
  // Times the kernel; the samples rotate over `param_sets` (one per
  // placement of its buffers), the warm-up runs on the first.
  Failure Time(const MeasuredLaunch& launch, const TimingPolicy& policy, double best_so_far_us,
               double checked_seconds, const std::vector<void**>& param_sets, double config_start,
               Measurement* m);
  // A baseline request's launch (MeasureRequest::baseline): the library
  // opened, its product planned for the request's dims and checked against
  // the problem's buffers.
  Failure BaselineLaunch(const MeasureRequest& req, const OpSpec& spec, const LaunchPlan& plan,
                         MeasuredLaunch* launch, Measurement* m);

  Status Send(const WireWriter& w) { return WriteFrame(out_, w.bytes()); }

  const Driver& d_;
  int index_;
  bool trace_ = false;  // TUNEFARM_RUNNER_TRACE: one line per request with the time of each phase
  int in_, out_;
  std::string cache_dir_;
  DeviceInfo device_;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  CUdeviceptr flush_ = 0;
  size_t flush_bytes_ = 0;
  CUfunction flush_l2_ = nullptr;  // the builtin read flush; nullptr: a memset
  int max_threads_per_sm_ = 2048;
  std::vector<CUevent> ev_start_, ev_stop_;
  std::unique_ptr<Nvml> nvml_;

  // Made by Setup, once the device is known.
  std::optional<RunnerDevice> device_ops_;
  std::optional<Checker> checker_;
  std::optional<ProblemCache> problems_;

  std::map<std::string, Package> packages_;
  CUdeviceptr builtin_stats_ = 0;  // the builtin kernels' results
  bool built_problem_ = false;     // the current request built its problem
  size_t placements_ = 1;          // of the current request's timing (trace)
  SamplingStop stopped_ = SamplingStop::kNo;  // why its sampling loop ended (trace)

  std::string stored_key_;     // last cubin received (sent once per config)
  std::string stored_image_;
  std::string loaded_key_;     // cubin that module_ holds
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;

  // The baseline library, opened at the first baseline request, its
  // workspace, and what it was last planned for ("dtype M N K").
  std::unique_ptr<CublasLt> cublaslt_;
  std::string cublaslt_error_;
  CUdeviceptr baseline_workspace_ = 0;
  std::string baseline_planned_;
};

}  // namespace tune::cuda::runner
