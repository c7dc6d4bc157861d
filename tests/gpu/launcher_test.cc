// The launcher on a GPU: a signed bundle with cubins made here by NVRTC, the
// gemm launched through it on device buffers and checked against the host;
// a config the device cannot run is skipped; a bundle without a cubin for
// the device misses with a line; the C API's handles outlive each other in
// any order; launches replay the kernel's graph, one per stream, and
// launch the kernel itself into a capture. Skips without a CUDA device.
#include <gtest/gtest.h>

#ifndef TUNEFARM_WITH_CUDA
TEST(LauncherGpu, NeedsTheCudaToolkit) { GTEST_SKIP() << "built without the CUDA toolkit"; }
#else

#include <dlfcn.h>

#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "measure/cuda/cuda_driver.h"
#include "measure/cuda/device_discovery.h"
#include "measure/runner/host_data.h"
#include "support/temp_dir.h"
#include "bundle/bundle.h"
#include "measure/cuda/cuda_backend.h"
#include "tune/c.h"
#include "tune/launcher.h"
#include "publish/publish.h"
#include "tune/runtime.h"

namespace tune {
namespace {

using tune::testing::TempDir;

// The driver's capture and graph calls the tests make themselves (the
// farm's driver table has none).
struct GraphCalls {
  CUresult (*begin_capture)(CUstream, CUstreamCaptureMode) = nullptr;
  CUresult (*end_capture)(CUstream, CUgraph*) = nullptr;
  CUresult (*get_nodes)(CUgraph, CUgraphNode*, size_t*) = nullptr;
  CUresult (*node_type)(CUgraphNode, CUgraphNodeType*) = nullptr;
  CUresult (*instantiate)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*graph_launch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*exec_destroy)(CUgraphExec) = nullptr;
  CUresult (*graph_destroy)(CUgraph) = nullptr;
  CUresult (*ctx_create)(CUcontext*, unsigned, CUdevice) = nullptr;
  CUresult (*ctx_destroy)(CUcontext) = nullptr;
  CUresult (*ctx_set_current)(CUcontext) = nullptr;
  CUresult (*ctx_get_current)(CUcontext*) = nullptr;

  bool Load() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) return false;
    auto get = [&](auto* fn, const char* name) {
      *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(dlsym(lib, name));
      return *fn != nullptr;
    };
    return get(&begin_capture, "cuStreamBeginCapture_v2") && get(&end_capture, "cuStreamEndCapture") &&
           get(&get_nodes, "cuGraphGetNodes") && get(&node_type, "cuGraphNodeGetType") &&
           get(&instantiate, "cuGraphInstantiateWithFlags") && get(&graph_launch, "cuGraphLaunch") &&
           get(&exec_destroy, "cuGraphExecDestroy") && get(&graph_destroy, "cuGraphDestroy") &&
           get(&ctx_create, "cuCtxCreate_v2") && get(&ctx_destroy, "cuCtxDestroy_v2") &&
           get(&ctx_set_current, "cuCtxSetCurrent") && get(&ctx_get_current, "cuCtxGetCurrent");
  }
  // The kernel nodes of `g` (every node of it is one, and there are `count`).
  void ExpectKernelNodes(CUgraph g, size_t count) const {
    size_t n = 0;
    EXPECT_EQ(get_nodes(g, nullptr, &n), CUDA_SUCCESS);
    EXPECT_EQ(n, count);
    std::vector<CUgraphNode> nodes(n);
    EXPECT_EQ(get_nodes(g, nodes.data(), &n), CUDA_SUCCESS);
    for (CUgraphNode node : nodes) {
      CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
      EXPECT_EQ(node_type(node, &type), CUDA_SUCCESS);
      EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_KERNEL);
    }
  }
};

class LauncherGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = cuda::LoadDriver();
    if (!d.ok()) GTEST_SKIP() << "no CUDA driver: " << d.status().message();
    d_ = *d;
    int count = 0;
    if (d_->cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) GTEST_SKIP() << "no CUDA device";
    auto info = cuda::DescribeDevice(*d_, 0);
    ASSERT_TRUE(info.ok()) << info.status().message();
    dev_ = *info;
    auto spec = LoadOpSpec(std::string(TUNEFARM_SOURCE_DIR) + "/ops/gemm");
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    spec_ = *spec;
    arch_ = CudaArchFor(spec_, dev_);
  }

  KernelImage Compile(const Config& c) {
    CompiledKernel ck = CompileConfig(spec_, "f16", c, arch_, dir_.path() + "/cache");
    arch_ = ck.arch.empty() ? arch_ : ck.arch;
    EXPECT_EQ(ck.failure, FailureClass::kNone) << ck.failure_message << ck.log;
    KernelImage k{ck.kernel_hash, c.Id(), "f16", arch_, "", ck.image, {}, {}};
    k.sha256 = Sha256Hex(k.image);
    return k;
  }

  BundleEntry Entry(const Config& c, int64_t m, int64_t n, int64_t k, const std::string& hash) {
    BundleEntry e;
    e.op = spec_.name;
    e.dtype = "f16";
    e.gpu_model = dev_.model;
    e.shape.dims = {{"M", m}, {"N", n}, {"K", k}};
    e.config = c;
    e.config_id = c.Id();
    e.kernel_hash = hash;
    e.arch = arch_;
    e.median_us = 10;
    e.backend = "cuda";
    return e;
  }

  // A bundle of the op's entries answered by `kernels`, cubins of one
  // source (one launch plan), with the op's default.
  Bundle OneSourceBundle(std::vector<BundleEntry> entries, std::vector<KernelImage> kernels) {
    Bundle b;
    b.defaults[spec_.name] = spec_.default_config;
    b.entries = std::move(entries);
    auto plan = MakeLaunchPlan(spec_, kernels.front().kernel_hash);
    EXPECT_TRUE(plan.ok()) << plan.status().message();
    if (plan.ok()) b.launch_plans = {*plan};
    b.kernels = std::move(kernels);
    return b;
  }

  runtime::Bundle Sign(const Bundle& b) {
    const SecretKey key = SecretKey::Generate();
    EXPECT_TRUE(WriteSignedBundleFiles(b, key, dir_.path() + "/b").ok());
    auto rb = runtime::Bundle::Load(dir_.path() + "/b.tfb", {FormatPublicKey(key.public_key())});
    EXPECT_TRUE(rb.ok()) << rb.status().message();
    return std::move(rb).value();
  }

  using LaunchFn = std::function<Status(const std::vector<int64_t>& dims, const std::vector<uint64_t>& buffers)>;

  double RunGemm(launcher::Kernel& kernel, int64_t m, int64_t n, int64_t k, bool workspace = false) {
    return RunGemmWith([&](const auto& dims, const auto& buffers) { return kernel.launch(dims, buffers); }, m, n,
                       k, workspace);
  }

  // C = A * B^T through `launch` on (m, n, k); the largest error against the
  // host. With `workspace`, a fourth buffer of M*N floats and a counter per
  // 64 x 64 tile, zeroed (ops/gemm_hopper's W).
  double RunGemmWith(const LaunchFn& launch, int64_t m, int64_t n, int64_t k, bool workspace = false) {
    auto a = runner::MakeInput("f16", "uniform(-1,1)", m * k, 1);
    auto b = runner::MakeInput("f16", "uniform(-1,1)", n * k, 2);
    EXPECT_TRUE(a.ok() && b.ok());
    CUdeviceptr da = 0, db = 0, dc = 0;
    EXPECT_EQ(d_->cuMemAlloc(&da, a->size()), CUDA_SUCCESS);
    EXPECT_EQ(d_->cuMemAlloc(&db, b->size()), CUDA_SUCCESS);
    EXPECT_EQ(d_->cuMemAlloc(&dc, size_t(m * n * 2)), CUDA_SUCCESS);
    d_->cuMemcpyHtoD(da, a->data(), a->size());
    d_->cuMemcpyHtoD(db, b->data(), b->size());
    d_->cuMemsetD8(dc, 0xFF, size_t(m * n * 2));
    CUdeviceptr dw = 0;
    const size_t w_bytes = size_t(m * n + ((m + 63) / 64) * ((n + 63) / 64)) * 4;
    if (workspace) {
      EXPECT_EQ(d_->cuMemAlloc(&dw, w_bytes), CUDA_SUCCESS);
      d_->cuMemsetD8(dw, 0, w_bytes);
    }
    std::vector<uint64_t> buffers = {uint64_t(da), uint64_t(db), uint64_t(dc)};
    if (workspace) buffers.push_back(uint64_t(dw));
    const std::vector<int64_t> dims = {m, n, k};
    Status st = launch(dims, buffers);
    EXPECT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(d_->cuCtxSynchronize(), CUDA_SUCCESS);
    if (dw) d_->cuMemFree(dw);
    std::string c(size_t(m * n * 2), '\0');
    d_->cuMemcpyDtoH(c.data(), dc, c.size());
    d_->cuMemFree(da);
    d_->cuMemFree(db);
    d_->cuMemFree(dc);
    const std::vector<float> fa = runner::DecodeToFloat("f16", *a), fb = runner::DecodeToFloat("f16", *b),
                             fc = runner::DecodeToFloat("f16", c);
    double worst = 0;
    for (int64_t i = 0; i < m; i += 7) {
      for (int64_t j = 0; j < n; j += 5) {
        double want = 0;
        for (int64_t x = 0; x < k; ++x) want += double(fa[size_t(i * k + x)]) * fb[size_t(j * k + x)];
        const double got = fc[size_t(i * n + j)];
        worst = std::isfinite(got) ? std::max(worst, std::fabs(got - want) / (1 + std::fabs(want))) : 1e9;
      }
    }
    return worst;
  }

  TempDir dir_;
  const cuda::Driver* d_ = nullptr;
  DeviceInfo dev_;
  OpSpec spec_;
  std::string arch_;
};

