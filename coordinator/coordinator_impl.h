// The coordinator's insides, private to coordinator/: Coordinator::Impl and
// what its files share. One struct, three files by concern:
//   coordinator.cc          the socket loop: peers, commands, sweeps, ticks
//   coordinator_results.cc  leases booked, results batches to the ingester
//                           and their outcomes, the passes' reads of the store
//   coordinator_status.cc   the HTTP status documents and /metrics
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "coordinator.h"
#include "tune/http_server.h"
#include "ingester.h"
#include "off_loop.h"
#include "scheduler.h"
#include "submit_rate.h"
#include "tune/clock.h"
#include "tune/curve.h"
#include "tune/log.h"
#include "tune/metrics.h"
#include "tune/protocol.h"
#include "tune/records.h"
#include "tune/result_store.h"
#include "zap_authenticator.h"

namespace tune {

// A routing identity as hex, for logs.
std::string Printable(const std::string& identity);

// Refused results batches after which a peer is disconnected.
constexpr uint32_t kMaxViolations = 3;

// What the HTTP thread serves: documents the coordinator loop rebuilds and
// swaps in under a mutex, so a slow browser never holds up the loop.
class HttpSnapshot final : public HttpStatusSource {
 public:
  std::string Json(const std::string& what) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = docs_.find(what);
    return it == docs_.end() ? "" : it->second;
  }
  std::string Metrics() override {
    std::lock_guard<std::mutex> lock(mu_);
    return metrics_;
  }
  void Publish(std::map<std::string, std::string> docs, std::string metrics) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [k, v] : docs) docs_[k] = std::move(v);
    metrics_ = std::move(metrics);
  }
  void PublishDocs(std::map<std::string, std::string> docs) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [k, v] : docs) docs_[k] = std::move(v);
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::string> docs_;
  std::string metrics_;
};

struct Coordinator::Impl {
  CoordinatorOptions opts;
  zmq::context_t ctx{1};
  std::unique_ptr<ZapAuthenticator> zap;  // declared before router: outlives it
  std::unique_ptr<zmq::socket_t> router;
  std::unique_ptr<ResultStore> store;
  std::unique_ptr<Ingester> ingester;  // declared after store: stops before it closes
  // Expands sweeps' config spaces (Expand); declared after store, whose
  // reads a resumed sweep's expansion makes.
  std::unique_ptr<OffLoop> expander;
  // Builds the documents that scan the store (best rows, the comparison):
  // their cost grows with what clients stored, which the loop must never
  // wait for. One build at a time (snapshot_building).
  std::unique_ptr<OffLoop> snapshotter;
  bool snapshot_building = false;
  Scheduler scheduler;
  SubmitRate submit_rate{0};
  // Per running sweep, the PackageDigest of each op package: the op
  // versions the store must keep (PruneOpVersions).
  std::map<std::string, std::vector<std::string>> sweep_package_digests;
  uint64_t seq = 0;

  struct Peer {
    std::string name;
    std::string key;       // CURVE public key (Z85) it was admitted with; "" in plaintext
    uint32_t violations = 0;  // batches refused since it said hello
    // Indices of devices that asked for work: only those make their model
    // live (Scheduler::AddDevice), so a model that a hello names and no
    // device ever serves makes no sweep wait for it.
    std::set<int> serving;
    std::vector<DeviceInfo> devices;
    double last_seen = 0;
    double last_sent = 0;
    // Its rows' clock less ours, from its last stored batch (NoteClockSkew).
    double clock_skew_seconds = 0;
    bool told_skew = false;
  };
  std::map<std::string, Peer> workers;  // routing identity -> worker
  // (worker identity, unit) whose batch failed to store: the unit must not
  // complete on that worker's final batch until the batch is stored.
  std::set<std::pair<std::string, uint64_t>> unstored_batches;

  // Every unit leased, in this run or (LeaseRecord) the one before: what its
  // rows must match, and who may report them. Dropped with its sweep.
  struct LeaseBook {
    std::shared_ptr<const LeasedUnit> unit;
    LeaseRecord record;  // the unit without its package, and its lessees
  };
  std::map<uint64_t, LeaseBook> lease_book;
  // Kernel hash of an op package per toolchain: sweep '\0' op '\0' nvrtc.
  std::map<std::string, std::string> kernel_hashes;

  // Counters for /metrics.
  uint64_t results_stored = 0, results_duplicate = 0, kernel_images = 0, leases = 0, dropped_messages = 0;
  uint64_t kernel_image_conflicts = 0;  // cubins that differ from another worker's (an alarm)
  std::map<std::string, uint64_t> failures_by_class;  // stored failure rows, by FailureClassName
  uint64_t batches_refused = 0, protocol_errors = 0;
  uint64_t leases_expired = 0, leases_retried = 0, worker_deaths = 0;
  std::map<std::string, uint64_t> stored_per_model;  // rows stored, by GPU model
  // From a results frame's arrival to its outcome on the loop (the ack).
  Histogram ingest_seconds{Histogram::SecondsBounds()};
  std::map<std::string, Histogram> unit_seconds;  // lease to stored final batch, by GPU model
  // Set while the store refuses writes (disk full, I/O error): no leases are
  // given out, since their results could not be stored, and the store is
  // tried again every kStoreRetrySeconds until a write succeeds.
  std::string store_fault;
  double store_retry_at = 0;

