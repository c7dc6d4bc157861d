// The protocol codec: tune/protocol.h structs <-> schema/protocol.capnp frames.
//
// DecodeEnvelope is the first thing that touches bytes from the network, so it
// treats every frame as hostile: sizes are checked before Cap'n Proto sees
// them, the reader's traversal and nesting limits are tied to the frame size
// (so a small frame cannot make us walk or allocate much more than itself),
// enum and union values outside what this build knows are rejected rather
// than guessed, and every exception is turned into a Status.
#include "tune/protocol.h"
#include "tune/text.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/array.h>
#include <kj/exception.h>

#include <cstring>
#include <exception>
#include <new>

#include "schema/protocol.capnp.h"
#include "schema/records.capnp.h"

namespace tune {
namespace {

// Reading each pointer once costs about one traversal word per message word;
// the slack covers list headers and the few fields read twice, while still
// bounding the work a crafted frame (e.g. many pointers to one far object)
// can cause.
constexpr uint64_t kTraversalWordsPerFrameWord = 4;
constexpr uint64_t kTraversalSlackWords = 1024;
// Our deepest legitimate path is Envelope > command > sweepSubmit >
// opPackages > OpPackage > files > OpFile > contents (8); generous headroom
// without letting recursion depth be chosen by the sender.
constexpr int kNestingLimit = 32;

// Thrown inside the decoder for semantic errors; caught at the boundary with
// kj::Exception so that callers only ever see a Status.
struct DecodeError {
  std::string message;
};

[[noreturn]] void Fail(std::string message) { throw DecodeError{std::move(message)}; }

// The traversal limit bounds the wire words we read, not what we build from
// them: a list of zero-sized structs costs the sender almost nothing but
// would cost us a whole C++ object per element. Every list is charged its
// C++ size before it is materialised, against a multiple of the frame size
// that honest messages (about 3x) stay well under.
constexpr size_t kDecodedBytesPerFrameByte = 8;
constexpr size_t kDecodedSlackBytes = 1u << 20;

class Budget {
 public:
  // check_text: every Text field must be valid UTF-8 within its bound
  // (tune/text.h). On for envelopes, which come from peers; off for stored
  // records, which may predate the check and must still be readable.
  Budget(size_t frame_bytes, bool check_text)
      : check_text(check_text), left_(frame_bytes * kDecodedBytesPerFrameByte + kDecodedSlackBytes) {}
  const bool check_text;
  void Charge(size_t count, size_t each) {
    const size_t cost = count * each;  // count < 2^29 (a Cap'n Proto list), each < 4 KiB
    if (cost > left_) Fail("frame decodes to more memory than its size allows");
    left_ -= cost;
  }

 private:
  size_t left_;
};

// ---------------------------------------------------------------------------
// Small conversions.

capnp::Text::Reader TextOf(const std::string& s) { return capnp::Text::Reader(s.c_str(), s.size()); }

capnp::Data::Reader DataOf(const std::string& s) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(s.data()), s.size());
}

std::string Str(capnp::Text::Reader t) { return std::string(t.begin(), t.size()); }

// A Text field as read from a frame: refused when the frame's budget checks
// text and `field` is not valid UTF-8 of at most `max_bytes`.
std::string Txt(capnp::Text::Reader t, const Budget& budget, const char* field,
                size_t max_bytes = kMaxNameBytes) {
  std::string s = Str(t);
  if (budget.check_text) {
    Status st = CheckText(s, field, max_bytes);
    if (!st.ok()) Fail(st.message());
  }
  return s;
}

std::string Str(capnp::Data::Reader d) {
  return std::string(reinterpret_cast<const char*>(d.begin()), d.size());
}

std::vector<std::string> Strings(capnp::List<capnp::Text>::Reader list, Budget& budget, const char* field) {
  budget.Charge(list.size(), sizeof(std::string));
  std::vector<std::string> out;
  out.reserve(list.size());
  for (auto t : list) out.push_back(Txt(t, budget, field));
  return out;
}

void SetStrings(capnp::List<capnp::Text>::Builder list, const std::vector<std::string>& v) {
  for (size_t i = 0; i < v.size(); ++i) list.set(i, TextOf(v[i]));
}