TEST_F(LauncherGpu, LaunchesTheShippedCubinSkipsWhatTheDeviceCannotRunAndMissesWithALine) {
  const Config def = spec_.default_config;
  KernelImage image = Compile(def);
  ASSERT_FALSE(image.image.empty());
  // A config whose shared memory no GPU has, shipped with a cubin: the
  // launcher must refuse it and answer the next level.
  Config huge = def;
  for (auto& [name, value] : huge.params)
    if (name == "STAGES") value = 64;
  KernelImage huge_image = image;
  huge_image.config_id = huge.Id();

  Bundle b = OneSourceBundle(
      {Entry(def, 256, 192, 128, image.kernel_hash), Entry(huge, 512, 512, 512, image.kernel_hash)},
      {image, huge_image});
  runtime::Bundle rb = Sign(b);

  auto launcher = launcher::Launcher::Open(rb, 0);
  ASSERT_TRUE(launcher.ok()) << launcher.status().message();
  EXPECT_EQ(launcher->device().model, dev_.model);
  auto gemm = launcher->prepare("gemm", "f16");
  ASSERT_TRUE(gemm.ok()) << gemm.status().message();
  EXPECT_EQ(gemm->dim_names(), (std::vector<std::string>{"M", "N", "K"}));
  EXPECT_EQ(gemm->buffer_names(), (std::vector<std::string>{"A", "B", "C"}));

  EXPECT_LT(RunGemm(*gemm, 256, 192, 128), 1e-2);
  EXPECT_EQ(gemm->last().level, runtime::Level::kExact);
  EXPECT_EQ(gemm->last().arch, arch_);
  // The tuned entry of 512^3 needs more shared memory than the device has:
  // the nearest runnable entry answers.
  EXPECT_LT(RunGemm(*gemm, 512, 512, 512), 1e-2);
  EXPECT_EQ(gemm->last().level, runtime::Level::kNearestShape);
  EXPECT_EQ(gemm->last().config->ToString(), rb.entries()[0].config.ToString());
  // Off the tile multiples (rows stay 16-byte aligned, as the op needs),
  // repeated: the cached launch answers alike.
  EXPECT_LT(RunGemm(*gemm, 136, 264, 72), 1e-2);
  EXPECT_LT(RunGemm(*gemm, 136, 264, 72), 1e-2);
  // Wrong counts are one-line errors, never a launch.
  EXPECT_FALSE(gemm->launch({1, 2}, {0, 0, 0}).ok());
  EXPECT_FALSE(gemm->launch({1, 2, 3}, {0, 0}).ok());

  // A config-only bundle: a miss that says why.
  Bundle config_only = b;
  config_only.kernels.clear();
  runtime::Bundle rb2 = Sign(config_only);
  auto l2 = launcher::Launcher::Open(rb2, 0);
  ASSERT_TRUE(l2.ok());
  auto k2 = l2->prepare("gemm", "f16");
  ASSERT_TRUE(k2.ok());
  Status miss = k2->launch({256, 192, 128}, {0, 0, 0});
  ASSERT_FALSE(miss.ok());
  EXPECT_EQ(miss.code(), StatusCode::kNotFound);
  EXPECT_NE(miss.message().find("config-only"), std::string::npos) << miss.message();
  EXPECT_EQ(k2->last().level, runtime::Level::kMiss);
}

