// The runner process's parts (private to measure/cuda): the Runner class and
// what its pieces share. One class, four files by concern:
//   runner.cc           the request loop, a measurement's steps, launches
//   runner_problems.cc  the problem cache: inputs, references, buffer placement
//   runner_check.cc     the correctness check against the reference
//   runner_timing.cc    the sampling loop (its stopping rule: tune/sampling.h)
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "measure/cuda/builtin_kernels.h"
#include "measure/cuda/cuda_driver.h"
#include "measure/cuda/nvml.h"
#include "measure/cuda/runner_protocol.h"
#include "tune/config_space.h"
#include "tune/cuda_backend.h"
#include "tune/sampling.h"

namespace tune::cuda::runner {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

constexpr int kWindowBatch = 256;           // the same in a contender's steady-state window
constexpr int64_t kDefaultMaxDynamicSmem = 48 * 1024;
constexpr int kExitSticky = 3;
constexpr int kExitProtocol = 2;
constexpr int kExitOrphaned = 4;

inline int DTypeWidth(const std::string& dtype) {
  if (dtype == "f32" || dtype == "i32") return 4;
  if (dtype == "f16" || dtype == "bf16") return 2;
  return 0;
}

// A failed step of a measurement: its class, its line, and whether the
// context is gone (the runner must exit after replying).
struct Failure {
  FailureClass cls = FailureClass::kNone;
  std::string message;
  bool fatal = false;
  bool failed() const { return cls != FailureClass::kNone; }
};

inline Failure Fail(FailureClass c, std::string message, bool fatal = false) { return Failure{c, std::move(message), fatal}; }

// One kernel parameter as the driver reads it: kernelParams[i] points at the
// start of the slot, which holds whichever type the kernel declares.
union ParamSlot {
  CUdeviceptr ptr;
  int32_t i32;
  int64_t i64;
  float f32;
};

struct ArgData {
  const ArgSpec* spec = nullptr;
  std::string dtype;        // resolved ("$dtype" -> the sweep's dtype)
  int64_t elems = 0;
  size_t bytes = 0;
  CUdeviceptr dev = 0;      // what the kernel gets
  CUdeviceptr pristine = 0; // initial contents of in/inout buffers, restored before each check
  CUdeviceptr ref = 0;      // reference output (fp32) of out/inout buffers
  bool IsInput() const { return spec->dir == "in" || spec->dir == "inout"; }
  bool IsOutput() const { return spec->dir == "out" || spec->dir == "inout"; }
};

// Inputs and reference outputs of one (op, dtype, shape): built once, kept on
// the device while memory allows (least recently used goes first).
struct Problem {
  std::string key;
  std::vector<ArgData> args;
  size_t device_bytes = 0;
  // Further placements of the kernel's buffers (TimingPolicy::placements):
  // per placement, one pointer per arg (0 for scalars). Not counted in
  // device_bytes.
  std::vector<std::vector<CUdeviceptr>> spare;
};

struct Package {
  Status status;
  OpSpec spec;
};

struct Reference {
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  Failure failure;
};

constexpr int kBuiltinBlock = 256;  // a multiple of 32: the compare reduction uses whole warps

struct BuiltinKernels {
  CUmodule module = nullptr;
  CUfunction compare = nullptr;  // nullptr: compare on the host instead
  CUfunction fill = nullptr;     // nullptr: draw inputs on the host instead
  CUfunction flush_l2 = nullptr; // nullptr: flush with a memset instead
};

// One output buffer's comparison, plus where it first failed.
struct OutputCheck {
  int64_t mismatches = 0, nans = 0, first_bad = -1;
  double max_abs_error = 0;
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

  Failure GetProblem(const OpSpec& spec, const std::string& digest, const std::string& dtype,
                     const Shape& shape, const LaunchPlan& plan, Problem** out);
  Failure BuildProblem(const OpSpec& spec, const std::string& digest, const std::string& dtype,
                       const Shape& shape, const LaunchPlan& plan, Problem* p);
  Failure GetReference(const OpSpec& spec, const std::string& digest, const std::string& dtype, Reference** out);
  Failure LoadImage(const MeasureRequest& req, const OpSpec& spec);
  void ReleaseBuffers(Problem* p);
  // Gives `p` `placements` placements of its kernel's buffers (as many as a
  // quarter of the problem budget holds): ArgData::dev and Problem::spare.
  // With `move` all of them are newly allocated (TimingPolicy::new_buffers).
  // Memory short: fewer placements, or the old ones.
  Failure PlaceBuffers(Problem* p, int placements, bool move);
  // Allocates one placement of `p`'s kernel buffers after a spacer, inputs
  // copied from their pristine values. Empty when memory is short.
  Failure NewPlacement(Problem* p, std::vector<CUdeviceptr>* set);
  void EvictOldestProblem();
  CuStatus Alloc(size_t bytes, CUdeviceptr* p);

  // Classifies a failed launch or synchronisation.
  Failure FromCu(const CuStatus& st, const std::string& what);
  bool ContextHealthy();
  CuStatus Launch(CUfunction f, const int64_t grid[3], const int64_t block[3], int64_t smem, CUstream s,
                  void** params);

  Failure Check(const OpSpec& spec, const LaunchPlan& plan, Problem* p, void** params, Measurement* m,
                double* checked_seconds);
  const BuiltinKernels& GetBuiltins(const std::string& dtype);
  // Fills an input buffer with its seeded draw (and, when as_f32 is set, a
  // float copy of the stored values), on the device where it can.
  Failure FillInput(const ArgData& a, const std::string& init, uint64_t seed, CUdeviceptr as_f32);
  // Compares `elems` elements of `out` (dtype) with the fp32 `ref`.
  Failure CompareOutput(const std::string& dtype, CUdeviceptr out, CUdeviceptr ref, int64_t elems, double atol,
                        double rtol, OutputCheck* oc);
  // Element `index` of a dtype buffer, as a float (for messages).
  double ElementAt(const std::string& dtype, CUdeviceptr buf, int64_t index);
  // Times the kernel; the samples rotate over `param_sets` (one per
  // placement of its buffers), the warm-up runs on the first.
  Failure Time(const TimingPolicy& policy, double best_so_far_us, double checked_seconds,
               const LaunchPlan& plan, const std::vector<void**>& param_sets, Clock::time_point config_start,
               Measurement* m);

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

  std::map<std::string, Package> packages_;
  std::map<std::string, Reference> references_;   // digest|dtype
  std::map<std::string, BuiltinKernels> builtins_;  // by dtype
  CUdeviceptr builtin_stats_ = 0;                   // the builtin kernels' results
  std::list<Problem> problems_;                   // front = most recent
  size_t problem_bytes_ = 0;
  bool built_problem_ = false;  // the current request built its problem
  size_t problem_budget_ = 0;
  size_t placements_ = 1;       // of the current request's timing (trace)
  SamplingStop stopped_ = SamplingStop::kNo;  // why its sampling loop ended (trace)
  uint64_t moves_ = 0;          // NewPlacement calls, which pick the spacer sizes

  std::string stored_key_;     // last cubin received (sent once per config)
  std::string stored_image_;
  std::string loaded_key_;     // cubin that module_ holds
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
};

}  // namespace tune::cuda::runner
