// The coordinator's results path: leases booked (here and in the store),
// results batches handed to the ingester with what they must match, their
// outcomes turned into acknowledgements and progress, and the reads of the
// store that the refine and confirm passes make.
#include <algorithm>
#include <cmath>
#include <ctime>

#include "coordinator_impl.h"
#include "tune/config_space.h"
#include "tune/known_gpus.h"
#include "tune/text.h"

namespace tune {
namespace {

// What the rows of `unit`, leased for `model`, must match.
std::shared_ptr<const LeasedUnit> LeasedUnitOf(const WorkUnit& unit, const std::string& model) {
  auto u = std::make_shared<LeasedUnit>();
  u->sweep_id = unit.sweep_id;
  u->op = unit.op;
  u->dtype = unit.dtype;
  u->gpu_model = model;
  u->shape = unit.shapes.empty() ? "" : unit.shapes.front().Canonical();
  for (const auto& c : unit.configs) u->configs.emplace(c.Id(), c);
  u->confirm = unit.confirm();
  u->refine = unit.refine();
  return u;
}

}  // namespace

// What a row of each config of `unit` cannot beat on `peer`'s device of its
// model (PhysicalFloorUs of the op's metrics); configs whose metrics do not
// plan there are left out (nothing to hold them to).
std::map<std::string, double> Coordinator::Impl::PhysicalFloors(const OpSpec& spec, const LeasedUnit& unit,
                                                                const Peer& peer) {
  std::map<std::string, double> out;
  const auto device = std::find_if(peer.devices.begin(), peer.devices.end(),
                                   [&](const DeviceInfo& d) { return d.model == unit.gpu_model; });
  Shape shape;
  if (device == peer.devices.end() || !ParseNamedValues(unit.shape, &shape.dims)) return out;
  for (const auto& [id, config] : unit.configs) {
    auto plan = PlanLaunch(spec, unit.dtype, config, shape, *device);
    if (plan.ok()) out[id] = PhysicalFloorUs(plan->flops, plan->bytes, *device);
  }
  return out;
}

// Records that `unit` (of `model`) was leased to `peer`, here and in the
// store, so that its results are accepted from it, also after a restart.
void Coordinator::Impl::BookLease(const WorkUnit& unit, const std::string& model, const Peer& peer) {
  LeaseBook& book = lease_book[unit.unit_id];
  if (!book.unit) {
    book.unit = LeasedUnitOf(unit, model);
    book.record.unit = unit;
    book.record.unit.op_package.clear();
    book.record.gpu_model = model;
  }
  const std::string who = Lessee(peer);
  auto& lessees = book.record.lessees;
  if (std::find(lessees.begin(), lessees.end(), who) != lessees.end()) return;
  lessees.push_back(who);
  Status st = store->PutLease(unit.unit_id, EncodeLeaseRecord(book.record));
  if (!st.ok()) StoreFailed("cannot record lease of unit " + std::to_string(unit.unit_id) + ": " + st.message(), NowSeconds());
}

// Leases of sweeps that no longer run: kept, the book would grow for good.
// Late batches of such a sweep (a duplicate lease's) are acknowledged
// unstored (SubmitResults): every row of an ended sweep is stored already.
void Coordinator::Impl::ForgetLeases(const std::string& sweep_id) {
  for (auto it = lease_book.begin(); it != lease_book.end();) {
    if (it->second.unit->sweep_id != sweep_id) {
      ++it;
      continue;
    }
    (void)store->DeleteLease(it->first);
    it = lease_book.erase(it);
  }
}

// KernelHash of the sweep's op for a toolchain, computed once.
std::string Coordinator::Impl::KernelHashOf(const std::string& sweep_id, const std::string& op, const std::string& toolchain) {
  const std::string key = sweep_id + '\0' + op + '\0' + toolchain;
  auto it = kernel_hashes.find(key);
  if (it != kernel_hashes.end()) return it->second;
  const SweepState* s = scheduler.FindSweep(sweep_id);
  if (!s) return "";
  for (const auto& spec : s->specs) {
    if (spec.name == op) return kernel_hashes[key] = KernelHash(spec, toolchain);
  }
  return "";
}

// A Results frame goes to the ingester undecoded, with what it must match:
// the unit as leased to this peer, its devices' kernel hashes and backends.
// Its unit counts as making progress until the batch is stored: rows
// waiting in the queue never make a straggler.
void Coordinator::Impl::SubmitResults(const std::string& identity, zmq::message_t frame, const ResultsHead& head) {
  const double now = NowSeconds();
  auto wit = Heard(identity, now);
  if (wit == workers.end()) return Disconnect(identity, "unknown worker: say hello first");
  const size_t queued = ingester->queued_bytes();
  if (queued > 0 && queued + frame.size() > opts.max_ingest_queue_bytes) {
    return Disconnect(identity, "results queue full: keep the batch and send it again later");
  }
  const Peer& peer = wit->second;
  auto book = lease_book.find(head.unit_id);
  const SweepState* sweep = scheduler.FindSweep(head.sweep_id);
  if (book == lease_book.end() && sweep && sweep->state != RunState::kRunning) {
    return Send(identity, ResultsAck{head.sweep_id, head.unit_id, head.batch, 0, ""});
  }
  scheduler.BatchQueued(head.sweep_id, head.unit_id, now);
  IngestJob job;
  job.identity = identity;
  job.worker = peer.name;
  if (book != lease_book.end()) {
    const auto& lessees = book->second.record.lessees;
    if (std::find(lessees.begin(), lessees.end(), Lessee(peer)) != lessees.end()) {
      job.unit = book->second.unit;
      if (const SweepState* s = scheduler.FindSweep(job.unit->sweep_id))
        for (const auto& spec : s->specs) {
          if (spec.name != job.unit->op) continue;
          job.host_digested |= spec.HostDigested();
          if (!spec.program) job.kernel_entries = {spec.kernel};
          job.floor_us = PhysicalFloors(spec, *job.unit, peer);
        }
      for (const auto& d : peer.devices) {
        if (d.model != job.unit->gpu_model) continue;
        job.backends.insert(d.backend);
        job.kernel_hashes.insert(KernelHashOf(job.unit->sweep_id, job.unit->op, d.nvrtc_version));
        const std::string arch = "sm_" + std::to_string(d.cc_major) + std::to_string(d.cc_minor);
        job.archs.insert(arch);
        job.archs.insert(arch + "a");
      }
    }
  }
  job.head = head;
  job.received = NowSeconds();
  job.received_unix = std::time(nullptr);
  job.frame = std::move(frame);
  ingester->Submit(std::move(job));
}

// A worker's clock far from ours: flagged (status, metrics) and logged once
// per connection; the worker is told in each acknowledgement.
void Coordinator::Impl::NoteClockSkew(const std::string& identity, double skew) {
  auto it = workers.find(identity);
  if (it == workers.end()) return;
  Peer& peer = it->second;
  peer.clock_skew_seconds = skew;
  if (std::abs(skew) <= kClockSkewWarnSeconds || peer.told_skew) return;
  peer.told_skew = true;
  Log(log::Level::kWarn, "a worker's clock is off ours: its rows are stored with our time",
      {{"worker", peer.name}, {"skew_seconds", std::to_string(skew)}});
}

// Leases of the run before this one, so their honest resends are stored.
Status Coordinator::Impl::LoadLeases() {
  std::vector<uint64_t> stale;
  Status st = store->ForEachLease([&](uint64_t id, const std::string& bytes) {
    auto rec = DecodeLeaseRecord(bytes.data(), bytes.size());
    const SweepState* s = rec.ok() ? scheduler.FindSweep(rec->unit.sweep_id) : nullptr;
    if (!s || s->state != RunState::kRunning) {
      stale.push_back(id);
      return;
    }
    auto u = LeasedUnitOf(rec->unit, rec->gpu_model);
    lease_book[id] = LeaseBook{std::move(u), std::move(rec).value()};
  });
  for (uint64_t id : stale) (void)store->DeleteLease(id);
  if (!lease_book.empty())
    Log(log::Level::kInfo, "leases of the last run still open", {{"leases", std::to_string(lease_book.size())}});
  return st;
}

// A batch of `unit_id` from this worker is not in the store: a reconnect
// makes the worker send every batch it holds unacknowledged again.
void Coordinator::Impl::AskToResend(const std::string& identity, uint64_t unit_id) {
  Log(log::Level::kWarn, "a results batch failed to store; asking for it again",
      {{"unit", std::to_string(unit_id)}, {"peer", Printable(identity)}});
  Send(identity, tune::Disconnect{"a results batch could not be stored; send it again"});
  DropWorker(identity);
}

// A batch that does not match its lease: nothing of it is stored, the
// sender is told so (it drops the batch) and gives up its lease of the
// unit, which goes back to the queue for an honest worker. A peer that
// keeps sending such batches is disconnected.
void Coordinator::Impl::Refuse(const IngestOutcome& o) {
  batches_refused++;
  auto wit = workers.find(o.identity);
  const std::string who = wit != workers.end() ? wit->second.name + " (" + Lessee(wit->second) + ")" : Printable(o.identity);
  Log(log::Level::kWarn, "refused results",
      {{"sweep", o.head.sweep_id}, {"unit", std::to_string(o.head.unit_id)}, {"worker", who}, {"error", o.error}});
  Send(o.identity, ResultsAck{o.head.sweep_id, o.head.unit_id, o.head.batch, 0, o.error});
  scheduler.GiveUpLease(o.identity, o.head.unit_id, std::time(nullptr));
  if (wit != workers.end() && ++wit->second.violations >= kMaxViolations) {
    Disconnect(o.identity, std::to_string(kMaxViolations) + " results batches refused");
  }
}

// Stored batches are acknowledged and counted here, on the loop, so the
// scheduler sees a unit complete only once all its rows are stored.
void Coordinator::Impl::ApplyIngestOutcomes() {
  for (auto& o : ingester->TakeOutcomes()) {
    const double now = NowSeconds();
    scheduler.BatchIngested(o.head.sweep_id, o.head.unit_id, o.stored, o.failed, o.failed_by_class, now);
    ingest_seconds.Observe(now - o.received);
    switch (o.kind) {
      case IngestOutcome::Kind::kRejected:
        protocol_errors++;
        Disconnect(o.identity, o.error);
        break;
      case IngestOutcome::Kind::kRefused:
        Refuse(o);
        break;
      case IngestOutcome::Kind::kStoreFailed:
        // Not acknowledged: the worker keeps the batch and sends it again
        // when it reconnects. Until then the unit must not complete on a
        // later final batch, and a failed final batch asks for that now.
        StoreFailed(o.error, NowSeconds());
        if (o.head.final) AskToResend(o.identity, o.head.unit_id);
        else unstored_batches.insert({o.identity, o.head.unit_id});
        break;
      case IngestOutcome::Kind::kStored: {
        results_stored += o.stored;
        if (!o.gpu_model.empty()) stored_per_model[o.gpu_model] += o.stored;
        for (const auto& [cls, n] : o.failed_by_class) failures_by_class[cls] += n;
        results_duplicate += o.rows - o.stored;
        kernel_images += o.kernels;
        kernel_image_conflicts += o.kernel_conflicts;
        // Two workers' images of one kernel differ: one of them is not what
        // NVRTC makes of the config (or a toolchain differs without saying).
        if (!o.kernel_note.empty())
          Log(o.kernel_conflicts ? log::Level::kWarn : log::Level::kInfo, o.kernel_note,
              {{"sweep", o.head.sweep_id}, {"unit", std::to_string(o.head.unit_id)}, {"worker", o.identity}});
        if (o.head.final && unstored_batches.erase({o.identity, o.head.unit_id})) {
          AskToResend(o.identity, o.head.unit_id);  // the final batch stays unacknowledged
          break;
        }
        NoteClockSkew(o.identity, o.clock_skew_seconds);
        Send(o.identity, ResultsAck{o.head.sweep_id, o.head.unit_id, o.head.batch,
                                    static_cast<uint32_t>(o.stored), "", o.clock_skew_seconds});
        if (!o.head.final) break;
        if (const double took = scheduler.CompleteUnit(o.identity, o.head.sweep_id, o.head.unit_id, now,
                                                       std::time(nullptr));
            took > 0) {
          auto [h, added] = unit_seconds.try_emplace(o.gpu_model, Histogram::SecondsBounds());
          h->second.Observe(took);
        }
        break;
      }
    }
  }
}

// The valid rows of a (model, op, dtype, shape) key of the current kernel
// hash, for a pass that times its fastest again. False when the pass has
// nothing to do there: a row of the key is confirmed (final: a resumed
// sweep whose confirm unit ran, or an earlier sweep's), or the scan failed
// (logged, naming the pass).
bool Coordinator::Impl::RowsToTimeAgain(const DeviceInfo& dev, const OpSpec& spec, const std::string& dtype, const Shape& shape,
                     const char* pass, std::vector<Measurement>* rows) {
  const std::string op_hash = KernelHash(spec, dev.nvrtc_version);
  // An op whose hosts add to its hash keeps its rows under hashes derived
  // from its own (one per set of headers or versions): the key is scanned whole.
  const ResultFilter key{dev.model, spec.name, dtype, shape.Canonical(), spec.HostDigested() ? "" : op_hash};
  bool confirmed = false;
  Status st = store->Scan(key, [&](const Measurement& m) {
    if (!MeasuresKernel(m, op_hash)) return true;
    confirmed = confirmed || m.confirmed;
    if (m.Valid() && std::isfinite(m.median_us)) rows->push_back(m);
    return !confirmed;
  });
  if (!st.ok()) Log(log::Level::kWarn, std::string(pass) + " skips a shape", {{"shape", shape.Canonical()}, {"error", st.message()}});
  return st.ok() && !confirmed;
}

// The confirm phase's contenders (ContendersOf) among the key's stored
// rows.
ContendersFn Coordinator::Impl::Contenders() {
  return [this](const DeviceInfo& dev, const OpSpec& spec, const std::string& dtype, const Shape& shape,
                uint32_t top) {
    std::vector<Measurement> valid;
    if (!RowsToTimeAgain(dev, spec, dtype, shape, "confirm phase", &valid)) return std::vector<Config>{};
    return ContendersOf(std::move(valid), top);
  };
}

// The refine pass's contenders (NearBestOf) among the key's stored rows.
NearBestFn Coordinator::Impl::NearBestConfigs() {
  return [this](const DeviceInfo& dev, const OpSpec& spec, const std::string& dtype, const Shape& shape,
                double within) {
    std::vector<Measurement> valid;
    if (!RowsToTimeAgain(dev, spec, dtype, shape, "refine pass", &valid)) return NearBest{};
    return NearBestOf(valid, within);
  };
}

}  // namespace tune
