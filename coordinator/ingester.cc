#include "ingester.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "base/text.h"
#include "opspec/op_definition.h"

namespace tune {
namespace {

// Why row `m` of a batch may not be stored for `job`; empty when it may.
// A baseline's row is of the op's default config, which sized its buffers.
std::string RowFault(const IngestJob& job, const Measurement& m, bool baseline = false) {
  const LeasedUnit& u = *job.unit;
  if (!baseline && !m.baseline.empty()) return "a config's row that names a baseline library";
  if (m.gpu_model != u.gpu_model) return "GPU model '" + m.gpu_model + "' in a unit for '" + u.gpu_model + "'";
  if (m.op != u.op || m.dtype != u.dtype) {
    return m.op + "/" + m.dtype + " in a unit of " + u.op + "/" + u.dtype;
  }
  if (m.shape != u.shape) return "shape '" + m.shape + "' in a unit of shape '" + u.shape + "'";
  if (baseline ? m.config_id != job.baseline_config.Id() : !u.configs.count(m.config_id))
    return "config " + m.config_id + " that the unit does not hold";
  if (!m.include_digest.empty() && (!job.host_digested || !IsHex(m.include_digest, 32)))
    return "an include digest '" + m.include_digest + "' for an op whose hosts add nothing, or of no digest's form";
  if (job.host_digested && m.include_digest.empty() && m.failure == FailureClass::kNone)
    return "a figure without the include digest its op's hash needs";
  if (std::none_of(job.kernel_hashes.begin(), job.kernel_hashes.end(),
                   [&m](const std::string& h) { return MeasuresKernel(m, h); }))
    return "kernel hash '" + m.kernel_hash + "' of another op or toolchain";
  if (!job.backends.count(m.backend)) return "backend '" + m.backend + "' that the sender's devices do not run";
  if (m.pass == Measurement::Pass::kConfirm && !u.confirm) return "a confirmed figure in a unit that is no confirm unit";
  if (m.pass == Measurement::Pass::kRefine && !u.refine) return "a refined figure in a unit that is no refine unit";
  if (!m.arch.empty() && !job.archs.count(m.arch)) return "arch '" + m.arch + "' that the sender's devices are not";
  const std::pair<const char*, double> figures[] = {
      {"median_us", m.median_us}, {"mean_us", m.mean_us}, {"stdev_us", m.stdev_us},
      {"min_us", m.min_us},       {"max_us", m.max_us},   {"ci95_us", m.ci95_us}};
  for (const auto& [name, v] : figures) {
    if (!std::isfinite(v) || v < 0) return std::string(name) + " = " + std::to_string(v);
  }
  // Energy, where measured: a board draws at most kMaxPowerW, and a call's
  // energy is what its power over its median comes to (a little more:
  // launch gaps in the window); a figure past that is forged.
  const std::pair<const char*, double> energy[] = {
      {"energy_uj", m.energy_uj}, {"power_w", m.power_w}, {"power_limit_w", m.power_limit_w}};
  for (const auto& [name, v] : energy) {
    if (!std::isfinite(v) || v < 0 || (v > 0 && m.failure != FailureClass::kNone))
      return std::string(name) + " = " + std::to_string(v) + (v > 0 ? " on a row that did not run" : "");
  }
  if (m.power_w > kMaxPowerW || m.power_limit_w > kMaxPowerW)
    return "a power of " + std::to_string(std::max(m.power_w, m.power_limit_w)) + " W, past " +
           std::to_string(int(kMaxPowerW)) + " W";
  if ((m.energy_uj > 0) != (m.power_w > 0)) return "an energy figure without its power, or a power without its energy";
  if (m.energy_uj > kMaxPowerW * m.max_us * 4) return "energy_uj = " + std::to_string(m.energy_uj) + " beyond any power over its time";
  if (m.failure == FailureClass::kNone) {
    if (m.samples < 1) return "a figure of 0 samples";
    for (double v : {m.median_us, m.mean_us, m.min_us, m.max_us}) {
      if (v < kMinFigureUs || v > kMaxFigureUs) return "a figure of " + std::to_string(v) + " us";
    }
    if (auto floor = job.floor_us.find(m.config_id); floor != job.floor_us.end() && m.median_us < floor->second)
      return "a median of " + std::to_string(m.median_us) + " us, faster than the device can do its op's metrics (" +
             std::to_string(floor->second) + " us at least): impossible";
  }
  return "";
}

}  // namespace

Result<std::vector<Measurement>> RowsToStore(const IngestJob& job, const Results& results) {
  if (!job.unit) return Status::Error("results for unit " + std::to_string(results.unit_id) + " that was not leased to it");
  if (results.sweep_id != job.unit->sweep_id) {
    return Status::Error("results for sweep '" + results.sweep_id + "' in a unit of sweep '" + job.unit->sweep_id + "'");
  }
  std::vector<Measurement> rows;
  rows.reserve(results.measurements.size());
  for (size_t i = 0; i < results.measurements.size(); ++i) {
    const Measurement& m = results.measurements[i];
    const std::string fault = RowFault(job, m);
    if (!fault.empty()) return Status::Error("row " + std::to_string(i) + ": " + fault);
    rows.push_back(m);
    Measurement& row = rows.back();
    row.config = job.unit->configs.at(m.config_id);  // the config leased, not the one reported
    row.sweep_id = results.sweep_id;
    row.proposer = job.unit->proposer;
    row.worker = job.worker;
    row.screen_us = 0;  // the store's to set
    // Rows are ordered by when the coordinator took them, never by a
    // sender's clock (a row of an old kernel stamped in the future would
    // otherwise outrank the op's new kernel at publish).
    if (job.received_unix > 0) row.unix_time = job.received_unix;
  }
  return rows;
}

Result<std::vector<Measurement>> BaselinesToStore(const IngestJob& job, const Results& results) {
  const LeasedUnit& u = *job.unit;
  std::vector<Measurement> out;
  for (size_t i = 0; i < results.baselines.size(); ++i) {
    const Measurement& m = results.baselines[i];
    const std::string where = "baseline " + std::to_string(i) + ": ";
    if (job.baseline.empty()) return Status::Error(where + "for op " + u.op + ", which declares no [baseline]");
    // "cublaslt 13.0.0": the op's library, then the version the host has.
    if (m.baseline != job.baseline && m.baseline.rfind(job.baseline + " ", 0) != 0)
      return Status::Error(where + "of library '" + m.baseline + "', not the op's '" + job.baseline + "'");
    if (Status st = CheckText(m.baseline, "baseline", 128); !st.ok()) return st.WithPrefix(where);
    if (m.pass != Measurement::Pass::kScreen) return Status::Error(where + "a refined or confirmed figure");
    if (std::string fault = RowFault(job, m, /*baseline=*/true); !fault.empty()) return Status::Error(where + fault);
    out.push_back(m);
    Measurement& row = out.back();
    row.config = job.baseline_config;
    row.sweep_id = results.sweep_id;
    row.worker = job.worker;
    row.proposer.clear();
    row.screen_us = 0;
    if (job.received_unix > 0) row.unix_time = job.received_unix;
  }
  return out;
}

Status CheckProfiles(const IngestJob& job, const Results& results) {
  const LeasedUnit& u = *job.unit;
  std::set<std::pair<std::string, std::string>> rows;  // (config, kernel hash) of the batch
  for (const Measurement& m : results.measurements) rows.insert({m.config_id, m.kernel_hash});
  std::set<std::string> seen;
  for (size_t i = 0; i < results.profiles.size(); ++i) {
    const KernelProfile& p = results.profiles[i];
    const std::string where = "profile " + std::to_string(i) + ": ";
    if (!u.confirm) return Status::Error(where + "in a unit that is no confirm unit (profiles come from those)");
    if (Status st = CheckProfile(p); !st.ok()) return st.WithPrefix(where);
    if (p.gpu_model != u.gpu_model || p.op != u.op || p.dtype != u.dtype || p.shape != u.shape)
      return Status::Error(where + "of " + p.gpu_model + " " + p.op + "/" + p.dtype + " " + p.shape + " in a unit of " +
                           u.gpu_model + " " + u.op + "/" + u.dtype + " " + u.shape);
    if (!rows.count({p.config_id, p.kernel_hash}))
      return Status::Error(where + "config " + p.config_id + " without a row of its kernel in the batch");
    if (!seen.insert(p.config_id).second) return Status::Error(where + "config " + p.config_id + " twice");
  }
  return Status::OK();
}

Status CheckReused(const IngestJob& job, const Results& results) {
  if (!results.reused.empty() && results.batch != 0)
    return Status::Error("reused configs in batch " + std::to_string(results.batch) + " (a unit says them in its first)");
  std::set<std::string> measured, seen;
  for (const Measurement& m : results.measurements) measured.insert(m.config_id);
  for (size_t i = 0; i < results.reused.size(); ++i) {
    const StoredDigest& d = results.reused[i];
    const std::string where = "reused " + std::to_string(i) + ": ";
    if (!job.unit->reusable.count(d))
      return Status::Error(where + "config " + d.config_id + " under digest " + d.digest +
                           ", a row the unit did not offer");
    if (!seen.insert(d.config_id).second) return Status::Error(where + "config " + d.config_id + " twice");
    if (measured.count(d.config_id)) return Status::Error(where + "config " + d.config_id + " measured as well");
  }
  return Status::OK();
}

Status CheckKernels(const IngestJob& job, const Results& results) {
  const LeasedUnit& u = *job.unit;
  // The checked rows of the batch, once: a batch of many cubins and rows
  // must not cost their product.
  std::set<std::string> checked;
  for (const Measurement& m : results.measurements)
    if (m.Valid()) checked.insert(KernelImage::KeyOf(m.kernel_hash, m.config_id, m.dtype, m.arch));
  std::set<std::string> seen;
  for (size_t i = 0; i < results.kernels.size(); ++i) {
    const KernelImage& k = results.kernels[i];
    const std::string where = "kernel " + std::to_string(i) + ": ";
    if (Status st = CheckKernelImage(k); !st.ok()) return st.WithPrefix(where);
    if (Status st = CheckCubinEntries(k.image, job.kernel_entries); !st.ok()) return st.WithPrefix(where);
    if (!seen.insert(k.Key()).second) return Status::Error(where + "cubin " + k.Key() + " twice in one batch");
    // Its kernel hash is that of a checked row of the batch (below), which
    // RowsToStore checked.
    if (k.dtype != u.dtype) return Status::Error(where + "dtype " + k.dtype + " in a unit of " + u.dtype);
    if (!u.configs.count(k.config_id)) return Status::Error(where + "config " + k.config_id + " that the unit does not hold");
    if (!job.archs.count(k.arch)) return Status::Error(where + "arch '" + k.arch + "' that the sender's devices are not");
    if (!checked.count(k.Key())) return Status::Error(where + "config " + k.config_id + " without a checked row in the batch");
  }
  return Status::OK();
}

Ingester::Ingester(ResultStore* store) : store_(store), loop_("ingest") {}

Status Ingester::Start() { return loop_.Start(); }

void Ingester::Submit(IngestJob job) {
  const size_t bytes = job.frame.size();
  queued_bytes_ += bytes;
  // OffLoop's work is a std::function, which must be copyable: the job (and
  // its frame) is shared rather than copied.
  auto shared = std::make_shared<IngestJob>(std::move(job));
  loop_.Post([this, shared, bytes]() -> OffLoop::Completion {
    auto outcome = std::make_shared<IngestOutcome>(Store(*shared));
    queued_bytes_ -= bytes;
    return [this, outcome] { outcomes_.push_back(std::move(*outcome)); };
  });
}

std::vector<IngestOutcome> Ingester::TakeOutcomes() {
  loop_.RunCompletions();
  std::vector<IngestOutcome> out;
  out.swap(outcomes_);
  return out;
}

IngestOutcome Ingester::Store(const IngestJob& job) {
  IngestOutcome out;
  out.identity = job.identity;
  out.head = job.head;
  out.received = job.received;
  if (job.unit) out.gpu_model = job.unit->gpu_model;
  auto reject = [&](const std::string& why) {
    out.kind = IngestOutcome::Kind::kRejected;
    out.error = why;
    return out;
  };
  auto env = DecodeEnvelope(job.frame.data(), job.frame.size());
  if (!env.ok()) return reject("malformed message: " + env.status().message());
  auto* results = std::get_if<Results>(&env->command);
  if (!results) return reject("expected results");
  auto rows = RowsToStore(job, *results);
  Status kernels = rows.ok() ? CheckKernels(job, *results) : Status::OK();
  if (kernels.ok() && rows.ok()) kernels = CheckProfiles(job, *results);
  if (kernels.ok() && rows.ok()) kernels = CheckReused(job, *results);
  if (!rows.ok() || !kernels.ok()) {
    out.kind = IngestOutcome::Kind::kRefused;
    out.error = rows.ok() ? kernels.message() : rows.status().message();
    return out;
  }
  auto baselines = BaselinesToStore(job, *results);
  if (!baselines.ok()) {
    out.baseline_note = "baselines refused: " + baselines.status().message();
    baselines = std::vector<Measurement>{};
  }
  if (results->pipeline.units) {
    // No figure of a unit takes longer than this: a week, over every thread.
    constexpr double kMaxPipelineSeconds = 7 * 86400.0;
    const std::string why = !results->final ? "pipeline figures on a batch that is not the unit's last"
                            : !job.unit     ? "pipeline figures for a unit not leased to the sender"
                                            : results->pipeline.Invalid(job.unit->configs.size(), kMaxPipelineSeconds);
    if (why.empty()) out.pipeline = results->pipeline;
    else out.pipeline_note = why + " (left out of the sweep's figures)";
  }
  out.rows = rows->size();
  out.reused = results->reused.size();
  for (const StoredDigest& d : results->reused) {
    for (const std::string& hash : job.kernel_hashes) {
      const auto row = store_->Get(job.unit->gpu_model, job.unit->op, job.unit->dtype, job.unit->shape,
                                   KernelHashWithIncludes(hash, d.digest), d.config_id);
      if (!row) continue;
      if (!row->Valid()) {
        ++out.reused_failed;
        if (row->failure != FailureClass::kNone) ++out.reused_failed_by_class[FailureClassName(row->failure)];
      }
      break;
    }
  }
  int64_t newest = 0;
  for (const Measurement& m : results->measurements) newest = std::max(newest, m.unix_time);
  if (newest > 0 && job.received_unix > 0) out.clock_skew_seconds = std::max(0.0, double(newest - job.received_unix));
  Status st = store_->PutBatch(*rows, &out.stored, job.replacing);
  if (!st.ok()) {
    out.kind = IngestOutcome::Kind::kStoreFailed;
    out.error = st.message();
    return out;
  }
  // After the rows: a cubin in the store always has its measured row.
  for (KernelImage k : results->kernels) {
    // Who vouches for an image is the store's record, never the sender's.
    k.witnesses.clear();
    k.conflicts.clear();
    KernelPut put = KernelPut::kNew;
    st = store_->PutKernel(k, job.witness, &put);
    if (put == KernelPut::kConflict) {
      ++out.kernel_conflicts;
      out.kernel_note = st.message() + " (from worker " + job.worker + ")";
    } else if (!st.ok()) {
      out.kind = IngestOutcome::Kind::kStoreFailed;
      out.error = st.message();
      return out;
    }
    ++out.kernels;
  }
  for (const Measurement& b : *baselines) {
    st = store_->PutBaseline(b);
    if (!st.ok()) {
      out.kind = IngestOutcome::Kind::kStoreFailed;
      out.error = st.message();
      return out;
    }
  }
  for (KernelProfile p : results->profiles) {
    ClassifyBottleneck(&p);  // the class and its reasons from the figures, not the sender's words
    st = store_->PutProfile(p);
    if (!st.ok()) {
      out.kind = IngestOutcome::Kind::kStoreFailed;
      out.error = st.message();
      return out;
    }
  }
  // The failure count is exact only when every row is new; a batch with
  // duplicates counts none rather than guess which rows were new.
  if (out.stored == out.rows) {
    for (const auto& m : *rows) {
      out.failed += m.Valid() ? 0 : 1;
      if (m.failure != FailureClass::kNone) ++out.failed_by_class[FailureClassName(m.failure)];
    }
  }
  return out;
}

}  // namespace tune
