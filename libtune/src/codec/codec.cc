#include "codec/codec.h"

namespace tune::codec {

// ---------------------------------------------------------------------------
// Small conversions.

capnp::Text::Reader TextOf(const std::string& s) { return capnp::Text::Reader(s.c_str(), s.size()); }

capnp::Data::Reader DataOf(const std::string& s) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(s.data()), s.size());
}

std::string Str(capnp::Text::Reader t) { return std::string(t.begin(), t.size()); }

std::string Txt(capnp::Text::Reader t, const Budget& budget, const char* field, size_t max_bytes) {
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
  auto list = b.initParams(c.params.size());
  for (size_t i = 0; i < c.params.size(); ++i) {
    const ParamValue& v = c.params[i].second;
    list[i].setName(TextOf(c.params[i].first));
    list[i].setValue(v.Number());
    if (v.kind() == ParamValue::Kind::kString) list[i].setText(TextOf(v.text()));
    list[i].setIsBool(v.kind() == ParamValue::Kind::kBool);
  }
}
Config GetConfig(wire::Config::Reader r, Budget& budget) {
  budget.Charge(r.getParams().size(), sizeof(ParamValues::value_type));
  Config c;
  c.params.reserve(r.getParams().size());
  for (auto nv : r.getParams()) {
    std::string name = Txt(nv.getName(), budget, "name");
    if (!nv.hasText() && !nv.getIsBool()) {
      c.params.emplace_back(std::move(name), nv.getValue());
      continue;
    }
    // A categorical value is its text (or its boolean); the number beside it
    // must be the one that text gives, or the record was not written so.
    ParamValue v;
    if (nv.getIsBool()) {
      if (nv.hasText() || (nv.getValue() != 0 && nv.getValue() != 1))
        Fail("param " + name + ": a boolean with a value other than 0 or 1");
      v = ParamValue::Bool(nv.getValue() == 1);
    } else {
      std::string text = Txt(nv.getText(), budget, "param text");
      if (Status st = CheckCategoricalText(text); !st.ok()) Fail("param " + name + ": " + st.message());
      v = ParamValue::String(std::move(text));
      if (v.Number() != nv.getValue()) Fail("param " + name + ": its number is not its text's code");
    }
    c.params.emplace_back(std::move(name), std::move(v));
  }
  return c;
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
  b.setPowerLimitW(d.power_limit_w);
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
  d.power_limit_w = r.getPowerLimitW();
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
  b.setConfirmed(m.pass == Measurement::Pass::kConfirm);
  b.setConfirmTiming(ToWire(m.confirm_timing));
  b.setRefined(m.pass == Measurement::Pass::kRefine);
  b.setScreenUs(m.screen_us);
  b.setArch(TextOf(m.arch));
  b.setProposer(TextOf(m.proposer));
  b.setBaseline(TextOf(m.baseline));
  b.setUnchecked(m.unchecked);
  b.setCheckedAgainstDefault(m.against_default);
  b.setEnergyUj(m.energy_uj);
  b.setPowerW(m.power_w);
  b.setPowerLimitW(m.power_limit_w);
  b.setIncludeDigest(TextOf(m.include_digest));
  b.setHotL2(m.timing == L2Timing::kHot);
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
  // Both flags set (never written by the farm) reads as the later pass.
  m.pass = r.getConfirmed() ? Measurement::Pass::kConfirm
           : r.getRefined() ? Measurement::Pass::kRefine
                            : Measurement::Pass::kScreen;
  m.confirm_timing = FromWire(r.getConfirmTiming());
  m.screen_us = r.getScreenUs();
  m.arch = Txt(r.getArch(), budget, "arch");
  m.proposer = Txt(r.getProposer(), budget, "proposer");
  m.baseline = Txt(r.getBaseline(), budget, "baseline");
  m.unchecked = r.getUnchecked();
  m.against_default = r.getCheckedAgainstDefault();
  m.energy_uj = r.getEnergyUj();
  m.power_w = r.getPowerW();
  m.power_limit_w = r.getPowerLimitW();
  m.include_digest = Txt(r.getIncludeDigest(), budget, "includeDigest");
  m.timing = r.getHotL2() ? L2Timing::kHot : L2Timing::kCold;
  return m;
}

