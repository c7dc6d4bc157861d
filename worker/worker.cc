#include "worker.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <zmq.hpp>

#include "base/backend_kinds.h"
#include "compile_pool.h"
#include "image_fetch.h"
#include "package_cache.h"
#include "coordinator_link.h"
#include "base/clock.h"
#include "wire/curve.h"
#include "serve/http_server.h"
#include "base/log.h"
#include "base/text.h"
#include "serve/metrics.h"
#include "protocol/protocol.h"
#include "measure/confine.h"
#include "measure/program/program_backend.h"
#ifdef TUNEFARM_WITH_CUDA
#include "compile_probe.h"
#include "measure/cuda/cuda_backend.h"
#endif

namespace tune {
namespace {

// A row of a later pass (refine, confirm) replaces the config's first
// figure when it is valid or failed its check: a kernel whose output is
// wrong now must not stay a winner. A compile error, crash or timeout says
// more about the host than the kernel, which keeps its first figure.
bool ReplacesFirstFigure(const Measurement& m) {
  return m.Valid() || m.failure == FailureClass::kWrongResult || m.failure == FailureClass::kNan;
}

std::string DefaultName() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return std::string(host) + ":" + std::to_string(getpid());
}

// Cubins survive between sweeps here unless --cache-dir says otherwise.
std::string DefaultCacheRoot() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME")) return std::string(xdg) + "/tunefarm";
  if (const char* home = std::getenv("HOME")) return std::string(home) + "/.cache/tunefarm";
  return "/tmp/tunefarm-cache";
}
std::string DefaultCacheDir() { return DefaultCacheRoot() + "/cubins"; }

// A unit as its device takes it: where its configs compile on the pool
// ahead of the device (CompilesAhead), they were handed to the pool when
// the unit came, and `compiled` holds them; otherwise the device starts
// them.
struct StagedUnit {
  WorkUnit unit;
  bool staged = false;  // its package is in use and its compiles started
  std::vector<std::future<CompiledKernel>> compiled;
};
const WorkUnit& UnitOf(const StagedUnit& s) { return s.unit; }

// Units handed from one thread to another (the socket thread to a device's
// stager, the stager to its device thread), in order.
template <class T>
class UnitQueue {
 public:
  void Push(T u) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      q_.push_back(std::move(u));
    }
    cv_.notify_one();
  }
  std::optional<T> Pop(const std::atomic<bool>* stop) {
    std::unique_lock<std::mutex> lock(mu_);
    while (q_.empty()) {
      if (stop->load()) return std::nullopt;
      cv_.wait_for(lock, std::chrono::milliseconds(100));
    }
    T u = std::move(q_.front());
    q_.pop_front();
    return u;
  }
  // Copies of the queued units not yet in `seen` (whose ids are added);
  // of a queue of StagedUnits.
  std::vector<WorkUnit> TakeUnseen(std::set<uint64_t>* seen) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<WorkUnit> out;
    for (const T& u : q_)
      if (seen->insert(UnitOf(u).unit_id).second) out.push_back(UnitOf(u));
    return out;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> q_;
};

// The coordinator's ImageReplies, handed from the socket thread to the device
// thread that waits for its unit's: the socket thread only drops a reply in
// (never waits), a device thread waits a bounded time. A unit's configs
// that its reply did not serve stay open until the unit ends: a later reply
// (a builder's images, sent on by the coordinator) is judged as the first
// was and its images kept in the worker's image cache, where each config's
// compile looks before it runs.
class ImageMailbox {
 public:
  // A device thread will wait for `unit_id`'s reply.
  void Expect(uint64_t unit_id) {
    std::lock_guard<std::mutex> lock(mu_);
    waiting_.insert(unit_id);
    replies_.erase(unit_id);
  }
  // The wants of `unit_id` still unserved, and the op's kernel each image
  // must define: a later reply may bring them, until Forget.
  void KeepOpen(uint64_t unit_id, std::vector<ImageWant> wants, std::vector<std::string> entries) {
    std::lock_guard<std::mutex> lock(mu_);
    if (wants.empty()) open_.erase(unit_id);
    else open_[unit_id] = Open{std::move(wants), std::move(entries)};
  }
  void Forget(uint64_t unit_id) {
    std::lock_guard<std::mutex> lock(mu_);
    open_.erase(unit_id);
  }
  // From the socket thread: the reply a device waits for is handed over; a
  // later one of an open unit has its good images put in `cache` (the lines
  // of those refused are returned); any other is dropped.
  std::vector<std::string> Deliver(ImageReply reply, const FetchedImageCache* cache) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!waiting_.count(reply.unit_id)) {
        auto open = open_.find(reply.unit_id);
        if (open == open_.end() || !cache || !reply.refused.empty()) return {};
        FetchedImages got = TakeFetchedImages(reply, open->second.wants, open->second.entries);
        std::erase_if(open->second.wants, [&](const ImageWant& w) { return got.good.count(w.Key()) > 0; });
        for (auto& [key, image] : got.good)
          cache->Put(ImageWant{image.kernel_hash, image.config_id, image.dtype, image.arch}, image.image);
        return std::move(got.refused);
      }
      const uint64_t id = reply.unit_id;
      replies_.insert_or_assign(id, std::move(reply));
    }
    cv_.notify_all();
    return {};
  }
  // The reply for `unit_id`, or nullopt after `seconds` (or on *stop); the
  // unit is no longer waited for either way.
  std::optional<ImageReply> Await(uint64_t unit_id, double seconds, const std::atomic<bool>* stop) {
    std::unique_lock<std::mutex> lock(mu_);
    const double until = NowSeconds() + seconds;
    // Woken every 100 ms at most, to see a stop.
    for (double now = NowSeconds(); !replies_.count(unit_id) && !stop->load() && now < until; now = NowSeconds())
      cv_.wait_for(lock, std::chrono::duration<double>(std::min(until - now, 0.1)));
    waiting_.erase(unit_id);
    auto it = replies_.find(unit_id);
    if (it == replies_.end()) return std::nullopt;
    ImageReply r = std::move(it->second);
    replies_.erase(it);
    return r;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  struct Open {
    std::vector<ImageWant> wants;
    std::vector<std::string> entries;
  };
  std::set<uint64_t> waiting_;
  std::map<uint64_t, ImageReply> replies_;
  std::map<uint64_t, Open> open_;  // by unit
};

}  // namespace

// What the socket thread knows of each device: the units it holds (the one
// it runs and up to kUnitsHeldPerDevice - 1 queued behind it), whether it
// would take more now, and when it may ask again after a NoWork; and which
// device's RequestWork awaits a reply (one at a time).
class DeviceSlots {
 public:
  static constexpr size_t npos = static_cast<size_t>(-1);
  explicit DeviceSlots(size_t devices)
      : held_(devices, 0), wants_next_(devices, false), fills_(devices, false), next_ask_(devices, 0) {}

  size_t held(size_t d) const { return held_[d]; }
  // Device `d`, running a unit, would take its next unit now; `fill`: and
  // more, up to kUnitsHeldPerDevice, so that their configs compile while it
  // times (until its next call says otherwise).
  void WantsNext(size_t d, bool fill) {
    if (held_[d] == 0) return;
    wants_next_[d] = true;
    fills_[d] = fill;
  }
  // A unit for `d`; false (the unit is dropped, its lease expires) when `d`
  // holds its most already.
  bool Take(size_t d, uint64_t unit_id) {
    if (held_[d] >= kUnitsHeldPerDevice) return false;
    held_[d]++;
    if (!fills_[d] || held_[d] >= kUnitsHeldPerDevice) wants_next_[d] = false;
    unit_slot_[unit_id] = d;
    return true;
  }
  // The final results batch of `unit_id` went out: its device holds one
  // unit less (it says whether it would take more when it starts the next).
  void Finished(uint64_t unit_id) {
    auto it = unit_slot_.find(unit_id);
    if (it == unit_slot_.end()) return;
    held_[it->second]--;
    unit_slot_.erase(it);
  }
  // The device that may ask for work now, or npos: one with nothing to do,
  // or one that would take more, past its NoWork retry time; none while a
  // request awaits its reply.
  size_t NextToAsk(double now) const {
    if (asking_ != npos) return npos;
    for (size_t d = 0; d < held_.size(); ++d) {
      const bool ready = held_[d] == 0 || (held_[d] < kUnitsHeldPerDevice && wants_next_[d]);
      if (ready && now >= next_ask_[d]) return d;
    }
    return npos;
  }
  void Asked(size_t d) { asking_ = d; }
  // The coordinator answered the request with a unit.
  void Answered() { asking_ = npos; }
  // The coordinator answered with NoWork: the device asks again at `retry_at`.
  void NoWork(double retry_at) {
    if (asking_ != npos) next_ask_[asking_] = retry_at;
    asking_ = npos;
  }
  // A new link: no request awaits a reply on it.
  void Unanswered() { asking_ = npos; }