// The C API's launchers and kernels keep the bundle they were made from:
// destroyed in any order (as a garbage collector may destroy them), a kernel
// still looks up and launches new shapes.
TEST_F(LauncherGpu, TheCApisHandlesMayBeDestroyedInAnyOrder) {
  const Config def = spec_.default_config;
  KernelImage image = Compile(def);
  Bundle b = OneSourceBundle({Entry(def, 256, 192, 128, image.kernel_hash)}, {image});
  const SecretKey key = SecretKey::Generate();
  ASSERT_TRUE(WriteSignedBundleFiles(b, key, dir_.path() + "/c").ok());
  const std::string pub = FormatPublicKey(key.public_key());
  const char* trusted[] = {pub.c_str()};
  char* err = nullptr;
  tunefarm_bundle_t* bundle = tunefarm_bundle_load((dir_.path() + "/c.tfb").c_str(), trusted, 1, &err);
  ASSERT_NE(bundle, nullptr) << err;
  tunefarm_launcher_t* launcher = tunefarm_launcher_open(bundle, 0, &err);
  ASSERT_NE(launcher, nullptr) << err;
  tunefarm_kernel_t* kernel = tunefarm_kernel_prepare(launcher, "gemm", "f16", &err);
  ASSERT_NE(kernel, nullptr) << err;
  tunefarm_bundle_destroy(bundle);
  tunefarm_launcher_destroy(launcher);
  auto launch = [&](const std::vector<int64_t>& dims, const std::vector<uint64_t>& buffers) {
    char* e = nullptr;
    if (tunefarm_kernel_launch(kernel, dims.data(), dims.size(), buffers.data(), buffers.size(), nullptr, &e) == 0)
      return Status::OK();
    Status st = Status::Error(e ? e : "launch failed");
    tunefarm_free(e);
    return st;
  };
  EXPECT_LT(RunGemmWith(launch, 256, 192, 128), 1e-2);
  EXPECT_LT(RunGemmWith(launch, 136, 264, 72), 1e-2);  // another shape: a lookup in the bundle it keeps
  tunefarm_kernel_destroy(kernel);
}