void SetKernelImage(wire::KernelImage::Builder b, const KernelImage& k, bool with_witnesses) {
  b.setKernelHash(TextOf(k.kernel_hash));
  b.setConfigId(TextOf(k.config_id));
  b.setDtype(TextOf(k.dtype));
  b.setArch(TextOf(k.arch));
  b.setSha256(TextOf(k.sha256));
  b.setImage(DataOf(k.image));
  if (!with_witnesses) return;
  for (auto [list, values] : {std::pair{b.initWitnesses(k.witnesses.size()), &k.witnesses},
                              std::pair{b.initConflicts(k.conflicts.size()), &k.conflicts}})
    for (size_t i = 0; i < values->size(); ++i) list.set(unsigned(i), TextOf((*values)[i]));
}

KernelImage GetKernelImage(wire::KernelImage::Reader r, Budget& budget) {
  KernelImage k;
  k.kernel_hash = Txt(r.getKernelHash(), budget, "kernelHash");
  k.config_id = Txt(r.getConfigId(), budget, "configId");
  k.dtype = Txt(r.getDtype(), budget, "dtype");
  k.arch = Txt(r.getArch(), budget, "arch");
  k.sha256 = Txt(r.getSha256(), budget, "sha256");
  k.image = Str(r.getImage());
  for (auto [list, values] : {std::pair{r.getWitnesses(), &k.witnesses}, std::pair{r.getConflicts(), &k.conflicts}}) {
    budget.Charge(list.size(), 64);
    for (auto t : list) values->push_back(Txt(t, budget, "witnesses"));
  }
  return k;
}

void SetProfile(wire::KernelProfile::Builder b, const KernelProfile& p) {
  b.setGpuModel(TextOf(p.gpu_model));
  b.setOp(TextOf(p.op));
  b.setDtype(TextOf(p.dtype));
  b.setShape(TextOf(p.shape));
  b.setKernelHash(TextOf(p.kernel_hash));
  b.setConfigId(TextOf(p.config_id));
  b.setComputePct(p.compute_pct);
  b.setMemoryPct(p.memory_pct);
  b.setOccupancyPct(p.occupancy_pct);
  b.setDramBytes(p.dram_bytes);
  b.setDurationUs(p.duration_us);
  auto stalls = b.initStalls(p.stalls.size());
  for (size_t i = 0; i < p.stalls.size(); ++i) {
    stalls[i].setName(TextOf(p.stalls[i].first));
    stalls[i].setValue(p.stalls[i].second);
  }
  b.setBottleneck(TextOf(p.bottleneck));
  b.setWhy(TextOf(p.why));
  b.setTool(TextOf(p.tool));
  b.setReport(DataOf(p.report));
}

KernelProfile GetProfile(wire::KernelProfile::Reader r, Budget& budget) {
  KernelProfile p;
  p.gpu_model = Txt(r.getGpuModel(), budget, "gpuModel");
  p.op = Txt(r.getOp(), budget, "op");
  p.dtype = Txt(r.getDtype(), budget, "dtype");
  p.shape = Txt(r.getShape(), budget, "shape");
  p.kernel_hash = Txt(r.getKernelHash(), budget, "kernelHash");
  p.config_id = Txt(r.getConfigId(), budget, "configId");
  p.compute_pct = r.getComputePct();
  p.memory_pct = r.getMemoryPct();
  p.occupancy_pct = r.getOccupancyPct();
  p.dram_bytes = r.getDramBytes();
  p.duration_us = r.getDurationUs();
  for (auto s : r.getStalls()) p.stalls.emplace_back(Txt(s.getName(), budget, "stalls.name"), s.getValue());
  p.bottleneck = Txt(r.getBottleneck(), budget, "bottleneck");
  p.why = Txt(r.getWhy(), budget, "why");
  p.tool = Txt(r.getTool(), budget, "tool");
  p.report = Str(r.getReport());
  return p;
}

std::string ToBytes(capnp::MessageBuilder& builder) {
  kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
  auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

}  // namespace tune::codec