 private:
  std::vector<size_t> held_;
  std::vector<bool> wants_next_, fills_;
  std::vector<double> next_ask_;
  std::map<uint64_t, size_t> unit_slot_;  // unit in progress -> device slot
  size_t asking_ = npos;
};

struct Worker::Impl : HttpStatusSource {
  WorkerOptions opts;
  zmq::context_t ctx{1};
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<std::unique_ptr<Backend>> program_backends;  // one beside each device's backend
  std::vector<DeviceInfo> devices;
  std::unique_ptr<CompilePool> pool;
  // The op packages unpacked on disk, under their byte bound; looked at
  // after a unit at most every kPackageEvictSeconds.
  std::unique_ptr<PackageCache> packages;
  std::mutex evict_mu;
  double last_evict = -1e9;
  static constexpr double kPackageEvictSeconds = 30;
  std::optional<CurveKeyPair> curve_keys;
  std::string coordinator_key;
  // Per device: units as they come (to its stager) and staged (to its
  // device thread); whether its last RequestWork asked to fill up
  // (DeviceSlots::WantsNext), read by the socket thread.
  std::vector<std::unique_ptr<UnitQueue<WorkUnit>>> arrivals;
  std::vector<std::unique_ptr<UnitQueue<StagedUnit>>> queues;
  std::deque<std::atomic<bool>> fills_ahead;
  std::deque<std::atomic<bool>> timing;  // per device: its thread runs a unit
  // Stored images asked of the coordinator before compiling (image_fetch.h),
  // and those taken, kept beside the cubin cache.
  ImageMailbox images;
  std::unique_ptr<FetchedImageCache> fetched_images;
  // The NVRTC cubin cache of this worker's CUDA backends and sim compiler.
  std::string CubinCacheDir() const { return opts.cache_dir.empty() ? DefaultCacheDir() : opts.cache_dir; }
  mutable std::mutex stats_mu;
  WorkerStats stats;
  // For /metrics, beside `stats` (under stats_mu): rows by (GPU model,
  // class), and how long compiles, measurements and whole units took.
  std::map<std::pair<std::string, std::string>, uint64_t> results_by_class;
  Histogram compile_seconds{Histogram::SecondsBounds()}, measure_seconds{Histogram::SecondsBounds()};
  std::map<std::string, Histogram> unit_seconds;  // by GPU model
  // Of the link, written by the socket thread.
  std::atomic<bool> linked{false};
  std::atomic<uint64_t> connects{0};
  std::atomic<size_t> results_unacknowledged{0};
  std::unique_ptr<HttpServer> http;
  std::atomic<bool> stop_devices{false};
  // Fastest valid median measured on this host per (GPU model, op, dtype,
  // kernel hash, shape), across units and devices: what early stopping and
  // refinement compare against (TimingPolicy).
  std::mutex best_mu;
  std::map<std::string, double> best_us;
  // Keys (sweep, model, op, dtype, shape) whose [baseline] this worker has a
  // figure of from a screening or refine unit: timed once each (a confirm
  // unit times it again, with the contenders). Guarded by best_mu.
  std::set<std::string> baselined;

  explicit Impl(WorkerOptions o) : opts(std::move(o)) {
    if (opts.name.empty()) opts.name = DefaultName();
  }
  ~Impl() override {
    if (http) http->Stop();  // before the members its thread reads
  }

  std::string Json(const std::string&) override { return ""; }
  std::string Metrics() override;

  // Counts a row for /metrics and WorkerStats.
  void CountRow(const std::string& model, const Measurement& m, bool again) {
    std::lock_guard<std::mutex> lock(stats_mu);
    stats.measured++;
    stats.measured_again += again ? 1 : 0;
    results_by_class[{model, m.Valid() ? "ok" : m.StatusName()}]++;
  }

  // One line of the worker's log (base/log.h).
  void Log(log::Level level, const std::string& message, std::initializer_list<log::Field> fields) {
    log::Write(level, "worker", message, fields);
  }

  Status CreateBackends() {
    std::string kind = opts.backend;
    if (kind != "sim" && (opts.sim_compile != "sim" || opts.sim_truth))
      return Status::Error("worker: --sim-compile and --sim-truth are for --backend sim");
#ifdef TUNEFARM_WITH_CUDA
    if (kind == "auto" || kind == "cuda") {
      auto found = DiscoverCudaDevices();
      if (found.ok() && !found->empty()) {
        SetIncludeRoots(opts.include_roots);
        CudaBackendOptions co;
        co.cache_dir = CubinCacheDir();
        if (!opts.runner_exe.empty()) co.runner_exe = opts.runner_exe;
        for (const auto& d : *found) {
          if (!opts.cuda_devices.empty() &&
              std::find(opts.cuda_devices.begin(), opts.cuda_devices.end(), d.index) ==
                  opts.cuda_devices.end()) {
            continue;
          }
          backends.push_back(MakeCudaBackend(d, co));
        }
        if (backends.empty()) return Status::Error("worker: none of the requested CUDA devices exist");
        return Status::OK();
      }
      if (kind == "cuda") {
        return Status::Error("worker: no CUDA device: " +
                             (found.ok() ? std::string("none found") : found.status().message()));
      }
      return Status::Error("worker: no CUDA device (" +
                           (found.ok() ? std::string("none found") : found.status().message()) +
                           "); run with --backend sim for a simulated GPU");
    }
#else
    if (kind == "cuda") return Status::Error("worker: built without the CUDA toolkit; use --backend sim");
    if (kind == "auto") return Status::Error("worker: built without the CUDA toolkit; use --backend sim");
#endif
    if (!FindBackendKind(kind)) return Status::Error("worker: unknown backend '" + kind + "' (auto, " + BackendNamesText() + ")");
    auto faults = SimFaults::Parse(opts.sim_faults);
    if (!faults.ok()) return faults.status();
    if (opts.sim_models.empty()) return Status::Error("worker: --sim-models is empty");
    SimOptions sim;
    sim.faults = *faults;
    sim.truth = opts.sim_truth;
    if (opts.sim_compile == "nvrtc") {
#ifdef TUNEFARM_WITH_CUDA
      if (faults->compile_error > 0)
        return Status::Error("worker: --sim-faults compile=: the configs compile for real with --sim-compile nvrtc");
      SetIncludeRoots(opts.include_roots);
      sim.compiler = NvrtcSimCompiler(CubinCacheDir());
#else
      return Status::Error("worker: --sim-compile nvrtc: built without the CUDA toolkit");
#endif
    } else if (opts.sim_compile != "sim") {
      return Status::Error("worker: unknown --sim-compile '" + opts.sim_compile + "' (sim, nvrtc)");
    }
    for (size_t i = 0; i < opts.sim_models.size(); ++i) {
      backends.push_back(MakeSimBackend(opts.sim_models[i], static_cast<int>(i), sim));
#ifdef TUNEFARM_WITH_CUDA
      // Compiling every config tells what the probe would.
      if (!sim.compiler) backends.back() = WithCompileProbe(std::move(backends.back()), opts.cache_dir);
#endif
    }
    return Status::OK();
  }