// A launch replays the kernel's graph (one per stream, its arguments updated
// when buffers, dims or the config answering change); into a stream being captured it launches the
// kernel, which the capture records as a kernel node; past four streams, and
// with TUNEFARM_LAUNCH_GRAPHS=0, it launches kernels. Each answer is checked.
TEST_F(LauncherGpu, LaunchesReplayTheKernelsGraphPerStreamAndKernelsIntoACapture) {
  GraphCalls calls;
  ASSERT_TRUE(calls.Load());

  // Two configs, two cubins: a shape of each.
  const Config def = spec_.default_config;
  Config two_stages = def;
  for (auto& [name, value] : two_stages.params)
    if (name == "STAGES") value = 2;
  ASSERT_NE(two_stages.Id(), def.Id());
  KernelImage image = Compile(def), other = Compile(two_stages);
  ASSERT_NE(image.image, other.image);  // one source (one kernel hash and plan), two cubins
  Bundle b = OneSourceBundle(
      {Entry(def, 256, 192, 128, image.kernel_hash), Entry(two_stages, 512, 512, 512, other.kernel_hash)},
      {image, other});
  runtime::Bundle rb = Sign(b);
  auto launcher = launcher::Launcher::Open(rb, 0);
  ASSERT_TRUE(launcher.ok()) << launcher.status().message();
  auto gemm = launcher->prepare("gemm", "f16");
  ASSERT_TRUE(gemm.ok()) << gemm.status().message();

  EXPECT_LT(RunGemm(*gemm, 256, 192, 128), 1e-2);
  EXPECT_TRUE(gemm->last().replayed);
  // The shapes in turn: the graph's kernel, grid and shared memory change
  // with its arguments.
  for (int turn = 0; turn < 2; ++turn) {
    EXPECT_LT(RunGemm(*gemm, 512, 512, 512), 1e-2);
    EXPECT_TRUE(gemm->last().replayed);
    ASSERT_NE(gemm->last().entry, nullptr);
    EXPECT_EQ(gemm->last().entry->config_id, two_stages.Id());
    EXPECT_LT(RunGemm(*gemm, 256, 192, 128), 1e-2);
    EXPECT_TRUE(gemm->last().replayed);
    ASSERT_NE(gemm->last().entry, nullptr);
    EXPECT_EQ(gemm->last().entry->config_id, def.Id());
  }
  // The same dims into another C first: the graph's arguments updated twice.
  CUdeviceptr scratch = 0;
  ASSERT_EQ(d_->cuMemAlloc(&scratch, 256 * 192 * 2), CUDA_SUCCESS);
  auto via_scratch = [&](const std::vector<int64_t>& dims, const std::vector<uint64_t>& buffers) {
    const std::vector<uint64_t> first = {buffers[0], buffers[1], uint64_t(scratch)};
    Status st = gemm->launch(dims, first);
    return st.ok() ? gemm->launch(dims, buffers) : st;
  };
  EXPECT_LT(RunGemmWith(via_scratch, 256, 192, 128), 1e-2);
  EXPECT_TRUE(gemm->last().replayed);
  EXPECT_LT(RunGemm(*gemm, 136, 264, 72), 1e-2);  // other dims: another grid
  EXPECT_TRUE(gemm->last().replayed);

  // Four more streams: the default stream's graph and three more, then the
  // kernel launched.
  std::vector<CUstream> streams(4);
  for (CUstream& s : streams) ASSERT_EQ(d_->cuStreamCreate(&s, 0), CUDA_SUCCESS);
  for (size_t i = 0; i < streams.size(); ++i) {
    auto on_stream = [&](const std::vector<int64_t>& dims, const std::vector<uint64_t>& buffers) {
      return gemm->launch(dims, buffers, streams[i]);
    };
    EXPECT_LT(RunGemmWith(on_stream, 256, 192, 128), 1e-2) << "stream " << i;
    EXPECT_EQ(gemm->last().replayed, i < 3) << "stream " << i;
  }

  // A capture on a stream that has a graph: the kernel is recorded, and the
  // captured graph computes C.
  auto captured = [&](const std::vector<int64_t>& dims, const std::vector<uint64_t>& buffers) {
    CUstream s = streams[0];
    if (calls.begin_capture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) != CUDA_SUCCESS) return Status::Error("capture");
    Status st = gemm->launch(dims, buffers, s);
    CUgraph g = nullptr;
    if (calls.end_capture(s, &g) != CUDA_SUCCESS || !st.ok()) return st.ok() ? Status::Error("end capture") : st;
    EXPECT_FALSE(gemm->last().replayed);
    calls.ExpectKernelNodes(g, 1);
    CUgraphExec exec = nullptr;
    const bool ran = calls.instantiate(&exec, g, 0) == CUDA_SUCCESS && calls.graph_launch(exec, s) == CUDA_SUCCESS &&
                     d_->cuStreamSynchronize(s) == CUDA_SUCCESS;
    if (exec) calls.exec_destroy(exec);
    calls.graph_destroy(g);
    return ran ? Status::OK() : Status::Error("the captured graph did not run");
  };
  EXPECT_LT(RunGemmWith(captured, 256, 192, 128), 1e-2);
  // And after the capture, the stream's graph again.
  auto after = [&](const std::vector<int64_t>& dims, const std::vector<uint64_t>& buffers) {
    return gemm->launch(dims, buffers, streams[0]);
  };
  EXPECT_LT(RunGemmWith(after, 256, 192, 128), 1e-2);
  EXPECT_TRUE(gemm->last().replayed);
  for (CUstream s : streams) d_->cuStreamDestroy(s);
  d_->cuMemFree(scratch);

  // Switched off: kernel launches, the same answers.
  ::setenv("TUNEFARM_LAUNCH_GRAPHS", "0", 1);
  auto plain = launcher::Launcher::Open(rb, 0);
  ::unsetenv("TUNEFARM_LAUNCH_GRAPHS");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  auto kernels_only = plain->prepare("gemm", "f16");
  ASSERT_TRUE(kernels_only.ok()) << kernels_only.status().message();
  EXPECT_LT(RunGemm(*kernels_only, 256, 192, 128), 1e-2);
  EXPECT_FALSE(kernels_only->last().replayed);
}