  void StoreFailed(const std::string& what, double now);
  void MaybeRecoverStore(double now);
  HttpSnapshot snapshot;
  std::unique_ptr<HttpServer> http;
  double last_publish = 0, last_best_publish = 0, last_compare_publish = 0, last_key_check = 0;
  size_t compare_keys = 0;  // best rows when the comparison was last published

  explicit Impl(CoordinatorOptions o) : opts(std::move(o)), scheduler(opts.scheduler) {}

  // One line of the coordinator's log (tune/log.h).
  void Log(log::Level level, const std::string& message, std::initializer_list<log::Field> fields = {});
  void NoteClockSkew(const std::string& identity, double skew);
  static std::map<std::string, double> PhysicalFloors(const OpSpec& spec, const LeasedUnit& unit, const Peer& peer);

  void Send(const std::string& identity, Command cmd);

  void PersistSweep(const std::string& id);

  // Whether the store holds a config's shapes for a device (read on the
  // expander thread: the store is thread-safe): what a sweep need not
  // measure again.
  MeasuredFn Measured();

  // The status of sweep `sweep_id` (every sweep when empty), as a client
  // is answered.
  SweepStatus StatusOf(const std::string& sweep_id) const;

  // The op packages of a sweep, as the store's op records (what publishing
  // and reports read op specs from), at the sweep's submit time.
  void RecordOps(const std::string& sweep_id, const SweepSubmit& submit);

  void Disconnect(const std::string& identity, const std::string& reason);

  void DropWorker(const std::string& identity);

  // Any command is a heartbeat. Returns the sender's entry, if it said hello.
  std::map<std::string, Peer>::iterator Heard(const std::string& identity, double now);

  // `client`: who a submit counts against (SubmitRate): the CURVE key, or
  // the peer's address without CURVE.
  void Handle(const std::string& identity, const std::string& key, const std::string& client, Envelope env);

  // Removes from the store the versions of `submit`'s ops beyond
  // kMaxRetainedOpVersions that no running sweep needs, on the expander
  // thread (the store reads every version's record).
  void PruneOpVersions(const SweepSubmit& submit);

  // Who a lease is booked to: the CURVE key a peer proved it holds, or its
  // name where the coordinator runs without CURVE.
  static std::string Lessee(const Peer& peer) { return peer.key.empty() ? peer.name : peer.key; }

  // Records that `unit` (of `model`) was leased to `peer`, here and in the
  // store, so that its results are accepted from it, also after a restart.
  void BookLease(const WorkUnit& unit, const std::string& model, const Peer& peer);

  // Leases of sweeps that no longer run: kept, the book would grow for good.
  // Late batches of such a sweep (a duplicate lease's) are acknowledged
  // unstored (SubmitResults): every row of an ended sweep is stored already.
  void ForgetLeases(const std::string& sweep_id);

  // KernelHash of the sweep's op for a toolchain, computed once.
  std::string KernelHashOf(const std::string& sweep_id, const std::string& op, const std::string& toolchain);

  // A Results frame goes to the ingester undecoded, with what it must match:
  // the unit as leased to this peer, its devices' kernel hashes and backends.
  // Its unit counts as making progress until the batch is stored: rows
  // waiting in the queue never make a straggler.
  void SubmitResults(const std::string& identity, zmq::message_t frame, const ResultsHead& head);

  // Leases of the run before this one, so their honest resends are stored.
  Status LoadLeases();

  // A batch of `unit_id` from this worker is not in the store: a reconnect
  // makes the worker send every batch it holds unacknowledged again.
  void AskToResend(const std::string& identity, uint64_t unit_id);

  // A batch that does not match its lease: nothing of it is stored, the
  // sender is told so (it drops the batch) and gives up its lease of the
  // unit, which goes back to the queue for an honest worker. A peer that
  // keeps sending such batches is disconnected.
  void Refuse(const IngestOutcome& o);

  // Stored batches are acknowledged and counted here, on the loop, so the
  // scheduler sees a unit complete only once all its rows are stored.
  void ApplyIngestOutcomes();

  // The valid rows of a (model, op, dtype, shape) key of the current kernel
  // hash, for a pass that times its fastest again. False when the pass has
  // nothing to do there: a row of the key is confirmed (final: a resumed
  // sweep whose confirm unit ran, or an earlier sweep's), or the scan failed
  // (logged, naming the pass).
  bool RowsToTimeAgain(const DeviceInfo& dev, const OpSpec& spec, const std::string& dtype, const Shape& shape,
                       const char* pass, std::vector<Measurement>* rows);

  // The confirm phase's contenders (ContendersOf) among the key's stored
  // rows.
  ContendersFn Contenders();

  // The refine pass's contenders (NearBestOf) among the key's stored rows.
  NearBestFn NearBestConfigs();

  // Hands a sweep's space expansion to the expander thread: enumerating a
  // space of millions of raw points takes seconds, which the loop's leases
  // and heartbeats cannot wait for.
  void Expand(SpaceExpansion job);

  // Sweeps that ended (done, or failed: units out of attempts, a space over
  // the bounds) since the last call: their state is made durable and their
  // leases forgotten. The one place a sweep's end is recorded.
  std::set<std::string> ended_sweeps;
  void RecordEndedSweeps();

  // Sweeps that were running when the last coordinator stopped (or was
  // killed) run on; configs whose every shape is stored are not leased again.
  Status ResumeSweeps();

  void Tick(double now);

  void PublishSnapshot(double now);
};

}  // namespace tune
