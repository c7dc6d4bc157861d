// Launch overhead (bench/launcher.md): what tune::launcher::Kernel::launch
// costs beside a bare cuLaunchKernel of the same function, geometry and
// arguments, on a repeated shape (the launcher replaying the kernel's graph,
// and with TUNEFARM_LAUNCH_GRAPHS=0 launching it); and the bare call on a
// stream of its own (non-blocking) beside the legacy default stream, which a
// launch from torch on its default stream uses; the arguments packed in one
// buffer; the bare graph calls. All loops queue the same small gemm; the
// figures are the median and mean host time of one call, over batches of
// launches each followed by a synchronisation (so the queue never fills).
//
//   bench_launch_overhead [--ops-dir ops] [--shape 64] [--calls 20000]
//
// It compiles the gemm op's default config with NVRTC for device 0, signs a
// bundle with it in memory and opens a launcher on it. Needs a GPU.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <numeric>
#include <string>
#include <vector>

#include "measure/cuda/cuda_driver.h"
#include "measure/cuda/device_discovery.h"
#include "bundle/bundle.h"
#include "measure/cuda/cuda_backend.h"
#include "tune/launcher.h"
#include "publish/publish.h"
#include "tune/runtime.h"

using namespace tune;
using Clock = std::chrono::steady_clock;

namespace {

int Fail(const std::string& why) {
  std::fprintf(stderr, "bench_launch_overhead: %s\n", why.c_str());
  return 1;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The mean is what a loop of launches pays per call (Python's timings are
// means): the median leaves out the calls that pay for the rest.
double Mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}

}  // namespace

int main(int argc, char** argv) {
  std::string ops_dir = "ops";
  int64_t n = 64;
  int calls = 20000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--ops-dir") ops_dir = argv[i + 1];
    else if (flag == "--shape") n = std::atoll(argv[i + 1]);
    else if (flag == "--calls") calls = std::atoi(argv[i + 1]);
    else return Fail("unknown flag " + flag);
  }
  auto d = cuda::LoadDriver();
  if (!d.ok()) return Fail(d.status().message());
  const cuda::Driver& dr = **d;
  auto dev = cuda::DescribeDevice(dr, 0);
  if (!dev.ok()) return Fail(dev.status().message());
  auto spec = LoadOpSpec(ops_dir + "/gemm");
  if (!spec.ok()) return Fail(spec.status().message());
  const std::string arch = CudaArchFor(*spec, *dev);
  CompiledKernel ck = CompileConfig(*spec, "f16", spec->default_config, arch, "/tmp/tunefarm-bench-cache");
  if (ck.failure != FailureClass::kNone) return Fail(ck.failure_message + "\n" + ck.log);

  Bundle b;
  b.defaults["gemm"] = spec->default_config;
  BundleEntry e;
  e.op = "gemm";
  e.dtype = "f16";
  e.gpu_model = dev->model;
  e.shape.dims = {{"M", n}, {"N", n}, {"K", n}};
  e.config = spec->default_config;
  e.config_id = spec->default_config.Id();
  e.kernel_hash = ck.kernel_hash;
  e.arch = arch;
  b.entries = {e};
  auto plan = MakeLaunchPlan(*spec, ck.kernel_hash);
  if (!plan.ok()) return Fail(plan.status().message());
  b.launch_plans = {*plan};
  KernelImage image{ck.kernel_hash, e.config_id, "f16", arch, Sha256Hex(ck.image), ck.image, {}, {}};
  b.kernels = {image};
  const SecretKey key = SecretKey::Generate();
  const std::string bytes = EncodeSignedBundle(b, key);
  auto rb = runtime::Bundle::LoadFromMemory(bytes.data(), bytes.size(), {FormatPublicKey(key.public_key())});
  if (!rb.ok()) return Fail(rb.status().message());
  auto launcher = launcher::Launcher::Open(*rb, 0);
  if (!launcher.ok()) return Fail(launcher.status().message());
  auto kernel = launcher->prepare("gemm", "f16");
  if (!kernel.ok()) return Fail(kernel.status().message());
  // The same launcher launching kernels (the setting is read when a launcher opens).
  const char* graphs_setting = std::getenv("TUNEFARM_LAUNCH_GRAPHS");
  const std::string graphs_was = graphs_setting ? graphs_setting : "";
  ::setenv("TUNEFARM_LAUNCH_GRAPHS", "0", 1);
  auto kernels_only_launcher = launcher::Launcher::Open(*rb, 0);
  if (graphs_setting) ::setenv("TUNEFARM_LAUNCH_GRAPHS", graphs_was.c_str(), 1);
  else ::unsetenv("TUNEFARM_LAUNCH_GRAPHS");
  if (!kernels_only_launcher.ok()) return Fail(kernels_only_launcher.status().message());
  auto kernels_only = kernels_only_launcher->prepare("gemm", "f16");
  if (!kernels_only.ok()) return Fail(kernels_only.status().message());