// A capture in another thread in global mode (as torch captures): a Kernel
// that makes its graph, replays it, updates it and is destroyed meanwhile
// leaves the capture whole. A thread with no context current: the first
// launch makes the launcher's current (a kernel launch), the next replays.
// Another context current: the launch fails as a kernel launch does.
TEST_F(LauncherGpu, GraphsLeaveOtherThreadsCapturesAndOtherContextsAlone) {
  GraphCalls calls;
  ASSERT_TRUE(calls.Load());
  const Config def = spec_.default_config;
  KernelImage image = Compile(def);
  Bundle b = OneSourceBundle({Entry(def, 256, 192, 128, image.kernel_hash)}, {image});
  runtime::Bundle rb = Sign(b);
  auto launcher = launcher::Launcher::Open(rb, 0);
  ASSERT_TRUE(launcher.ok()) << launcher.status().message();
  auto gemm = launcher->prepare("gemm", "f16");
  ASSERT_TRUE(gemm.ok()) << gemm.status().message();
  EXPECT_LT(RunGemm(*gemm, 256, 192, 128), 1e-2);  // resolved (and its shared memory allowed) before any capture
  std::optional<launcher::Kernel> other;
  {
    auto k = launcher->prepare("gemm", "f16");
    ASSERT_TRUE(k.ok()) << k.status().message();
    other.emplace(std::move(*k));
  }
  CUcontext primary = nullptr;
  ASSERT_EQ(calls.ctx_get_current(&primary), CUDA_SUCCESS);
  CUstream capturing = nullptr, side = nullptr;
  ASSERT_EQ(d_->cuStreamCreate(&capturing, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(d_->cuStreamCreate(&side, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  const size_t c_bytes = 256 * 192 * 2;
  CUdeviceptr c1 = 0, c2 = 0;
  ASSERT_EQ(d_->cuMemAlloc(&c1, c_bytes), CUDA_SUCCESS);
  ASSERT_EQ(d_->cuMemAlloc(&c2, c_bytes), CUDA_SUCCESS);

  auto in_capture = [&](const std::vector<int64_t>& dims, const std::vector<uint64_t>& buffers) {
    std::mutex mu;
    std::condition_variable cv;
    int stage = 0;  // 1: the capture has its launch; 2: the other Kernel is done
    CUresult begun = CUDA_ERROR_UNKNOWN, ended = CUDA_ERROR_UNKNOWN;
    Status captured_launch;
    bool captured_replayed = true;
    CUgraph g = nullptr;
    std::thread capturer([&] {
      calls.ctx_set_current(primary);
      begun = calls.begin_capture(capturing, CU_STREAM_CAPTURE_MODE_GLOBAL);
      captured_launch = gemm->launch(dims, buffers, capturing);
      captured_replayed = gemm->last().replayed;
      {
        std::lock_guard<std::mutex> lock(mu);
        stage = 1;
      }
      cv.notify_all();
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return stage == 2; });
      ended = calls.end_capture(capturing, &g);
    });
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return stage == 1; });
    }
    const std::vector<uint64_t> into_c1 = {buffers[0], buffers[1], uint64_t(c1)},
                                into_c2 = {buffers[0], buffers[1], uint64_t(c2)};
    const Status made = other->launch(dims, into_c1, side);  // its graph made
    const bool made_replayed = other->last().replayed;
    const Status updated = other->launch(dims, into_c2, side);  // its graph updated
    const bool updated_replayed = other->last().replayed;
    other.reset();  // its graph destroyed
    {
      std::lock_guard<std::mutex> lock(mu);
      stage = 2;
    }
    cv.notify_all();
    capturer.join();
    EXPECT_TRUE(made.ok()) << made.message();
    EXPECT_TRUE(updated.ok()) << updated.message();
    EXPECT_TRUE(made_replayed && updated_replayed);
    EXPECT_EQ(begun, CUDA_SUCCESS);
    EXPECT_TRUE(captured_launch.ok()) << captured_launch.message();
    EXPECT_FALSE(captured_replayed);
    EXPECT_EQ(ended, CUDA_SUCCESS) << "the capture was spoiled";
    if (ended != CUDA_SUCCESS || !g) return Status::Error("no captured graph");
    calls.ExpectKernelNodes(g, 1);
    CUgraphExec exec = nullptr;
    const bool ran = calls.instantiate(&exec, g, 0) == CUDA_SUCCESS &&
                     calls.graph_launch(exec, capturing) == CUDA_SUCCESS && d_->cuCtxSynchronize() == CUDA_SUCCESS;
    if (exec) calls.exec_destroy(exec);
    calls.graph_destroy(g);
    // The other Kernel's two replays computed what the captured launch did.
    std::string c(c_bytes, '\0'), got1(c_bytes, '\0'), got2(c_bytes, '\0');
    d_->cuMemcpyDtoH(c.data(), buffers[2], c_bytes);
    d_->cuMemcpyDtoH(got1.data(), c1, c_bytes);
    d_->cuMemcpyDtoH(got2.data(), c2, c_bytes);
    EXPECT_TRUE(got1 == c && got2 == c);
    return ran ? Status::OK() : Status::Error("the captured graph did not run");
  };
  EXPECT_LT(RunGemmWith(in_capture, 256, 192, 128), 1e-2);

  auto from_a_new_thread = [&](const std::vector<int64_t>& dims, const std::vector<uint64_t>& buffers) {
    Status first, second;
    bool first_replayed = true, second_replayed = false;
    std::thread([&] {
      const std::vector<uint64_t> into_c1 = {buffers[0], buffers[1], uint64_t(c1)};
      first = gemm->launch(dims, into_c1);
      first_replayed = gemm->last().replayed;
      second = gemm->launch(dims, buffers);
      second_replayed = gemm->last().replayed;
    }).join();
    EXPECT_TRUE(first.ok()) << first.message();
    EXPECT_FALSE(first_replayed);  // no context current: the kernel's launch made it current
    EXPECT_TRUE(second_replayed);
    return second;
  };
  EXPECT_LT(RunGemmWith(from_a_new_thread, 256, 192, 128), 1e-2);

  CUcontext mine = nullptr;
  CUdevice device = 0;
  ASSERT_EQ(d_->cuDeviceGet(&device, 0), CUDA_SUCCESS);
  ASSERT_EQ(calls.ctx_create(&mine, 0, device), CUDA_SUCCESS);  // current now
  const Status elsewhere = gemm->launch({256, 192, 128}, {uint64_t(c1), uint64_t(c1), uint64_t(c2)});
  EXPECT_FALSE(elsewhere.ok());
  EXPECT_FALSE(gemm->last().replayed);
  EXPECT_EQ(calls.ctx_set_current(primary), CUDA_SUCCESS);
  EXPECT_EQ(calls.ctx_destroy(mine), CUDA_SUCCESS);
  d_->cuMemFree(c1);
  d_->cuMemFree(c2);
  d_->cuStreamDestroy(capturing);
  d_->cuStreamDestroy(side);
}

