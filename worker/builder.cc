#include "builder.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <zmq.hpp>

#include "base/clock.h"
#include "base/known_gpus.h"
#include "base/log.h"
#include "base/target.h"
#include "base/text.h"
#include "protocol/protocol.h"
#include "compile_pool.h"
#include "coordinator_link.h"
#include "opspec/op_definition.h"
#include "serve/http_server.h"
#include "serve/metrics.h"
#include "wire/curve.h"
#include "worker.h"
#ifdef TUNEFARM_WITH_CUDA
#include "measure/cuda/cuda_backend.h"
#endif

namespace tune {
namespace {

// The configs a builder asks for at once: one per compile thread. Its
// images go back when the whole work is built, and a device whose compile
// pool reaches one of them first compiles it too: a small work is a short
// wait (a round trip between works is milliseconds, a compile a second).
uint32_t ConfigsPerRequest(unsigned threads) {
  return static_cast<uint32_t>(std::clamp<size_t>(threads, 1, kMaxBuildConfigs));
}

}  // namespace

Result<std::vector<std::string>> ParseBuilderArchs(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  std::set<std::string> known;
  for (const DeviceInfo& d : KnownGpus()) known.insert(CudaArch(d.cc_major, d.cc_minor));
  for (const std::string& arch : items) {
    const std::string_view cap = ArchCapability(arch);
    if (!IsCudaArch(arch))
      return Status::InvalidArgument("--arch: '" + arch + "' is not an architecture (sm_90, sm_90a, sm_100a)");
    if (!known.count(std::string(cap)))
      return Status::InvalidArgument("--arch: unknown architecture '" + arch + "' (known: " +
                                     Join(std::vector<std::string>(known.begin(), known.end()), ", ") + ")");
    if (std::find(out.begin(), out.end(), arch) == out.end()) out.push_back(arch);
  }
  if (out.empty()) return Status::InvalidArgument("--arch: name the architectures to compile for (sm_90a,sm_100a)");
  if (out.size() > kMaxBuilderArchs)
    return Status::InvalidArgument("--arch: " + std::to_string(out.size()) + " architectures, over " +
                                   std::to_string(kMaxBuilderArchs));
  return out;
}

struct Builder::Impl final : HttpStatusSource {
  BuilderOptions opts;
  zmq::context_t ctx{1};
  std::optional<CurveKeyPair> curve_keys;
  std::string coordinator_key, toolchain;
  std::unique_ptr<CompilePool> pool;
  std::unique_ptr<HttpServer> http;
  mutable std::mutex stats_mu;
  BuilderStats stats;
  std::atomic<bool> linked{false};

  explicit Impl(BuilderOptions o) : opts(std::move(o)) {}
  ~Impl() override {
    if (http) http->Stop();  // before the members its thread reads
  }
  std::string Json(const std::string&) override { return ""; }
  std::string Metrics() override {
    std::vector<Metric> m;
    m.push_back(Metric::Gauge("tunefarm_builder_build_info", "this builder's version and toolchain (always 1)", 1,
                              {{"version", TUNEFARM_VERSION}, {"toolchain", toolchain}}));
    m.push_back(Metric::Gauge("tunefarm_builder_connected", "1 while the coordinator answers this builder's hello",
                              linked ? 1 : 0));
    std::lock_guard<std::mutex> lock(stats_mu);
    m.push_back(Metric::Counter("tunefarm_builder_works_total", "works (configs of one op, dtype and arch) received",
                                stats.works));
    m.push_back(Metric::Counter("tunefarm_builder_compiles_total", "configs compiled (cache misses)", stats.compiled));
    m.push_back(Metric::Counter("tunefarm_builder_compile_cache_hits_total", "configs found in the cubin cache",
                                stats.cached));
    m.push_back(Metric::Counter("tunefarm_builder_compile_failures_total", "configs that did not compile",
                                stats.failed));
    m.push_back(Metric::Counter("tunefarm_builder_images_sent_total", "cubins sent to the coordinator",
                                stats.images_sent));
    m.push_back(Metric::Counter("tunefarm_builder_refused_total", "image batches the coordinator refused",
                                stats.refused));
    m.push_back(Metric::Counter("tunefarm_builder_compile_seconds_total", "compiler time, summed over threads",
                                stats.compile_seconds));
    return RenderMetrics(m);
  }

  // A work as the compile pool takes it.
  struct InHand {
    uint64_t link = 0;  // the link it came on: answered on that one only
    BuildWork work;
    std::vector<std::future<CompiledKernel>> compiles;
    uint32_t refused = 0;  // configs not compiled at all (a work this builder cannot take)
  };

