// The runner: the per-GPU process that checks and times configs.
//
// It owns the only context on its device. Everything that can poison or
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
#include <memory>
#include <thread>

#include "measure/runner/runner.h"
#include "base/tensor_map.h"
#include "base/stats.h"
#include "opspec/expr.h"

namespace tune::runner {

Status Runner::Setup() {
  device_ = api_.Info();
  auto check = [](const DeviceStatus& st) { return st.ok() ? Status::OK() : Status::Error(st.message); };
  TUNE_RETURN_IF_ERROR(check(api_.CreateStream(&stream_)));
  // Reading twice the L2 between samples evicts whatever the previous sample
  // left there, so every sample starts from DRAM like a cold production call
  // (tunefarm_flush_l2 reads the zeros).
  flush_bytes_ = std::max<size_t>(2 * size_t(device_.l2_bytes), 8u << 20);
  TUNE_RETURN_IF_ERROR(check(api_.Alloc(flush_bytes_, &flush_)));
  TUNE_RETURN_IF_ERROR(check(api_.Fill(flush_, 0, flush_bytes_)));
  TUNE_RETURN_IF_ERROR(check(api_.Alloc(4 * sizeof(unsigned long long), &builtin_stats_)));
  ev_start_.resize(kWindowBatch);
  ev_stop_.resize(kWindowBatch);
  for (int i = 0; i < kWindowBatch; ++i) {
    TUNE_RETURN_IF_ERROR(check(api_.CreateEvent(&ev_start_[i])));
    TUNE_RETURN_IF_ERROR(check(api_.CreateEvent(&ev_stop_[i])));
  }
  size_t free_bytes = 0, total_bytes = 0;
  TUNE_RETURN_IF_ERROR(check(api_.MemoryInfo(&free_bytes, &total_bytes)));
  // The rest stays free for the kernels' modules and for problems that do not
  // fit beside the cached ones.
  device_ops_.emplace(api_, flush_);
  checker_.emplace(*device_ops_, toolchain_, cache_dir_, builtin_stats_, index_);
  problems_.emplace(*device_ops_, *checker_, toolchain_, cache_dir_, free_bytes / 2);
  return Status::OK();
}

int Runner::Serve() {
  auto first = ReadFrame(in_);
  if (!first.ok()) return first.status().code() == StatusCode::kEndOfStream ? 0 : kExitProtocol;
  WireReader init(*first);
  if (init.Type() != MsgType::kInit) return kExitProtocol;
  uint32_t version = init.U32();
  cache_dir_ = init.Str();
  IncludeRoots roots;
  for (uint32_t i = 0, n = init.U32(); i < n && n <= 256; ++i) {
    std::string name = init.Str();
    roots[name] = init.Str();
  }
  toolchain_.SetIncludeRoots(std::move(roots));
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
    if (!frame.ok()) return frame.status().code() == StatusCode::kEndOfStream ? 0 : kExitProtocol;
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
  if (r->ok() && !req.default_image.empty() && !defaults_.count(req.default_image_key)) {
    if (defaults_.size() >= kMaxDefaultKernels) {
      for (auto& [key, k] : defaults_)
        if (k.module) api_.UnloadImage(k.module);
      defaults_.clear();
    }
    defaults_[req.default_image_key].image = std::move(req.default_image);
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

Failure Runner::LoadImage(const MeasureRequest& req, const OpSpec& spec) {
  if (req.image_key == loaded_key_ && function_) return {};
  if (req.image_key != stored_key_)
    return Fail(FailureClass::kLaunchError, "runner: cubin " + req.image_key + " was never sent");
  if (module_) api_.UnloadImage(module_);
  module_ = nullptr;
  function_ = nullptr;
  loaded_key_.clear();
  if (DeviceStatus st = api_.LoadImage(stored_image_, &module_); !st.ok()) {
    module_ = nullptr;
    return device_ops_->FromDevice(st, "loading the cubin");
  }
  if (DeviceStatus st = api_.GetFunction(module_, spec.kernel, &function_); !st.ok()) {
    function_ = nullptr;
    return device_ops_->FromDevice(st, "kernel " + spec.kernel);
  }
  loaded_key_ = req.image_key;
  return {};
}

// The loaded kernel's resources and whether the plan's block and shared
// memory fit them (the occupancy they allow goes into m->resources).
Failure Runner::KernelLimits(const MeasureRequest& req, const LaunchPlan& plan, Measurement* m) {
  KernelResources& res = m->resources;
  res = req.compile_resources;
  const device::FunctionAttributes attrs = api_.Attributes(function_);
  if (attrs.registers > 0) res.registers = attrs.registers;
  if (attrs.static_smem_bytes > 0) res.static_smem_bytes = attrs.static_smem_bytes;
  if (attrs.local_bytes > 0) res.local_bytes = attrs.local_bytes;
  if (attrs.max_threads_per_block > 0) res.max_threads_per_block = attrs.max_threads_per_block;
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
    if (DeviceStatus st = api_.SetMaxDynamicSmem(function_, plan.smem_bytes); !st.ok()) {
      Failure f = device_ops_->FromDevice(st, "opting into " + std::to_string(plan.smem_bytes) + " bytes of dynamic shared memory");
      if (!f.fatal) f.cls = FailureClass::kResources;
      return f;
    }
  }
  int blocks_per_sm = 0;
  if (threads > 0 && threads <= 1024) {
    if (DeviceStatus st = api_.Occupancy(function_, int(threads), plan.smem_bytes, &blocks_per_sm); !st.ok()) {
      return device_ops_->FromDevice(st, "occupancy");
    }
    if (blocks_per_sm == 0) {
      return Fail(FailureClass::kResources, "no block fits on an SM (" + std::to_string(threads) + " threads, " +
                                                std::to_string(res.registers) + " registers/thread, " +
                                                std::to_string(res.static_smem_bytes + plan.smem_bytes) +
                                                " bytes shared memory)");
    }
    int64_t warps = (threads + 31) / 32;
    res.occupancy = std::min(1.0, double(blocks_per_sm * warps) / double(std::max(1, api_.MaxThreadsPerMultiprocessor() / 32)));
  }

  return {};
}

Failure Runner::BaselineLaunch(const MeasureRequest& req, const OpSpec& spec, const LaunchPlan& plan,
                               MeasuredLaunch* launch, Measurement* m) {
  if (!spec.baseline || spec.baseline->library != req.baseline)
    return Fail(FailureClass::kLaunchError, "baseline " + req.baseline + ": not the op's [baseline]");
  const BaselineSpec& b = *spec.baseline;
  if (!baseline_lib_ && baseline_error_.empty()) {
    auto lib = api_.OpenBaseline(b.library);
    if (lib.ok()) baseline_lib_ = std::move(lib).value();
    else baseline_error_ = lib.status().message();
  }
  if (!baseline_lib_) return Fail(FailureClass::kLaunchError, baseline_error_);
  m->baseline = baseline_lib_->Version();
  constexpr size_t kWorkspaceBytes = 32u << 20;  // what cuBLAS's own heuristics assume on Hopper
  if (!baseline_workspace_) {
    if (DeviceStatus st = api_.Alloc(kWorkspaceBytes, &baseline_workspace_); !st.ok()) {
      baseline_workspace_ = 0;
      return device_ops_->FromDevice(st, "baseline workspace");
    }
  }
  // M, N and K from the dims; the buffers the plan sized must hold them.
  ExprScope scope;
  scope.SetAll(req.shape.dims);
  scope.Set("dsize", DTypeSize(req.dtype));
  int64_t mnk[3] = {0, 0, 0};
  const std::string* texts[3] = {&b.m, &b.n, &b.k};
  for (int i = 0; i < 3; ++i) {
    auto e = Expr::Compile(*texts[i], &scope, "[baseline]");
    if (!e.ok()) return Fail(FailureClass::kLaunchError, e.status().message());
    mnk[i] = e->EvalInt();
  }
  const auto index = [&](const std::string& name) {
    size_t i = 0;
    while (i < spec.args.size() && spec.args[i].name != name) ++i;
    return i;
  };
  const size_t ia = index(b.a), ib = index(b.b), ic = index(b.c);
  const std::pair<size_t, int64_t> want[] = {{ia, mnk[0] * mnk[2]}, {ib, mnk[1] * mnk[2]}, {ic, mnk[0] * mnk[1]}};
  for (const auto& [arg, elems] : want) {
    if (arg >= plan.arg_elems.size() || plan.arg_elems[arg] != elems)
      return Fail(FailureClass::kLaunchError, "baseline: buffer " + spec.args[std::min(arg, spec.args.size() - 1)].name +
                                                  " does not hold the product's " + std::to_string(elems) + " elements");
  }
  const std::string key = req.dtype + " " + std::to_string(mnk[0]) + " " + std::to_string(mnk[1]) + " " +
                          std::to_string(mnk[2]);
  if (key != baseline_planned_) {
    baseline_planned_.clear();
    if (Status st = baseline_lib_->Plan(req.dtype, mnk[0], mnk[1], mnk[2], kWorkspaceBytes); !st.ok())
      return Fail(FailureClass::kLaunchError, st.message());
    baseline_planned_ = key;
  }
  device::BaselineLibrary* lib = baseline_lib_.get();
  const DevicePtr workspace = baseline_workspace_;
  *launch = [lib, workspace, ia, ib, ic](Stream s, void** params) -> DeviceStatus {
    const auto ptr = [&](size_t i) { return static_cast<const ParamSlot*>(params[i])->ptr; };
    Status st = lib->Run(ptr(ia), ptr(ib), ptr(ic), workspace, s);
    if (st.ok()) return {};
    return device::DeviceFailed(DeviceError::kFailed, st.message());
  };
  return {};
}

Failure Runner::BindParams(const OpSpec& spec, const LaunchPlan& plan, const Problem& problem, size_t placements,
                           bool encode_maps, BoundParams* out) {
  // Tensor maps' layouts, once: placements differ only in the addresses.
  // Maps follow the buffers they describe (declared before them).
  struct MapLayout {
    size_t buffer = 0;
    TensorMapLayout layout;
  };
  std::vector<MapLayout> maps(spec.args.size());
  for (size_t i = 0; i < spec.args.size() && encode_maps; ++i) {
    const ArgSpec& as = spec.args[i];
    if (as.kind != ArgSpec::Kind::kTensorMap) continue;
    const size_t of = size_t(std::find_if(spec.args.begin(), spec.args.end(),
                                          [&](const ArgSpec& b) { return b.name == as.map_of; }) -
                             spec.args.begin());
    auto layout = LayTensorMap(as.name, problem.args[of].dtype, plan.arg_extents[of], plan.arg_extents[i], as.swizzle);
    if (!layout.ok()) return Fail(FailureClass::kLaunchError, layout.status().message());
    maps[i] = MapLayout{of, *layout};
  }
  out->slots.assign(placements, std::vector<ParamSlot>(spec.args.size()));
  out->params.assign(placements, std::vector<void*>(spec.args.size()));
  out->sets.clear();
  for (size_t k = 0; k < placements; ++k) {
    for (size_t i = 0; i < spec.args.size(); ++i) {
      const ArgSpec& as = spec.args[i];
      ParamSlot& slot = out->slots[k][i];
      if (as.kind == ArgSpec::Kind::kBuffer) {
        slot.ptr = k == 0 ? problem.args[i].dev : problem.spare[k - 1][i];
      } else if (as.kind == ArgSpec::Kind::kTensorMap) {
        // A baseline library reads the buffers: its map slots stay unused.
        const DevicePtr at = out->slots[k][maps[i].buffer].ptr;
        if (encode_maps) {
          if (Status st = CheckTensorMapAddress(as.name, at); !st.ok())
            return Fail(FailureClass::kLaunchError, st.message());
          if (DeviceStatus cs = api_.EncodeTensorMap(maps[i].layout, at, slot.map); !cs.ok())
            return Fail(FailureClass::kLaunchError, "tensor map " + as.name + ": " + cs.message);
        }
      } else if (as.scalar_type == "i64") {
        slot.i64 = std::llround(plan.scalar_values[i]);
      } else if (as.scalar_type == "f32") {
        slot.f32 = float(plan.scalar_values[i]);
      } else {
        slot.i32 = int32_t(std::llround(plan.scalar_values[i]));
      }
      out->params[k][i] = &slot;
    }
    out->sets.push_back(out->params[k].data());
  }
  return {};
}

Failure Runner::RunDefault(const MeasureRequest& req, const OpSpec& spec, const LaunchPlan& config_plan,
                           Problem* problem) {
  const std::string what = "the default config " + spec.default_config.Canonical();
  // Not the config's fault, but no config can be checked without it.
  const auto unusable = [&](Failure f) {
    f.message = what + " (what [check] default compares with): " + f.message + "; no config can be checked";
    return f;
  };
  auto it = defaults_.find(req.default_image_key);
  if (req.default_image_key.empty() || it == defaults_.end())
    return unusable(Fail(FailureClass::kLaunchError, "its cubin " + req.default_image_key + " was never sent"));
  DefaultKernel& k = it->second;
  if (!k.module) {
    if (DeviceStatus st = api_.LoadImage(k.image, &k.module); !st.ok()) {
      k.module = nullptr;
      return unusable(device_ops_->FromDevice(st, "loading its cubin"));
    }
    if (DeviceStatus st = api_.GetFunction(k.module, spec.kernel, &k.function); !st.ok()) {
      api_.UnloadImage(k.module);
      k.module = nullptr;
      return unusable(device_ops_->FromDevice(st, "kernel " + spec.kernel));
    }
  }
  auto plan = PlanLaunch(spec, req.dtype, spec.default_config, req.shape, device_);
  if (!plan.ok()) return unusable(Fail(FailureClass::kLaunchError, "launch plan: " + plan.status().message()));
  // The op's parser keeps buffers and scalars to dims (op_definition.h
  // kDefault); a plan that still differs cannot share the problem.
  if (plan->arg_elems != config_plan.arg_elems || plan->scalar_values != config_plan.scalar_values)
    return unusable(Fail(FailureClass::kLaunchError, "its buffers or scalars differ from the config's"));
  if (plan->smem_bytes > kDefaultMaxDynamicSmem) {
    if (DeviceStatus st = api_.SetMaxDynamicSmem(k.function, plan->smem_bytes); !st.ok())
      return unusable(device_ops_->FromDevice(st, "opting into its dynamic shared memory"));
  }
  BoundParams bound;
  if (Failure f = BindParams(spec, *plan, *problem, 1, true, &bound); f.failed()) return unusable(f);
  const Function function = k.function;
  const LaunchPlan& p = *plan;
  const MeasuredLaunch launch = [this, function, &p](Stream s, void** params) {
    return device_ops_->Launch(function, p.grid, p.block, p.smem_bytes, s, params);
  };
  if (Failure f = checker_->AdoptDefault(launch, problem, bound.sets[0]); f.failed()) return unusable(f);
  return {};
}

Failure Runner::Measure(const MeasureRequest& req, const OpSpec& spec, const std::string& digest, Measurement* m) {
  // Phase times for TUNEFARM_RUNNER_TRACE, in ms: plan, problem, load+limits, check, timing.
  const double t_start = NowSeconds();
  double ms[5] = {0, 0, 0, 0, 0};
  double t_phase = t_start;
  auto lap = [&](int i) {
    const double now = NowSeconds();
    ms[i] = (now - t_phase) * 1e3;
    t_phase = now;
  };
  built_problem_ = false;
  placements_ = 1;
  stopped_ = SamplingStop::kNo;
  struct Trace {
    Runner* r;
    const MeasureRequest& req;
    const OpSpec& spec;
    const Measurement* m;
    double* ms;
    double start;  // NowSeconds
    ~Trace() {
      if (!r->trace_) return;
      fprintf(stderr,
              "tunefarm runner[%d] pid %d: %s %s %s %s: plan %.1f, problem %.1f%s%s, load %.1f, check %.1f, time %.1f (%u "
              "samples, %zu placements, stop: %s), total %.1f ms; median %.3f us, %d MHz%s, at %.3f s\n",
              r->index_, int(getpid()), spec.name.c_str(), req.dtype.c_str(), req.shape.Canonical().c_str(),
              req.config.Canonical().c_str(), ms[0], ms[1], r->built_problem_ ? " (built)" : "",
              req.policy.new_buffers ? " (new buffers)" : "", ms[2], ms[3], ms[4], m->samples, r->placements_,
              SamplingStopName(r->stopped_), Seconds(start) * 1e3, m->median_us, m->sm_clock_mhz, m->throttled ? " throttled" : "",
              NowUnixSecondsPrecise());
    }
  } trace{this, req, spec, m, ms, t_start};
  auto plan_or = PlanLaunch(spec, req.dtype, req.config, req.shape, device_);
  if (!plan_or.ok()) return Fail(FailureClass::kLaunchError, "launch plan: " + plan_or.status().message());
  const LaunchPlan& plan = *plan_or;
  lap(0);
  if (plan.arg_elems.size() != spec.args.size() || plan.scalar_values.size() != spec.args.size())
    return Fail(FailureClass::kLaunchError, "launch plan: argument count differs from the spec");

  Problem* problem = nullptr;
  if (Failure f = problems_->Get(spec, digest, req.dtype, req.shape, plan, &problem, &built_problem_); f.failed())
    return f;
  if (Failure f = problems_->PlaceBuffers(problem, req.policy.placements, req.policy.new_buffers && !built_problem_);
      f.failed())
    return f;
  if (spec.check.mode == CheckSpec::Mode::kDefault && !problem->default_ran) {
    problem->default_failure = RunDefault(req, spec, plan, problem);
    problem->default_ran = !problem->default_failure.fatal;  // a fatal one ends this runner; the next tries again
  }
  if (problem->default_failure.failed()) return problem->default_failure;
  lap(1);

  // From here on only the config itself runs: the backend's per-config clock
  // starts now rather than with the (shared) problem set-up.
  WireWriter started(MsgType::kStarted);
  if (Status s = Send(started); !s.ok()) return Fail(FailureClass::kCrash, "runner: " + s.message(), true);
  const double config_start = NowSeconds();

  MeasuredLaunch launch;
  if (!req.baseline.empty()) {
    if (Failure f = BaselineLaunch(req, spec, plan, &launch, m); f.failed()) return f;
  } else {
    if (Failure f = LoadImage(req, spec); f.failed()) return f;
    if (Failure f = KernelLimits(req, plan, m); f.failed()) return f;
    launch = [this, &plan](Stream s, void** params) {
      return device_ops_->Launch(function_, plan.grid, plan.block, plan.smem_bytes, s, params);
    };
  }

  // The kernel's parameters, one set per placement of its buffers.
  BoundParams bound;
  if (Failure f = BindParams(spec, plan, *problem, 1 + problem->spare.size(), req.baseline.empty(), &bound); f.failed())
    return f;
  placements_ = bound.sets.size();
  const std::vector<void**>& param_sets = bound.sets;

  lap(2);
  double checked_seconds = 0;
  if (Failure f = checker_->Check(launch, spec, plan, problem, param_sets[0], m, &checked_seconds); f.failed()) return f;
  lap(3);
  flush_l2_ = checker_->Builtins(req.dtype).flush_l2;
  hot_l2_ = spec.timing == L2Timing::kHot;
  hold_ = checker_->Builtins(req.dtype).hold;
  Failure timed = Time(launch, req.policy, req.best_so_far_us, checked_seconds, param_sets, config_start, m);
  lap(4);
  return timed;
}

// Ends the runner when the worker that started it is gone, even while a
// kernel hangs: nobody would ever read its answer or kill it otherwise.
int FramesOut(int out_fd) {
  if (out_fd != STDOUT_FILENO) return out_fd;
  const int out = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (out < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) return -1;
  return out;
}

void WatchParent() {
  pid_t parent = getppid();
  std::thread([parent] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      if (getppid() != parent) _exit(kExitOrphaned);
    }
  }).detach();
}

int AnswerUnopened(int in_fd, int out_fd, const std::string& why) {
  auto first = ReadFrame(in_fd);
  WireWriter hello(MsgType::kHello);
  hello.U32(kRunnerProtocolVersion);
  hello.U8(0);
  hello.Str(why);
  EncodeDeviceInfo(DeviceInfo{}, &hello);
  if (first.ok()) (void)WriteFrame(out_fd, hello.bytes());
  return kExitProtocol;
}

}  // namespace tune::runner