  std::shared_ptr<const OpSpec> SpecFor(const WorkUnit& unit, std::string* error) {
    auto spec = SharedOpSpec(unit.op_package, "op '" + unit.op + "'");
    if (!spec.ok()) {
      *error = spec.status().message();
      return nullptr;
    }
    return *spec;
  }

  // Device thread: runs units from its queue; results go to the socket
  // thread over an inproc PUSH socket as encoded Results envelopes.
  void DeviceLoop(size_t slot) {
    zmq::socket_t push(ctx, zmq::socket_type::push);
    push.set(zmq::sockopt::linger, 0);
    push.connect("inproc://results");
    std::set<uint64_t> planned;  // units whose configs the program backend was told of
    while (auto staged = queues[slot]->Pop(&stop_devices)) {
      const double start = NowSeconds();
      if (!staged->staged) UsePackage(slot, staged->unit);
      timing[slot] = true;
      RunUnit(slot, *staged, push, &planned);
      timing[slot] = false;
      images.Forget(staged->unit.unit_id);
      ReleasePackage(staged->unit);
      std::lock_guard<std::mutex> lock(stats_mu);
      auto [h, added] = unit_seconds.try_emplace(devices[slot].model, Histogram::SecondsBounds());
      h->second.Observe(NowSeconds() - start);
    }
  }

  // Stager thread of one device: hands the configs of each unit that comes
  // to the compile pool at once (after asking the coordinator for the
  // images it serves), so that they compile while the device times the
  // units before it; then queues the unit for the device. Units whose
  // configs do not compile on the pool go through as they came.
  void StageLoop(size_t slot) {
    zmq::socket_t push(ctx, zmq::socket_type::push);
    push.set(zmq::sockopt::linger, 0);
    push.connect("inproc://results");
    while (auto unit = arrivals[slot]->Pop(&stop_devices)) {
      StagedUnit staged{std::move(*unit), false, {}};
      std::string error;
      auto spec = SpecFor(staged.unit, &error);
      if (spec && CompilesAhead(*spec, *backends[slot])) {
        UsePackage(slot, staged.unit);
        staged.staged = true;
        staged.compiled = StartCompiles(staged.unit, spec, *backends[slot], push);
        if (timing[slot]) {
          std::lock_guard<std::mutex> lock(stats_mu);
          stats.units_ahead++;
        }
      }
      queues[slot]->Push(std::move(staged));
    }
  }

  // Whether `spec`'s configs compile to cubins of the op's hash on the
  // worker's pool with NVRTC on `backend`'s device (a CUDA device, or a sim
  // device with --sim-compile nvrtc): those compile ahead of the device,
  // and the coordinator may serve their images. Not program ops (they build
  // in their own process) nor ops whose hosts add to their hash (a unit of
  // theirs loses the configs the host may reuse only when it starts).
  bool CompilesAhead(const OpSpec& spec, const Backend& backend) const {
    const DeviceInfo& dev = backend.device();
    return !spec.program && !spec.HostDigested() &&
           (dev.backend == "cuda" || (dev.backend == "sim" && opts.sim_compile == "nvrtc"));
  }

  // The compiles of `unit`'s configs, started on the pool: images the
  // worker or the coordinator has (ImagesFor) are ready at once; the rest
  // look in the image cache once more before they compile (a builder's
  // image may come meanwhile).
  std::vector<std::future<CompiledKernel>> StartCompiles(const WorkUnit& unit, std::shared_ptr<const OpSpec> spec,
                                                         Backend& backend, zmq::socket_t& push) {
    std::vector<std::future<CompiledKernel>> compiled;
    compiled.reserve(unit.configs.size());
    std::map<size_t, ImageWant> unserved;
    std::map<size_t, CompiledKernel> ready =
        ImagesFor(unit, *spec, backend, OpHash(*spec, backend.toolchain()), push, &unserved);
    for (size_t i = 0; i < unit.configs.size(); ++i) {
      if (auto it = ready.find(i); it != ready.end()) {
        std::promise<CompiledKernel> done;
        done.set_value(std::move(it->second));
        compiled.push_back(done.get_future());
        continue;
      }
      std::optional<ImageWant> late;
      if (auto it = unserved.find(i); it != unserved.end()) late = it->second;
      compiled.push_back(pool->Submit([this, &backend, spec, dtype = unit.dtype, c = unit.configs[i], late] {
        if (late && fetched_images)
          if (auto image = fetched_images->Get(*late, {spec->kernel}))
            return FetchedKernel(c, *late, std::move(*image));
        return backend.Compile(*spec, dtype, c);
      }));
    }
    return compiled;
  }

  // `unit`'s package is in use until ReleasePackage: kept on disk (and
  // unpacked again where the cache removed it).
  void UsePackage(size_t slot, const WorkUnit& unit) {
    if (!packages) return;
    const std::string digest = PackageDigest(unit.op_package);
    packages->Pin(unit.unit_id, digest);
    if (Status st = packages->Touch(slot, unit.op, unit.op_package, digest); !st.ok())
      Log(log::Level::kWarn, "op package not unpacked again", {{"op", unit.op}, {"error", st.message()}});
  }
  void ReleasePackage(const WorkUnit& unit) {
    if (!packages) return;
    packages->Unpin(unit.unit_id);
    {
      std::lock_guard<std::mutex> lock(evict_mu);
      const double now = NowSeconds();
      if (now - last_evict < kPackageEvictSeconds) return;
      last_evict = now;
    }
    const PackageCache::Eviction e = packages->Evict();
    if (!e.removed.empty())
      Log(log::Level::kInfo, "op package cache over its bound: least recently used removed",
          {{"worker", opts.name}, {"folders", e.removed.size()}, {"mib_before", e.bytes_before >> 20},
           {"mib_after", e.bytes_after >> 20}, {"bound_mib", opts.max_package_cache_bytes >> 20}});
  }

  // Hands a command to the socket thread over the device's inproc pipe.
  static void Post(zmq::socket_t& push, Command cmd) {
    Envelope env;
    env.command = std::move(cmd);
    const std::string frame = EncodeEnvelope(env);
    push.send(zmq::buffer(frame), zmq::send_flags::none);
  }

  // A unit's rows and the cubins of its checked configs, not yet sent.
  struct Pending {
    std::vector<Measurement> rows;
    std::vector<KernelImage> kernels;
    std::vector<KernelProfile> profiles;
    std::vector<Measurement> baselines;
    std::vector<StoredDigest> reused;  // sent with the first batch
    PipelineFigures pipeline;          // the unit's, sent with the final batch
    size_t kernel_bytes = 0;
    std::set<std::string> kernels_taken;  // of this unit: each cubin travels once

    // Adds the cubin `m` was measured with when m passed its check.
    void AddKernel(const Measurement& m, const CompiledKernel& k) {
      // An image over the coordinator's bound would cost the batch its rows.
      if (!m.Valid() || k.fetched || k.image.empty() || k.image.size() > kMaxKernelImageBytes || m.arch.empty()) return;
      KernelImage img;
      img.kernel_hash = m.kernel_hash;
      img.config_id = m.config_id;
      img.dtype = m.dtype;
      img.arch = m.arch;
      if (!kernels_taken.insert(img.Key()).second) return;
      img.image = k.image;
      img.sha256 = Sha256Hex(img.image);
      kernel_bytes += img.image.size();
      kernels.push_back(std::move(img));
    }
  };
  // Cubins a batch may carry before it is sent (frames stay well inside
  // kMaxFrameBytes).
  static constexpr size_t kMaxBatchKernelBytes = size_t(16) << 20;

