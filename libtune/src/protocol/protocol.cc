// The protocol codec: protocol/protocol.h envelopes <-> schema/protocol.capnp
// frames. DecodeEnvelope is the first code that touches bytes from the
// network; codec/codec.h holds the discipline it follows. It is transport
// free (wire/ carries the frames over ZeroMQ), so the store can keep a
// sweep's submit in this encoding without linking ZeroMQ.
#include "protocol/protocol.h"

#include <cmath>

#include "codec/codec.h"
#include "protocol/envelope_parts.h"

namespace tune {
namespace {

using namespace codec;  // NOLINT: this file is the codec

// Envelopes come from peers: their text is checked.
constexpr FrameRules kEnvelopeFrame{"envelope", kMaxFrameBytes, true};

// ---------------------------------------------------------------------------
// Commands.

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

void SetPipeline(wire::PipelineFigures::Builder b, const PipelineFigures& p) {
  b.setUnits(p.units);
  b.setCompiled(p.compiled);
  b.setFetched(p.fetched);
  b.setCached(p.cached);
  b.setCompileSeconds(p.compile_seconds);
  b.setDeviceWaitSeconds(p.device_wait_seconds);
  b.setMeasureSeconds(p.measure_seconds);
  b.setUnitSeconds(p.unit_seconds);
  b.setCompileThreads(p.compile_threads);
  b.setWallSeconds(p.wall_seconds);
}
// Values as they came: the coordinator judges a unit's (Invalid).
PipelineFigures GetPipeline(wire::PipelineFigures::Reader r) {
  PipelineFigures p;
  p.units = r.getUnits();
  p.compiled = r.getCompiled();
  p.fetched = r.getFetched();
  p.cached = r.getCached();
  p.compile_seconds = r.getCompileSeconds();
  p.device_wait_seconds = r.getDeviceWaitSeconds();
  p.measure_seconds = r.getMeasureSeconds();
  p.unit_seconds = r.getUnitSeconds();
  p.compile_threads = r.getCompileThreads();
  p.wall_seconds = r.getWallSeconds();
  return p;
}

void SetCommand(wire::Envelope::Command::Builder cmd, const Command& c) {
  std::visit(
      Overloaded{
          [&](const Hello& h) {
            auto b = cmd.initHello();
            b.setWorkerName(TextOf(h.worker_name));
            b.setFarmVersion(TextOf(h.farm_version));
            SetList(b.initDevices(h.devices.size()), h.devices,
                    [](auto d, const DeviceInfo& v) { SetDevice(d, v); });
            SetStrings(b.initBuilderArchs(h.builder_archs.size()), h.builder_archs);
            b.setBuilderToolchain(TextOf(h.builder_toolchain));
          },
          [&](const HelloAck& h) {
            auto b = cmd.initHelloAck();
            b.setHeartbeatMs(h.heartbeat_ms);
            b.setLiveness(h.liveness);
          },
          [&](const Heartbeat&) { cmd.setHeartbeat(); },
          [&](const RequestWork& r) { cmd.initRequestWork().setDeviceIndex(r.device_index); },
          [&](const NoWork& n) { cmd.initNoWork().setRetryMs(n.retry_ms); },
          [&](const WorkUnit& w) { SetWorkUnit(cmd.initWorkUnit(), w); },
          [&](const Results& r) {
            auto b = cmd.initResults();
            b.setSweepId(TextOf(r.sweep_id));
            b.setUnitId(r.unit_id);
            b.setBatch(r.batch);
            b.setFinal(r.final);
            SetList(b.initMeasurements(r.measurements.size()), r.measurements,
                    [](auto s, const Measurement& v) { SetMeasurement(s, v); });
            SetList(b.initKernels(r.kernels.size()), r.kernels,
                    [](auto s, const KernelImage& v) { SetKernelImage(s, v); });
            SetList(b.initProfiles(r.profiles.size()), r.profiles,
                    [](auto s, const KernelProfile& v) { SetProfile(s, v); });
            SetList(b.initBaselines(r.baselines.size()), r.baselines,
                    [](auto s, const Measurement& v) { SetMeasurement(s, v); });
            SetStoredDigests(b.initReused(r.reused.size()), r.reused);
            if (r.pipeline.units) SetPipeline(b.initPipeline(), r.pipeline);
          },
          [&](const ResultsAck& a) {
            auto b = cmd.initResultsAck();
            b.setSweepId(TextOf(a.sweep_id));
            b.setUnitId(a.unit_id);
            b.setBatch(a.batch);
            b.setStored(a.stored);
            b.setRefused(TextOf(a.refused));
            b.setClockSkewSeconds(a.clock_skew_seconds);
          },
          [&](const SweepSubmit& s) {
            auto b = cmd.initSweepSubmit();
            b.setName(TextOf(s.name));
            SetStrings(b.initOps(s.ops.size()), s.ops);
            SetList(b.initOpPackages(s.op_packages.size()), s.op_packages,
                    [](auto p, const OpPackage& v) { SetOpPackage(p, v); });
            SetStrings(b.initDtypes(s.dtypes.size()), s.dtypes);
            SetList(b.initShapes(s.shapes.size()), s.shapes,
                    [](auto p, const Shape& v) { SetShape(p, v); });
            SetStrings(b.initGpuModels(s.gpu_models.size()), s.gpu_models);
            b.setConfigsPerUnit(s.configs_per_unit);
            b.setConfirmTop(s.confirm_top);
            b.setConfirmSeconds(s.confirm_seconds);
            b.setConfirmTiming(ToWire(s.confirm_timing));
            b.setRefinePass(s.refine_pass);
            b.setProfileTop(s.profile_top);
            b.setStrategy(TextOf(s.strategy));
            b.setSeed(s.seed);
            b.setBudget(s.budget);
            b.setBudgetSeconds(s.budget_seconds);
            SetStrings(b.initRetry(s.retry.size()), s.retry);
            b.setPriority(s.priority);
            b.setObjective(TextOf(s.objective));
            SetList(b.initConfigs(s.configs.size()), s.configs,
                    [](auto p, const Config& v) { SetConfig(p, v); });
            b.setRetime(s.retime);
          },
          [&](const SweepAccepted& a) { cmd.initSweepAccepted().setSweepId(TextOf(a.sweep_id)); },
          [&](const SweepCancel& r) { cmd.initSweepCancel().setSweepId(TextOf(r.sweep_id)); },
          [&](const StoreRead& r) {
            auto b = cmd.initStoreRead();
            b.setGpuModel(TextOf(r.filter.gpu_model));
            b.setOp(TextOf(r.filter.op));
            b.setDtype(TextOf(r.filter.dtype));
            b.setShape(TextOf(r.filter.shape));
            b.setKernelHash(TextOf(r.filter.kernel_hash));
            b.setExportId(TextOf(r.export_id));
            b.setOffset(r.offset);
          },
          [&](const StoreChunk& c) {
            auto b = cmd.initStoreChunk();
            b.setExportId(TextOf(c.export_id));
            b.setOffset(c.offset);
            b.setTotalBytes(c.total_bytes);
            b.setData(DataOf(c.data));
          },
          [&](const ImageRequest& r) {
            auto b = cmd.initImageRequest();
            b.setSweepId(TextOf(r.sweep_id));
            b.setUnitId(r.unit_id);
            SetList(b.initWants(r.wants.size()), r.wants, [](auto w, const ImageWant& v) {
              w.setKernelHash(TextOf(v.kernel_hash));
              w.setConfigId(TextOf(v.config_id));
              w.setDtype(TextOf(v.dtype));
              w.setArch(TextOf(v.arch));
            });
          },
          [&](const ImageReply& r) {
            auto b = cmd.initImageReply();
            b.setSweepId(TextOf(r.sweep_id));
            b.setUnitId(r.unit_id);
            // Who vouched for an image is the coordinator's bookkeeping.
            SetList(b.initImages(r.images.size()), r.images,
                    [](auto k, const KernelImage& v) { SetKernelImage(k, v, /*with_witnesses=*/false); });
            b.setMissing(r.missing);
            b.setRefused(TextOf(r.refused));
          },
          [&](const BuildRequest& r) { cmd.initBuildRequest().setMaxConfigs(r.max_configs); },
          [&](const BuildWork& w) {
            auto b = cmd.initBuildWork();
            b.setSweepId(TextOf(w.sweep_id));
            b.setWorkId(w.work_id);
            b.setOp(TextOf(w.op));
            SetOpPackage(b.initOpPackage(), w.op_package);
            b.setDtype(TextOf(w.dtype));
            b.setArch(TextOf(w.arch));
            b.setKernelHash(TextOf(w.kernel_hash));
            SetList(b.initConfigs(w.configs.size()), w.configs, [](auto c, const Config& v) { SetConfig(c, v); });
          },
          [&](const BuiltImages& r) {
            auto b = cmd.initBuiltImages();
            b.setWorkId(r.work_id);
            // Who vouches for an image is the coordinator's to record.
            SetList(b.initImages(r.images.size()), r.images,
                    [](auto k, const KernelImage& v) { SetKernelImage(k, v, /*with_witnesses=*/false); });
            b.setFailed(r.failed);
          },
          [&](const SweepStatusRequest& r) {
            cmd.initSweepStatusRequest().setSweepId(TextOf(r.sweep_id));
          },
          [&](const SweepStatus& s) {
            auto b = cmd.initSweepStatus();
            b.setWorkers(s.workers);
            b.setStoreFault(TextOf(s.store_fault));
            SetList(b.initDevices(s.devices.size()), s.devices,
                    [](auto d, const DeviceInfo& v) { SetDevice(d, v); });
            SetList(b.initSweeps(s.sweeps.size()), s.sweeps,
                    [](auto p, const SweepProgress& v) {
                      p.setSweepId(TextOf(v.sweep_id));
                      p.setName(TextOf(v.name));
                      p.setState(TextOf(v.state));
                      p.setUnitsTotal(v.units_total);
                      p.setUnitsDone(v.units_done);
                      p.setPairsTotal(v.pairs_total);
                      p.setPairsDone(v.pairs_done);
                      p.setPairsFailed(v.pairs_failed);
                      SetStrings(p.initGpuModels(v.gpu_models.size()), v.gpu_models);
                      p.setStartedUnix(v.started_unix);
                      p.setFinishedUnix(v.finished_unix);
                      p.setError(TextOf(v.error));
                      SetStrings(p.initWaitingFor(v.waiting_for.size()), v.waiting_for);
                      SetStrings(p.initExpanding(v.expanding.size()), v.expanding);
                      SetStrings(p.initWaits(v.waits.size()), v.waits);
                      SetStrings(p.initSkipped(v.skipped.size()), v.skipped);
                      p.setPriority(v.priority);
                      SetPipeline(p.initPipeline(), v.pipeline);
                      p.setInFlight(v.in_flight);
                      p.setInFlightDepth(v.in_flight_depth);
                      auto classes = p.initFailedByClass(v.failed_by_class.size());
                      size_t i = 0;
                      for (const auto& [name, count] : v.failed_by_class) {
                        classes[i].setName(TextOf(name));
                        classes[i++].setCount(count);
                      }
                    });
          },
          [&](const ErrorReply& e) { cmd.initError().setMessage(TextOf(e.message)); },
          [&](const Disconnect& d) { cmd.initDisconnect().setReason(TextOf(d.reason)); },
      },
      c);
}

Command GetCommand(wire::Envelope::Command::Reader cmd, Budget& budget) {
  auto shape = [&](wire::Shape::Reader r) { return GetShape(r, budget); };
  switch (cmd.which()) {
    case wire::Envelope::Command::HELLO: {
      auto r = cmd.getHello();
      Hello h;
      h.worker_name = Txt(r.getWorkerName(), budget, "workerName");
      h.farm_version = Txt(r.getFarmVersion(), budget, "farmVersion");
      h.devices = GetList<DeviceInfo>(r.getDevices(), budget,
                                      [&](wire::DeviceInfo::Reader d) { return GetDevice(d, budget); });
      if (r.getBuilderArchs().size() > kMaxBuilderArchs)
        Fail("hello: " + std::to_string(r.getBuilderArchs().size()) + " builderArchs, over " +
             std::to_string(kMaxBuilderArchs));
      h.builder_archs = Strings(r.getBuilderArchs(), budget, "builderArchs");
      h.builder_toolchain = Txt(r.getBuilderToolchain(), budget, "builderToolchain");
      if (h.builder() && !h.devices.empty()) Fail("hello: a builder (builderArchs) with devices");
      return h;
    }
    case wire::Envelope::Command::HELLO_ACK: {
      auto r = cmd.getHelloAck();
      HelloAck h;
      h.heartbeat_ms = r.getHeartbeatMs();
      h.liveness = r.getLiveness();
      return h;
    }
    case wire::Envelope::Command::HEARTBEAT:
      return Heartbeat{};
    case wire::Envelope::Command::REQUEST_WORK:
      return RequestWork{cmd.getRequestWork().getDeviceIndex()};
    case wire::Envelope::Command::NO_WORK:
      return NoWork{cmd.getNoWork().getRetryMs()};
    case wire::Envelope::Command::WORK_UNIT:
      return GetWorkUnit(cmd.getWorkUnit(), budget);
    case wire::Envelope::Command::RESULTS: {
      auto r = cmd.getResults();
      Results res;
      res.sweep_id = Txt(r.getSweepId(), budget, "sweepId");
      res.unit_id = r.getUnitId();
      res.batch = r.getBatch();
      res.final = r.getFinal();
      res.measurements =
          GetList<Measurement>(r.getMeasurements(), budget,
                               [&](wire::Measurement::Reader m) { return GetMeasurement(m, budget); });
      res.kernels = GetList<KernelImage>(r.getKernels(), budget,
                                         [&](wire::KernelImage::Reader k) { return GetKernelImage(k, budget); });
      res.profiles = GetList<KernelProfile>(r.getProfiles(), budget,
                                            [&](wire::KernelProfile::Reader p) { return GetProfile(p, budget); });
      res.baselines = GetList<Measurement>(r.getBaselines(), budget,
                                           [&](wire::Measurement::Reader m) { return GetMeasurement(m, budget); });
      res.reused = GetStoredDigests(r.getReused(), budget);
      if (r.hasPipeline()) res.pipeline = GetPipeline(r.getPipeline());
      return res;
    }
    case wire::Envelope::Command::RESULTS_ACK: {
      auto r = cmd.getResultsAck();
      ResultsAck a;
      a.sweep_id = Txt(r.getSweepId(), budget, "sweepId");
      a.unit_id = r.getUnitId();
      a.batch = r.getBatch();
      a.stored = r.getStored();
      a.refused = Txt(r.getRefused(), budget, "refused", kMaxMessageBytes);
      a.clock_skew_seconds = r.getClockSkewSeconds();
      if (!std::isfinite(a.clock_skew_seconds)) Fail("resultsAck: clockSkewSeconds is not finite");
      return a;
    }
    case wire::Envelope::Command::SWEEP_SUBMIT: {
      auto r = cmd.getSweepSubmit();
      SweepSubmit s;
      s.name = Txt(r.getName(), budget, "name");
      s.ops = Strings(r.getOps(), budget, "ops");
      s.op_packages = GetList<OpPackage>(r.getOpPackages(), budget, [&](wire::OpPackage::Reader p) {
        return GetOpPackage(p, budget);
      });
      s.dtypes = Strings(r.getDtypes(), budget, "dtypes");
      s.shapes = GetList<Shape>(r.getShapes(), budget, shape);
      s.gpu_models = Strings(r.getGpuModels(), budget, "gpuModels");
      s.configs_per_unit = r.getConfigsPerUnit();
      s.confirm_top = r.getConfirmTop();
      s.confirm_seconds = r.getConfirmSeconds();
      s.confirm_timing = FromWire(r.getConfirmTiming());
      s.refine_pass = r.getRefinePass();
      s.profile_top = r.getProfileTop();
      s.strategy = Txt(r.getStrategy(), budget, "strategy");
      if (s.strategy.empty()) s.strategy = kStrategyForOldClients;  // what such a client expects (strategy_table.h)
      s.seed = r.getSeed();
      s.budget = r.getBudget();
      s.budget_seconds = r.getBudgetSeconds();
      s.retry = Strings(r.getRetry(), budget, "retry");
      // Range-checked where the sweep is added (Scheduler::AddSweep), which
      // names the sweep.
      s.priority = r.getPriority();
      // Checked against the op where the sweep is added (CheckListedSweep).
      s.configs = GetList<Config>(r.getConfigs(), budget,
                                  [&](wire::Config::Reader c) { return GetConfig(c, budget); });
      s.retime = r.getRetime();  // needs the config list: CheckListedSweep
      // Checked where the sweep is added (CheckSearchFields).
      s.objective = Txt(r.getObjective(), budget, "objective");
      if (s.objective.empty()) s.objective = ObjectiveName(Objective::kTime);  // an older client's
      return s;
    }
    case wire::Envelope::Command::SWEEP_ACCEPTED:
      return SweepAccepted{Txt(cmd.getSweepAccepted().getSweepId(), budget, "sweepId")};
    case wire::Envelope::Command::SWEEP_CANCEL:
      return SweepCancel{Txt(cmd.getSweepCancel().getSweepId(), budget, "sweepId")};
    case wire::Envelope::Command::STORE_READ: {
      auto r = cmd.getStoreRead();
      StoreRead q;
      q.filter.gpu_model = Txt(r.getGpuModel(), budget, "gpuModel");
      q.filter.op = Txt(r.getOp(), budget, "op");
      q.filter.dtype = Txt(r.getDtype(), budget, "dtype");
      q.filter.shape = Txt(r.getShape(), budget, "shape");
      q.filter.kernel_hash = Txt(r.getKernelHash(), budget, "kernelHash");
      q.export_id = Txt(r.getExportId(), budget, "exportId");
      q.offset = r.getOffset();
      return q;
    }
    case wire::Envelope::Command::STORE_CHUNK: {
      auto r = cmd.getStoreChunk();
      StoreChunk c;
      c.export_id = Txt(r.getExportId(), budget, "exportId");
      c.offset = r.getOffset();
      c.total_bytes = r.getTotalBytes();
      c.data = Str(r.getData());
      if (c.data.size() > kStoreChunkBytes) Fail("storeChunk: data over " + std::to_string(kStoreChunkBytes) + " bytes");
      if (c.offset > c.total_bytes || c.data.size() > c.total_bytes - c.offset)
        Fail("storeChunk: bytes past totalBytes");
      return c;
    }
    case wire::Envelope::Command::IMAGE_REQUEST: {
      auto r = cmd.getImageRequest();
      ImageRequest q;
      q.sweep_id = Txt(r.getSweepId(), budget, "sweepId");
      q.unit_id = r.getUnitId();
      q.wants = GetList<ImageWant>(r.getWants(), budget, [&](wire::ImageWant::Reader w) {
        return ImageWant{Txt(w.getKernelHash(), budget, "wants.kernelHash"), Txt(w.getConfigId(), budget, "wants.configId"),
                         Txt(w.getDtype(), budget, "wants.dtype"), Txt(w.getArch(), budget, "wants.arch")};
      });
      return q;
    }
    case wire::Envelope::Command::IMAGE_REPLY: {
      auto r = cmd.getImageReply();
      ImageReply a;
      a.sweep_id = Txt(r.getSweepId(), budget, "sweepId");
      a.unit_id = r.getUnitId();
      a.images = GetList<KernelImage>(r.getImages(), budget,
                                      [&](wire::KernelImage::Reader k) { return GetKernelImage(k, budget); });
      a.missing = r.getMissing();
      a.refused = Txt(r.getRefused(), budget, "refused", kMaxMessageBytes);
      return a;
    }
    case wire::Envelope::Command::BUILD_REQUEST: {
      const uint32_t n = cmd.getBuildRequest().getMaxConfigs();
      if (n == 0 || n > kMaxBuildConfigs)
        Fail("buildRequest: maxConfigs " + std::to_string(n) + " is not within [1, " +
             std::to_string(kMaxBuildConfigs) + "]");
      return BuildRequest{n};
    }
    case wire::Envelope::Command::BUILD_WORK: {
      auto r = cmd.getBuildWork();
      BuildWork w;
      w.sweep_id = Txt(r.getSweepId(), budget, "sweepId");
      w.work_id = r.getWorkId();
      w.op = Txt(r.getOp(), budget, "op");
      w.op_package = GetOpPackage(r.getOpPackage(), budget);
      w.dtype = Txt(r.getDtype(), budget, "dtype");
      w.arch = Txt(r.getArch(), budget, "arch");
      w.kernel_hash = Txt(r.getKernelHash(), budget, "kernelHash");
      if (r.getConfigs().size() > kMaxBuildConfigs)
        Fail("buildWork: " + std::to_string(r.getConfigs().size()) + " configs, over " +
             std::to_string(kMaxBuildConfigs));
      w.configs = GetList<Config>(r.getConfigs(), budget, [&](wire::Config::Reader c) { return GetConfig(c, budget); });
      return w;
    }
    case wire::Envelope::Command::BUILT_IMAGES: {
      auto r = cmd.getBuiltImages();
      BuiltImages b;
      b.work_id = r.getWorkId();
      if (r.getImages().size() > kMaxBuildConfigs)
        Fail("builtImages: " + std::to_string(r.getImages().size()) + " images, over " +
             std::to_string(kMaxBuildConfigs));
      b.images = GetList<KernelImage>(r.getImages(), budget,
                                      [&](wire::KernelImage::Reader k) { return GetKernelImage(k, budget); });
      b.failed = r.getFailed();
      if (b.failed > kMaxBuildConfigs)
        Fail("builtImages: failed " + std::to_string(b.failed) + ", over " + std::to_string(kMaxBuildConfigs));
      return b;
    }
    case wire::Envelope::Command::SWEEP_STATUS_REQUEST:
      return SweepStatusRequest{Txt(cmd.getSweepStatusRequest().getSweepId(), budget, "sweepId")};
    case wire::Envelope::Command::SWEEP_STATUS: {
      auto r = cmd.getSweepStatus();
      SweepStatus s;
      s.workers = r.getWorkers();
      s.store_fault = Txt(r.getStoreFault(), budget, "storeFault", kMaxMessageBytes);
      s.devices = GetList<DeviceInfo>(r.getDevices(), budget,
                                      [&](wire::DeviceInfo::Reader d) { return GetDevice(d, budget); });
      s.sweeps = GetList<SweepProgress>(r.getSweeps(), budget, [&](wire::SweepProgress::Reader p) {
        SweepProgress v;
        v.sweep_id = Txt(p.getSweepId(), budget, "sweepId");
        v.name = Txt(p.getName(), budget, "name");
        v.state = Txt(p.getState(), budget, "state");
        v.units_total = p.getUnitsTotal();
        v.units_done = p.getUnitsDone();
        v.pairs_total = p.getPairsTotal();
        v.pairs_done = p.getPairsDone();
        v.pairs_failed = p.getPairsFailed();
        v.gpu_models = Strings(p.getGpuModels(), budget, "gpuModels");
        v.started_unix = p.getStartedUnix();
        v.finished_unix = p.getFinishedUnix();
        v.error = Txt(p.getError(), budget, "error", kMaxMessageBytes);
        v.waiting_for = Strings(p.getWaitingFor(), budget, "waitingFor");
        v.expanding = Strings(p.getExpanding(), budget, "expanding");
        v.waits = Strings(p.getWaits(), budget, "waits");
        v.skipped = Strings(p.getSkipped(), budget, "skipped");
        v.priority = p.getPriority();
        if (p.hasPipeline()) v.pipeline = GetPipeline(p.getPipeline());
        v.in_flight = p.getInFlight();
        v.in_flight_depth = p.getInFlightDepth();
        for (const auto& c : GetList<std::pair<std::string, uint64_t>>(
                 p.getFailedByClass(), budget, [&](wire::ClassCount::Reader c) {
                   return std::make_pair(Txt(c.getName(), budget, "failedByClass.name"), c.getCount());
                 })) {
          v.failed_by_class[c.first] += c.second;
        }
        return v;
      });
      return s;
    }
    case wire::Envelope::Command::ERROR:
      return ErrorReply{Txt(cmd.getError().getMessage(), budget, "message", kMaxMessageBytes)};
    case wire::Envelope::Command::DISCONNECT:
      return Disconnect{Txt(cmd.getDisconnect().getReason(), budget, "reason", kMaxMessageBytes)};
    case wire::Envelope::Command::UNKNOWN:
      Fail("envelope: no command set");
  }
  // A newer peer's command: we cannot act on it, and guessing is worse.
  Fail("envelope: unknown command " + std::to_string(static_cast<unsigned>(cmd.which())));
}

// Checked before anything else: a peer speaking another version may mean
// different things by the same fields.
Status CheckVersion(uint16_t version) {
  if (version == kProtocolVersion) return Status::OK();
  return Status::InvalidArgument("envelope: protocol version " + std::to_string(version) +
                       " is not supported (this build speaks " + std::to_string(kProtocolVersion) +
                       ")");
}

}  // namespace

PipelineFigures& PipelineFigures::operator+=(const PipelineFigures& o) {
  units += o.units;
  compiled += o.compiled;
  fetched += o.fetched;
  cached += o.cached;
  compile_seconds += o.compile_seconds;
  device_wait_seconds += o.device_wait_seconds;
  measure_seconds += o.measure_seconds;
  unit_seconds += o.unit_seconds;
  return *this;
}

std::string PipelineFigures::Invalid(size_t configs, double bound) const {
  if (units != 1) return "pipeline.units is " + std::to_string(units) + ", not 1";
  if (compiled > configs || fetched > configs || cached > configs || compiled + fetched + cached > configs)
    return "pipeline counts " + std::to_string(compiled) + "+" + std::to_string(fetched) + "+" +
           std::to_string(cached) + " exceed the unit's " + std::to_string(configs) + " configs";
  for (const auto& [name, v] : {std::pair<const char*, double>{"compileSeconds", compile_seconds},
                                {"deviceWaitSeconds", device_wait_seconds},
                                {"measureSeconds", measure_seconds},
                                {"unitSeconds", unit_seconds}}) {
    if (!std::isfinite(v) || v < 0 || v > bound)
      return std::string("pipeline.") + name + " " + std::to_string(v) + " is not within [0, " +
             std::to_string(bound) + "] s";
  }
  if (compile_threads > kMaxCompileThreads)
    return "pipeline.compileThreads " + std::to_string(compile_threads) + " is over " +
           std::to_string(kMaxCompileThreads);
  if (wall_seconds != 0) return "pipeline.wallSeconds is a sweep's figure, not a unit's (must be 0)";
  return "";
}

std::string EncodeEnvelope(const Envelope& env) {
  capnp::MallocMessageBuilder builder(kFirstSegmentWords);
  auto root = builder.initRoot<wire::Envelope>();
  root.setVersion(env.version);
  root.setSeq(env.seq);
  root.setSender(TextOf(env.sender));
  SetCommand(root.initCommand(), env.command);
  return ToBytes(builder);
}

Result<Envelope> DecodeEnvelope(const void* data, size_t size) {
  return ReadFrame<Envelope>(data, size, kEnvelopeFrame, [](capnp::MessageReader& reader, Budget& budget) -> Result<Envelope> {
    auto root = reader.getRoot<wire::Envelope>();
    Envelope env;
    env.version = root.getVersion();
    TUNE_RETURN_IF_ERROR(CheckVersion(env.version));
    env.seq = root.getSeq();
    env.sender = Txt(root.getSender(), budget, "sender");
    env.command = GetCommand(root.getCommand(), budget);
    return env;
  });
}

Result<std::optional<ResultsHead>> PeekResults(const void* data, size_t size) {
  using Peeked = std::optional<ResultsHead>;
  return ReadFrame<Peeked>(data, size, kEnvelopeFrame, [](capnp::MessageReader& reader, Budget& budget) -> Result<Peeked> {
    auto root = reader.getRoot<wire::Envelope>();
    TUNE_RETURN_IF_ERROR(CheckVersion(root.getVersion()));
    auto cmd = root.getCommand();
    if (cmd.which() != wire::Envelope::Command::RESULTS) return Peeked();
    auto r = cmd.getResults();
    ResultsHead head;
    head.sweep_id = Txt(r.getSweepId(), budget, "sweepId");
    head.unit_id = r.getUnitId();
    head.batch = r.getBatch();
    head.final = r.getFinal();
    return Peeked(std::move(head));
  });
}

const char* CommandName(const Command& c) {
  static constexpr const char* kNames[] = {
      "hello",        "hello_ack",      "heartbeat",      "request_work",
      "no_work",      "work_unit",      "results",        "results_ack",
      "sweep_submit", "sweep_accepted", "sweep_status_request", "sweep_status",
      "error",        "disconnect",     "sweep_cancel",   "store_read",
      "store_chunk",  "image_request",  "image_reply",    "build_request",
      "build_work",   "built_images",
  };
  static_assert(std::size(kNames) == std::variant_size_v<Command>,
                "every command alternative needs a name");
  return c.index() < std::size(kNames) ? kNames[c.index()] : "unknown";
}

}  // namespace tune