  CUdeviceptr a = 0, bb = 0, c = 0;
  const size_t bytes_each = size_t(n * n * 2);
  if (dr.cuMemAlloc(&a, bytes_each) || dr.cuMemAlloc(&bb, bytes_each) || dr.cuMemAlloc(&c, bytes_each))
    return Fail("cuMemAlloc failed");
  Status st = kernel->launch({n, n, n}, {uint64_t(a), uint64_t(bb), uint64_t(c)});
  if (!st.ok()) return Fail(st.message());
  dr.cuCtxSynchronize();
  const launcher::Choice& ch = kernel->last();

  // The bare launch: the same cubin, geometry and arguments.
  CUmodule module = nullptr;
  CUfunction fn = nullptr;
  if (dr.cuModuleLoadData(&module, image.image.data()) || dr.cuModuleGetFunction(&fn, module, spec->kernel.c_str()))
    return Fail("cannot load the cubin");
  if (ch.smem_bytes > 48 * 1024)
    dr.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(ch.smem_bytes));
  int32_t dims32[3] = {int32_t(n), int32_t(n), int32_t(n)};
  void* params[] = {&a, &bb, &c, &dims32[0], &dims32[1], &dims32[2]};

  CUstream own = nullptr;
  if (dr.cuStreamCreate(&own, CU_STREAM_NON_BLOCKING)) return Fail("cuStreamCreate failed");
  constexpr int kBatch = 200;
  std::vector<double> bare, through, through_kernels, bare_own, bare_packed;
  // The same arguments packed in one buffer (the `extra` form of the call):
  // three pointers, then three ints.
  struct {
    CUdeviceptr a, b, c;
    int32_t m, n, k;
  } packed{a, bb, c, int32_t(n), int32_t(n), int32_t(n)};
  size_t packed_size = offsetof(decltype(packed), k) + sizeof packed.k;  // the kernel's parameter bytes, no padding
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &packed_size,
                   CU_LAUNCH_PARAM_END};
  auto bare_launch = [&](CUstream stream, void** kernel_params, void** kernel_extra) {
    return dr.cuLaunchKernel(fn, unsigned(ch.grid[0]), unsigned(ch.grid[1]), unsigned(ch.grid[2]),
                             unsigned(ch.block[0]), unsigned(ch.block[1]), unsigned(ch.block[2]),
                             unsigned(ch.smem_bytes), stream, kernel_params, kernel_extra);
  };
  if (bare_launch(nullptr, nullptr, extra)) return Fail("the packed-argument launch failed");
  // One batch of `call`s, each timed into `out`, then a synchronisation.
  auto batch = [&](std::vector<double>* out, const auto& call) {
    for (int i = 0; i < kBatch; ++i) {
      const auto t0 = Clock::now();
      call();
      out->push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
    }
    dr.cuCtxSynchronize();
  };
  // The same launch as a graph of one kernel node, replayed per call: as
  // is (its arguments unchanged), and with the node's arguments set before
  // each replay (C alternating between two buffers); and the capture query
  // a launch that replays graphs makes first. The graph calls come from the
  // driver library itself (the farm's driver table leaves them out).
  using GraphCreateFn = CUresult (*)(CUgraph*, unsigned);
  using AddKernelNodeFn = CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                                       const CUDA_KERNEL_NODE_PARAMS_v2*);
  using InstantiateFn = CUresult (*)(CUgraphExec*, CUgraph, unsigned long long);
  using SetParamsFn = CUresult (*)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v2*);
  using GraphLaunchFn = CUresult (*)(CUgraphExec, CUstream);
  using IsCapturingFn = CUresult (*)(CUstream, CUstreamCaptureStatus*);
  void* libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  auto get = [&](const char* name) { return libcuda ? dlsym(libcuda, name) : nullptr; };
  auto graph_create = reinterpret_cast<GraphCreateFn>(get("cuGraphCreate"));
  auto add_node = reinterpret_cast<AddKernelNodeFn>(get("cuGraphAddKernelNode_v2"));
  auto instantiate = reinterpret_cast<InstantiateFn>(get("cuGraphInstantiateWithFlags"));
  auto set_params = reinterpret_cast<SetParamsFn>(get("cuGraphExecKernelNodeSetParams_v2"));
  auto graph_launch = reinterpret_cast<GraphLaunchFn>(get("cuGraphLaunch"));
  auto is_capturing = reinterpret_cast<IsCapturingFn>(get("cuStreamIsCapturing"));
  CUgraph graph = nullptr;
  CUgraphNode node = nullptr;
  CUgraphExec graph_exec = nullptr;
  CUDA_KERNEL_NODE_PARAMS_v2 np{};
  np.func = fn;
  np.gridDimX = unsigned(ch.grid[0]), np.gridDimY = unsigned(ch.grid[1]), np.gridDimZ = unsigned(ch.grid[2]);
  np.blockDimX = unsigned(ch.block[0]), np.blockDimY = unsigned(ch.block[1]), np.blockDimZ = unsigned(ch.block[2]);
  np.sharedMemBytes = unsigned(ch.smem_bytes);
  np.kernelParams = params;
  if (graph_create && add_node && instantiate && set_params && graph_launch && is_capturing &&
      (graph_create(&graph, 0) != 0 || add_node(&node, graph, nullptr, 0, &np) != 0 ||
       instantiate(&graph_exec, graph, 0) != 0))
    graph_exec = nullptr;
  CUdeviceptr c2 = 0;
  if (dr.cuMemAlloc(&c2, bytes_each)) return Fail("cuMemAlloc failed");
  CUdeviceptr c_now = c;
  void* params_c[] = {&a, &bb, &c_now, &dims32[0], &dims32[1], &dims32[2]};
  CUDA_KERNEL_NODE_PARAMS_v2 np_c = np;
  np_c.kernelParams = params_c;
  std::vector<double> graph_default, graph_own, graph_set, capture_query;
  for (int round = 0; round < calls / kBatch; ++round) {
    if (graph_exec) {
      batch(&graph_default, [&] { graph_launch(graph_exec, nullptr); });
      batch(&graph_own, [&] { graph_launch(graph_exec, own); });
      batch(&graph_set, [&] {
        c_now = c_now == c ? c2 : c;
        set_params(graph_exec, node, &np_c);
        graph_launch(graph_exec, nullptr);
      });
      batch(&capture_query, [&] {
        CUstreamCaptureStatus status;
        is_capturing(nullptr, &status);
      });
    }
    batch(&bare, [&] { bare_launch(nullptr, params, nullptr); });
    batch(&through, [&] { (void)kernel->launch({n, n, n}, {uint64_t(a), uint64_t(bb), uint64_t(c)}); });
    batch(&through_kernels, [&] { (void)kernels_only->launch({n, n, n}, {uint64_t(a), uint64_t(bb), uint64_t(c)}); });
    batch(&bare_own, [&] { bare_launch(own, params, nullptr); });
    batch(&bare_packed, [&] { bare_launch(nullptr, nullptr, extra); });
  }
  // The GPU's side: a batch of launches from its first call until the GPU
  // has run them all, through the launcher replaying its graph and
  // launching the kernel (a replayed graph must not run the queue slower).
  std::vector<double> queue_graphs, queue_kernels;
  auto queue = [&](std::vector<double>* out, launcher::Kernel& k) {
    const auto t0 = Clock::now();
    for (int i = 0; i < kBatch; ++i) (void)k.launch({n, n, n}, {uint64_t(a), uint64_t(bb), uint64_t(c)});
    dr.cuCtxSynchronize();
    out->push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / kBatch);
  };
  for (int round = 0; round < calls / kBatch; ++round) {
    queue(&queue_graphs, *kernel);
    queue(&queue_kernels, *kernels_only);
  }
  const double mb = Median(bare), mt = Median(through_kernels);
  std::printf("device %s (%s), gemm f16 %lld^3, config %s, %zu calls each\n", dev->name.c_str(), arch.c_str(),
              (long long)n, ch.config->ToString().c_str(), bare.size());
  std::printf("bare cuLaunchKernel   median %8.1f ns  mean %8.1f ns\n", mb, Mean(bare));
  std::printf("launcher launch()     median %8.1f ns  mean %8.1f ns  (replaying its graph: %s)\n", Median(through),
              Mean(through), kernel->last().replayed ? "yes" : "no");
  std::printf("launcher, kernels     median %8.1f ns  mean %8.1f ns  (TUNEFARM_LAUNCH_GRAPHS=0)\n", mt,
              Mean(through_kernels));
  std::printf("overhead              median %8.1f ns  (kernels launched, over bare; goal <= 1000 ns)\n", mt - mb);
  std::printf("bare, own stream      median %8.1f ns  mean %8.1f ns\n", Median(bare_own), Mean(bare_own));
  std::printf("bare, packed args     median %8.1f ns  mean %8.1f ns\n", Median(bare_packed), Mean(bare_packed));
  if (graph_exec) {
    std::printf("graph of it           median %8.1f ns  mean %8.1f ns\n", Median(graph_default), Mean(graph_default));
    std::printf("graph, own stream     median %8.1f ns  mean %8.1f ns\n", Median(graph_own), Mean(graph_own));
    std::printf("graph, args set       median %8.1f ns  mean %8.1f ns\n", Median(graph_set), Mean(graph_set));
    std::printf("capture query         median %8.1f ns  mean %8.1f ns\n", Median(capture_query), Mean(capture_query));
  } else {
    std::printf("graph of it           (not timed: the driver could not make the graph)\n");
  }
  std::printf("queue run, graphs     median %8.1f ns per launch until the GPU is done\n", Median(queue_graphs));
  std::printf("queue run, kernels    median %8.1f ns per launch until the GPU is done\n", Median(queue_kernels));
  dr.cuCtxSynchronize();
  if (graph_exec) reinterpret_cast<CUresult (*)(CUgraphExec)>(get("cuGraphExecDestroy"))(graph_exec);
  if (graph) reinterpret_cast<CUresult (*)(CUgraph)>(get("cuGraphDestroy"))(graph);
  if (libcuda) dlclose(libcuda);
  for (CUdeviceptr p : {a, bb, c, c2}) dr.cuMemFree(p);
  dr.cuStreamDestroy(own);
  dr.cuModuleUnload(module);
  return 0;
}
