// The launcher (tune/launcher.h). It declares the few Driver API entry points
// it calls rather than including cuda.h, so that deployments (and the farm's
// CI) build it without a CUDA toolkit; the values below are the driver ABI's.
#include "tune/launcher.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_map>

#include "bundle/bundle.h"
#include "base/shared_library.h"
#include "base/tensor_map.h"
#include "base/types.h"
#include "base/target.h"

namespace tune::launcher {
namespace detail {

using CUresult = int;
using CUdevice = int;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphNode = struct CUgraphNode_st*;
using CUgraphExec = struct CUgraphExec_st*;

constexpr int kAttrMaxThreadsPerBlock = 1, kAttrSmCount = 16, kAttrL2 = 38, kAttrCcMajor = 75, kAttrCcMinor = 76,
              kAttrSmemOptin = 97;
constexpr int kFuncMaxThreads = 0, kFuncStaticSmem = 1, kFuncMaxDynamicSmem = 8;
constexpr CUresult kErrorInvalidContext = 201;  // no current context on the calling thread
constexpr CUresult kErrorNotSupported = 801;
constexpr int kCaptureStatusNone = 0, kCaptureModeRelaxed = 2;
const CUstream kStreamPerThread = reinterpret_cast<CUstream>(uintptr_t{2});  // CU_STREAM_PER_THREAD

// CUDA_KERNEL_NODE_PARAMS_v2: a graph's kernel node.
struct KernelNodeParams {
  CUfunction func = nullptr;
  unsigned grid[3] = {0, 0, 0}, block[3] = {0, 0, 0}, smem_bytes = 0;
  void** kernel_params = nullptr;
  void** extra = nullptr;
  void* kernel = nullptr;  // a CUkernel, used where func is null
  CUcontext ctx = nullptr;
};
static_assert(sizeof(KernelNodeParams) == 72 && offsetof(KernelNodeParams, kernel_params) == 40);

struct Driver {
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule) = nullptr;
  CUresult (*cuFuncGetAttribute)(int*, int, CUfunction) = nullptr;
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
  // Optional (drivers before CUDA 12 lack it): only kernels that take
  // tensor maps need it, and they say so when it is missing.
  CUresult (*cuTensorMapEncodeTiled)(void*, int, uint32_t, void*, const uint64_t*, const uint64_t*, const uint32_t*,
                                     const uint32_t*, int, int, int, int) = nullptr;
  // Optional (CUDA 12 and later): a launch replayed as a graph of one kernel
  // node (Prepared::GraphFor); without them every launch is cuLaunchKernel.
  CUresult (*cuCtxGetCurrent)(CUcontext*) = nullptr;
  CUresult (*cuStreamIsCapturing)(CUstream, int*) = nullptr;
  CUresult (*cuThreadExchangeStreamCaptureMode)(int*) = nullptr;
  CUresult (*cuGraphCreate)(CUgraph*, unsigned) = nullptr;
  CUresult (*cuGraphAddKernelNode)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                                   const KernelNodeParams*) = nullptr;
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*cuGraphExecKernelNodeSetParams)(CUgraphExec, CUgraphNode, const KernelNodeParams*) = nullptr;
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*cuGraphExecDestroy)(CUgraphExec) = nullptr;
  CUresult (*cuGraphDestroy)(CUgraph) = nullptr;
  bool graphs = false;  // all of the above found

  std::string Error(CUresult r, const char* call) const {
    const char* text = nullptr;
    if (cuGetErrorString && cuGetErrorString(r, &text) != 0) text = nullptr;
    return std::string(call) + ": " + (text ? text : "CUDA error " + std::to_string(r));
  }
};