// The wire enum is not numerically equal to the C++ one (the wire starts with
// `unknown`), so every value is mapped by name.
wire::FailureClass ToWire(FailureClass c) {
  switch (c) {
    case FailureClass::kNone: return wire::FailureClass::NONE;
    case FailureClass::kCompileError: return wire::FailureClass::COMPILE_ERROR;
    case FailureClass::kResources: return wire::FailureClass::RESOURCES;
    case FailureClass::kLaunchError: return wire::FailureClass::LAUNCH_ERROR;
    case FailureClass::kCrash: return wire::FailureClass::CRASH;
    case FailureClass::kTimeout: return wire::FailureClass::TIMEOUT;
    case FailureClass::kWrongResult: return wire::FailureClass::WRONG_RESULT;
    case FailureClass::kNan: return wire::FailureClass::NAN_RESULT;
    case FailureClass::kSkipped: return wire::FailureClass::SKIPPED;
  }
  return wire::FailureClass::UNKNOWN;
}

FailureClass FromWire(wire::FailureClass c) {
  switch (c) {
    case wire::FailureClass::NONE: return FailureClass::kNone;
    case wire::FailureClass::COMPILE_ERROR: return FailureClass::kCompileError;
    case wire::FailureClass::RESOURCES: return FailureClass::kResources;
    case wire::FailureClass::LAUNCH_ERROR: return FailureClass::kLaunchError;
    case wire::FailureClass::CRASH: return FailureClass::kCrash;
    case wire::FailureClass::TIMEOUT: return FailureClass::kTimeout;
    case wire::FailureClass::WRONG_RESULT: return FailureClass::kWrongResult;
    case wire::FailureClass::NAN_RESULT: return FailureClass::kNan;
    case wire::FailureClass::SKIPPED: return FailureClass::kSkipped;
    case wire::FailureClass::UNKNOWN: break;
  }
  // An unset or newer class must never read as kNone: that would turn a
  // failure into a candidate winner.
  Fail("measurement: unknown failure class " + std::to_string(static_cast<unsigned>(c)));
}

wire::ConfirmTiming ToWire(ConfirmTiming t) {
  switch (t) {
    case ConfirmTiming::kSustained: return wire::ConfirmTiming::SUSTAINED;
    case ConfirmTiming::kBurst: return wire::ConfirmTiming::BURST;
    case ConfirmTiming::kAuto: return wire::ConfirmTiming::AUTO;
  }
  return wire::ConfirmTiming::SUSTAINED;
}

ConfirmTiming FromWire(wire::ConfirmTiming t) {
  switch (t) {
    case wire::ConfirmTiming::SUSTAINED: return ConfirmTiming::kSustained;
    case wire::ConfirmTiming::BURST: return ConfirmTiming::kBurst;
    case wire::ConfirmTiming::AUTO: return ConfirmTiming::kAuto;
  }
  // A newer peer's timing: running the unit another way would store figures
  // of a kind the sweep did not ask for.
  Fail("confirm timing: unknown value " + std::to_string(static_cast<unsigned>(t)));
}

// ---------------------------------------------------------------------------
// Records.

void SetNamedValues(capnp::List<wire::NamedValue>::Builder list, const NamedValues& v) {
  for (size_t i = 0; i < v.size(); ++i) {
    list[i].setName(TextOf(v[i].first));
    list[i].setValue(v[i].second);
  }
}

NamedValues GetNamedValues(capnp::List<wire::NamedValue>::Reader list, Budget& budget) {
  budget.Charge(list.size(), sizeof(NamedValues::value_type));
  NamedValues out;
  out.reserve(list.size());
  for (auto nv : list) out.emplace_back(Txt(nv.getName(), budget, "name"), nv.getValue());
  return out;
}

void SetConfig(wire::Config::Builder b, const Config& c) {
  SetNamedValues(b.initParams(c.params.size()), c.params);
}
Config GetConfig(wire::Config::Reader r, Budget& budget) {
  return Config{GetNamedValues(r.getParams(), budget)};
}

void SetShape(wire::Shape::Builder b, const Shape& s) {
  SetNamedValues(b.initDims(s.dims.size()), s.dims);
}
Shape GetShape(wire::Shape::Reader r, Budget& budget) {
  return Shape{GetNamedValues(r.getDims(), budget)};
}