  InHand Take(BuildWork work, uint64_t link) {
    InHand hand{link, std::move(work), {}, 0};
    const BuildWork& w = hand.work;
    {
      std::lock_guard<std::mutex> lock(stats_mu);
      stats.works++;
    }
    auto refuse_all = [&](const std::string& why) {
      log::Warn("builder", "work not compiled", {{"builder", opts.name}, {"work", w.work_id}, {"op", w.op},
                                                 {"error", why}});
      hand.refused = static_cast<uint32_t>(w.configs.size());
      return std::move(hand);
    };
    const bool ours = std::any_of(opts.archs.begin(), opts.archs.end(),
                                  [&](const std::string& a) { return ArchCapability(a) == ArchCapability(w.arch); });
    if (!ours) return refuse_all("arch '" + w.arch + "' is none of this builder's (" + Join(opts.archs, ",") + ")");
    auto parsed = SharedOpSpec(w.op_package, "op '" + w.op + "'");
    if (!parsed.ok()) return refuse_all(parsed.status().message());
    std::shared_ptr<const OpSpec> shared = *parsed;
    // The work's hash is the op's for this toolchain: another means another
    // op or NVRTC, and images no device would ask for.
    if (const std::string hash = OpHash(*shared, toolchain); hash != w.kernel_hash)
      return refuse_all("kernel hash " + hash + " here, " + w.kernel_hash + " in the work");
    for (const Config& c : w.configs) {
      hand.compiles.push_back(pool->Submit([this, shared, dtype = w.dtype, arch = w.arch, c] {
#ifdef TUNEFARM_WITH_CUDA
        return CompileConfig(*shared, dtype, c, arch, opts.cache_dir);
#else
        (void)dtype, (void)arch;
        CompiledKernel k;
        k.failure = FailureClass::kCompileError;
        k.failure_message = "built without the CUDA toolkit";
        return k;
#endif
      }));
    }
    log::Write(log::Level::kDebug, "builder", "work", {{"builder", opts.name}, {"work", w.work_id}, {"op", w.op}, {"dtype", w.dtype},
                                   {"arch", w.arch}, {"configs", w.configs.size()}});
    return hand;
  }

  static bool Ready(const InHand& hand) {
    return std::all_of(hand.compiles.begin(), hand.compiles.end(), [](const std::future<CompiledKernel>& f) {
      return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    });
  }

