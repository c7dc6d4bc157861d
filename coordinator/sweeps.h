// The coordinator's sweeps: submitted, cancelled, answered about, made
// durable and resumed, their config spaces expanded off the loop, and the
// store reads the scheduler's passes make. Private to coordinator/; loop
// thread only, not thread-safe (the expander thread runs only the work this
// class posts to it).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "coordinator.h"
#include "coordinator_parts.h"
#include "coordinator_results.h"
#include "off_loop.h"
#include "scheduler.h"
#include "submit_rate.h"
#include "worker_sessions.h"

namespace tune {

class Sweeps {
 public:
  // Every pointer must outlive this object.
  Sweeps(const CoordinatorOptions* opts, ResultStore* store, Scheduler* scheduler, const WorkerSessions* sessions,
         Ingestion* ingestion, StoreHealth* health)
      : opts_(opts),
        store_(store),
        scheduler_(scheduler),
        sessions_(sessions),
        ingestion_(ingestion),
        health_(health),
        submit_rate_(opts->max_sweeps_per_minute) {}

  // Gives the scheduler its store reads and expander, starts the expander
  // thread and resumes the sweeps that were running when the last
  // coordinator stopped (or was killed); configs whose every shape is
  // stored are not leased again. A sweep that cannot resume is marked
  // failed. Returns the thread's or the store's error.
  Status Start();

  // Readable while expansions wait to be applied (RunCompletions).
  int wake_fd() const { return expander_->wake_fd(); }
  void RunCompletions() { expander_->RunCompletions(); }
  // Readable while searched keys' batches wait to be taken (RunProposals):
  // their store scans and model training run on a thread of their own, so
  // that leases and heartbeats never wait for them.
  int proposals_fd() const { return searcher_->wake_fd(); }
  void RunProposals() { searcher_->RunCompletions(); }

  // A client's sweep; `client` is who it counts against (SubmitRate).
  // Returns the reply: SweepAccepted, or ErrorReply saying why not.
  Command Submit(const SweepSubmit& submit, const std::string& client, double now);

  // Returns the sweep's status once cancelled (made durable at once); an
  // ended sweep is left as it is and its status returned (its state says
  // it ended). An ErrorReply when `sweep_id` names no sweep (Resolve).
  Command Cancel(const std::string& sweep_id);

  // The status of sweep `sweep_id` (every sweep when empty), as a client
  // is answered; an ErrorReply when `sweep_id` names no sweep (Resolve).
  Command StatusReply(const std::string& sweep_id) const;
  // The progress of sweep `sweep_id` (its whole id), or of every sweep when
  // empty: those of this run and the newest that ended before it started
  // (their records). What `status` and the dashboard list.
  SweepStatus StatusOf(const std::string& sweep_id) const;

  // Sweeps that ended (done, or failed: units out of attempts, a space over
  // the bounds) since the last call: their state is made durable and their
  // leases forgotten. The one place a sweep's end is recorded.
  void RecordEnded();

 private:
  // The id of the one known sweep (running, or ended: this run's or its
  // record's) that `sweep_id` names: its whole id or a prefix of it that
  // no other sweep's id shares. NotFound when none matches; InvalidArgument
  // listing the matches when several do.
  Result<std::string> Resolve(const std::string& sweep_id) const;
  void Persist(const std::string& id);
  // The coverage of each key of an ended sweep (KeyCoverage), into the store.
  void RecordCoverage(const SweepState& sweep);
  // The priors of a searched key (Scheduler::SetPriors): the valid rows of
  // the op and dtype on every other (GPU model, shape) key the store holds,
  // of each key's newest kernel. Runs on the expansion's thread.
  std::vector<PriorTrial> Priors(const DeviceInfo& dev, const OpSpec& spec, const std::string& dtype,
                                 const Shape& shape);
  // Whether the store holds a config's shapes for a device (read on the
  // expander thread: the store is thread-safe): what a sweep need not
  // measure again.
  // What the store holds, for sweep `sweep_id` of `submit` (other sweeps'
  // failures of its retry classes count as not measured).
  MeasuredFn Measured(const SweepSubmit& submit, const std::string& sweep_id);
  // The op packages of a sweep, as the store's op records (what publishing
  // and reports read op specs from), at the sweep's submit time.
  void RecordOps(const std::string& sweep_id, const SweepSubmit& submit);
  // Removes from the store the versions of `submit`'s ops beyond
  // kMaxRetainedOpVersions that no running sweep needs, on the expander
  // thread (the store reads every version's record).
  void PruneOpVersions(const SweepSubmit& submit);
  // Hands a sweep's space expansion to the expander thread: enumerating a
  // space of millions of raw points takes seconds, which the loop's leases
  // and heartbeats cannot wait for.
  void Expand(SpaceExpansion job);
  Status Resume();
  // The valid rows of a (model, op, dtype, shape) key of the current kernel
  // hash (of a retime, `retime_sweep`: its own rows alone), for a pass that
  // times its fastest again. False when the pass has
  // nothing to do there: a row of the key is confirmed (final: a resumed
  // sweep whose confirm unit ran, or an earlier sweep's), or the scan failed
  // (logged, naming the pass). Runs on the scheduler's caller (the loop).
  bool RowsToTimeAgain(const DeviceInfo& dev, const OpSpec& spec, const std::string& dtype, const Shape& shape,
                       const char* pass, const std::string& retime_sweep, std::vector<Measurement>* rows);
  // The confirm phase's contenders (ContendersOf) among the key's stored
  // rows.
  ContendersFn Contenders();
  // The refine pass's contenders (NearBestOf) among the key's stored rows.
  NearBestFn NearBestConfigs();

  const CoordinatorOptions* opts_;
  ResultStore* store_;
  Scheduler* scheduler_;
  const WorkerSessions* sessions_;
  Ingestion* ingestion_;
  StoreHealth* health_;
  SubmitRate submit_rate_;
  // Per running sweep, the PackageDigest of each op package: the op
  // versions the store must keep (PruneOpVersions).
  std::map<std::string, std::vector<std::string>> package_digests_;
  std::set<std::string> ended_;  // sweeps whose end is recorded
  // Sweeps that ended before this coordinator started (their records'
  // progress), newest kHistory, by id: `status` finds them (a reply about
  // every sweep lists the newest kHistoryListed).
  static constexpr size_t kHistory = 1000;
  static constexpr size_t kHistoryListed = 50;  // in a reply about every sweep
  static constexpr size_t kAmbiguousListed = 10;  // matches an ambiguous prefix's error names
  std::map<std::string, SweepProgress> history_;
  std::unique_ptr<OffLoop> searcher_;  // after the state its work reads: its thread stops first
  std::unique_ptr<OffLoop> expander_;  // last: its thread stops before the rest goes
};

}  // namespace tune