void SetDevice(wire::DeviceInfo::Builder b, const DeviceInfo& d) {
  b.setIndex(d.index);
  b.setName(TextOf(d.name));
  b.setModel(TextOf(d.model));
  b.setBackend(TextOf(d.backend));
  b.setCcMajor(d.cc_major);
  b.setCcMinor(d.cc_minor);
  b.setNumSms(d.num_sms);
  b.setTotalMemBytes(d.total_mem_bytes);
  b.setL2Bytes(d.l2_bytes);
  b.setSmemPerBlockOptin(d.smem_per_block_optin);
  b.setMaxThreadsPerBlock(d.max_threads_per_block);
  b.setSmClockMhz(d.sm_clock_mhz);
  b.setMemClockMhz(d.mem_clock_mhz);
  b.setDriverVersion(TextOf(d.driver_version));
  b.setNvrtcVersion(TextOf(d.nvrtc_version));
}

DeviceInfo GetDevice(wire::DeviceInfo::Reader r, const Budget& budget) {
  DeviceInfo d;
  d.index = r.getIndex();
  d.name = Txt(r.getName(), budget, "name");
  d.model = Txt(r.getModel(), budget, "model");
  d.backend = Txt(r.getBackend(), budget, "backend");
  d.cc_major = r.getCcMajor();
  d.cc_minor = r.getCcMinor();
  d.num_sms = r.getNumSms();
  d.total_mem_bytes = r.getTotalMemBytes();
  d.l2_bytes = r.getL2Bytes();
  d.smem_per_block_optin = r.getSmemPerBlockOptin();
  d.max_threads_per_block = r.getMaxThreadsPerBlock();
  d.sm_clock_mhz = r.getSmClockMhz();
  d.mem_clock_mhz = r.getMemClockMhz();
  d.driver_version = Txt(r.getDriverVersion(), budget, "driverVersion");
  d.nvrtc_version = Txt(r.getNvrtcVersion(), budget, "nvrtcVersion");
  return d;
}

void SetMeasurement(wire::Measurement::Builder b, const Measurement& m) {
  b.setGpuModel(TextOf(m.gpu_model));
  b.setOp(TextOf(m.op));
  b.setDtype(TextOf(m.dtype));
  b.setShape(TextOf(m.shape));
  b.setKernelHash(TextOf(m.kernel_hash));
  b.setConfigId(TextOf(m.config_id));
  SetConfig(b.initConfig(), m.config);
  b.setFailure(ToWire(m.failure));
  b.setFailureMessage(TextOf(m.failure_message));
  b.setMedianUs(m.median_us);
  b.setMeanUs(m.mean_us);
  b.setStdevUs(m.stdev_us);
  b.setMinUs(m.min_us);
  b.setMaxUs(m.max_us);
  b.setCi95Us(m.ci95_us);
  b.setSamples(m.samples);
  b.setCheckPassed(m.check_passed);
  b.setMaxAbsError(m.max_abs_error);
  b.setMismatchRatio(m.mismatch_ratio);
  auto res = b.initResources();
  res.setRegisters(m.resources.registers);
  res.setStaticSmemBytes(m.resources.static_smem_bytes);
  res.setDynamicSmemBytes(m.resources.dynamic_smem_bytes);
  res.setLocalBytes(m.resources.local_bytes);
  res.setMaxThreadsPerBlock(m.resources.max_threads_per_block);
  res.setOccupancy(m.resources.occupancy);
  b.setThrottled(m.throttled);
  b.setSmClockMhz(m.sm_clock_mhz);
  b.setBackend(TextOf(m.backend));
  b.setDeviceName(TextOf(m.device_name));
  b.setWorker(TextOf(m.worker));
  b.setDriverVersion(TextOf(m.driver_version));
  b.setNvrtcVersion(TextOf(m.nvrtc_version));
  b.setFarmVersion(TextOf(m.farm_version));
  b.setUnixTime(m.unix_time);
  b.setSweepId(TextOf(m.sweep_id));
  b.setConfirmed(m.confirmed);
  b.setConfirmTiming(ToWire(m.confirm_timing));
  b.setRefined(m.refined);
  b.setScreenUs(m.screen_us);
}

