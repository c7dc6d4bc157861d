// The coordinator's results path: leases given out and booked (here and in
// the store), results batches handed to the ingester with what they must
// match, and their outcomes turned into acknowledgements and progress.
// Private to coordinator/; loop thread only, not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <zmq.hpp>

#include "coordinator.h"
#include "coordinator_parts.h"
#include "ingester.h"
#include "scheduler.h"
#include "serve/metrics.h"
#include "opspec/kernel_hash.h"
#include "store/records.h"
#include "worker_sessions.h"

namespace tune {

// What the results path counts, for /metrics.
struct IngestCounters {
  uint64_t results_stored = 0, results_duplicate = 0, results_reused = 0, kernel_images = 0;
  uint64_t kernel_image_conflicts = 0;  // cubins that differ from another worker's (an alarm)
  uint64_t leases = 0, leases_retried = 0, batches_refused = 0;
  std::map<std::string, uint64_t> failures_by_class;  // stored failure rows, by FailureClassName
  std::map<std::string, uint64_t> stored_per_model;   // rows stored, by GPU model
  // Configs reported reused (not measured again: a row under the worker's
  // host digest stands), by worker name. The digest is the worker's word,
  // so an operator sees whose word each reuse was; at most
  // kMaxReuseWorkerLabels names, the rest under kOtherWorkers.
  std::map<std::string, uint64_t> reused_per_worker;
  static constexpr char kOtherWorkers[] = "(others)";
  // From a results frame's arrival to its outcome on the loop (the ack).
  Histogram ingest_seconds{Histogram::SecondsBounds()};
  std::map<std::string, Histogram> unit_seconds;  // lease to stored final batch, by GPU model
};

class Ingestion {
 public:
  // Every pointer must outlive this object; `opts` gives the ingest queue's
  // bounds.
  Ingestion(const CoordinatorOptions* opts, ResultStore* store, Scheduler* scheduler, WorkerSessions* sessions,
            StoreHealth* health, PeerLink* link)
      : opts_(opts), store_(store), scheduler_(scheduler), sessions_(sessions), health_(health), link_(link) {}

  // Loads the leases of the run before this one (so their honest resends
  // are stored; the scheduler must hold the resumed sweeps already) and
  // starts the ingester thread. Returns the store's or the thread's error.
  Status Start();

  // Readable while ingest outcomes wait (ApplyOutcomes). Start() first.
  int wake_fd() const { return ingester_->wake_fd(); }
  // Bytes of results received and not yet stored. Start() first.
  size_t queued_bytes() const { return ingester_->queued_bytes(); }

  // A unit for `device` of `session` (`identity`), booked to it; nullopt
  // when none is queued for its model, or while the store is behind
  // (refusing writes, or its ingest backlog over the bound): the model then
  // counts as asked for, and is served once the store catches up.
  std::optional<WorkUnit> Lease(const std::string& identity, const WorkerSession& session, const DeviceInfo& device,
                                double now);

  // A Results frame goes to the ingester undecoded, with what it must match:
  // the unit as leased to this peer, its devices' kernel hashes and backends.
  // Its unit counts as making progress until the batch is stored: rows
  // waiting in the queue never make a straggler. A peer that did not say
  // hello, or whose batch overflows the queue, is disconnected.
  void SubmitResults(const std::string& identity, zmq::message_t frame, const ResultsHead& head);

  // Stored batches are acknowledged and counted here, on the loop, so the
  // scheduler sees a unit complete only once all its rows are stored.
  void ApplyOutcomes();

  // Leases of sweeps that no longer run: kept, the book would grow for good.
  // Late batches of such a sweep (a duplicate lease's) are acknowledged
  // unstored (SubmitResults): every row of an ended sweep is stored already.
  void ForgetLeases(const std::string& sweep_id);

  // What `peer` may ask stored images of for unit `unit_id` (ImageRequest):
  // the unit as leased, when it was leased to this peer (in this run or the
  // one before; dropped with its sweep), with the op hashes and
  // architectures of the peer's devices of the unit's model, as a results
  // batch of it would be held to. nullopt when the unit is not leased to it.
  struct ImageGrant {
    std::shared_ptr<const LeasedUnit> unit;
    std::set<std::string> kernel_hashes, archs;
  };
  std::optional<ImageGrant> GrantImages(uint64_t unit_id, const WorkerSession& peer);
  // Whether `identity` holds a live lease of `unit_id` now, and whether
  // sweep `sweep_id` runs (a request of an ended sweep's unit is late, not
  // hostile).
  bool HoldsNow(const std::string& identity, uint64_t unit_id) const { return scheduler_->Holds(identity, unit_id); }
  bool SweepRunning(const std::string& sweep_id) const { return scheduler_->Running(sweep_id); }

  const IngestCounters& counters() const { return counters_; }

 private:
  // Every unit leased, in this run or (LeaseRecord) the one before: what its
  // rows must match, and who may report them. Dropped with its sweep.
  struct LeaseBook {
    std::shared_ptr<const LeasedUnit> unit;
    LeaseRecord record;  // the unit without its package, and its lessees
    // PhysicalFloors of the unit on its first reporting lessee's device,
    // computed with its first batch (the bound is far above any device of
    // one model, so one device's figures serve every lessee).
    std::optional<std::map<std::string, double>> floor_us;
  };
  // A worker's batch of a unit.
  struct BatchOf {
    std::string identity;
    uint64_t unit_id = 0;
    bool operator<(const BatchOf& o) const { return std::tie(identity, unit_id) < std::tie(o.identity, o.unit_id); }
  };

  Status LoadLeases();
  // Records that `unit` (of `model`) was leased to `session`, here and in
  // the store, so that its results are accepted from it, also after a
  // restart.
  void BookLease(const WorkUnit& unit, const std::string& model, const WorkerSession& session);
  // The op hash (OpHash) that `device`'s rows of the sweep's op carry; ""
  // for a sweep or op this coordinator does not know.
  std::string OpHashOf(const std::string& sweep_id, const std::string& op, const DeviceInfo& device);
  // The op hashes, architectures and backends of `peer`'s devices of
  // `unit`'s model: what its rows and cubins of the unit may name.
  void DeviceKeys(const LeasedUnit& unit, const WorkerSession& peer, std::set<std::string>* kernel_hashes,
                  std::set<std::string>* archs, std::set<std::string>* backends);
  // A batch of `unit_id` from this worker is not in the store: a reconnect
  // makes the worker send every batch it holds unacknowledged again.
  void AskToResend(const std::string& identity, uint64_t unit_id);
  // A batch that does not match its lease: nothing of it is stored, the
  // sender is told so (it drops the batch) and gives up its lease of the
  // unit, which goes back to the queue for an honest worker. A peer that
  // keeps sending such batches is disconnected.
  void Refuse(const IngestOutcome& o);

  const CoordinatorOptions* opts_;
  ResultStore* store_;
  Scheduler* scheduler_;
  WorkerSessions* sessions_;
  StoreHealth* health_;
  PeerLink* link_;
  std::map<uint64_t, LeaseBook> lease_book_;
  std::map<std::string, OpHashMemo> op_hashes_;  // by sweep id
  // Batches that failed to store: their unit must not complete on that
  // worker's final batch until the batch is stored.
  std::set<BatchOf> unstored_batches_;
  IngestCounters counters_;
  std::unique_ptr<Ingester> ingester_;  // last: its thread stops before the rest goes
};

}  // namespace tune