  void Flush(zmq::socket_t& push, const WorkUnit& unit, uint64_t* batch, Pending* pending, bool final) {
    Results r;
    r.sweep_id = unit.sweep_id;
    r.unit_id = unit.unit_id;
    r.batch = (*batch)++;
    r.final = final;
    r.measurements = std::move(pending->rows);
    r.kernels = std::move(pending->kernels);
    r.profiles = std::move(pending->profiles);
    r.baselines = std::move(pending->baselines);
    r.reused = std::move(pending->reused);
    if (final) r.pipeline = pending->pipeline;
    pending->reused.clear();
    pending->profiles.clear();
    pending->baselines.clear();
    pending->rows.clear();
    pending->kernels.clear();
    pending->kernel_bytes = 0;
    Post(push, std::move(r));
  }

  // Profiles the unit.profile_top fastest valid rows [first, last) of a
  // confirm unit on `shape` (`kernels[i]` measured row first + i), and any
  // within kTieWithin of the fastest (one of which may win the tie rule). A
  // backend that cannot profile says why once per unit, in the log; the
  // rows stand.
  void ProfileFastest(Backend& backend, const OpSpec& spec, const WorkUnit& unit, const Shape& shape,
                      const std::vector<CompiledKernel>& kernels,
                      std::vector<Measurement>::const_iterator first, std::vector<Measurement>::const_iterator last,
                      Pending* pending) {
    std::vector<size_t> order;
    for (auto it = first; it != last; ++it)
      if (it->Valid()) order.push_back(size_t(it - first));
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return first[a].median_us < first[b].median_us; });
    size_t keep = std::min<size_t>(order.size(), unit.profile_top);
    while (keep < order.size() && first[order[keep]].median_us <= (1 + kTieWithin) * first[order[0]].median_us) ++keep;
    order.resize(keep);
    for (size_t i : order) {
      const Measurement& m = first[i];
      auto p = backend.ProfileKernel(spec, unit.dtype, kernels[i], shape);
      if (!p.ok()) {
        Log(log::Level::kWarn, "no profile", {{"worker", opts.name}, {"unit", unit.unit_id},
                                              {"config", m.config_id}, {"error", p.status().message()}});
        return;
      }
      p->gpu_model = m.gpu_model;
      p->op = m.op;
      p->dtype = m.dtype;
      p->shape = m.shape;
      p->kernel_hash = m.kernel_hash;
      p->config_id = m.config_id;
      Log(log::Level::kInfo, "profiled", {{"worker", opts.name}, {"op", m.op}, {"shape", m.shape},
                                          {"config", m.config_id}, {"bottleneck", p->bottleneck}, {"why", p->why}});
      pending->profiles.push_back(std::move(*p));
    }
  }

  // Tells the socket thread that the device may take its next unit while it
  // finishes the current one.
  // Device `slot` would take its next unit now (`fill`: and more, up to
  // kUnitsHeldPerDevice; DeviceSlots::WantsNext).
  void AskForNextUnit(zmq::socket_t& push, size_t slot, bool fill) {
    fills_ahead[slot] = fill;
    Post(push, RequestWork{devices[slot].index});
  }

  // A serve-mode program op compiles in its serve process, ahead of timing
  // when told what comes: the queued units of its device are planned as
  // soon as they arrive (between measurements), not when they start.
  void PlanQueued(size_t slot, std::set<uint64_t>* planned) {
    for (const WorkUnit& next : queues[slot]->TakeUnseen(planned)) {
      std::string ignored;
      auto spec = SpecFor(next, &ignored);
      if (!spec || !spec->program || next.confirm()) continue;
      UsePackage(slot, next);  // its serve process may unpack and build it now
      std::vector<StoredDigest> reused;
      const auto trimmed = WithoutReused(next, *spec, *program_backends[slot], &reused);
      const std::vector<Config>& configs = (trimmed ? *trimmed : next).configs;
      if (!configs.empty()) program_backends[slot]->Plan(*spec, next.dtype, configs, next.shapes);
    }
  }

  // `unit` without the configs whose stored rows this host may reuse: those
  // the unit offers under this host's digest for the op (WorkUnit::reusable),
  // listed in *reused. nullopt when none is left out: the unit as it came.
  std::optional<WorkUnit> WithoutReused(const WorkUnit& unit, const OpSpec& spec, Backend& backend,
                                        std::vector<StoredDigest>* reused) {
    reused->clear();
    if (unit.reusable.empty() || unit.confirm() || unit.refine()) return std::nullopt;
    auto digest = backend.HostDigest(spec);
    // A host that cannot say measures: its compiles fail with the reason.
    if (!digest.ok() || digest->empty()) return std::nullopt;
    std::set<std::string> mine;
    for (const StoredDigest& d : unit.reusable)
      if (d.digest == *digest) mine.insert(d.config_id);
    if (mine.empty()) return std::nullopt;
    WorkUnit out = unit;
    out.configs.clear();
    for (const Config& c : unit.configs) {
      if (mine.count(c.Id())) reused->push_back({c.Id(), *digest});
      else out.configs.push_back(c);
    }
    return out;
  }

  // A row of `unit` for (c, s) on `dev`, before its outcome.
  Measurement BaseRow(const WorkUnit& unit, const DeviceInfo& dev, const Config& c, const Shape& s) const {
    Measurement m;
    m.gpu_model = dev.model;
    m.op = unit.op;
    m.dtype = unit.dtype;
    m.shape = s.Canonical();
    m.config = c;
    m.config_id = c.Id();
    m.backend = dev.backend;
    m.device_name = dev.name;
    m.driver_version = dev.driver_version;
    m.nvrtc_version = dev.nvrtc_version;
    m.farm_version = TUNEFARM_VERSION;
    m.worker = opts.name;
    m.unix_time = NowUnixSeconds();
    return m;
  }


  // One unit on one device: its configs compile on the pool while earlier
  // ones are timed; rows go out in batches (Flush) as they come.
  struct UnitRun {
    const WorkUnit& unit;
    const DeviceInfo& dev;
    const OpSpec& spec;
    Backend& backend;
    zmq::socket_t& push;
    std::string op_hash;
    std::vector<std::future<CompiledKernel>> compiled;
    Pending pending;
    uint64_t batch = 0;
    double started = 0;  // when its device took it
    // Before the final batch: the unit's pipeline figures are complete.
    void Close(unsigned compile_threads) {
      pending.pipeline.units = 1;
      pending.pipeline.unit_seconds = NowSeconds() - started;
      pending.pipeline.compile_threads = std::min<unsigned>(compile_threads, kMaxCompileThreads);
    }
  };

  // The identity of what `k` is: its kernel hash (the op's when the backend
  // adds nothing), include digest, arch (of a cubin only) and how its
  // samples met the L2 (the op's timing, part of that hash).
  static void StampKernel(const UnitRun& run, const CompiledKernel& k, Measurement* m) {
    m->kernel_hash = k.kernel_hash.empty() ? run.op_hash : k.kernel_hash;
    m->include_digest = k.include_digest;
    m->arch = k.image.empty() ? "" : k.arch;
    m->timing = run.spec.timing;
  }

  // The configs of `unit` that need no compile here, by index: images the
  // worker took before (its image cache) and those the coordinator serves
  // now (one ImageRequest for the rest, answered within
  // kImageFetchWaitSeconds), each checked (CheckFetchedImage). A config
  // whose cubin the NVRTC cache holds is not asked for: its compile is a
  // cache hit, so that each config counts once, as compiled, fetched or
  // from the cubin cache. Only for ops that CompilesAhead (a sim device
  // with --sim-compile nvrtc takes the same cubins as a CUDA device of its
  // model's architecture). The rest compile as before (a bad image is
  // logged and dropped); *unserved holds their wants, open to a later
  // reply until the unit ends (ImageMailbox::KeepOpen).
  std::map<size_t, CompiledKernel> ImagesFor(const WorkUnit& unit, const OpSpec& spec, const Backend& backend,
                                             const std::string& op_hash, zmq::socket_t& push,
                                             std::map<size_t, ImageWant>* unserved) {
    std::map<size_t, CompiledKernel> out;
#ifdef TUNEFARM_WITH_CUDA
    if (!fetched_images || !CompilesAhead(spec, backend) || unit.configs.empty()) return out;
    const std::string arch = CudaArchFor(spec, backend.device());
    const std::vector<std::string> entries = {spec.kernel};
    std::vector<ImageWant> wants;
    std::map<std::string, size_t> index;  // want key -> config index
    for (size_t i = 0; i < unit.configs.size(); ++i) {
      if (CubinCached(spec, unit.dtype, unit.configs[i], arch, CubinCacheDir())) continue;
      ImageWant w{op_hash, unit.configs[i].Id(), unit.dtype, arch};
      if (auto cached = fetched_images->Get(w, entries)) {
        out[i] = FetchedKernel(unit.configs[i], w, std::move(*cached));
        out[i].from_cache = true;
      } else if (index.emplace(w.Key(), i).second) {
        wants.push_back(std::move(w));
      }
    }
    if (wants.empty()) return out;
    images.Expect(unit.unit_id);
    Post(push, ImageRequest{unit.sweep_id, unit.unit_id, wants});
    auto reply = images.Await(unit.unit_id, kImageFetchWaitSeconds, &stop_devices);
    FetchedImages got;
    if (reply && !reply->refused.empty())
      Log(log::Level::kWarn, "image request refused", {{"worker", opts.name}, {"coordinator", opts.endpoint},
                                                        {"unit", unit.unit_id}, {"why", reply->refused}});
    else if (reply)
      got = TakeFetchedImages(*reply, wants, entries);
    for (const std::string& why : got.refused)
      Log(log::Level::kWarn, "image from the coordinator refused; the config compiles here",
          {{"worker", opts.name}, {"coordinator", opts.endpoint}, {"unit", unit.unit_id}, {"error", why}});
    for (auto& [key, image] : got.good) {
      const size_t i = index.at(key);
      fetched_images->Put(ImageWant{image.kernel_hash, image.config_id, image.dtype, image.arch}, image.image);
      out[i] = FetchedKernel(unit.configs[i], ImageWant{op_hash, image.config_id, image.dtype, arch},
                             std::move(image.image));
    }
    // What was not served may still come (a builder's image) before its
    // compile starts.
    std::erase_if(wants, [&](const ImageWant& w) { return got.good.count(w.Key()) > 0; });
    for (const ImageWant& w : wants) (*unserved)[index.at(w.Key())] = w;
    images.KeepOpen(unit.unit_id, std::move(wants), entries);
#else
    (void)unit, (void)spec, (void)backend, (void)op_hash, (void)push, (void)unserved;
#endif
    return out;
  }

  // A kernel of `config` from a served image of `want`, checked already.
  static CompiledKernel FetchedKernel(const Config& config, const ImageWant& want, std::string image) {
    CompiledKernel k;
    k.config = config;
    k.config_id = config.Id();
    k.kernel_hash = want.kernel_hash;
    k.arch = want.arch;
    k.image = std::move(image);
    k.fetched = true;
    return k;
  }

  // Waits for config i's compile and counts it.
  CompiledKernel TakeCompiled(UnitRun& run, size_t i) {
    const double wait_start = NowSeconds();
    CompiledKernel k = run.compiled[i].get();
    std::lock_guard<std::mutex> lock(stats_mu);
    if (!run.unit.confirm() && !run.unit.refine())
      stats.screened.insert(run.unit.op + '\0' + run.unit.dtype + '\0' + run.unit.configs[i].Id());
    stats.compile_wait_seconds += NowSeconds() - wait_start;
    const bool fetched = k.fetched && !k.from_cache;
    stats.fetched += fetched ? 1 : 0;
    stats.compiled += k.from_cache || fetched ? 0 : 1;
    stats.compile_cache_hits += k.from_cache ? 1 : 0;
    stats.compile_seconds += k.compile_seconds;
    if (!k.from_cache && !fetched) compile_seconds.Observe(k.compile_seconds);
    PipelineFigures& p = run.pending.pipeline;
    p.device_wait_seconds += NowSeconds() - wait_start;
    p.fetched += fetched ? 1 : 0;
    p.compiled += k.from_cache || fetched ? 0 : 1;
    p.cached += k.from_cache ? 1 : 0;
    p.compile_seconds += k.compile_seconds;
    return k;
  }

  void RunUnit(size_t slot, StagedUnit& staged, zmq::socket_t& push, std::set<uint64_t>* planned) {
    const WorkUnit& given = staged.unit;
    Backend& device_backend = *backends[slot];
    const DeviceInfo& dev = device_backend.device();
    std::string error;
    auto spec = SpecFor(given, &error);
    if (!spec) {
      // An op that does not parse here fails every pair of the unit with the
      // reason, so the sweep still completes and shows why.
      Pending pending;
      for (const auto& c : given.configs) {
        for (const auto& s : given.shapes) {
          Measurement m = BaseRow(given, dev, c, s);
          m.kernel_hash = "invalid-spec";
          m.failure = FailureClass::kCompileError;
          m.failure_message = error;
          pending.rows.push_back(std::move(m));
        }
      }
      uint64_t batch = 0;
      Flush(push, given, &batch, &pending, true);
      return;
    }
    Backend& backend = spec->program ? *program_backends[slot] : device_backend;
    // Configs measured before under this host's digest are reused, not
    // measured again: the coordinator learns which with the first batch.
    std::vector<StoredDigest> reused;
    const std::optional<WorkUnit> trimmed = WithoutReused(given, *spec, backend, &reused);
    const WorkUnit& unit = trimmed ? *trimmed : given;
    Log(log::Level::kDebug, "unit",
        {{"worker", opts.name}, {"sweep", unit.sweep_id}, {"unit", unit.unit_id}, {"op", unit.op},
         {"dtype", unit.dtype}, {"shape", unit.shapes.empty() ? "" : unit.shapes[0].Canonical()},
         {"configs", unit.configs.size()}, {"reused", reused.size()}, {"model", dev.model}});
    UnitRun run{unit, dev, *spec, backend, push, OpHash(*spec, backend.toolchain()), {}, {}, 0, NowSeconds()};
    run.pending.reused = std::move(reused);
    // Planned units are forgotten when they start.
    planned->erase(planned->begin(), planned->lower_bound(unit.unit_id));
    if (staged.staged) {  // a staged unit is never trimmed: it is not a program op's
      run.compiled = std::move(staged.compiled);
    } else {
      run.compiled = StartCompiles(unit, spec, backend, push);
    }
    if (!planned->count(unit.unit_id) && !unit.configs.empty()) backend.Plan(*spec, unit.dtype, unit.configs, unit.shapes);
    if (unit.confirm()) RunConfirmUnit(run, slot);
    else RunScreenOrRefineUnit(run, slot, planned);
  }

  // The fastest configs of one shape, timed again together.
  void RunConfirmUnit(UnitRun& run, size_t slot) {
    const WorkUnit& unit = run.unit;
    std::vector<CompiledKernel> valid;
    for (size_t i = 0; i < unit.configs.size(); ++i) {
      CompiledKernel k = TakeCompiled(run, i);
      if (k.failure == FailureClass::kNone) valid.push_back(std::move(k));
      else Log(log::Level::kWarn, "a config of a confirm unit no longer compiles",
               {{"worker", opts.name}, {"unit", unit.unit_id}, {"config", k.config_id},
                {"error", k.failure_message}});
    }
    std::vector<Measurement>& rows = run.pending.rows;
    const double measure_start = NowSeconds();
    // The op's baseline is timed with the contenders, round by round.
    std::vector<CompiledKernel> timed = valid;
    if (HasBaseline(run) && !valid.empty()) timed.push_back(BaselineOf(run, valid[0]));
    for (const auto& s : unit.shapes) {
      std::vector<Measurement> got = MeasureTogether(run.backend, run.spec, unit.dtype, timed, s, PolicyFor(unit),
                                                     unit.confirm_seconds, unit.confirm_timing);
      if (timed.size() > valid.size()) run.pending.baselines.push_back(BaselineRow(run, timed.back(), s, got.back()));
      for (size_t j = 0; j < valid.size(); ++j) {
        Measurement m = BaseRow(unit, run.dev, valid[j].config, s);
        m.CopyOutcome(got[j]);
        StampKernel(run, valid[j], &m);
        if (ReplacesFirstFigure(m)) m.pass = Measurement::Pass::kConfirm;
        run.pending.AddKernel(m, valid[j]);
        rows.push_back(std::move(m));
      }
      if (unit.profile_top > 0)
        ProfileFastest(run.backend, run.spec, unit, s, valid, rows.end() - valid.size(), rows.end(), &run.pending);
    }
    for (const Measurement& m : rows) CountRow(run.dev.model, m, /*again=*/true);
    {
      std::lock_guard<std::mutex> lock(stats_mu);
      stats.measure_seconds += NowSeconds() - measure_start;
    }
    run.pending.pipeline.measure_seconds += NowSeconds() - measure_start;
    // Asked for only now: a unit fetched ahead would wait out the whole
    // confirm run while its lease runs down.
    AskForNextUnit(run.push, slot, false);
    run.Close(pool->threads());
    Flush(run.push, unit, &run.batch, &run.pending, true);
  }

  // The worker's timing policy, with the energy window its unit's sweep
  // asks for (WorkUnit::energy_seconds) where that is longer: a value out
  // of [0, kMaxEnergySeconds] from the coordinator is taken as none.
  TimingPolicy PolicyFor(const WorkUnit& unit) const {
    TimingPolicy policy = opts.timing;
    if (unit.energy_seconds > 0 && unit.energy_seconds <= kMaxEnergySeconds)
      policy.energy_seconds = std::max(policy.energy_seconds, unit.energy_seconds);
    return policy;
  }

  // A screening or refine unit: each config on each shape, against the best
  // this worker has seen of the key (early stop), in batches.
  void RunScreenOrRefineUnit(UnitRun& run, size_t slot, std::set<uint64_t>* planned) {
    const WorkUnit& unit = run.unit;
    // A serve-mode program op asks for its next unit at once, so that its
    // configs compile while this unit's are timed; a device whose configs
    // compile on the pool (CompilesAhead) fills up to kUnitsHeldPerDevice
    // units, so that the pool compiles what it times next.
    const bool compiles_ahead = run.spec.program && !run.spec.program->serve.empty();
    const bool fills = CompilesAhead(run.spec, run.backend);
    // A screening unit of a sweep with a refine pass ranks every config
    // only; a refine unit's configs are contenders by the coordinator's
    // choice, timed to the CI target (and in the refine window) whatever
    // their new figure: no best to judge or stop them against.
    TimingPolicy policy = PolicyFor(unit);
    if (unit.screen_only) {
      policy.target_rel_ci = std::max(policy.target_rel_ci, policy.rank_rel_ci);
      policy.refine_seconds = 0;
    }
    // Every config reused: nothing to time, the next unit may come now.
    if (unit.configs.empty()) AskForNextUnit(run.push, slot, false);
    double last_flush = NowSeconds();
    std::map<std::string, size_t> failed;  // by status, for the unit's summary line
    std::optional<CompiledKernel> compiled_one;  // what the baseline's key takes its kernel hash from
    for (size_t i = 0; i < unit.configs.size(); ++i) {
      // The last config: ask for the next unit now, so that it is here when
      // this one ends and the device never waits on a round trip.
      if (fills ? i == 0 : compiles_ahead ? i == 0 : i + 1 == unit.configs.size())
        AskForNextUnit(run.push, slot, fills);
      if (compiles_ahead) PlanQueued(slot, planned);
      CompiledKernel k = TakeCompiled(run, i);
      if (!compiled_one && k.failure == FailureClass::kNone) compiled_one = k;
      for (const auto& s : unit.shapes) {
        Measurement m = k.failure != FailureClass::kNone ? CompileFailureRow(run, k, unit.configs[i], s)
                                                         : MeasureOne(run, k, unit.configs[i], s, policy);
        StampKernel(run, k, &m);
        run.pending.AddKernel(m, k);
        CountRow(run.dev.model, m, unit.refine());
        if (!m.Valid()) {
          ++failed[m.StatusName()];
          Log(log::Level::kDebug, "config failed",
              {{"worker", opts.name}, {"unit", unit.unit_id}, {"config", m.config.Canonical()},
               {"shape", m.shape}, {"status", m.StatusName()}, {"reason", FirstLine(m.failure_message)}});
        }
        run.pending.rows.push_back(std::move(m));
        if (run.pending.rows.size() >= opts.batch_size || run.pending.kernel_bytes >= kMaxBatchKernelBytes ||
            NowSeconds() - last_flush >= opts.batch_seconds) {
          Flush(run.push, unit, &run.batch, &run.pending, false);
          last_flush = NowSeconds();
        }
      }
    }
    if (HasBaseline(run) && compiled_one) {
      for (const auto& s : unit.shapes) {
        const std::string key = unit.sweep_id + '\0' + run.dev.model + '\0' + unit.op + '\0' + unit.dtype + '\0' +
                                s.Canonical();
        {
          std::lock_guard<std::mutex> lock(best_mu);
          if (baselined.count(key)) continue;
        }
        const CompiledKernel k = BaselineOf(run, *compiled_one);
        Measurement row = BaselineRow(run, k, s, run.backend.Measure(run.spec, unit.dtype, k, s, policy, 0));
        if (row.Valid()) {  // a failure is tried again in the key's next unit
          std::lock_guard<std::mutex> lock(best_mu);
          baselined.insert(key);
        }
        run.pending.baselines.push_back(std::move(row));
      }
    }
    run.Close(pool->threads());
    Flush(run.push, unit, &run.batch, &run.pending, true);
    if (!failed.empty()) {
      std::string classes;
      size_t n = 0;
      for (const auto& [status, count] : failed) {
        classes += (classes.empty() ? "" : ",") + status + "=" + std::to_string(count);
        n += count;
      }
      Log(log::Level::kInfo, "unit had failures",
          {{"worker", opts.name}, {"sweep", unit.sweep_id}, {"unit", unit.unit_id}, {"op", unit.op},
           {"dtype", unit.dtype}, {"failed", n}, {"of", unit.configs.size() * unit.shapes.size()},
           {"by_class", classes}});
    }
  }

  // Whether the unit's op has a [baseline] to time beside its configs.
  static bool HasBaseline(const UnitRun& run) { return run.spec.baseline.has_value(); }

  // The op's baseline in the key of `compiled`, a config of the unit that
  // compiled: its kernel hash and, where the host adds to it, the digest
  // of what it added (the rows of a key share them).
  static CompiledKernel BaselineOf(const UnitRun& run, const CompiledKernel& compiled) {
    CompiledKernel k = BaselineKernel(run.spec, compiled.kernel_hash);  // StampKernel falls back to the op's hash
    k.include_digest = compiled.include_digest;
    return k;
  }

  // The row of the op's baseline (`k`, BaselineKernel) measured as `got`.
  Measurement BaselineRow(UnitRun& run, const CompiledKernel& k, const Shape& s, const Measurement& got) {
    Measurement m = BaseRow(run.unit, run.dev, k.config, s);
    m.CopyOutcome(got);
    m.baseline = got.baseline.empty() ? k.baseline : got.baseline;
    StampKernel(run, k, &m);
    if (!m.Valid())
      Log(log::Level::kInfo, "baseline not measured",
          {{"worker", opts.name}, {"op", run.unit.op}, {"baseline", m.baseline}, {"shape", m.shape},
           {"status", m.StatusName()}, {"reason", FirstLine(m.failure_message)}});
    return m;
  }

  Measurement CompileFailureRow(UnitRun& run, const CompiledKernel& k, const Config& c, const Shape& s) {
    Measurement m = BaseRow(run.unit, run.dev, c, s);
    m.failure = k.failure;
    m.failure_message = k.failure_message + (k.log.empty() ? "" : "\n" + k.log);
    m.resources = k.resources;
    return m;
  }

  // Times config `c` (compiled as `k`) on shape `s`, judged against the
  // best this worker has of the key, which its figure may lower.
  Measurement MeasureOne(UnitRun& run, const CompiledKernel& k, const Config& c, const Shape& s,
                         const TimingPolicy& policy) {
    const WorkUnit& unit = run.unit;
    const std::string best_key =
        run.dev.model + "|" + unit.op + "|" + unit.dtype + "|" + k.kernel_hash + "|" + s.Canonical();
    double best = 0;  // a refine unit has none to judge against
    if (!unit.refine()) {
      std::lock_guard<std::mutex> lock(best_mu);
      best = best_us[best_key];
    }
    const double measure_start = NowSeconds();
    Measurement got = run.backend.Measure(run.spec, unit.dtype, k, s, policy, best);
    {
      std::lock_guard<std::mutex> lock(stats_mu);
      stats.measure_seconds += NowSeconds() - measure_start;
      measure_seconds.Observe(NowSeconds() - measure_start);
    }
    run.pending.pipeline.measure_seconds += NowSeconds() - measure_start;
    Measurement m = BaseRow(unit, run.dev, c, s);
    m.CopyOutcome(got);
    if (unit.refine() && ReplacesFirstFigure(m)) m.pass = Measurement::Pass::kRefine;
    if (m.Valid()) {
      std::lock_guard<std::mutex> lock(best_mu);
      double& known = best_us[best_key];
      if (known == 0 || m.median_us < known) known = m.median_us;
    }
    return m;
  }
};