Measurement GetMeasurement(wire::Measurement::Reader r, Budget& budget) {
  Measurement m;
  m.gpu_model = Txt(r.getGpuModel(), budget, "gpuModel");
  m.op = Txt(r.getOp(), budget, "op");
  m.dtype = Txt(r.getDtype(), budget, "dtype");
  m.shape = Txt(r.getShape(), budget, "shape");
  m.kernel_hash = Txt(r.getKernelHash(), budget, "kernelHash");
  m.config_id = Txt(r.getConfigId(), budget, "configId");
  m.config = GetConfig(r.getConfig(), budget);
  m.failure = FromWire(r.getFailure());
  m.failure_message = Txt(r.getFailureMessage(), budget, "failureMessage", kMaxLogBytes);
  m.median_us = r.getMedianUs();
  m.mean_us = r.getMeanUs();
  m.stdev_us = r.getStdevUs();
  m.min_us = r.getMinUs();
  m.max_us = r.getMaxUs();
  m.ci95_us = r.getCi95Us();
  m.samples = r.getSamples();
  m.check_passed = r.getCheckPassed();
  m.max_abs_error = r.getMaxAbsError();
  m.mismatch_ratio = r.getMismatchRatio();
  auto res = r.getResources();
  m.resources.registers = res.getRegisters();
  m.resources.static_smem_bytes = res.getStaticSmemBytes();
  m.resources.dynamic_smem_bytes = res.getDynamicSmemBytes();
  m.resources.local_bytes = res.getLocalBytes();
  m.resources.max_threads_per_block = res.getMaxThreadsPerBlock();
  m.resources.occupancy = res.getOccupancy();
  m.throttled = r.getThrottled();
  m.sm_clock_mhz = r.getSmClockMhz();
  m.backend = Txt(r.getBackend(), budget, "backend");
  m.device_name = Txt(r.getDeviceName(), budget, "deviceName");
  m.worker = Txt(r.getWorker(), budget, "worker");
  m.driver_version = Txt(r.getDriverVersion(), budget, "driverVersion");
  m.nvrtc_version = Txt(r.getNvrtcVersion(), budget, "nvrtcVersion");
  m.farm_version = Txt(r.getFarmVersion(), budget, "farmVersion");
  m.unix_time = r.getUnixTime();
  m.sweep_id = Txt(r.getSweepId(), budget, "sweepId");
  m.confirmed = r.getConfirmed();
  m.confirm_timing = FromWire(r.getConfirmTiming());
  m.refined = r.getRefined();
  m.screen_us = r.getScreenUs();
  return m;
}

void SetOpPackage(wire::OpPackage::Builder b, const OpPackage& p) {
  auto files = b.initFiles(p.size());
  size_t i = 0;
  for (const auto& [name, contents] : p) {
    files[i].setName(TextOf(name));
    files[i].setContents(DataOf(contents));
    ++i;
  }
}

OpPackage GetOpPackage(wire::OpPackage::Reader r, Budget& budget) {
  OpPackage p;
  auto files = r.getFiles();
  // A map node holds the pair plus the tree links.
  budget.Charge(files.size(), sizeof(OpPackage::value_type) + 4 * sizeof(void*));
  for (auto f : files) {
    auto [it, inserted] = p.emplace(Txt(f.getName(), budget, "opFile.name"), Str(f.getContents()));
    // Two files of one name would make the kernel hash depend on which copy
    // a peer happened to keep.
    if (!inserted) Fail("op package: duplicate file '" + it->first + "'");
  }
  return p;
}

template <typename T, typename R, typename F>
std::vector<T> GetList(R list, Budget& budget, F&& get) {
  budget.Charge(list.size(), sizeof(T));
  std::vector<T> out;
  out.reserve(list.size());
  for (auto item : list) out.push_back(get(item));
  return out;
}

template <typename B, typename T, typename F>
void SetList(B list, const std::vector<T>& v, F&& set) {
  for (size_t i = 0; i < v.size(); ++i) set(list[i], v[i]);
}

void SetWorkUnit(wire::WorkUnit::Builder b, const WorkUnit& w) {
  b.setSweepId(TextOf(w.sweep_id));
  b.setUnitId(w.unit_id);
  b.setAttempt(w.attempt);
  b.setDeviceIndex(w.device_index);
  b.setOp(TextOf(w.op));
  SetOpPackage(b.initOpPackage(), w.op_package);
  b.setDtype(TextOf(w.dtype));
  SetList(b.initShapes(w.shapes.size()), w.shapes, [](auto s, const Shape& v) { SetShape(s, v); });
  SetList(b.initConfigs(w.configs.size()), w.configs, [](auto s, const Config& v) { SetConfig(s, v); });
  b.setLeaseSeconds(w.lease_seconds);
  b.setConfirmSeconds(w.confirm_seconds);
  b.setConfirmTiming(ToWire(w.confirm_timing));
  b.setRefineBestUs(w.refine_best_us);
  b.setScreenOnly(w.screen_only);
}

