// The runner (private to measure): Runner serves a backend's requests on one
// device, through the device layer (device/device_api.h), the same for every
// vendor. Its parts are listed in runner_device.h; a vendor's RunnerMain
// (measure/cuda/cuda_backend.h) opens its DeviceApi and Toolchain and hands
// them to a Runner.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "measure/runner/checker.h"
#include "measure/runner/problem_cache.h"
#include "measure/runner/runner_device.h"
#include "measure/runner/runner_protocol.h"
#include "measure/sampling.h"

namespace tune::runner {

constexpr int kWindowBatch = 256;           // the same in a contender's steady-state window
constexpr int64_t kDefaultMaxDynamicSmem = 48 * 1024;

struct Package {
  Status status;
  OpSpec spec;
};

class Runner {
 public:
  // Serves the requests read from `in_fd` on `device`, answering on
  // `out_fd`; `device_index` names it in log lines.
  Runner(DeviceApi& device, Toolchain& toolchain, int device_index, int in_fd, int out_fd)
      : api_(device), toolchain_(toolchain), index_(device_index), in_(in_fd), out_(out_fd) {
    const char* t = std::getenv("TUNEFARM_RUNNER_TRACE");
    trace_ = t && *t && std::string(t) != "0";
  }
  // Until EOF (0), a protocol error (kExitProtocol) or a lost device
  // (kExitSticky, after its answer).
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
  // TimingPolicy::energy_seconds: `seconds` of back-to-back launches on
  // `params` (no flush), the device's energy counter read around them,
  // within `wall_left`; fills m's energy_uj, power_w and power_limit_w
  // where the device has a counter.
  Failure MeasureEnergy(const MeasuredLaunch& launch, double seconds, double median_us, void** params,
                        double wall_left, Measurement* m);
  // A baseline request's launch (MeasureRequest::baseline): the library
  // opened, its product planned for the request's dims and checked against
  // the problem's buffers.
  Failure BaselineLaunch(const MeasureRequest& req, const OpSpec& spec, const LaunchPlan& plan,
                         MeasuredLaunch* launch, Measurement* m);

  // A kernel's parameters over `placements` placements of `problem`'s
  // buffers (ArgData::dev first, then Problem::spare): slots, pointers to
  // them, and one pointer array per placement. `encode_maps`: false for a
  // baseline library, which reads the buffers and no tensor map.
  struct BoundParams {
    std::vector<std::vector<ParamSlot>> slots;
    std::vector<std::vector<void*>> params;
    std::vector<void**> sets;
  };
  Failure BindParams(const OpSpec& spec, const LaunchPlan& plan, const Problem& problem, size_t placements,
                     bool encode_maps, BoundParams* out);
  // [check] default: the op's default config (req.default_image_key) runs
  // once on `problem`, and its outputs become the reference every config
  // is compared with (Checker::AdoptDefault). Its failure is every config's.
  Failure RunDefault(const MeasureRequest& req, const OpSpec& spec, const LaunchPlan& config_plan, Problem* problem);

  Status Send(const WireWriter& w) { return WriteFrame(out_, w.bytes()); }

  DeviceApi& api_;
  Toolchain& toolchain_;
  int index_;
  bool trace_ = false;  // TUNEFARM_RUNNER_TRACE: one line per request with the time of each phase
  int in_, out_;
  std::string cache_dir_;
  DeviceInfo device_;
  Stream stream_ = nullptr;
  DevicePtr flush_ = 0;
  size_t flush_bytes_ = 0;
  Function flush_l2_ = nullptr;  // the builtin read flush; nullptr: a fill
  bool hot_l2_ = false;          // the op's timing is hot: no flush before a sample
  Function hold_ = nullptr;      // the builtin spin that holds a hot batch's stream
  std::vector<Event> ev_start_, ev_stop_;

  // Made by Setup, once the device is known.
  std::optional<RunnerDevice> device_ops_;
  std::optional<Checker> checker_;
  std::optional<ProblemCache> problems_;

  std::map<std::string, Package> packages_;
  DevicePtr builtin_stats_ = 0;  // the builtin kernels' results
  bool built_problem_ = false;     // the current request built its problem
  size_t placements_ = 1;          // of the current request's timing (trace)
  SamplingStop stopped_ = SamplingStop::kNo;  // why its sampling loop ended (trace)

  // [check] default: the default configs' cubins received, by image key,
  // loaded at their first use.
  struct DefaultKernel {
    std::string image;
    Image module = nullptr;
    Function function = nullptr;
  };
  static constexpr size_t kMaxDefaultKernels = 64;
  std::map<std::string, DefaultKernel> defaults_;

  std::string stored_key_;     // last cubin received (sent once per config)
  std::string stored_image_;
  std::string loaded_key_;     // cubin that module_ holds
  Image module_ = nullptr;
  Function function_ = nullptr;

  // The baseline library, opened at the first baseline request, its
  // workspace, and what it was last planned for ("dtype M N K").
  std::unique_ptr<device::BaselineLibrary> baseline_lib_;
  std::string baseline_error_;
  DevicePtr baseline_workspace_ = 0;
  std::string baseline_planned_;
};

// The descriptor a runner process answers on when the backend's channel is
// its stdout: a copy of it, with stdout sent to stderr so that nothing a
// library prints can corrupt the frames; -1 when that fails. Any other
// `out_fd` is returned as it is.
int FramesOut(int out_fd);

// Ends the process (kExitOrphaned) once its parent is gone: a vendor's
// RunnerMain calls it before serving.
void WatchParent();

// For a RunnerMain whose device did not open: answers the backend's init
// with `why`, so that the worker's line says it; returns kExitProtocol.
int AnswerUnopened(int in_fd, int out_fd, const std::string& why);

}  // namespace tune::runner