std::string Worker::Impl::Metrics() {
  std::vector<Metric> m;
  m.push_back(Metric::Gauge("tunefarm_worker_build_info", "this worker's version (always 1)", 1,
                            {{"version", TUNEFARM_VERSION}}));
  std::map<std::string, size_t> per_model;
  for (const auto& d : devices) per_model[d.model]++;
  for (const auto& [model, n] : per_model)
    m.push_back(Metric::Gauge("tunefarm_worker_devices", "devices this worker measures on, by GPU model", n,
                              {{"gpu_model", model}}));
  m.push_back(Metric::Gauge("tunefarm_worker_connected", "1 while the coordinator answers this worker's hello",
                            linked ? 1 : 0));
  m.push_back(Metric::Counter("tunefarm_worker_reconnects_total", "links to the coordinator opened after the first",
                              connects > 0 ? connects - 1 : 0));
  m.push_back(Metric::Gauge("tunefarm_worker_results_unacknowledged",
                            "results batches sent and kept until the coordinator acknowledges them",
                            results_unacknowledged));
  std::lock_guard<std::mutex> lock(stats_mu);
  m.push_back(Metric::Counter("tunefarm_worker_units_total", "work units received", stats.units));
  m.push_back(Metric::Counter("tunefarm_worker_units_queued_total",
                              "work units received while their device was still busy", stats.units_queued));
  m.push_back(Metric::Counter("tunefarm_worker_units_compiled_ahead_total",
                              "work units whose configs went to the compile pool while their device timed another",
                              stats.units_ahead));
  for (const auto& [key, n] : results_by_class)
    m.push_back(Metric::Counter("tunefarm_worker_results_total", "(config, shape) rows produced, by GPU model and class",
                                n, {{"gpu_model", key.first}, {"class", key.second}}));
  m.push_back(Metric::Counter("tunefarm_worker_compiles_total", "kernels compiled (cache misses)", stats.compiled));
  m.push_back(Metric::Counter("tunefarm_worker_compile_cache_hits_total", "kernels found in the cubin cache",
                              stats.compile_cache_hits));
  m.push_back(Metric::Counter("tunefarm_worker_images_fetched_total",
                              "kernels taken from the coordinator's stored images instead of compiled",
                              stats.fetched));
  m.push_back(Metric::Counter("tunefarm_worker_compile_wait_seconds_total",
                              "time devices waited for a compile (the compile pool is behind the GPUs)",
                              stats.compile_wait_seconds));
  m.push_back(Metric::FromHistogram("tunefarm_worker_compile_seconds", "one uncached compile", compile_seconds));
  m.push_back(Metric::FromHistogram("tunefarm_worker_measure_seconds", "one (config, shape) check and timing",
                                    measure_seconds));
  for (const auto& [model, h] : unit_seconds)
    m.push_back(Metric::FromHistogram("tunefarm_worker_unit_seconds", "one work unit, first compile to last row",
                                      h, {{"gpu_model", model}}));
  return RenderMetrics(m);
}

