#include "protocol/envelope_parts.h"

namespace tune::codec {

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
  b.setProfileTop(w.profile_top);
  SetStoredDigests(b.initReusable(w.reusable.size()), w.reusable);
  b.setEnergySeconds(w.energy_seconds);
}

void SetStoredDigests(capnp::List<wire::StoredDigest>::Builder b, const std::vector<StoredDigest>& v) {
  SetList(b, v, [](auto s, const StoredDigest& d) {
    s.setConfigId(TextOf(d.config_id));
    s.setDigest(TextOf(d.digest));
  });
}

std::vector<StoredDigest> GetStoredDigests(capnp::List<wire::StoredDigest>::Reader r, Budget& budget) {
  return GetList<StoredDigest>(r, budget, [&](wire::StoredDigest::Reader d) {
    return StoredDigest{Txt(d.getConfigId(), budget, "configId"), Txt(d.getDigest(), budget, "digest")};
  });
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
  w.profile_top = r.getProfileTop();
  w.reusable = GetStoredDigests(r.getReusable(), budget);
  // A worker takes it only within [0, kMaxEnergySeconds] (Worker::PolicyFor).
  w.energy_seconds = r.getEnergySeconds();
  return w;
}

}  // namespace tune::codec