  BuiltImages Finish(InHand& hand) {
    BuiltImages out;
    out.work_id = hand.work.work_id;
    out.failed = hand.refused;
    std::lock_guard<std::mutex> lock(stats_mu);
    stats.failed += hand.refused;
    size_t bytes = 0;
    for (auto& f : hand.compiles) {
      CompiledKernel k = f.get();
      stats.compile_seconds += k.compile_seconds;
      // Half a frame of cubins at most: a batch of large ones leaves the
      // rest to the devices' compiles.
      const bool fits = bytes + k.image.size() <= kMaxFrameBytes / 2;
      if (k.failure != FailureClass::kNone || k.image.empty() || k.image.size() > kMaxKernelImageBytes ||
          k.arch != hand.work.arch || !fits) {
        if (k.failure == FailureClass::kNone && !fits) k.failure_message = "over the frame's bound for cubins";
        stats.failed++;
        out.failed++;
        log::Info("builder", "config did not compile; the GPU workers record why",
                  {{"builder", opts.name}, {"op", hand.work.op}, {"config", k.config_id},
                   {"error", k.failure_message}});
        continue;
      }
      bytes += k.image.size();
      (k.from_cache ? stats.cached : stats.compiled)++;
      KernelImage img;
      img.kernel_hash = k.kernel_hash;
      img.config_id = k.config_id;
      img.dtype = hand.work.dtype;
      img.arch = k.arch;
      img.sha256 = Sha256Hex(k.image);
      img.image = std::move(k.image);
      out.images.push_back(std::move(img));
    }
    stats.images_sent += out.images.size();
    return out;
  }
};

Builder::Builder(BuilderOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {}
Builder::~Builder() = default;

BuilderStats Builder::stats() const {
  std::lock_guard<std::mutex> lock(impl_->stats_mu);
  return impl_->stats;
}

std::string Builder::http_url() const { return impl_->http ? impl_->http->url() : ""; }

Status Builder::Start() {
#ifndef TUNEFARM_WITH_CUDA
  return Status::Error("worker --compile-only: built without the CUDA toolkit (a builder compiles with NVRTC)");
#else
  auto& o = impl_->opts;
  if (o.archs.empty()) return Status::Error("worker --compile-only: give --arch (the architectures to compile for)");
  if (o.name.empty()) o.name = WorkerDefaultName();
  if (o.cache_dir.empty()) o.cache_dir = WorkerDefaultCacheDir();
  if (o.curve_secret_key.empty() || o.coordinator_public_key.empty())
    return Status::Error("worker --compile-only: give --curve-key and --coordinator-key: a builder's images are "
                         "served on the word of its key (the coordinator's --builder-allow-list)");
  auto keys = LoadCurveKeyPair(o.curve_secret_key);
  if (!keys.ok()) return keys.status();
  impl_->curve_keys = *keys;
  auto server = LoadCurvePublicKey(o.coordinator_public_key);
  if (!server.ok()) return server.status();
  impl_->coordinator_key = *server;
  impl_->toolchain = NvrtcVersionString();
  impl_->pool = std::make_unique<CompilePool>(o.compile_threads);
  if (o.http_port >= 0) {
    HttpServerOptions ho;
    ho.address = o.http_address;
    ho.port = static_cast<uint16_t>(o.http_port);
    impl_->http = std::make_unique<HttpServer>(ho, impl_.get());
    TUNE_RETURN_IF_ERROR(impl_->http->Start());
  }
  return Status::OK();
#endif
}

Status Builder::Run(const std::atomic<bool>* stop) {
  Impl& b = *impl_;
  if (!b.pool) return Status::Error("builder: Start() was not called");
  CoordinatorLink::Options lo;
  lo.endpoint = b.opts.endpoint;
  lo.name = b.opts.name;
  lo.curve_keys = b.curve_keys;
  lo.coordinator_key = b.coordinator_key;
  lo.builder_archs = b.opts.archs;
  lo.builder_toolchain = b.toolchain;
  CoordinatorLink link(b.ctx, lo);
  std::minstd_rand rng(std::random_device{}());
  std::uniform_real_distribution<double> jitter(0.75, 1.25);
  std::optional<Impl::InHand> hand;
  uint64_t links = 0;
  bool asked = false;
  double ask_at = 0;
  auto connect = [&] {
    ++links;
    asked = false;
    return link.Connect();
  };
  Status exit_status;
  try {
    exit_status = connect();
    while (exit_status.ok() && !stop->load()) {
      if (b.opts.alive) b.opts.alive();
      b.linked = link.connected() && link.greeted();
      if (!link.connected()) {
        if (link.ReconnectDue(NowSeconds())) exit_status = connect();
        else std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      zmq::pollitem_t items[] = {{link.socket().handle(), 0, ZMQ_POLLIN, 0}};
      try {
        zmq::poll(items, 1, std::chrono::milliseconds(20));
      } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) continue;
        throw;
      }
      if (items[0].revents & ZMQ_POLLIN) {
        while (auto cmd = link.Receive()) {
          if (auto* work = std::get_if<BuildWork>(&*cmd)) {
            asked = false;
            if (hand) continue;  // one work at a time; the coordinator hands it again
            hand = b.Take(std::move(*work), links);
          } else if (auto* none = std::get_if<NoWork>(&*cmd)) {
            asked = false;
            ask_at = NowSeconds() + none->retry_ms / 1000.0 * jitter(rng);
          } else if (auto* error = std::get_if<ErrorReply>(&*cmd)) {
            {
              std::lock_guard<std::mutex> lock(b.stats_mu);
              b.stats.refused++;
            }
            log::Warn("builder", "the coordinator refused", {{"builder", b.opts.name}, {"error", error->message}});
          }
        }
      }
      if (hand && Impl::Ready(*hand)) {
        BuiltImages built = b.Finish(*hand);
        // Answered on the link it came on: a new link is a new peer to the
        // coordinator, which hands the work again (the cache keeps what
        // compiled).
        if (hand->link == links && link.greeted()) link.Send(std::move(built));
        hand.reset();
        ask_at = 0;
      }
      const double now = NowSeconds();
      if (!link.KeepAlive(now)) continue;
      if (link.greeted() && !hand && !asked && now >= ask_at) {
        link.Send(BuildRequest{ConfigsPerRequest(b.pool->threads())});
        asked = true;
      }
    }
    if (link.connected() && exit_status.ok()) link.Send(tune::Disconnect{"builder stopping"});
  } catch (const zmq::error_t& e) {
    exit_status = Status::Error(std::string("builder: socket error: ") + e.what());
  }
  b.linked = false;
  log::Write(exit_status.ok() ? log::Level::kInfo : log::Level::kError, "builder", "stopped",
             {{"builder", b.opts.name},
              {"reason", exit_status.ok() ? std::string("asked to stop") : exit_status.message()}});
  return exit_status;
}

}  // namespace tune