std::string WorkerDefaultName() { return DefaultName(); }
std::string WorkerDefaultCacheDir() { return DefaultCacheDir(); }

Worker::Worker(WorkerOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {}
Worker::~Worker() = default;

const std::vector<DeviceInfo>& Worker::devices() const { return impl_->devices; }
void Worker::set_endpoint(const std::string& endpoint) { impl_->opts.endpoint = endpoint; }
std::string Worker::Metrics() const { return impl_->Metrics(); }
std::string Worker::http_url() const { return impl_->http ? impl_->http->url() : ""; }
WorkerStats Worker::stats() const {
  std::lock_guard<std::mutex> lock(impl_->stats_mu);
  WorkerStats s = impl_->stats;
  s.compile_threads = impl_->pool ? impl_->pool->threads() : 0;
  return s;
}

Status Worker::Start() {
  const auto& o = impl_->opts;
  if (o.curve_secret_key.empty() != o.coordinator_public_key.empty()) {
    return Status::Error("worker: --curve-key and --coordinator-key go together");
  }
  if (!o.curve_secret_key.empty()) {
    auto keys = LoadCurveKeyPair(o.curve_secret_key);
    if (!keys.ok()) return keys.status();
    impl_->curve_keys = *keys;
    auto server = LoadCurvePublicKey(o.coordinator_public_key);
    if (!server.ok()) return server.status();
    impl_->coordinator_key = *server;
  } else if (!IsLoopbackEndpoint(o.endpoint) && !o.insecure_plaintext) {
    return Status::Error("worker: " + o.endpoint +
                         " is not loopback: give --curve-key and --coordinator-key "
                         "(or --insecure-plaintext on a trusted network)");
  }
  TUNE_RETURN_IF_ERROR(impl_->CreateBackends());
  ProgramBackendOptions programs;
  programs.work_dir = (o.cache_dir.empty() ? DefaultCacheRoot() : o.cache_dir) + "/programs";
  programs.allowed = o.allow_programs;
  programs.protected_paths = o.protected_paths;
  if (!o.curve_secret_key.empty()) programs.protected_paths.push_back(o.curve_secret_key);
  programs.allow_unconfined = o.allow_unconfined_programs;
  programs.private_namespace = o.program_namespace;
  programs.python_path = TunefarmPythonPath();
  // Said once a process: a Python process starts a farm for each key it tunes.
  static std::once_flag said;
  if (o.allow_programs)
    std::call_once(said, [&] {
      if (geteuid() == 0)
        log::Warn("worker", "program ops run as root: without capabilities, but root-owned files (/proc/sys among "
                            "them) stay writable to them; run the worker as a user of its own");
      if (o.program_namespace && confine::LandlockAbi() >= 1 && !confine::CanMakePrivateShm())
        log::Warn("worker", "program ops share this host's /dev/shm and see /run: this kernel refuses the "
                            "unprivileged user namespace that gives each its own (docs/program-ops.md)");
      if (programs.python_path.empty())
        log::Warn("worker", "no tunefarm Python package ships with this binary (none beside it, on PYTHONPATH, or "
                            "in the build tree it was built in): ops served by `python3 -m tunefarm.harness` need "
                            "one; set TUNEFARM_PYTHON to its python/ folder");
    });
  // One serve process per device, each with a compile pool: together they
  // keep the worker's cores busy, not each of them all the cores.
  if (const unsigned cores = UsableCores(); cores > 0)
    programs.cpus = std::max(1u, cores / unsigned(std::max<size_t>(impl_->backends.size(), 1)));
  for (const auto& b : impl_->backends) {
    impl_->devices.push_back(b->device());
    impl_->program_backends.push_back(MakeProgramBackend(b->device(), b->toolchain(), programs));
  }
  // Every device's runner starts now, all at once, instead of inside its
  // first config: context creation is per process, not per sweep.
  std::vector<Status> prepared(impl_->backends.size());
  {
    std::vector<std::thread> starting;
    for (size_t i = 0; i < impl_->backends.size(); ++i) {
      starting.emplace_back([this, &prepared, i] { prepared[i] = impl_->backends[i]->Prepare(); });
    }
    for (auto& t : starting) t.join();
  }
  for (size_t i = 0; i < prepared.size(); ++i) {
    if (!prepared[i].ok()) {
      impl_->Log(log::Level::kWarn, "a device did not start; tried again at its first config",
                 {{"worker", impl_->opts.name}, {"device", impl_->devices[i].index},
                  {"error", prepared[i].message()}});
    }
  }
  impl_->pool = std::make_unique<CompilePool>(impl_->opts.compile_threads);
  // Where the backends unpack op packages (UnpackedPackage's roots): the
  // cubin cache's and the program ops' folders.
  impl_->packages = std::make_unique<PackageCache>(
      std::vector<std::string>{(o.cache_dir.empty() ? DefaultCacheDir() : o.cache_dir) + "/packages",
                               programs.work_dir + "/packages"},
      o.max_package_cache_bytes, PackageCache::kDefaultGraceSeconds);
  impl_->fetched_images = std::make_unique<FetchedImageCache>(
      (o.cache_dir.empty() ? DefaultCacheDir() : o.cache_dir) + "/fetched");
  if (o.http_port >= 0) {
    HttpServerOptions ho;
    ho.address = o.http_address;
    ho.port = static_cast<uint16_t>(o.http_port);
    impl_->http = std::make_unique<HttpServer>(ho, impl_.get());
    TUNE_RETURN_IF_ERROR(impl_->http->Start());
  }
  return Status::OK();
}

Status Worker::Run(const std::atomic<bool>* stop) {
  Impl& w = *impl_;
  if (w.backends.empty()) return Status::Error("worker: Start() was not called");
  zmq::socket_t pull(w.ctx, zmq::socket_type::pull);
  pull.bind("inproc://results");
  w.stop_devices = false;
  std::vector<std::thread> device_threads;
  w.arrivals.clear();
  w.queues.clear();
  w.fills_ahead.clear();
  w.timing.clear();
  for (size_t i = 0; i < w.backends.size(); ++i) {
    w.arrivals.push_back(std::make_unique<UnitQueue<WorkUnit>>());
    w.queues.push_back(std::make_unique<UnitQueue<StagedUnit>>());
    w.fills_ahead.emplace_back(false);
    w.timing.emplace_back(false);
  }
  for (size_t i = 0; i < w.backends.size(); ++i) {
    device_threads.emplace_back([&w, i] { w.StageLoop(i); });
    device_threads.emplace_back([&w, i] { w.DeviceLoop(i); });
  }

  CoordinatorLink link(w.ctx, {w.opts.endpoint, w.opts.name, w.devices, w.curve_keys, w.coordinator_key, {}, {}});
  DeviceSlots slots(w.devices.size());
  // NoWork retries spread over +-25 % of the coordinator's retry_ms: idle
  // workers told "no work" together would otherwise ask again together.
  std::minstd_rand retry_rng(std::random_device{}());
  std::uniform_real_distribution<double> retry_jitter(0.75, 1.25);
  // The slot of the device whose index is `index`, or npos.
  auto slot_of = [&w](int index) {
    for (size_t d = 0; d < w.devices.size(); ++d) {
      if (w.devices[d].index == index) return d;
    }
    return DeviceSlots::npos;
  };
  auto connect = [&]() {
    slots.Unanswered();
    w.connects++;
    return link.Connect();
  };
  Status exit_status;

  try {
    exit_status = connect();
    while (exit_status.ok() && !stop->load()) {
      if (w.opts.alive) w.opts.alive();
      w.linked = link.connected() && link.greeted();
      if (!link.connected()) {
        if (link.ReconnectDue(NowSeconds())) exit_status = connect();
        else std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      zmq::pollitem_t items[] = {{link.socket().handle(), 0, ZMQ_POLLIN, 0},
                                 {pull.handle(), 0, ZMQ_POLLIN, 0}};
      try {
        zmq::poll(items, 2, std::chrono::milliseconds(20));
      } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) continue;  // a signal: the loop re-checks *stop
        throw;
      }

      // From device threads: results to forward and requests for a next
      // unit.
      if (items[1].revents & ZMQ_POLLIN) {
        zmq::message_t msg;
        while (pull.recv(msg, zmq::recv_flags::dontwait)) {
          auto env = DecodeEnvelope(msg.data(), msg.size());
          if (!env.ok()) continue;
          if (auto* ask = std::get_if<RequestWork>(&env->command)) {
            if (size_t d = slot_of(ask->device_index); d != DeviceSlots::npos) slots.WantsNext(d, w.fills_ahead[d]);
            continue;
          }
          if (auto* req = std::get_if<ImageRequest>(&env->command)) {
            // Without a link the device compiles at once.
            if (link.greeted()) link.Send(std::move(*req));
            else
              w.images.Deliver(ImageReply{req->sweep_id, req->unit_id, {}, uint32_t(req->wants.size()), "no link"},
                               nullptr);
            continue;
          }
          auto& r = std::get<Results>(env->command);
          if (r.final) slots.Finished(r.unit_id);
          link.SendResults(std::move(r));
        }
      }

      if (items[0].revents & ZMQ_POLLIN) {
        while (auto cmd = link.Receive()) {
          if (auto* unit = std::get_if<WorkUnit>(&*cmd)) {
            slots.Answered();
            const size_t d = slot_of(unit->device_index);
            if (d == DeviceSlots::npos || !slots.Take(d, unit->unit_id)) continue;
            {
              std::lock_guard<std::mutex> lock(w.stats_mu);
              w.stats.units++;
              w.stats.units_queued += slots.held(d) > 1 ? 1 : 0;
            }
            w.arrivals[d]->Push(std::move(*unit));
          } else if (auto* reply = std::get_if<ImageReply>(&*cmd)) {
            const uint64_t unit_id = reply->unit_id;
            for (const std::string& why : w.images.Deliver(std::move(*reply), w.fetched_images.get()))
              w.Log(log::Level::kWarn, "image from the coordinator refused; the config compiles here",
                    {{"worker", w.opts.name}, {"coordinator", w.opts.endpoint}, {"unit", unit_id}, {"error", why}});
          } else if (auto* none = std::get_if<NoWork>(&*cmd)) {
            slots.NoWork(NowSeconds() + none->retry_ms / 1000.0 * retry_jitter(retry_rng));
          }
        }
      }

      w.results_unacknowledged = link.unacknowledged();
      const double now = NowSeconds();
      if (!link.KeepAlive(now)) continue;
      if (link.greeted()) {
        if (size_t d = slots.NextToAsk(now); d != DeviceSlots::npos) {
          link.Send(RequestWork{w.devices[d].index});
          slots.Asked(d);
        }
      }
    }
    if (link.connected() && exit_status.ok()) link.Send(tune::Disconnect{"worker stopping"});
  } catch (const zmq::error_t& e) {
    exit_status = Status::Error(std::string("worker: socket error: ") + e.what());
  }
  w.linked = false;
  w.stop_devices = true;
  for (auto& t : device_threads) t.join();
  w.Log(exit_status.ok() ? log::Level::kInfo : log::Level::kError, "stopped",
        {{"worker", w.opts.name}, {"reason", exit_status.ok() ? std::string("asked to stop") : exit_status.message()}});
  return exit_status;
}

}  // namespace tune