Result<Driver> OpenDriver() {
  Driver d;
  auto lib = OpenSharedLibrary("the CUDA driver", {kCudaDriverLibrary});
  if (!lib.ok()) return lib.status();
  auto sym = [&](auto* fn, const char* name) { return lib->Resolve(*fn, name); };
  const bool ok = sym(&d.cuInit, "cuInit") && sym(&d.cuDeviceGetCount, "cuDeviceGetCount") &&
                  sym(&d.cuDeviceGet, "cuDeviceGet") && sym(&d.cuDeviceGetName, "cuDeviceGetName") &&
                  sym(&d.cuDeviceGetAttribute, "cuDeviceGetAttribute") &&
                  sym(&d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") &&
                  sym(&d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease") &&
                  sym(&d.cuCtxSetCurrent, "cuCtxSetCurrent") && sym(&d.cuModuleLoadData, "cuModuleLoadData") &&
                  sym(&d.cuModuleGetFunction, "cuModuleGetFunction") && sym(&d.cuModuleUnload, "cuModuleUnload") &&
                  sym(&d.cuFuncGetAttribute, "cuFuncGetAttribute") && sym(&d.cuFuncSetAttribute, "cuFuncSetAttribute") &&
                  sym(&d.cuLaunchKernel, "cuLaunchKernel") && sym(&d.cuGetErrorString, "cuGetErrorString");
  if (!ok) return Status::Unavailable("CUDA driver lacks an entry point the launcher needs");
  sym(&d.cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled");
  d.graphs = sym(&d.cuCtxGetCurrent, "cuCtxGetCurrent") && sym(&d.cuStreamIsCapturing, "cuStreamIsCapturing") &&
             sym(&d.cuThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode") &&
             sym(&d.cuGraphCreate, "cuGraphCreate") && sym(&d.cuGraphAddKernelNode, "cuGraphAddKernelNode_v2") &&
             sym(&d.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags") &&
             sym(&d.cuGraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams_v2") &&
             sym(&d.cuGraphLaunch, "cuGraphLaunch") && sym(&d.cuGraphExecDestroy, "cuGraphExecDestroy") &&
             sym(&d.cuGraphDestroy, "cuGraphDestroy");
  return d;
}

// A loaded cubin and what the driver says of its kernel.
struct Module {
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  int max_threads = 0, static_smem = 0;
  // The dynamic shared memory a launch may use without raising the limit
  // first: the driver's default, then what cuFuncSetAttribute allowed.
  // Kernels of several threads share the module.
  std::atomic<int> dynamic_smem_allowed{0};
};

struct Shared {
  Driver d;
  const runtime::Bundle* bundle = nullptr;
  Device device;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  bool graphs = false;  // launches replay graphs: the driver has them and TUNEFARM_LAUNCH_GRAPHS is not 0
  std::mutex mu;                                   // modules
  std::map<std::string, std::unique_ptr<Module>> modules;  // KernelImage::Key()

  ~Shared() {
    for (auto& [key, m] : modules) d.cuModuleUnload(m->module);
    if (ctx) d.cuDevicePrimaryCtxRelease(dev);
  }
  LaunchDevice Limits() const {
    return LaunchDevice{device.smem_optin, device.max_threads, device.num_sms, device.cc_major * 10 + device.cc_minor,
                        device.l2_bytes};
  }
  // The loaded module of `image` (loaded on first use).
  Result<Module*> Load(const KernelImage& image, const std::string& function) {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = modules.find(image.Key()); it != modules.end()) return it->second.get();
    auto m = std::make_unique<Module>();
    if (CUresult r = d.cuCtxSetCurrent(ctx); r != 0) return Status::Error(d.Error(r, "cuCtxSetCurrent"));
    if (CUresult r = d.cuModuleLoadData(&m->module, image.image.data()); r != 0)
      return Status::Error(d.Error(r, "cuModuleLoadData") + " (cubin " + image.Key() + ")");
    if (CUresult r = d.cuModuleGetFunction(&m->function, m->module, function.c_str()); r != 0) {
      d.cuModuleUnload(m->module);
      return Status::Error(d.Error(r, "cuModuleGetFunction") + " (" + function + ")");
    }
    int dynamic = 0;
    d.cuFuncGetAttribute(&m->max_threads, kFuncMaxThreads, m->function);
    d.cuFuncGetAttribute(&m->static_smem, kFuncStaticSmem, m->function);
    d.cuFuncGetAttribute(&dynamic, kFuncMaxDynamicSmem, m->function);
    m->dynamic_smem_allowed = dynamic;
    Module* out = m.get();
    modules.emplace(image.Key(), std::move(m));
    return out;
  }
};

// One candidate of the chain that can run on this device.
struct Candidate {
  const BundleLaunchPlan* plan = nullptr;
  Module* module = nullptr;
  std::string arch;
};

union Slot {
  uint64_t ptr;
  int32_t i32;
  int64_t i64;
  float f32;
  alignas(64) unsigned char map[128];  // a CUtensorMap
};

// The launch as a graph of one kernel node, for one stream: the driver
// replays it for about half of what cuLaunchKernel costs (bench/launcher.md).
// A graph's launches are ordered behind its earlier ones whatever their
// stream, so each stream has its own, lest launches on two streams wait on
// each other.
struct GraphSlot {
  CUstream stream = nullptr;
  CUgraph graph = nullptr;
  CUgraphNode node = nullptr;
  CUgraphExec exec = nullptr;
  uint64_t arguments = 0;  // the Prepared::arguments its node launches
};

// A tensor-map argument of the resolved launch: encoded again whenever the
// buffer it describes moves.
struct MapSlot {
  std::string name;
  size_t slot = 0, buffer = 0;  // its slot; the slot of the buffer it describes
  TensorMapLayout layout;
  uint64_t encoded_for = 0;     // the buffer address of the current encoding (0: none)
};

struct Prepared {
  std::shared_ptr<Shared> s;
  std::string op, dtype;
  runtime::PreparedLookup lookup;
  std::unordered_map<const runtime::NamedInts*, Candidate> candidates;  // by Answer::config
  std::vector<std::string> dim_names, buffer_names, buffer_dirs;
  std::string skipped;  // why the first refused candidate was refused (for a miss)
  // The last launch, reused while the dims repeat.
  bool cached = false;
  std::vector<int64_t> last_dims;
  Choice choice;
  CUfunction function = nullptr;
  std::vector<size_t> buffer_slots;  // slot index of each buffer argument
  std::vector<MapSlot> maps;
  std::vector<Slot> slots;
  std::vector<void*> params;
  // Bumped whenever the function, geometry or an argument changes: a graph
  // whose node launched other arguments is updated before it is replayed.
  uint64_t arguments = 1;
  bool graphs = false;  // launches replay graphs (Launcher::Open; off after kMakeAttempts graphs failed)
  int failed_makes = 0;
  std::vector<GraphSlot> graph_slots;  // by stream handle: the first kGraphStreams streams launched on

  static constexpr size_t kGraphStreams = 4;  // further streams take cuLaunchKernel
  static constexpr int kMakeAttempts = 4;

  ~Prepared() {
    if (graph_slots.empty()) return;
    Relaxed relaxed(s->d);
    for (GraphSlot& g : graph_slots) DestroyGraph(g);
  }
  Status Resolve(std::span<const int64_t> dims);
  // The stream's graph of the launch as resolved, its arguments current;
  // nullptr where none serves (another context current, a capture on the
  // stream, the per-thread default stream, too many streams, graphs off, the
  // driver refusing): launch the kernel.
  CUgraphExec GraphFor(CUstream stream);

 private:
  // Graphs are made and destroyed with this thread's capture mode relaxed:
  // a capture running in another thread (torch captures in global mode)
  // neither refuses these calls nor is spoiled by them.
  struct Relaxed {
    const Driver& d;
    int mode = kCaptureModeRelaxed;
    bool exchanged;
    explicit Relaxed(const Driver& driver) : d(driver), exchanged(d.cuThreadExchangeStreamCaptureMode(&mode) == 0) {}
    ~Relaxed() {
      if (exchanged) d.cuThreadExchangeStreamCaptureMode(&mode);
    }
  };
  KernelNodeParams NodeParams() {
    KernelNodeParams np;
    np.func = function;
    for (int i = 0; i < 3; ++i) np.grid[i] = unsigned(choice.grid[i]), np.block[i] = unsigned(choice.block[i]);
    np.smem_bytes = unsigned(choice.smem_bytes);
    np.kernel_params = params.data();
    return np;
  }
  CUresult MakeGraph(GraphSlot* g);
  void DestroyGraph(GraphSlot& g) {  // under Relaxed
    if (g.exec) s->d.cuGraphExecDestroy(g.exec);  // one still running is freed when it completes
    if (g.graph) s->d.cuGraphDestroy(g.graph);
    g = GraphSlot{g.stream};
  }
};

CUresult Prepared::MakeGraph(GraphSlot* g) {
  const Driver& d = s->d;
  Relaxed relaxed(d);
  if (!relaxed.exchanged) return kErrorNotSupported;
  const KernelNodeParams np = NodeParams();
  CUresult r = d.cuGraphCreate(&g->graph, 0);
  if (r == 0) r = d.cuGraphAddKernelNode(&g->node, g->graph, nullptr, 0, &np);
  if (r == 0) r = d.cuGraphInstantiateWithFlags(&g->exec, g->graph, 0);
  if (r != 0) DestroyGraph(*g);
  g->arguments = arguments;
  return r;
}

CUgraphExec Prepared::GraphFor(CUstream stream) {
  if (!graphs) return nullptr;
  const Driver& d = s->d;
  // Another context current (a caller on another device's context) or none
  // (a new thread): the kernel's launch refuses the first as it did, and
  // makes the launcher's context current for the second. A replay would run
  // the kernel on the other context's default stream instead.
  CUcontext current = nullptr;
  if (d.cuCtxGetCurrent(&current) != 0 || current != s->ctx) return nullptr;
  // The per-thread default stream is one handle for every thread: one
  // graph would order the threads' launches behind each other.
  if (stream == kStreamPerThread) return nullptr;
  // A capture records the kernel itself.
  int capture = kCaptureStatusNone;
  if (d.cuStreamIsCapturing(stream, &capture) != 0 || capture != kCaptureStatusNone) return nullptr;
  GraphSlot* g = nullptr;
  for (GraphSlot& x : graph_slots)
    if (x.stream == stream) g = &x;
  if (!g) {
    if (graph_slots.size() >= kGraphStreams) return nullptr;
    GraphSlot made{stream};
    if (MakeGraph(&made) != 0) {
      // This call launches the kernel (which says what is wrong, if
      // anything is); a driver that keeps refusing gets kernels only.
      if (++failed_makes >= kMakeAttempts) graphs = false;
      return nullptr;
    }
    g = &graph_slots.emplace_back(made);
  } else if (g->arguments != arguments) {
    // A refused update (arguments the kernel's launch refuses too) leaves
    // the graph as it was, to be updated at the next call.
    const KernelNodeParams np = NodeParams();
    if (d.cuGraphExecKernelNodeSetParams(g->exec, g->node, &np) != 0) return nullptr;
    g->arguments = arguments;
  }
  return g->exec;
}

// The geometry of `config` on `dims` under `plan`, checked against what the
// device and the loaded function allow.
Result<LaunchGeometry> Geometry(const Shared& s, const Candidate& c, const runtime::NamedInts& config,
                                const std::vector<std::string>& dim_names, std::span<const int64_t> dims,
                                const std::string& dtype) {
  ParamValues params;
  NamedValues named_dims;
  for (size_t i = 0; i < config.size(); ++i) params.emplace_back(config.name(i), config.value(i));
  for (size_t i = 0; i < dim_names.size() && i < dims.size(); ++i) named_dims.emplace_back(dim_names[i], dims[i]);
  auto vars = LaunchVariables(*c.plan, params, named_dims, dtype, s.Limits());
  if (!vars.ok()) return vars.status();
  auto g = EvaluateLaunchPlan(*c.plan, *vars);
  if (!g.ok()) return g.status();
  const int64_t threads = g->block[0] * g->block[1] * g->block[2];
  if (threads > c.module->max_threads)
    return Status::InvalidArgument("block of " + std::to_string(threads) + " threads exceeds the kernel's limit of " +
                                   std::to_string(c.module->max_threads) + " on this device");
  if (c.module->static_smem + g->smem_bytes > s.device.smem_optin)
    return Status::InvalidArgument("shared memory " + std::to_string(c.module->static_smem + g->smem_bytes) +
                                   " bytes exceeds the device's " + std::to_string(s.device.smem_optin));
  return g;
}

Status Prepared::Resolve(std::span<const int64_t> dims) {
  cached = false;
  const runtime::Answer a = lookup.lookup(dims);
  choice = Choice{};
  choice.level = a.level;
  if (a.level == runtime::Level::kMiss || !a.config) {
    std::string archs;
    for (const KernelImage& k : s->bundle->source().kernels) {
      if (archs.find(k.arch) == std::string::npos) archs += (archs.empty() ? "" : ", ") + k.arch;
    }
    return Status::NotFound("launch " + op + "/" + dtype + ": miss: nothing in the bundle runs on " +
                            s->device.model + " (sm_" + std::to_string(s->device.cc_major) +
                            std::to_string(s->device.cc_minor) + "); its cubins are for: " +
                            (archs.empty() ? "none (a config-only bundle)" : archs) +
                            (skipped.empty() ? "" : "; skipped: " + skipped));
  }
  const Candidate& c = candidates.at(a.config);
  auto g = Geometry(*s, c, *a.config, dim_names, dims, dtype);
  if (!g.ok()) return g.status().WithPrefix("launch " + op + "/" + dtype + " " + a.config->ToString() + ": ");
  if (g->smem_bytes > c.module->dynamic_smem_allowed.load()) {
    std::lock_guard<std::mutex> lock(s->mu);
    if (g->smem_bytes > c.module->dynamic_smem_allowed.load()) {
      if (CUresult r = s->d.cuFuncSetAttribute(c.module->function, kFuncMaxDynamicSmem, int(g->smem_bytes)); r != 0)
        return Status::Error("launch " + op + ": " + s->d.Error(r, "cuFuncSetAttribute"));
      c.module->dynamic_smem_allowed = int(g->smem_bytes);
    }
  }
  choice.config = a.config;
  choice.entry = a.entry;
  choice.candidates = a.candidates;
  choice.arch = c.arch;
  std::copy(g->grid, g->grid + 3, choice.grid);
  std::copy(g->block, g->block + 3, choice.block);
  choice.smem_bytes = g->smem_bytes;
  function = c.module->function;
  const auto& args = c.plan->args;
  slots.assign(args.size(), Slot{0});
  params.resize(args.size());
  buffer_slots.clear();
  maps.clear();
  for (size_t i = 0; i < args.size(); ++i) {
    params[i] = &slots[i];
    if (args[i].buffer) {
      buffer_slots.push_back(i);
      continue;
    }
    if (args[i].tensor_map()) {
      const BundleLaunchArg& of = args[size_t(args[i].map_of)];
      const std::string buffer_dtype = of.dtype == "$dtype" ? dtype : of.dtype;
      auto layout = LayTensorMap(args[i].name, buffer_dtype, g->map_extents[i], g->map_box[i], args[i].swizzle);
      if (!layout.ok()) return layout.status().WithPrefix("launch " + op + ": ");
      if (!s->d.cuTensorMapEncodeTiled)
        return Status::Unavailable("launch " + op + ": the kernel takes tensor maps and this CUDA driver cannot "
                                   "encode them (cuTensorMapEncodeTiled: CUDA 12 and later)");
      maps.push_back(MapSlot{args[i].name, i, size_t(args[i].map_of), *layout, 0});
      continue;
    }
    // Rounded as the farm's runner passes them; a value the type cannot
    // hold is refused rather than converted with undefined behaviour.
    const double v = g->scalars[i];
    if (args[i].scalar_type == "f32") {
      slots[i].f32 = static_cast<float>(v);
    } else if (args[i].scalar_type == "i64" ? !(std::fabs(v) < 0x1p63)
                                            : !(v >= std::numeric_limits<int32_t>::min() - 0.5 &&
                                                v < std::numeric_limits<int32_t>::max() + 0.5)) {
      return Status::InvalidArgument("launch " + op + ": arg " + args[i].name + " = " + std::to_string(v) +
                                     " does not fit " + args[i].scalar_type);
    } else if (args[i].scalar_type == "i64") {
      slots[i].i64 = std::llround(v);
    } else {
      slots[i].i32 = static_cast<int32_t>(std::llround(v));
    }
  }
  if (buffer_slots.size() != buffer_names.size())
    return Status::Corruption("launch " + op + ": the launch plan has " + std::to_string(buffer_slots.size()) +
                              " buffers, the kernel " + std::to_string(buffer_names.size()));
  last_dims.assign(dims.begin(), dims.end());
  cached = true;
  ++arguments;
  return Status::OK();
}

}  // namespace detail

using detail::Candidate;
using detail::Prepared;
using detail::Shared;

Kernel::Kernel(std::unique_ptr<Prepared> p) : p_(std::move(p)) {}
Kernel::Kernel(Kernel&&) noexcept = default;
Kernel& Kernel::operator=(Kernel&&) noexcept = default;
Kernel::~Kernel() = default;

const std::vector<std::string>& Kernel::dim_names() const { return p_->dim_names; }
const std::vector<std::string>& Kernel::buffer_names() const { return p_->buffer_names; }
const std::vector<std::string>& Kernel::buffer_dirs() const { return p_->buffer_dirs; }
const Choice& Kernel::last() const { return p_->choice; }

Status Kernel::launch(std::span<const int64_t> dims, std::span<const uint64_t> buffers, void* stream) {
  Prepared& p = *p_;
  if (dims.size() != p.dim_names.size())
    return Status::InvalidArgument("launch " + p.op + ": " + std::to_string(dims.size()) + " dims for " +
                                   std::to_string(p.dim_names.size()));
  if (buffers.size() != p.buffer_names.size())
    return Status::InvalidArgument("launch " + p.op + ": " + std::to_string(buffers.size()) + " buffers for " +
                                   std::to_string(p.buffer_names.size()));
  if (!p.cached || !std::equal(dims.begin(), dims.end(), p.last_dims.begin(), p.last_dims.end())) {
    TUNE_RETURN_IF_ERROR(p.Resolve(dims));
  }
  bool moved = false;
  for (size_t i = 0; i < p.buffer_slots.size(); ++i) {
    uint64_t& ptr = p.slots[p.buffer_slots[i]].ptr;
    moved |= ptr != buffers[i];
    ptr = buffers[i];
  }
  if (moved) ++p.arguments;  // a tensor map encoded below moved with its buffer
  for (detail::MapSlot& m : p.maps) {
    const uint64_t address = p.slots[m.buffer].ptr;
    if (address == m.encoded_for) continue;
    TUNE_RETURN_IF_ERROR(CheckTensorMapAddress(m.name, address).WithPrefix("launch " + p.op + ": "));
    const TensorMapLayout& l = m.layout;
    if (detail::CUresult r = p.s->d.cuTensorMapEncodeTiled(
            p.slots[m.slot].map, l.dtype, l.rank, reinterpret_cast<void*>(address), l.dims, l.strides, l.box,
            l.element_strides, l.kInterleaveNone, l.swizzle, l.kL2Promotion256B, l.kOobFillZeros);
        r != 0)
      return Status::Error("launch " + p.op + ": tensor map " + m.name + ": " +
                           p.s->d.Error(r, "cuTensorMapEncodeTiled"));
    m.encoded_for = address;
  }
  const auto cu_stream = static_cast<detail::CUstream>(stream);
  const detail::CUgraphExec graph = p.GraphFor(cu_stream);
  p.choice.replayed = graph != nullptr;
  const Choice& c = p.choice;
  auto go = [&] {
    if (graph) return p.s->d.cuGraphLaunch(graph, cu_stream);
    return p.s->d.cuLaunchKernel(p.function, unsigned(c.grid[0]), unsigned(c.grid[1]), unsigned(c.grid[2]),
                                 unsigned(c.block[0]), unsigned(c.block[1]), unsigned(c.block[2]),
                                 unsigned(c.smem_bytes), cu_stream, p.params.data(), nullptr);
  };
  detail::CUresult r = go();
  if (r == detail::kErrorInvalidContext && p.s->d.cuCtxSetCurrent(p.s->ctx) == 0) r = go();  // another thread
  if (r != 0)
    return Status::Error("launch " + p.op + ": " + p.s->d.Error(r, graph ? "cuGraphLaunch" : "cuLaunchKernel"));
  return Status::OK();
}

Launcher::Launcher(std::shared_ptr<Shared> s) : s_(std::move(s)) {}
Launcher::Launcher(Launcher&&) noexcept = default;
Launcher& Launcher::operator=(Launcher&&) noexcept = default;
Launcher::~Launcher() = default;

const Device& Launcher::device() const { return s_->device; }

std::string Launcher::arch() const {
  return CudaArch(s_->device.cc_major, s_->device.cc_minor);
}

Result<Launcher> Launcher::Open(const runtime::Bundle& bundle, int ordinal) {
  auto s = std::make_shared<Shared>();
  s->bundle = &bundle;
  auto d = detail::OpenDriver();
  if (!d.ok()) return d.status().WithPrefix("launcher: ");
  s->d = *d;
  const detail::Driver& dr = s->d;
  const char* graphs = std::getenv("TUNEFARM_LAUNCH_GRAPHS");
  s->graphs = dr.graphs && !(graphs && std::string_view(graphs) == "0");
  auto fail = [&](detail::CUresult r, const char* call) { return Status::Unavailable("launcher: " + dr.Error(r, call)); };
  if (detail::CUresult r = dr.cuInit(0); r != 0) return fail(r, "cuInit");
  int count = 0;
  if (detail::CUresult r = dr.cuDeviceGetCount(&count); r != 0) return fail(r, "cuDeviceGetCount");
  if (ordinal < 0 || ordinal >= count)
    return Status::NotFound("launcher: no CUDA device " + std::to_string(ordinal) + " (" + std::to_string(count) +
                            " present)");
  detail::CUdevice dev = 0;
  if (detail::CUresult r = dr.cuDeviceGet(&dev, ordinal); r != 0) return fail(r, "cuDeviceGet");
  char name[256] = {};
  if (detail::CUresult r = dr.cuDeviceGetName(name, sizeof name - 1, dev); r != 0) return fail(r, "cuDeviceGetName");
  Device& info = s->device;
  info.ordinal = ordinal;
  info.name = name;
  info.model = NormaliseGpuModel(info.name);
  const std::pair<int, int64_t*> attrs[] = {{detail::kAttrSmemOptin, &info.smem_optin},
                                            {detail::kAttrMaxThreadsPerBlock, &info.max_threads},
                                            {detail::kAttrSmCount, &info.num_sms},
                                            {detail::kAttrL2, &info.l2_bytes}};
  for (const auto& [attr, out] : attrs) {
    int v = 0;
    if (detail::CUresult r = dr.cuDeviceGetAttribute(&v, attr, dev); r != 0) return fail(r, "cuDeviceGetAttribute");
    *out = v;
  }
  if (detail::CUresult r = dr.cuDeviceGetAttribute(&info.cc_major, detail::kAttrCcMajor, dev); r != 0)
    return fail(r, "cuDeviceGetAttribute");
  if (detail::CUresult r = dr.cuDeviceGetAttribute(&info.cc_minor, detail::kAttrCcMinor, dev); r != 0)
    return fail(r, "cuDeviceGetAttribute");
  if (detail::CUresult r = dr.cuDevicePrimaryCtxRetain(&s->ctx, dev); r != 0) return fail(r, "cuDevicePrimaryCtxRetain");
  s->dev = dev;
  if (detail::CUresult r = dr.cuCtxSetCurrent(s->ctx); r != 0) return fail(r, "cuCtxSetCurrent");
  return Launcher(std::move(s));
}

Result<Kernel> Launcher::prepare(std::string_view op, std::string_view dtype) {
  auto p = std::make_unique<Prepared>();
  p->s = s_;
  p->graphs = s_->graphs;
  p->op = std::string(op);
  p->dtype = std::string(dtype);
  Shared& s = *s_;
  if (detail::CUresult r = s.d.cuCtxSetCurrent(s.ctx); r != 0)
    return Status::Error("launcher: " + s.d.Error(r, "cuCtxSetCurrent"));
  const tune::Bundle& src = s.bundle->source();
  // The kernel's signature: the buffers of the op's first launch plan. A
  // candidate whose plan passes other buffers (another version of the op's
  // arguments) is skipped.
  const BundleLaunchPlan* signature = nullptr;
  for (const BundleLaunchPlan& plan : src.launch_plans)
    if (plan.op == op && !signature) signature = &plan;
  auto buffers_of = [](const BundleLaunchPlan& plan) {
    std::vector<std::string> names;
    for (const BundleLaunchArg& a : plan.args)
      if (a.buffer) names.push_back(a.name);
    return names;
  };
  if (signature) {
    p->buffer_names = buffers_of(*signature);
    for (const BundleLaunchArg& a : signature->args)
      if (a.buffer) p->buffer_dirs.push_back(a.dir);
  }
  if (const auto* dims = s.bundle->dims_of(op)) {
    p->dim_names = *dims;
  } else if (signature) {
    // No tuned entry: the op's dims are the plan's variables that are
    // neither its params (those of the op's default) nor device limits.
    const auto def = src.defaults.find(std::string(op));
    for (const std::string& v : signature->vars) {
      const bool param = def != src.defaults.end() &&
                         std::any_of(def->second.params.begin(), def->second.params.end(),
                                     [&](const auto& nv) { return nv.first == v; });
      const bool limit =
          std::find(std::begin(kLaunchDeviceVars), std::end(kLaunchDeviceVars), v) != std::end(kLaunchDeviceVars);
      if (!param && !limit) p->dim_names.push_back(v);
    }
  }
  const std::string arch = this->arch(), arch_a = arch + "a";
  auto usable = [&](const runtime::Answer& a) {
    Config config;
    for (size_t i = 0; i < a.config->size(); ++i) config.params.emplace_back(a.config->name(i), ParamValue::Of(a.config->value(i), a.config->text(i)));
    const std::string config_id = a.entry ? a.entry->config_id : config.Id();
    // The cubin for this device: the entry's kernel hash, or for the op's
    // default any kernel hash of the op that has a plan here.
    for (const KernelImage& k : src.kernels) {
      if (k.config_id != config_id || k.dtype != dtype || (k.arch != arch && k.arch != arch_a)) continue;
      if (a.entry && k.kernel_hash != a.entry->kernel_hash) continue;
      const BundleLaunchPlan* plan = nullptr;
      for (const BundleLaunchPlan& pl : src.launch_plans)
        if (pl.op == op && pl.kernel_hash == k.kernel_hash) plan = &pl;
      if (!plan) continue;
      if (buffers_of(*plan) != p->buffer_names) {
        if (p->skipped.empty()) p->skipped = "config " + config_id + ": its launch plan takes other buffers";
        continue;
      }
      auto module = s.Load(k, plan->function);
      if (!module.ok()) {
        if (p->skipped.empty()) p->skipped = module.status().message();
        continue;
      }
      Candidate c{plan, *module, k.arch};
      // Resources on the entry's own shape (defaults: dims of 1): what a
      // config needs seldom depends on the dims; launch() checks again.
      std::vector<int64_t> dims(p->dim_names.size(), 1);
      if (a.entry) {
        for (size_t i = 0; i < p->dim_names.size(); ++i) dims[i] = a.entry->shape.get(p->dim_names[i], 1);
      }
      auto g = detail::Geometry(s, c, *a.config, p->dim_names, dims, p->dtype);
      if (!g.ok()) {
        if (p->skipped.empty()) p->skipped = g.status().message();
        continue;
      }
      p->candidates.emplace(a.config, c);
      return true;
    }
    return false;
  };
  p->lookup = s.bundle->prepare(op, dtype, s.device.model, arch, usable);
  if (!signature && !s.bundle->dims_of(op))
    return Status::NotFound("launcher: the bundle knows no op '" + std::string(op) + "'");
  return Kernel(std::move(p));
}

}  // namespace tune::launcher
