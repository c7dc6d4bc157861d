// RunnerMain: the per-GPU process that checks and times configs.
//
// It owns the only CUDA context on its device. Everything that can poison or
// hang a context happens here, so that the worker only ever loses this
// process: a sticky error is reported and the process exits; a hang is ended
// by the backend's SIGKILL.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <memory>
#include <thread>

#include "cuda/builtin_kernels.h"
#include "cuda/cuda_driver.h"
#include "cuda/device_discovery.h"
#include "cuda/host_data.h"
#include "cuda/nvml.h"
#include "cuda/nvrtc_compile.h"
#include "cuda/runner_protocol.h"
#include "tune/config_space.h"
#include "tune/cuda_backend.h"
#include "tune/stats.h"

namespace tune {
namespace cuda {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

constexpr int kBatchMax = 32;               // samples queued per synchronisation
constexpr int kWindowBatch = 256;           // the same in a contender's steady-state window
constexpr int64_t kDefaultMaxDynamicSmem = 48 * 1024;
constexpr int kExitSticky = 3;
constexpr int kExitProtocol = 2;
constexpr int kExitOrphaned = 4;

int DTypeWidth(const std::string& dtype) {
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

Failure Fail(FailureClass c, std::string message, bool fatal = false) { return Failure{c, std::move(message), fatal}; }

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
  uint64_t moves_ = 0;          // NewPlacement calls, which pick the spacer sizes

  std::string stored_key_;     // last cubin received (sent once per config)
  std::string stored_image_;
  std::string loaded_key_;     // cubin that module_ holds
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
};

Status Runner::Setup() {
  auto info = DescribeDevice(d_, index_);
  if (!info.ok()) return info.status();
  device_ = *info;
  auto check = [](const CuStatus& st) { return st.ok() ? Status::OK() : Status::Error(st.message); };
  TUNE_RETURN_IF_ERROR(check(TUNE_CU(d_.cuDeviceGet(&dev_, index_))));
  TUNE_RETURN_IF_ERROR(check(TUNE_CU(d_.cuDevicePrimaryCtxRetain(&ctx_, dev_))));
  TUNE_RETURN_IF_ERROR(check(TUNE_CU(d_.cuCtxSetCurrent(ctx_))));
  TUNE_RETURN_IF_ERROR(check(TUNE_CU(d_.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING))));
  TUNE_RETURN_IF_ERROR(check(TUNE_CU(
      d_.cuDeviceGetAttribute(&max_threads_per_sm_, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, dev_))));
  // Reading twice the L2 between samples evicts whatever the previous sample
  // left there, so every sample starts from DRAM like a cold production call
  // (tunefarm_flush_l2 reads the zeros).
  flush_bytes_ = std::max<size_t>(2 * size_t(device_.l2_bytes), 8u << 20);
  TUNE_RETURN_IF_ERROR(check(TUNE_CU(d_.cuMemAlloc(&flush_, flush_bytes_))));
  TUNE_RETURN_IF_ERROR(check(TUNE_CU(d_.cuMemsetD8(flush_, 0, flush_bytes_))));
  TUNE_RETURN_IF_ERROR(check(TUNE_CU(d_.cuMemAlloc(&builtin_stats_, 4 * sizeof(unsigned long long)))));
  ev_start_.resize(kWindowBatch);
  ev_stop_.resize(kWindowBatch);
  for (int i = 0; i < kWindowBatch; ++i) {
    TUNE_RETURN_IF_ERROR(check(TUNE_CU(d_.cuEventCreate(&ev_start_[i], CU_EVENT_DEFAULT))));
    TUNE_RETURN_IF_ERROR(check(TUNE_CU(d_.cuEventCreate(&ev_stop_[i], CU_EVENT_DEFAULT))));
  }
  size_t free_bytes = 0, total_bytes = 0;
  TUNE_RETURN_IF_ERROR(check(TUNE_CU(d_.cuMemGetInfo(&free_bytes, &total_bytes))));
  // The rest stays free for the kernels' modules and for problems that do not
  // fit beside the cached ones.
  problem_budget_ = free_bytes / 2;
  std::string why;
  nvml_ = Nvml::Open(PciBusId(d_, index_), &why);
  if (!nvml_) fprintf(stderr, "tunefarm runner[%d]: no clock readings: %s\n", index_, why.c_str());
  return Status::OK();
}

int Runner::Serve() {
  auto first = ReadFrame(in_);
  if (!first.ok()) return first.status().message() == "eof" ? 0 : kExitProtocol;
  WireReader init(*first);
  if (init.Type() != MsgType::kInit) return kExitProtocol;
  uint32_t version = init.U32();
  cache_dir_ = init.Str();
  WireWriter hello(MsgType::kHello);
  hello.U32(kRunnerProtocolVersion);
  Status setup = version == kRunnerProtocolVersion
                     ? Setup()
                     : Status::Error("runner protocol " + std::to_string(kRunnerProtocolVersion) +
                                     ", backend speaks " + std::to_string(version));
  hello.U8(setup.ok() ? 1 : 0);
  hello.Str(setup.message());
  EncodeDeviceInfo(device_, &hello);
  if (!Send(hello).ok() || !setup.ok()) return kExitProtocol;

  for (;;) {
    auto frame = ReadFrame(in_);
    if (!frame.ok()) return frame.status().message() == "eof" ? 0 : kExitProtocol;
    WireReader r(*frame);
    switch (r.Type()) {
      case MsgType::kPackage:
        HandlePackage(&r);
        break;
      case MsgType::kMeasure:
        if (!HandleMeasure(&r)) return kExitSticky;
        break;
      default:
        fprintf(stderr, "tunefarm runner[%d]: unexpected message type\n", index_);
        return kExitProtocol;
    }
  }
}

void Runner::HandlePackage(WireReader* r) {
  std::string digest = r->Str();
  std::string origin = r->Str();
  OpPackage pkg;
  uint32_t n = r->U32();
  for (uint32_t i = 0; i < n && r->ok(); ++i) {
    std::string name = r->Str();
    pkg[name] = r->Str();
  }
  Package& p = packages_[digest];
  // Cached problems point into the parsed spec; a resent package keeps it.
  if (p.status.ok() && !p.spec.name.empty()) return;
  if (!r->ok()) {
    p.status = Status::Error("truncated op package");
    return;
  }
  auto spec = ParseOpSpec(pkg, origin);
  if (!spec.ok()) {
    p.status = spec.status();
    return;
  }
  p.spec = std::move(*spec);
  p.status = Status::OK();
}

bool Runner::HandleMeasure(WireReader* r) {
  MeasureRequest req = DecodeMeasureRequest(r);
  if (r->ok() && !req.image.empty()) {
    stored_key_ = req.image_key;
    stored_image_ = std::move(req.image);
  }
  Measurement m;
  Failure f;
  if (!r->ok()) {
    f = Fail(FailureClass::kCrash, "runner: truncated measure request", true);
  } else {
    auto it = packages_.find(req.package_digest);
    if (it == packages_.end()) {
      f = Fail(FailureClass::kLaunchError, "runner: op package " + req.package_digest + " was never sent");
    } else if (!it->second.status.ok()) {
      f = Fail(FailureClass::kLaunchError, "runner: op package: " + it->second.status.message());
    } else {
      try {
        f = Measure(req, it->second.spec, req.package_digest, &m);
      } catch (const std::exception& e) {
        // Runner state may be half-updated; a fresh process is the safe answer.
        f = Fail(FailureClass::kCrash, std::string("runner: exception: ") + e.what(), true);
      }
    }
  }
  if (f.failed()) {
    Measurement clean;
    clean.failure = f.cls;
    clean.failure_message = f.message;
    clean.resources = m.resources;
    clean.max_abs_error = m.max_abs_error;
    clean.mismatch_ratio = m.mismatch_ratio;
    m = std::move(clean);
  }
  WireWriter w(MsgType::kResult);
  EncodeMeasurement(m, &w);
  w.U8(f.fatal ? 1 : 0);
  Status sent = Send(w);
  if (f.fatal) fprintf(stderr, "tunefarm runner[%d]: exiting after: %s\n", index_, f.message.c_str());
  return sent.ok() && !f.fatal;
}

bool Runner::ContextHealthy() {
  if (d_.cuCtxSynchronize() != CUDA_SUCCESS) return false;
  return d_.cuMemsetD8(flush_, 0, 1) == CUDA_SUCCESS && d_.cuCtxSynchronize() == CUDA_SUCCESS;
}

Failure Runner::FromCu(const CuStatus& st, const std::string& what) {
  if (IsStickyError(st.code) || !ContextHealthy()) {
    return Fail(FailureClass::kCrash, what + ": " + st.message + " (context lost; runner restarts)", true);
  }
  if (st.code == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES || st.code == CUDA_ERROR_OUT_OF_MEMORY) {
    return Fail(FailureClass::kResources, what + ": " + st.message);
  }
  return Fail(FailureClass::kLaunchError, what + ": " + st.message);
}

CuStatus Runner::Launch(CUfunction f, const int64_t grid[3], const int64_t block[3], int64_t smem,
                        CUstream s, void** params) {
  for (int i = 0; i < 3; ++i) {
    if (grid[i] <= 0 || grid[i] > 0x7FFFFFFF || block[i] <= 0 || block[i] > 1024) {
      return CuStatus{CUDA_ERROR_INVALID_VALUE,
                      "launch geometry out of range: grid (" + std::to_string(grid[0]) + "," +
                          std::to_string(grid[1]) + "," + std::to_string(grid[2]) + ") block (" +
                          std::to_string(block[0]) + "," + std::to_string(block[1]) + "," +
                          std::to_string(block[2]) + ")"};
    }
  }
  return TUNE_CU(d_.cuLaunchKernel(f, unsigned(grid[0]), unsigned(grid[1]), unsigned(grid[2]), unsigned(block[0]),
                                   unsigned(block[1]), unsigned(block[2]), unsigned(smem), s, params, nullptr));
}

CuStatus Runner::Alloc(size_t bytes, CUdeviceptr* p) {
  CUresult r = d_.cuMemAlloc(p, std::max<size_t>(bytes, 1));
  if (r == CUDA_ERROR_OUT_OF_MEMORY && !problems_.empty()) {
    // Cached problems are a convenience; the one being built needs the memory.
    while (!problems_.empty()) EvictOldestProblem();
    r = d_.cuMemAlloc(p, std::max<size_t>(bytes, 1));
  }
  return CheckCu(r, "cuMemAlloc", __FILE__, __LINE__);
}

void Runner::ReleaseBuffers(Problem* p) {
  for (ArgData& a : p->args) {
    for (CUdeviceptr b : {a.dev, a.pristine, a.ref})
      if (b) d_.cuMemFree(b);
    a.dev = a.pristine = a.ref = 0;
  }
  for (const auto& set : p->spare)
    for (CUdeviceptr b : set)
      if (b) d_.cuMemFree(b);
  p->spare.clear();
}

Failure Runner::NewPlacement(Problem* p, std::vector<CUdeviceptr>* set) {
  // Each placement after a spacer of a varying number of 2 MiB pages, so
  // that it lands on other physical pages than any earlier one.
  constexpr size_t kPage = size_t(2) << 20;
  CUdeviceptr spacer = 0;
  const size_t spacer_bytes = kPage * (1 + (moves_++ * 7919) % 31);
  if (d_.cuMemAlloc(&spacer, spacer_bytes) != CUDA_SUCCESS) spacer = 0;
  set->assign(p->args.size(), 0);
  Failure failed;
  bool short_of_memory = false;
  for (size_t i = 0; i < p->args.size() && !failed.failed() && !short_of_memory; ++i) {
    const ArgData& a = p->args[i];
    if (a.spec->kind != ArgSpec::Kind::kBuffer || a.dev == 0) continue;
    if (d_.cuMemAlloc(&(*set)[i], std::max<size_t>(a.bytes, 1)) != CUDA_SUCCESS) {
      (*set)[i] = 0;
      short_of_memory = true;
    } else if (a.IsInput()) {
      // Inputs keep their values; outputs are poisoned before every check.
      if (CuStatus st = TUNE_CU(d_.cuMemcpyDtoD((*set)[i], a.pristine, a.bytes)); !st.ok())
        failed = FromCu(st, "placing arg " + a.spec->name);
    }
  }
  if (spacer) d_.cuMemFree(spacer);
  if (failed.failed() || short_of_memory) {
    for (CUdeviceptr b : *set)
      if (b) d_.cuMemFree(b);
    set->clear();
  }
  return failed;
}

Failure Runner::PlaceBuffers(Problem* p, int placements, bool move) {
  size_t set_bytes = 0;
  for (const ArgData& a : p->args)
    if (a.spec->kind == ArgSpec::Kind::kBuffer && a.dev) set_bytes += a.bytes;
  size_t want = size_t(std::max(1, placements));
  if (set_bytes > 0) want = std::min(want, 1 + problem_budget_ / 4 / set_bytes);
  auto release = [&](const std::vector<CUdeviceptr>& set) {
    for (CUdeviceptr b : set)
      if (b) d_.cuMemFree(b);
  };
  std::vector<std::vector<CUdeviceptr>> fresh;
  // New placements are allocated while the old ones are held, so that they
  // land elsewhere.
  const size_t keep = move ? 0 : std::min(want, 1 + p->spare.size());
  while (keep + fresh.size() < want) {
    std::vector<CUdeviceptr> set;
    if (Failure f = NewPlacement(p, &set); f.failed()) {
      for (const auto& s : fresh) release(s);
      return f;
    }
    if (set.empty()) break;
    fresh.push_back(std::move(set));
  }
  if (move && !fresh.empty()) {
    // The first new placement replaces the kernel's buffers.
    for (size_t i = 0; i < p->args.size(); ++i) {
      if (!fresh[0][i]) continue;
      d_.cuMemFree(p->args[i].dev);
      p->args[i].dev = fresh[0][i];
    }
    fresh.erase(fresh.begin());
    for (const auto& set : p->spare) release(set);
    p->spare.clear();
  }
  while (!p->spare.empty() && 1 + p->spare.size() + fresh.size() > want) {
    release(p->spare.back());
    p->spare.pop_back();
  }
  for (auto& set : fresh) p->spare.push_back(std::move(set));
  return {};
}

void Runner::EvictOldestProblem() {
  Problem& p = problems_.back();
  ReleaseBuffers(&p);
  problem_bytes_ -= std::min(problem_bytes_, p.device_bytes);
  problems_.pop_back();
}

Failure Runner::GetReference(const OpSpec& spec, const std::string& digest, const std::string& dtype,
                             Reference** out) {
  std::string key = digest + "|" + dtype;
  auto it = references_.find(key);
  if (it == references_.end()) {
    Reference ref;
    CompiledKernel ck = CompileReference(spec, dtype, CudaArchFor(spec, device_), cache_dir_);
    if (ck.failure != FailureClass::kNone) {
      std::string log = ck.log.size() > 4000 ? ck.log.substr(0, 4000) + "..." : ck.log;
      // Not the config's fault, but no config can be checked without it.
      ref.failure = Fail(FailureClass::kCompileError, ck.failure_message + (log.empty() ? "" : "\n" + log));
    } else {
      CuStatus st = TUNE_CU(d_.cuModuleLoadData(&ref.module, ck.image.data()));
      if (st.ok()) st = TUNE_CU(d_.cuModuleGetFunction(&ref.function, ref.module, spec.check.reference_kernel.c_str()));
      if (!st.ok()) {
        Failure f = FromCu(st, "reference " + spec.check.reference_kernel);
        if (f.fatal) return f;
        ref.failure = f;
      }
    }
    it = references_.emplace(key, std::move(ref)).first;
  }
  *out = &it->second;
  return it->second.failure;
}

Failure Runner::GetProblem(const OpSpec& spec, const std::string& digest, const std::string& dtype,
                           const Shape& shape, const LaunchPlan& plan, Problem** out) {
  // Buffer sizes and scalars may depend on params, so they are part of the key.
  std::string key = digest + "|" + dtype + "|" + shape.Canonical();
  for (int64_t e : plan.arg_elems) key += "|" + std::to_string(e);
  for (double v : plan.scalar_values) key += "|" + std::to_string(v);
  for (auto it = problems_.begin(); it != problems_.end(); ++it) {
    if (it->key == key) {
      problems_.splice(problems_.begin(), problems_, it);
      *out = &problems_.front();
      return {};
    }
  }
  int64_t need = 0;
  for (size_t i = 0; i < spec.args.size(); ++i) {
    if (spec.args[i].kind != ArgSpec::Kind::kBuffer) continue;
    std::string dt = spec.args[i].dtype == "$dtype" ? dtype : spec.args[i].dtype;
    // Kernel buffer, plus the pristine copy of inputs and the fp32 reference of outputs.
    need += plan.arg_elems[i] * (DTypeWidth(dt) * (spec.args[i].dir == "out" ? 1 : 2) +
                                 (spec.args[i].dir == "in" ? 0 : int64_t(sizeof(float))));
  }
  while (!problems_.empty() && problem_bytes_ + size_t(need) > problem_budget_) EvictOldestProblem();
  Problem built;
  built.key = key;
  Failure f = BuildProblem(spec, digest, dtype, shape, plan, &built);
  if (f.failed()) {
    ReleaseBuffers(&built);
    return f;
  }
  problem_bytes_ += built.device_bytes;
  built_problem_ = true;
  problems_.push_front(std::move(built));
  *out = &problems_.front();
  return {};
}

Failure Runner::BuildProblem(const OpSpec& spec, const std::string& digest, const std::string& dtype,
                             const Shape& shape, const LaunchPlan& plan, Problem* p) {
  Reference* ref = nullptr;
  if (Failure f = GetReference(spec, digest, dtype, &ref); f.failed()) return f;

  std::vector<ParamSlot> slots(spec.args.size());

  p->args.resize(spec.args.size());
  for (size_t i = 0; i < spec.args.size(); ++i) {
    const ArgSpec& as = spec.args[i];
    ArgData& a = p->args[i];
    a.spec = &as;
    if (as.kind == ArgSpec::Kind::kScalar) {
      double v = plan.scalar_values[i];
      if (as.scalar_type == "i64") slots[i].i64 = std::llround(v);
      else if (as.scalar_type == "f32") slots[i].f32 = float(v);
      else slots[i].i32 = int32_t(std::llround(v));
      continue;
    }
    a.dtype = as.dtype == "$dtype" ? dtype : as.dtype;
    int width = DTypeWidth(a.dtype);
    if (width == 0) return Fail(FailureClass::kLaunchError, "arg " + as.name + ": unknown dtype " + a.dtype);
    a.elems = plan.arg_elems[i];
    a.bytes = size_t(a.elems) * width;
    std::string what = "arg " + as.name + " (" + std::to_string(a.bytes) + " bytes)";
    if (CuStatus st = Alloc(a.bytes, &a.dev); !st.ok()) return FromCu(st, what);
    p->device_bytes += a.bytes;
    slots[i].ptr = a.dev;
    if (a.IsOutput()) {
      // The reference writes fp32; an inout buffer starts from the same
      // values (FillInput below), an output is poisoned like the kernel's
      // outputs: an element the reference never writes shows up as NaN below
      // instead of passing as zero.
      size_t ref_bytes = size_t(a.elems) * sizeof(float);
      if (CuStatus st = Alloc(ref_bytes, &a.ref); !st.ok()) return FromCu(st, what + " reference");
      p->device_bytes += ref_bytes;
      if (!a.IsInput()) {
        if (CuStatus st = TUNE_CU(d_.cuMemsetD8(a.ref, 0xFF, ref_bytes)); !st.ok()) return FromCu(st, what + " reference");
      }
      slots[i].ptr = a.ref;
    }
    if (a.IsInput()) {
      uint64_t seed = Fnv1a64(spec.name + "|" + as.name + "|" + a.dtype + "|" + shape.Canonical());
      if (CuStatus st = Alloc(a.bytes, &a.pristine); !st.ok()) return FromCu(st, what);
      p->device_bytes += a.bytes;
      if (Failure f = FillInput(a, as.init, seed, a.IsOutput() ? a.ref : 0); f.failed()) return f;
      if (CuStatus st = TUNE_CU(d_.cuMemcpyDtoD(a.dev, a.pristine, a.bytes)); !st.ok()) return FromCu(st, what);
    }
  }
  std::vector<void*> params(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) params[i] = &slots[i];
  if (CuStatus st = Launch(ref->function, plan.ref_grid, plan.ref_block, 0, nullptr, params.data()); !st.ok()) {
    Failure f = FromCu(st, "reference launch");
    f.message = "reference " + spec.check.reference_kernel + ": " + f.message;
    return f;
  }
  if (CuStatus st = TUNE_CU(d_.cuCtxSynchronize()); !st.ok()) {
    Failure f = FromCu(st, "reference run");
    f.message = "reference " + spec.check.reference_kernel + ": " + f.message;
    return f;
  }
  for (size_t i = 0; i < spec.args.size(); ++i) {
    ArgData& a = p->args[i];
    if (a.spec->kind != ArgSpec::Kind::kBuffer || !a.IsOutput()) continue;
    // The reference against itself: only its NaNs can fail.
    OutputCheck self;
    if (Failure f = CompareOutput("f32", a.ref, a.ref, a.elems, 0, 0, &self); f.failed()) return f;
    if (self.nans > 0) {
      return Fail(FailureClass::kLaunchError, "reference " + spec.check.reference_kernel + " produced " +
                                                  std::to_string(self.nans) + " NaNs in " + a.spec->name +
                                                  "; no config can be checked");
    }
  }
  return {};
}

Failure Runner::LoadImage(const MeasureRequest& req, const OpSpec& spec) {
  if (req.image_key == loaded_key_ && function_) return {};
  if (req.image_key != stored_key_)
    return Fail(FailureClass::kLaunchError, "runner: cubin " + req.image_key + " was never sent");
  if (module_) d_.cuModuleUnload(module_);
  module_ = nullptr;
  function_ = nullptr;
  loaded_key_.clear();
  if (CuStatus st = TUNE_CU(d_.cuModuleLoadData(&module_, stored_image_.data())); !st.ok()) {
    module_ = nullptr;
    return FromCu(st, "loading the cubin");
  }
  if (CuStatus st = TUNE_CU(d_.cuModuleGetFunction(&function_, module_, spec.kernel.c_str())); !st.ok()) {
    function_ = nullptr;
    return FromCu(st, "kernel " + spec.kernel);
  }
  loaded_key_ = req.image_key;
  return {};
}

Failure Runner::Measure(const MeasureRequest& req, const OpSpec& spec, const std::string& digest, Measurement* m) {
  // Phase times for TUNEFARM_RUNNER_TRACE, in ms: plan, problem, load+limits, check, timing.
  const Clock::time_point t_start = Clock::now();
  double ms[5] = {0, 0, 0, 0, 0};
  Clock::time_point t_phase = t_start;
  auto lap = [&](int i) {
    Clock::time_point now = Clock::now();
    ms[i] = std::chrono::duration<double, std::milli>(now - t_phase).count();
    t_phase = now;
  };
  built_problem_ = false;
  placements_ = 1;
  struct Trace {
    Runner* r;
    const MeasureRequest& req;
    const OpSpec& spec;
    const Measurement* m;
    double* ms;
    Clock::time_point start;
    ~Trace() {
      if (!r->trace_) return;
      fprintf(stderr,
              "tunefarm runner[%d] pid %d: %s %s %s %s: plan %.1f, problem %.1f%s%s, load %.1f, check %.1f, time %.1f (%u "
              "samples, %zu placements), total %.1f ms; median %.3f us, %d MHz%s, at %.3f s\n",
              r->index_, int(getpid()), spec.name.c_str(), req.dtype.c_str(), req.shape.Canonical().c_str(),
              req.config.Canonical().c_str(), ms[0], ms[1], r->built_problem_ ? " (built)" : "",
              req.policy.new_buffers ? " (new buffers)" : "", ms[2], ms[3], ms[4], m->samples, r->placements_,
              Seconds(start) * 1e3, m->median_us, m->sm_clock_mhz, m->throttled ? " throttled" : "",
              std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
    }
  } trace{this, req, spec, m, ms, t_start};
  auto plan_or = PlanLaunch(spec, req.dtype, req.config, req.shape, device_);
  if (!plan_or.ok()) return Fail(FailureClass::kLaunchError, "launch plan: " + plan_or.status().message());
  const LaunchPlan& plan = *plan_or;
  lap(0);
  if (plan.arg_elems.size() != spec.args.size() || plan.scalar_values.size() != spec.args.size())
    return Fail(FailureClass::kLaunchError, "launch plan: argument count differs from the spec");

  Problem* problem = nullptr;
  if (Failure f = GetProblem(spec, digest, req.dtype, req.shape, plan, &problem); f.failed()) return f;
  if (Failure f = PlaceBuffers(problem, req.policy.placements, req.policy.new_buffers && !built_problem_);
      f.failed())
    return f;
  lap(1);

  // From here on only the config itself runs: the backend's per-config clock
  // starts now rather than with the (shared) problem set-up.
  WireWriter started(MsgType::kStarted);
  if (Status s = Send(started); !s.ok()) return Fail(FailureClass::kCrash, "runner: " + s.message(), true);
  const Clock::time_point config_start = Clock::now();

  if (Failure f = LoadImage(req, spec); f.failed()) return f;

  KernelResources& res = m->resources;
  res = req.compile_resources;
  int regs = 0, static_smem = 0, local = 0, max_threads = 0;
  if (d_.cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, function_) == CUDA_SUCCESS) res.registers = regs;
  if (d_.cuFuncGetAttribute(&static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function_) == CUDA_SUCCESS)
    res.static_smem_bytes = static_smem;
  if (d_.cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, function_) == CUDA_SUCCESS)
    res.local_bytes = local;
  if (d_.cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function_) == CUDA_SUCCESS)
    res.max_threads_per_block = max_threads;
  res.dynamic_smem_bytes = plan.smem_bytes;

  const int64_t threads = plan.block[0] * plan.block[1] * plan.block[2];
  if (plan.smem_bytes < 0) return Fail(FailureClass::kLaunchError, "negative dynamic shared memory");
  if (res.max_threads_per_block > 0 && threads > res.max_threads_per_block) {
    return Fail(FailureClass::kResources, "block of " + std::to_string(threads) + " threads exceeds the kernel's limit of " +
                                              std::to_string(res.max_threads_per_block) + " (" +
                                              std::to_string(res.registers) + " registers/thread)");
  }
  if (res.static_smem_bytes + plan.smem_bytes > device_.smem_per_block_optin) {
    return Fail(FailureClass::kResources, "shared memory " + std::to_string(res.static_smem_bytes) + " static + " +
                                              std::to_string(plan.smem_bytes) + " dynamic bytes exceeds the opt-in limit of " +
                                              std::to_string(device_.smem_per_block_optin));
  }
  if (plan.smem_bytes > kDefaultMaxDynamicSmem) {
    if (CuStatus st = TUNE_CU(d_.cuFuncSetAttribute(function_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                    int(plan.smem_bytes)));
        !st.ok()) {
      Failure f = FromCu(st, "opting into " + std::to_string(plan.smem_bytes) + " bytes of dynamic shared memory");
      if (!f.fatal) f.cls = FailureClass::kResources;
      return f;
    }
  }
  int blocks_per_sm = 0;
  if (threads > 0 && threads <= 1024) {
    if (CuStatus st = TUNE_CU(d_.cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, function_, int(threads),
                                                                             size_t(plan.smem_bytes)));
        !st.ok()) {
      return FromCu(st, "occupancy");
    }
    if (blocks_per_sm == 0) {
      return Fail(FailureClass::kResources, "no block fits on an SM (" + std::to_string(threads) + " threads, " +
                                                std::to_string(res.registers) + " registers/thread, " +
                                                std::to_string(res.static_smem_bytes + plan.smem_bytes) +
                                                " bytes shared memory)");
    }
    int64_t warps = (threads + 31) / 32;
    res.occupancy = std::min(1.0, double(blocks_per_sm * warps) / double(std::max(1, max_threads_per_sm_ / 32)));
  }

  // The kernel's parameters, one set per placement of its buffers.
  const size_t placements = 1 + problem->spare.size();
  placements_ = placements;
  std::vector<std::vector<ParamSlot>> slots(placements, std::vector<ParamSlot>(spec.args.size()));
  std::vector<std::vector<void*>> params(placements, std::vector<void*>(spec.args.size()));
  std::vector<void**> param_sets;
  for (size_t k = 0; k < placements; ++k) {
    for (size_t i = 0; i < spec.args.size(); ++i) {
      const ArgSpec& as = spec.args[i];
      ParamSlot& slot = slots[k][i];
      if (as.kind == ArgSpec::Kind::kBuffer) {
        slot.ptr = k == 0 ? problem->args[i].dev : problem->spare[k - 1][i];
      } else if (as.scalar_type == "i64") {
        slot.i64 = std::llround(plan.scalar_values[i]);
      } else if (as.scalar_type == "f32") {
        slot.f32 = float(plan.scalar_values[i]);
      } else {
        slot.i32 = int32_t(std::llround(plan.scalar_values[i]));
      }
      params[k][i] = &slot;
    }
    param_sets.push_back(params[k].data());
  }

  lap(2);
  double checked_seconds = 0;
  if (Failure f = Check(spec, plan, problem, param_sets[0], m, &checked_seconds); f.failed()) return f;
  lap(3);
  flush_l2_ = GetBuiltins(req.dtype).flush_l2;
  Failure timed = Time(req.policy, req.best_so_far_us, checked_seconds, plan, param_sets, config_start, m);
  lap(4);
  return timed;
}