// A kernel that takes tensor maps (ops/gemm_hopper): the launcher encodes
// them from the caller's buffers at each launch, and again when a buffer
// moves.
TEST_F(LauncherGpu, EncodesTheTensorMapsOfAHopperKernelFromTheCallersBuffers) {
  if (dev_.cc_major != 9) GTEST_SKIP() << "gemm_hopper is for sm_90a";
  auto spec = LoadOpSpec(std::string(TUNEFARM_SOURCE_DIR) + "/ops/gemm_hopper");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  spec_ = *spec;
  arch_ = CudaArchFor(spec_, dev_);
  const Config def = spec_.default_config;
  KernelImage image = Compile(def);
  ASSERT_FALSE(image.image.empty());
  Bundle b = OneSourceBundle({Entry(def, 1024, 1024, 512, image.kernel_hash)}, {image});
  runtime::Bundle rb = Sign(b);
  auto launcher = launcher::Launcher::Open(rb, 0);
  ASSERT_TRUE(launcher.ok()) << launcher.status().message();
  auto gemm = launcher->prepare(spec_.name, "f16");
  ASSERT_TRUE(gemm.ok()) << gemm.status().message();
  EXPECT_EQ(gemm->buffer_names(), (std::vector<std::string>{"A", "B", "C", "W"}));
  EXPECT_LT(RunGemm(*gemm, 1024, 1024, 512, true), 1e-2);
  EXPECT_EQ(gemm->last().level, runtime::Level::kExact);
  EXPECT_TRUE(gemm->last().replayed);
  // Same dims, new buffers (the maps follow them); then other dims: the
  // graph's maps with them.
  EXPECT_LT(RunGemm(*gemm, 1024, 1024, 512, true), 1e-2);
  EXPECT_TRUE(gemm->last().replayed);
  EXPECT_LT(RunGemm(*gemm, 136, 264, 72, true), 1e-2);
  EXPECT_TRUE(gemm->last().replayed);
  // A buffer the copy engine cannot address is a one-line error, not a launch.
  Status odd = gemm->launch({64, 64, 64}, {8, 8, 8, 8});
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.message().find("tensor map tmA: the buffer's address is not 16-byte aligned"), std::string::npos)
      << odd.message();
}

}  // namespace
}  // namespace tune

#endif
