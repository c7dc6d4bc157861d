#include "coordinator_results.h"

#include <algorithm>
#include <cmath>

#include "opspec/config_space.h"
#include "base/known_gpus.h"
#include "base/text.h"
#include "base/target.h"

namespace tune {
namespace {

// What the rows of `unit`, leased for `model`, must match.
std::shared_ptr<const LeasedUnit> LeasedUnitOf(const WorkUnit& unit, const std::string& model,
                                               std::string proposer) {
  auto u = std::make_shared<LeasedUnit>();
  u->proposer = std::move(proposer);
  u->sweep_id = unit.sweep_id;
  u->op = unit.op;
  u->dtype = unit.dtype;
  u->gpu_model = model;
  u->shape = unit.shapes.empty() ? "" : unit.shapes.front().Canonical();
  for (const auto& c : unit.configs) u->configs.emplace(c.Id(), c);
  u->confirm = unit.confirm();
  u->refine = unit.refine();
  u->reusable.insert(unit.reusable.begin(), unit.reusable.end());
  return u;
}

// What a row of each config of `unit` cannot beat on `peer`'s device of its
// model (PhysicalFloorUs of the op's metrics); configs whose metrics do not
// plan there are left out (nothing to hold them to).
std::map<std::string, double> PhysicalFloors(const OpSpec& spec, const LeasedUnit& unit, const WorkerSession& peer) {
  std::map<std::string, double> out;
  const auto device = std::find_if(peer.devices.begin(), peer.devices.end(),
                                   [&](const DeviceInfo& d) { return d.model == unit.gpu_model; });
  Shape shape;
  if (device == peer.devices.end() || !ParseNamedValues(unit.shape, &shape.dims)) return out;
  auto floor = [&](const Config& config) {
    auto plan = PlanLaunch(spec, unit.dtype, config, shape, *device);
    if (plan.ok()) out[config.Id()] = PhysicalFloorUs(plan->flops, plan->bytes, *device);
  };
  for (const auto& [id, config] : unit.configs) floor(config);
  // A baseline's row is of the op's default config: no library beats the device either.
  if (spec.baseline) floor(spec.default_config);
  return out;
}

}  // namespace

Status Ingestion::Start() {
  TUNE_RETURN_IF_ERROR(LoadLeases());
  ingester_ = std::make_unique<Ingester>(store_);
  return ingester_->Start();
}

std::optional<WorkUnit> Ingestion::Lease(const std::string& identity, const WorkerSession& session,
                                         const DeviceInfo& device, double now) {
  const bool store_behind = !health_->fault().empty() || queued_bytes() > opts_->max_ingest_backlog_bytes;
  if (store_behind) scheduler_->NoteAsked(device.model, now);  // served once the store is back
  auto unit = store_behind ? std::nullopt
                            : scheduler_->Lease(identity, device.model, now, opts_->env->NowUnixSeconds());
  if (!unit) return std::nullopt;
  unit->device_index = device.index;
  counters_.leases++;
  counters_.leases_retried += unit->attempt > 1 ? 1 : 0;
  BookLease(*unit, device.model, session);
  CoordinatorLog(log::Level::kDebug, "lease",
                 {{"sweep", unit->sweep_id}, {"unit", unit->unit_id}, {"op", unit->op},
                  {"dtype", unit->dtype}, {"shape", unit->shapes.empty() ? "" : unit->shapes[0].Canonical()},
                  {"configs", unit->configs.size()}, {"worker", session.name}});
  return unit;
}

void Ingestion::BookLease(const WorkUnit& unit, const std::string& model, const WorkerSession& session) {
  LeaseBook& book = lease_book_[unit.unit_id];
  if (!book.unit) {
    const std::string shape = unit.shapes.empty() ? "" : unit.shapes.front().Canonical();
    book.unit = LeasedUnitOf(unit, model, scheduler_->ProposerOf(unit.sweep_id, PoolKey{model, unit.op, unit.dtype, shape}));
    book.record.unit = unit;
    book.record.unit.op_package.clear();
    book.record.gpu_model = model;
  }
  const std::string who = session.Lessee();
  auto& lessees = book.record.lessees;
  if (std::find(lessees.begin(), lessees.end(), who) != lessees.end()) return;
  lessees.push_back(who);
  Status st = store_->PutLease(unit.unit_id, EncodeLeaseRecord(book.record));
  if (!st.ok()) {
    health_->Failed("cannot record lease of unit " + std::to_string(unit.unit_id) + ": " + st.message(),
                    opts_->env->NowSeconds());
  }
}

void Ingestion::ForgetLeases(const std::string& sweep_id) {
  for (auto it = lease_book_.begin(); it != lease_book_.end();) {
    if (it->second.unit->sweep_id != sweep_id) {
      ++it;
      continue;
    }
    (void)store_->DeleteLease(it->first);
    it = lease_book_.erase(it);
  }
}

std::string Ingestion::OpHashOf(const std::string& sweep_id, const std::string& op, const DeviceInfo& device) {
  const SweepState* s = scheduler_->FindSweep(sweep_id);
  if (!s) return "";
  for (const auto& spec : s->specs) {
    if (spec.name == op) return op_hashes_[sweep_id].Of(spec, device);
  }
  return "";
}

void Ingestion::SubmitResults(const std::string& identity, zmq::message_t frame, const ResultsHead& head) {
  const double now = opts_->env->NowSeconds();
  const WorkerSession* session = sessions_->Heard(identity, now);
  if (!session) return link_->Disconnect(identity, "unknown worker: say hello first");
  const size_t queued = ingester_->queued_bytes();
  if (queued > 0 && queued + frame.size() > opts_->max_ingest_queue_bytes) {
    return link_->Disconnect(identity, "results queue full: keep the batch and send it again later");
  }
  const WorkerSession& peer = *session;
  auto book = lease_book_.find(head.unit_id);
  const SweepState* sweep = scheduler_->FindSweep(head.sweep_id);
  if (book == lease_book_.end() && sweep && sweep->state != RunState::kRunning) {
    return link_->Send(identity, ResultsAck{head.sweep_id, head.unit_id, head.batch, 0, ""});
  }
  scheduler_->BatchQueued(head.sweep_id, head.unit_id, now);
  IngestJob job;
  job.identity = identity;
  job.worker = peer.name;
  job.witness = WitnessOfKey(peer.key);
  if (book != lease_book_.end()) {
    const auto& lessees = book->second.record.lessees;
    if (std::find(lessees.begin(), lessees.end(), peer.Lessee()) != lessees.end()) {
      job.unit = book->second.unit;
      if (const SweepState* s = scheduler_->FindSweep(job.unit->sweep_id)) {
        for (const std::string& c : s->submit.retry) job.replacing.retried.insert(FailureClassFromName(c));
        if (s->submit.retime) job.replacing.retime_sweep = s->id;
        for (const auto& spec : s->specs) {
          if (spec.name != job.unit->op) continue;
          job.host_digested |= spec.HostDigested();
          if (!spec.program) job.kernel_entries = {spec.kernel};
          if (spec.baseline) {
            job.baseline = spec.baseline->library;
            job.baseline_config = spec.default_config;
          }
          if (!book->second.floor_us) book->second.floor_us = PhysicalFloors(spec, *job.unit, peer);
          job.floor_us = *book->second.floor_us;
        }
      }
      DeviceKeys(*job.unit, peer, &job.kernel_hashes, &job.archs, &job.backends);
    }
  }
  job.head = head;
  job.received = opts_->env->NowSeconds();
  job.received_unix = opts_->env->NowUnixSeconds();
  job.frame = std::move(frame);
  ingester_->Submit(std::move(job));
}

void Ingestion::DeviceKeys(const LeasedUnit& unit, const WorkerSession& peer, std::set<std::string>* kernel_hashes,
                           std::set<std::string>* archs, std::set<std::string>* backends) {
  for (const auto& d : peer.devices) {
    if (d.model != unit.gpu_model) continue;
    backends->insert(d.backend);
    kernel_hashes->insert(OpHashOf(unit.sweep_id, unit.op, d));
    const std::string arch = TargetOf(d).arch;
    archs->insert(arch);
    archs->insert(arch + "a");
  }
}

std::optional<Ingestion::ImageGrant> Ingestion::GrantImages(uint64_t unit_id, const WorkerSession& peer) {
  auto book = lease_book_.find(unit_id);
  if (book == lease_book_.end()) return std::nullopt;
  const auto& lessees = book->second.record.lessees;
  if (std::find(lessees.begin(), lessees.end(), peer.Lessee()) == lessees.end()) return std::nullopt;
  ImageGrant grant;
  grant.unit = book->second.unit;
  std::set<std::string> backends;
  DeviceKeys(*grant.unit, peer, &grant.kernel_hashes, &grant.archs, &backends);
  grant.kernel_hashes.erase("");  // a sweep or op this coordinator does not know
  return grant;
}

Status Ingestion::LoadLeases() {
  std::vector<uint64_t> stale;
  Status st = store_->ForEachLease([&](uint64_t id, const std::string& bytes) {
    auto rec = DecodeLeaseRecord(bytes.data(), bytes.size());
    const SweepState* s = rec.ok() ? scheduler_->FindSweep(rec->unit.sweep_id) : nullptr;
    if (!s || s->state != RunState::kRunning) {
      stale.push_back(id);
      return;
    }
    auto u = LeasedUnitOf(rec->unit, rec->gpu_model, "");  // the plans come with the next expansion
    lease_book_[id] = LeaseBook{std::move(u), std::move(rec).value(), std::nullopt};
  });
  for (uint64_t id : stale) (void)store_->DeleteLease(id);
  if (!lease_book_.empty())
    CoordinatorLog(log::Level::kInfo, "leases of the last run still open",
                   {{"leases", lease_book_.size()}});
  return st;
}

void Ingestion::AskToResend(const std::string& identity, uint64_t unit_id) {
  CoordinatorLog(log::Level::kWarn, "a results batch failed to store; asking for it again",
                 {{"unit", unit_id}, {"peer", Printable(identity)}});
  link_->Send(identity, tune::Disconnect{"a results batch could not be stored; send it again"});
  sessions_->Drop(identity);
}

void Ingestion::Refuse(const IngestOutcome& o) {
  counters_.batches_refused++;
  const WorkerSession* session = sessions_->Find(o.identity);
  const std::string who = session ? session->name + " (" + session->Lessee() + ")" : Printable(o.identity);
  CoordinatorLog(log::Level::kWarn, "refused results",
                 {{"sweep", o.head.sweep_id}, {"unit", o.head.unit_id}, {"worker", who},
                  {"error", o.error}});
  link_->Send(o.identity, ResultsAck{o.head.sweep_id, o.head.unit_id, o.head.batch, 0, o.error});
  scheduler_->GiveUpLease(o.identity, o.head.unit_id, opts_->env->NowUnixSeconds(), o.error);
  if (sessions_->NoteViolation(o.identity)) {
    link_->Disconnect(o.identity, std::to_string(kMaxViolations) + " results batches refused");
  }
}

void Ingestion::ApplyOutcomes() {
  IngestCounters& c = counters_;
  for (auto& o : ingester_->TakeOutcomes()) {
    const double now = opts_->env->NowSeconds();
    scheduler_->BatchIngested(o.head.sweep_id, o.head.unit_id, o.stored, o.failed, o.failed_by_class, now);
    c.ingest_seconds.Observe(now - o.received);
    switch (o.kind) {
      case IngestOutcome::Kind::kRejected:
        link_->ProtocolError(o.identity, o.error);
        break;
      case IngestOutcome::Kind::kRefused:
        Refuse(o);
        break;
      case IngestOutcome::Kind::kStoreFailed:
        // Not acknowledged: the worker keeps the batch and sends it again
        // when it reconnects. Until then the unit must not complete on a
        // later final batch, and a failed final batch asks for that now.
        health_->Failed(o.error, opts_->env->NowSeconds());
        if (o.head.final) AskToResend(o.identity, o.head.unit_id);
        else unstored_batches_.insert({o.identity, o.head.unit_id});
        break;
      case IngestOutcome::Kind::kStored: {
        c.results_stored += o.stored;
        if (!o.gpu_model.empty()) c.stored_per_model[o.gpu_model] += o.stored;
        for (const auto& [cls, n] : o.failed_by_class) c.failures_by_class[cls] += n;
        c.results_duplicate += o.rows - o.stored;
        c.results_reused += o.reused;
        if (o.reused) {
          const WorkerSession* s = sessions_->Find(o.identity);
          std::string name = s ? s->name : Printable(o.identity);
          if (!c.reused_per_worker.count(name) && c.reused_per_worker.size() >= kMaxReuseWorkerLabels)
            name = IngestCounters::kOtherWorkers;
          c.reused_per_worker[name] += o.reused;
        }
        if (o.reused)
          scheduler_->NoteReused(o.head.sweep_id, o.head.unit_id, o.reused, o.reused_failed, o.reused_failed_by_class);
        c.kernel_images += o.kernels;
        c.kernel_image_conflicts += o.kernel_conflicts;
        // Two workers' images of one kernel differ: one of them is not what
        // NVRTC makes of the config (or a toolchain differs without saying).
        if (!o.kernel_note.empty())
          CoordinatorLog(o.kernel_conflicts ? log::Level::kWarn : log::Level::kInfo, o.kernel_note,
                         {{"sweep", o.head.sweep_id}, {"unit", o.head.unit_id},
                          {"worker", o.identity}});
        if (!o.baseline_note.empty())
          CoordinatorLog(log::Level::kWarn, o.baseline_note,
                         {{"sweep", o.head.sweep_id}, {"unit", o.head.unit_id}, {"worker", o.identity}});
        if (!o.pipeline_note.empty())
          CoordinatorLog(log::Level::kWarn, o.pipeline_note,
                         {{"sweep", o.head.sweep_id}, {"unit", o.head.unit_id}, {"worker", o.identity}});
        if (o.head.final && unstored_batches_.erase({o.identity, o.head.unit_id})) {
          AskToResend(o.identity, o.head.unit_id);  // the final batch stays unacknowledged
          break;
        }
        sessions_->NoteClockSkew(o.identity, o.clock_skew_seconds);
        link_->Send(o.identity, ResultsAck{o.head.sweep_id, o.head.unit_id, o.head.batch,
                                    static_cast<uint32_t>(o.stored), "", o.clock_skew_seconds});
        if (!o.head.final) break;
        if (o.pipeline.units) scheduler_->AddPipeline(o.identity, o.head.sweep_id, o.head.unit_id, o.pipeline);
        if (const double took = scheduler_->CompleteUnit(o.identity, o.head.sweep_id, o.head.unit_id, now,
                                                         opts_->env->NowUnixSeconds());
            took > 0) {
          auto [h, added] = c.unit_seconds.try_emplace(o.gpu_model, Histogram::SecondsBounds());
          h->second.Observe(took);
        }
        break;
      }
    }
  }
}

}  // namespace tune