Failure Runner::Check(const OpSpec& spec, const LaunchPlan& plan, Problem* p, void** params, Measurement* m,
                      double* checked_seconds) {
  for (ArgData& a : p->args) {
    if (a.spec->kind != ArgSpec::Kind::kBuffer) continue;
    CuStatus st;
    if (a.pristine) {
      st = TUNE_CU(d_.cuMemcpyDtoD(a.dev, a.pristine, a.bytes));  // undo what earlier configs wrote
    } else if (a.IsOutput()) {
      st = TUNE_CU(d_.cuMemsetD8(a.dev, 0xFF, a.bytes));  // NaN in every float format
    }
    if (!st.ok()) return FromCu(st, "preparing " + a.spec->name);
  }
  const Clock::time_point t0 = Clock::now();
  if (CuStatus st = Launch(function_, plan.grid, plan.block, plan.smem_bytes, nullptr, params); !st.ok())
    return FromCu(st, "launch");
  if (CuStatus st = TUNE_CU(d_.cuCtxSynchronize()); !st.ok()) return FromCu(st, "checked run");
  *checked_seconds = Seconds(t0);

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
    snprintf(buf, sizeof(buf), "first at %s[%lld]: %g vs reference %g", first_arg->spec->name.c_str(),
             static_cast<long long>(first_index), ElementAt(first_arg->dtype, first_arg->dev, first_index),
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

const BuiltinKernels& Runner::GetBuiltins(const std::string& dtype) {
  auto it = builtins_.find(dtype);
  if (it != builtins_.end()) return it->second;
  BuiltinKernels k;
  const CompiledKernel ck =
      CompileBuiltin(kBuiltinSource, "tunefarm_compare", dtype,
                     "sm_" + std::to_string(device_.cc_major) + std::to_string(device_.cc_minor), cache_dir_);
  const bool compiled = ck.failure == FailureClass::kNone;
  if (compiled && d_.cuModuleLoadData(&k.module, ck.image.data()) == CUDA_SUCCESS) {
    if (d_.cuModuleGetFunction(&k.compare, k.module, "tunefarm_compare") != CUDA_SUCCESS) k.compare = nullptr;
    if (d_.cuModuleGetFunction(&k.fill, k.module, "tunefarm_fill") != CUDA_SUCCESS) k.fill = nullptr;
    if (d_.cuModuleGetFunction(&k.flush_l2, k.module, "tunefarm_flush_l2") != CUDA_SUCCESS) k.flush_l2 = nullptr;
  }
  if (!k.compare || !k.fill) {
    fprintf(stderr, "tunefarm runner[%d]: %s inputs and checks on the host: %s\n", index_, dtype.c_str(),
            compiled ? "module load failed" : ck.failure_message.c_str());
  }
  return builtins_.emplace(dtype, k).first->second;
}

Failure Runner::FillInput(const ArgData& a, const std::string& init_text, uint64_t seed, CUdeviceptr as_f32) {
  const std::string what = "arg " + a.spec->name;
  const BuiltinKernels& k = GetBuiltins(a.dtype);
  if (!k.fill) {
    auto data = MakeInput(a.dtype, init_text, a.elems, seed);
    if (!data.ok()) return Fail(FailureClass::kLaunchError, what + ": " + data.status().message());
    if (CuStatus st = TUNE_CU(d_.cuMemcpyHtoD(a.pristine, data->data(), a.bytes)); !st.ok()) return FromCu(st, what);
    if (as_f32) {
      std::vector<float> wide = DecodeToFloat(a.dtype, *data);
      if (CuStatus st = TUNE_CU(d_.cuMemcpyHtoD(as_f32, wide.data(), wide.size() * sizeof(float))); !st.ok())
        return FromCu(st, what);
    }
    return {};
  }
  auto init = ParseInit(init_text);
  if (!init.ok()) return Fail(FailureClass::kLaunchError, what + ": " + init.status().message());
  unsigned int nonzero = 0;
  if (CuStatus st = TUNE_CU(d_.cuMemcpyHtoD(builtin_stats_, &nonzero, sizeof(nonzero))); !st.ok())
    return FromCu(st, what);
  CUdeviceptr out = a.pristine, stats = builtin_stats_;
  long long n = a.elems;
  unsigned long long s = seed;
  int kind = int(init->kind);
  double lo = init->a, hi = init->b;
  void* params[] = {&out, &as_f32, &n, &s, &kind, &lo, &hi, &stats};
  int64_t blocks = std::clamp<int64_t>((a.elems + kBuiltinBlock - 1) / kBuiltinBlock, 1, int64_t(device_.num_sms) * 8);
  const int64_t grid[3] = {blocks, 1, 1}, block[3] = {kBuiltinBlock, 1, 1};
  if (CuStatus st = Launch(k.fill, grid, block, 0, nullptr, params); !st.ok()) return FromCu(st, what + " fill");
  if (CuStatus st = TUNE_CU(d_.cuMemcpyDtoH(&nonzero, builtin_stats_, sizeof(nonzero))); !st.ok())
    return FromCu(st, what + " fill");
  // Zeros hide kernels that never read their inputs (MakeInput refuses them too).
  if (a.elems > 0 && !nonzero)
    return Fail(FailureClass::kLaunchError, what + ": init '" + init_text + "' gives all zeros for " + a.dtype);
  return {};
}

Failure Runner::CompareOutput(const std::string& dtype, CUdeviceptr out, CUdeviceptr ref, int64_t elems, double atol,
                              double rtol, OutputCheck* oc) {
  if (elems <= 0) return {};
  const BuiltinKernels& k = GetBuiltins(dtype);
  if (!k.compare) {
    std::string host_out(static_cast<size_t>(elems) * DTypeWidth(dtype), '\0');
    std::vector<float> host_ref(static_cast<size_t>(elems));
    if (CuStatus st = TUNE_CU(d_.cuMemcpyDtoH(host_out.data(), out, host_out.size())); !st.ok())
      return FromCu(st, "reading the output");
    if (CuStatus st = TUNE_CU(d_.cuMemcpyDtoH(host_ref.data(), ref, host_ref.size() * sizeof(float))); !st.ok())
      return FromCu(st, "reading the reference");
    Comparison c;
    Compare(DecodeToFloat(dtype, host_out), host_ref, atol, rtol, &c);
    oc->mismatches = c.mismatches;
    oc->nans = c.nans;
    oc->max_abs_error = c.max_abs_error;
    oc->first_bad = c.first_bad;
    return {};
  }
  unsigned long long stats[4] = {0, 0, 0, ~0ull};
  if (CuStatus st = TUNE_CU(d_.cuMemcpyHtoD(builtin_stats_, stats, sizeof(stats))); !st.ok())
    return FromCu(st, "compare set-up");
  long long n = elems;
  float a = float(atol), r = float(rtol);
  CUdeviceptr stats_ptr = builtin_stats_;
  void* params[] = {&out, &ref, &n, &a, &r, &stats_ptr};
  int64_t blocks = std::min<int64_t>((elems + kBuiltinBlock - 1) / kBuiltinBlock, int64_t(device_.num_sms) * 8);
  const int64_t grid[3] = {blocks, 1, 1}, block[3] = {kBuiltinBlock, 1, 1};
  if (CuStatus st = Launch(k.compare, grid, block, 0, nullptr, params); !st.ok()) return FromCu(st, "compare launch");
  if (CuStatus st = TUNE_CU(d_.cuMemcpyDtoH(stats, builtin_stats_, sizeof(stats))); !st.ok())
    return FromCu(st, "compare");
  oc->mismatches = int64_t(stats[0]);
  oc->nans = int64_t(stats[1]);
  uint32_t bits = uint32_t(stats[2] & 0xFFFFFFFFu);
  float maxerr;
  std::memcpy(&maxerr, &bits, sizeof(maxerr));
  oc->max_abs_error = maxerr;
  oc->first_bad = stats[3] == ~0ull ? -1 : int64_t(stats[3]);
  return {};
}

double Runner::ElementAt(const std::string& dtype, CUdeviceptr buf, int64_t index) {
  int width = DTypeWidth(dtype);
  std::string bytes(size_t(width), '\0');
  if (index < 0 || d_.cuMemcpyDtoH(bytes.data(), buf + CUdeviceptr(index) * width, size_t(width)) != CUDA_SUCCESS)
    return std::nan("");
  std::vector<float> v = DecodeToFloat(dtype, bytes);
  return v.empty() ? std::nan("") : v[0];
}

Failure Runner::Time(const TimingPolicy& policy, double best_so_far_us, double checked_seconds,
                     const LaunchPlan& plan, const std::vector<void**>& param_sets,
                     Clock::time_point config_start, Measurement* m) {
  const int max_samples = std::max(1, policy.max_samples);
  const int min_samples = std::clamp(policy.min_samples, 1, max_samples);
  // The checked run already paid for the first-launch costs; a slow kernel
  // gets fewer warm-ups so that its minimum samples fit in the time cap.
  int warmup = std::max(0, policy.warmup);
  if (checked_seconds > 0 && checked_seconds * warmup > policy.max_seconds)
    warmup = std::max(0, int(policy.max_seconds / checked_seconds));
  for (int i = 0; i < warmup; ++i) {
    if (CuStatus st = Launch(function_, plan.grid, plan.block, plan.smem_bytes, stream_, param_sets[0]); !st.ok())
      return FromCu(st, "warm-up launch");
  }
  if (CuStatus st = TUNE_CU(d_.cuStreamSynchronize(stream_)); !st.ok()) return FromCu(st, "warm-up");
  if (policy.idle_seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(policy.idle_seconds));

  ClockSample before = nvml_ ? nvml_->Sample() : ClockSample{};
  // Stay well inside the backend's wall-clock limit whatever the policy says.
  const double wall_cap = std::min(2.0 * policy.max_seconds + 1.0,
                                   std::max(0.1, 0.5 * policy.timeout_seconds - Seconds(config_start)));
  const Clock::time_point loop_start = Clock::now();
  // The L2 flush before each sample: a read of the flush buffer, or where
  // the builtin kernels did not compile, a write of it.
  long long flush_words = (long long)(flush_bytes_ / 16);
  void* flush_params[] = {&flush_, &flush_words, &builtin_stats_};
  const int64_t flush_grid[3] = {int64_t(std::max(1, device_.num_sms)) * 4, 1, 1};
  const int64_t flush_block[3] = {512, 1, 1};
  auto flush = [&]() -> CuStatus {
    if (flush_l2_) return Launch(flush_l2_, flush_grid, flush_block, 0, stream_, flush_params);
    return TUNE_CU(d_.cuMemsetD8Async(flush_, 0, flush_bytes_, stream_));
  };
  // Queues `count` samples back to back on the stream, each after an L2
  // flush and on the next placement, and appends their times.
  size_t placement = 0;
  auto take = [&](int count, std::vector<double>* out, double* timed) -> Failure {
    for (int b = 0; b < count; ++b) {
      void** params = param_sets[placement++ % param_sets.size()];
      CuStatus st = flush();
      if (st.ok()) st = TUNE_CU(d_.cuEventRecord(ev_start_[b], stream_));
      if (st.ok()) st = Launch(function_, plan.grid, plan.block, plan.smem_bytes, stream_, params);
      if (st.ok()) st = TUNE_CU(d_.cuEventRecord(ev_stop_[b], stream_));
      if (!st.ok()) return FromCu(st, "timed launch");
    }
    if (CuStatus st = TUNE_CU(d_.cuStreamSynchronize(stream_)); !st.ok()) return FromCu(st, "timed run");
    for (int b = 0; b < count; ++b) {
      float ms = 0;
      if (CuStatus st = TUNE_CU(d_.cuEventElapsedTime(&ms, ev_start_[b], ev_stop_[b])); !st.ok())
        return FromCu(st, "event timing");
      out->push_back(double(ms) * 1000.0);
      *timed += double(ms) / 1000.0;
    }
    return {};
  };
  std::vector<double> samples;
  double timed_seconds = 0;
  SampleStats stats;
  int batch = min_samples;
  while (int(samples.size()) < max_samples) {
    batch = std::clamp(batch, 1, std::min(kBatchMax, max_samples - int(samples.size())));
    if (Failure f = take(batch, &samples, &timed_seconds); f.failed()) return f;
    stats = ComputeStats(samples);
    const int n = int(samples.size());
    if (n >= min_samples) {
      // Clearly slower than the best: enough to rank it.
      if (policy.StopsEarly(stats.median, best_so_far_us)) break;
      if (stats.mean > 0 && stats.ci95 <= policy.TargetRelCi(stats.median, best_so_far_us) * stats.mean) break;
    }
    if (timed_seconds >= policy.max_seconds || Seconds(loop_start) >= wall_cap) break;
    // Next batch: roughly what the CI target still needs (CI shrinks with
    // sqrt(n)), bounded by the time left.
    const double rel = stats.RelativeCi();
    const double target = policy.TargetRelCi(stats.median, best_so_far_us);
    int need = kBatchMax;
    if (n >= min_samples && rel > 0 && target > 0) need = int(std::ceil(double(n) * (rel / target) * (rel / target))) - n;
    if (n < min_samples) need = min_samples - n;
    if (stats.mean > 0) {
      double left = (policy.max_seconds - timed_seconds) / (stats.mean * 1e-6);
      need = int(std::min<double>(need, std::max(1.0, std::ceil(left))));
    }
    batch = need;
  }
  // A contender for the win is timed again in a window long enough for the
  // clocks to settle; the window's samples replace the ranking ones.
  const bool contender = policy.refine_seconds > 0 && stats.median > 0 && policy.Contender(stats.median, best_so_far_us);
  if (contender) {
    std::vector<double> window;
    double window_seconds = 0;
    while (window_seconds < policy.refine_seconds && Seconds(loop_start) < wall_cap) {
      const double left = (policy.refine_seconds - window_seconds) / (stats.median * 1e-6);
      const int count = int(std::clamp<double>(std::ceil(left), 1, kWindowBatch));
      if (Failure f = take(count, &window, &window_seconds); f.failed()) return f;
    }
    stats = ComputeStats(window);
  }
  ClockSample after = nvml_ ? nvml_->Sample() : ClockSample{};

  m->median_us = stats.median;
  m->mean_us = stats.mean;
  m->stdev_us = stats.stdev;
  m->min_us = stats.min;
  m->max_us = stats.max;
  m->ci95_us = stats.ci95;
  m->samples = uint32_t(stats.n);
  m->throttled = before.Throttled() || after.Throttled();
  m->sm_clock_mhz = after.valid ? after.sm_clock_mhz : before.sm_clock_mhz;
  return {};
}

// Ends the runner when the worker that started it is gone, even while a
// kernel hangs: nobody would ever read its answer or kill it otherwise.
void WatchParent() {
  pid_t parent = getppid();
  std::thread([parent] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      if (getppid() != parent) _exit(kExitOrphaned);
    }
  }).detach();
}

}  // namespace
}  // namespace cuda

int RunnerMain(int device_index, int in_fd, int out_fd) {
  int out = out_fd;
  if (out_fd == STDOUT_FILENO) {
    // Only frames may reach the backend; anything printed goes to stderr.
    out = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (out < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) return cuda::kExitProtocol;
  }
  auto driver = cuda::LoadDriver();
  if (!driver.ok()) {
    // Answer the backend's init so that it learns why, then stop.
    auto first = cuda::ReadFrame(in_fd);
    cuda::WireWriter hello(cuda::MsgType::kHello);
    hello.U32(cuda::kRunnerProtocolVersion);
    hello.U8(0);
    hello.Str(driver.status().message());
    cuda::EncodeDeviceInfo(DeviceInfo{}, &hello);
    if (first.ok()) (void)cuda::WriteFrame(out, hello.bytes());
    fprintf(stderr, "tunefarm runner[%d]: %s\n", device_index, driver.status().message().c_str());
    return cuda::kExitProtocol;
  }
  cuda::WatchParent();
  cuda::Runner runner(**driver, device_index, in_fd, out);
  return runner.Serve();
}

}  // namespace tune