WorkUnit GetWorkUnit(wire::WorkUnit::Reader r, Budget& budget) {
  WorkUnit w;
  w.sweep_id = Txt(r.getSweepId(), budget, "sweepId");
  w.unit_id = r.getUnitId();
  w.attempt = r.getAttempt();
  w.device_index = r.getDeviceIndex();
  w.op = Txt(r.getOp(), budget, "op");
  w.op_package = GetOpPackage(r.getOpPackage(), budget);
  w.dtype = Txt(r.getDtype(), budget, "dtype");
  w.shapes = GetList<Shape>(r.getShapes(), budget, [&](wire::Shape::Reader s) { return GetShape(s, budget); });
  w.configs = GetList<Config>(r.getConfigs(), budget, [&](wire::Config::Reader c) { return GetConfig(c, budget); });
  w.lease_seconds = r.getLeaseSeconds();
  w.confirm_seconds = r.getConfirmSeconds();
  w.confirm_timing = FromWire(r.getConfirmTiming());
  w.refine_best_us = r.getRefineBestUs();
  w.screen_only = r.getScreenOnly();
  return w;
}

// ---------------------------------------------------------------------------
// Commands.

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

void SetCommand(wire::Envelope::Command::Builder cmd, const Command& c) {
  std::visit(
      Overloaded{
          [&](const Hello& h) {
            auto b = cmd.initHello();
            b.setWorkerName(TextOf(h.worker_name));
            b.setFarmVersion(TextOf(h.farm_version));
            SetList(b.initDevices(h.devices.size()), h.devices,
                    [](auto d, const DeviceInfo& v) { SetDevice(d, v); });
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
          },
          [&](const ResultsAck& a) {
            auto b = cmd.initResultsAck();
            b.setSweepId(TextOf(a.sweep_id));
            b.setUnitId(a.unit_id);
            b.setBatch(a.batch);
            b.setStored(a.stored);
            b.setRefused(TextOf(a.refused));
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
          },
          [&](const SweepAccepted& a) { cmd.initSweepAccepted().setSweepId(TextOf(a.sweep_id)); },
          [&](const SweepStatusRequest& r) {
            cmd.initSweepStatusRequest().setSweepId(TextOf(r.sweep_id));
          },
          [&](const SweepStatus& s) {
            auto b = cmd.initSweepStatus();
            b.setWorkers(s.workers);
            b.setStoreFault(TextOf(s.store_fault));
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
      return s;
    }
    case wire::Envelope::Command::SWEEP_ACCEPTED:
      return SweepAccepted{Txt(cmd.getSweepAccepted().getSweepId(), budget, "sweepId")};
    case wire::Envelope::Command::SWEEP_STATUS_REQUEST:
      return SweepStatusRequest{Txt(cmd.getSweepStatusRequest().getSweepId(), budget, "sweepId")};
    case wire::Envelope::Command::SWEEP_STATUS: {
      auto r = cmd.getSweepStatus();
      SweepStatus s;
      s.workers = r.getWorkers();
      s.store_fault = Txt(r.getStoreFault(), budget, "storeFault", kMaxMessageBytes);
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

// ---------------------------------------------------------------------------
// Framing.

std::string ToBytes(capnp::MessageBuilder& builder) {
  kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
  auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

// Runs `fn(reader)` over a frame with every hostile-input check applied.
// `what` names the record in error messages; `check_text` as in Budget.
template <typename T, typename Fn>
Result<T> ReadFrame(const void* data, size_t size, const char* what, bool check_text, Fn&& fn) {
  if (data == nullptr && size != 0) return Status::Error(std::string(what) + ": null buffer");
  if (size == 0) return Status::Error(std::string(what) + ": empty frame");
  if (size > kMaxFrameBytes) {
    return Status::Error(std::string(what) + ": frame of " + std::to_string(size) +
                         " bytes exceeds the limit of " + std::to_string(kMaxFrameBytes));
  }
  if (size % sizeof(capnp::word) != 0) {
    return Status::Error(std::string(what) + ": frame size " + std::to_string(size) +
                         " is not a multiple of 8 bytes");
  }
  const size_t words = size / sizeof(capnp::word);
  try {
    // Cap'n Proto reads words in place and requires word alignment; ZeroMQ
    // gives no alignment guarantee, so misaligned frames are copied.
    kj::Array<capnp::word> copy;
    kj::ArrayPtr<const capnp::word> view;
    if (reinterpret_cast<uintptr_t>(data) % alignof(capnp::word) == 0) {
      view = kj::arrayPtr(static_cast<const capnp::word*>(data), words);
    } else {
      copy = kj::heapArray<capnp::word>(words);
      std::memcpy(copy.begin(), data, size);
      view = copy.asPtr();
    }
    capnp::ReaderOptions options;
    options.traversalLimitInWords = words * kTraversalWordsPerFrameWord + kTraversalSlackWords;
    options.nestingLimit = kNestingLimit;
    capnp::FlatArrayMessageReader reader(view, options);
    // One record per frame: trailing bytes mean a framing bug or tampering.
    if (reader.getEnd() != view.end()) {
      return Status::Error(std::string(what) + ": " +
                           std::to_string((view.end() - reader.getEnd()) * sizeof(capnp::word)) +
                           " trailing bytes after the message");
    }
    Budget budget(size, check_text);
    return fn(reader, budget);
  } catch (const DecodeError& e) {
    return Status::Error(std::string(what) + ": " + e.message);
  } catch (const kj::Exception& e) {
    return Status::Error(std::string(what) + ": malformed frame: " +
                         std::string(e.getDescription().cStr()));
  } catch (const std::bad_alloc&) {
    return Status::Error(std::string(what) + ": malformed frame: out of memory while decoding");
  } catch (const std::exception& e) {
    return Status::Error(std::string(what) + ": malformed frame: " + e.what());
  }
}

// Checked before anything else: a peer speaking another version may mean
// different things by the same fields.
Status CheckVersion(uint16_t version) {
  if (version == kProtocolVersion) return Status::OK();
  return Status::Error("envelope: protocol version " + std::to_string(version) +
                       " is not supported (this build speaks " + std::to_string(kProtocolVersion) +
                       ")");
}

// Cap'n Proto's default first segment is 1024 words, allocated and zeroed for
// every message; most of ours (acks, heartbeats, stored rows) fit in 128, and
// larger ones grow by further segments.
constexpr unsigned kFirstSegmentWords = 128;

}  // namespace

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
  return ReadFrame<Envelope>(data, size, "envelope", true, [](capnp::MessageReader& reader, Budget& budget) -> Result<Envelope> {
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
  return ReadFrame<Peeked>(data, size, "envelope", true, [](capnp::MessageReader& reader, Budget& budget) -> Result<Peeked> {
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

std::string EncodeMeasurement(const Measurement& m) {
  capnp::MallocMessageBuilder builder(kFirstSegmentWords);
  SetMeasurement(builder.initRoot<wire::Measurement>(), m);
  return ToBytes(builder);
}

Result<Measurement> DecodeMeasurement(const void* data, size_t size) {
  return ReadFrame<Measurement>(data, size, "measurement", false,
                                [](capnp::MessageReader& reader, Budget& budget) -> Result<Measurement> {
                                  return GetMeasurement(reader.getRoot<wire::Measurement>(), budget);
                                });
}

std::string EncodeLeaseRecord(const LeaseRecord& rec) {
  capnp::MallocMessageBuilder builder(kFirstSegmentWords);
  auto root = builder.initRoot<wire::LeaseRecord>();
  SetWorkUnit(root.initUnit(), rec.unit);
  root.setGpuModel(TextOf(rec.gpu_model));
  SetStrings(root.initLessees(rec.lessees.size()), rec.lessees);
  return ToBytes(builder);
}

Result<LeaseRecord> DecodeLeaseRecord(const void* data, size_t size) {
  return ReadFrame<LeaseRecord>(data, size, "lease record", false,
                                [](capnp::MessageReader& reader, Budget& budget) -> Result<LeaseRecord> {
                                  auto root = reader.getRoot<wire::LeaseRecord>();
                                  LeaseRecord rec;
                                  rec.unit = GetWorkUnit(root.getUnit(), budget);
                                  rec.gpu_model = Txt(root.getGpuModel(), budget, "gpuModel");
                                  rec.lessees = Strings(root.getLessees(), budget, "lessees");
                                  return rec;
                                });
}

const char* CommandName(const Command& c) {
  static constexpr const char* kNames[] = {
      "hello",        "hello_ack",      "heartbeat",      "request_work",
      "no_work",      "work_unit",      "results",        "results_ack",
      "sweep_submit", "sweep_accepted", "sweep_status_request", "sweep_status",
      "error",        "disconnect",
  };
  static_assert(std::size(kNames) == std::variant_size_v<Command>,
                "every command alternative needs a name");
  return c.index() < std::size(kNames) ? kNames[c.index()] : "unknown";
}

}  // namespace tune
