// Ingester: stores Results batches on a thread of its own, so that the
// coordinator's socket loop answers leases, heartbeats and status requests
// while rows are being written.
//
// The loop peeks at each frame (PeekResults) and hands a Results frame over
// with what it knows of the sender. One ingest thread decodes, checks and
// stores the batches in the order they were submitted, so a worker's batches
// are stored (and acknowledged) in the order it sent them and a unit's final
// batch is stored after its others. For each batch it posts an outcome that
// the loop collects with TakeOutcomes (when wake_fd() is readable) and turns
// into a ResultsAck, progress counts and unit completion. The Ingester never
// touches a socket or the scheduler.
//
// Thread safety: Submit, TakeOutcomes and queued_bytes() may be called from any
// one thread (the loop); the store must be safe to use from another thread
// (ResultStore is). The ingest thread is an OffLoop (off_loop.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "base/limits.h"
#include "off_loop.h"
#include "protocol/protocol.h"
#include "store/result_store.h"
#include "tune/status.h"
#include "base/types.h"

namespace tune {

// What a unit was leased as: the rows a worker may report for it. Shared by
// every batch of the unit (the loop builds it once per unit).
struct LeasedUnit {
  std::string sweep_id, op, dtype, gpu_model;
  std::string shape;                     // Shape::Canonical() of its one shape
  std::map<std::string, Config> configs; // Config::Id() -> config
  bool confirm = false;                  // only its rows may be confirmed
  bool refine = false;                   // only its rows may be refined
  std::string proposer;                  // the search strategy of its key, stamped on its rows
  std::set<StoredDigest> reusable;       // the stored rows it offered (WorkUnit::reusable)
};

// Bounds on a reported figure: a kernel's median above an hour (or below a
// picosecond) is no measurement this farm takes.
inline constexpr double kMaxFigureUs = 3.6e9;
inline constexpr double kMinFigureUs = 1e-6;

struct IngestJob {
  std::string identity;              // the sender's routing identity
  std::string worker;                // its name, stamped on every row
  // Who vouches for the batch's cubins: WitnessOfKey of the CURVE key the
  // sender proved it holds, "" without CURVE (its cubins are stored, and
  // vouch for nothing). Never its name: one key may say many names.
  std::string witness;
  // The unit, when it was leased to this sender (or duplicated to it), in
  // this run of the coordinator or in the one before (LeaseRecord); null
  // otherwise, and the batch is refused.
  std::shared_ptr<const LeasedUnit> unit;
  // The op hashes (OpHash of the unit's op for each of the sender's devices
  // of the unit's model) and those devices' backends: a row names one of
  // each.
  std::set<std::string> kernel_hashes, backends;
  // The op's hosts add to its kernel hash (OpSpec::HostDigested): a row may
  // carry an include digest, and its kernel hash then derives from one of
  // kernel_hashes and it (MeasuresKernel).
  bool host_digested = false;
  // Which stored rows the batch's replace beyond an earlier pass's: its
  // sweep's retry classes and, for a retime, other sweeps' rows.
  ResultStore::Replacing replacing;
  // The architectures a cubin of those devices may be built for ("sm_90",
  // "sm_90a").
  std::set<std::string> archs;
  // The functions a cubin of the unit's op must define (its kernel); empty
  // for ops that ship no cubin.
  std::vector<std::string> kernel_entries;
  // The op's [baseline] library ("cublaslt") and default config (its rows
  // are of it); empty: the op declares none, and a batch with baseline rows
  // is refused.
  std::string baseline;
  Config baseline_config;
  // Config id -> PhysicalFloorUs of its metrics at the unit's shape on the
  // sender's device: a row faster than that is refused as impossible.
  std::map<std::string, double> floor_us;
  ResultsHead head;                  // PeekResults of the frame
  double received = 0;               // when the frame arrived (NowSeconds)
  int64_t received_unix = 0;         // and on the coordinator's wall clock
  zmq::message_t frame;              // the whole envelope, as received
};

struct IngestOutcome {
  enum class Kind {
    kStored,       // PutBatch returned OK: the rows are in the store's WAL
    kStoreFailed,  // nothing stored; not to be acknowledged, the worker sends it again
    kRejected,     // the frame breaks the protocol: disconnect the sender
    kRefused,      // well-formed, but not what was leased: nothing stored
  };
  Kind kind = Kind::kStored;
  std::string identity;
  ResultsHead head;       // the job's
  double received = 0;    // the job's: ingest latency runs from here
  std::string error;      // why, for kStoreFailed, kRejected and kRefused
  size_t rows = 0;        // rows in the batch
  size_t stored = 0;      // new rows; the others were stored before
  size_t reused = 0;      // configs not measured again: their stored rows stand
  // Of those, the ones whose stored row records a failure, by class: the
  // sweep's failures as a measured row's would be.
  uint64_t reused_failed = 0;
  std::map<std::string, uint64_t> reused_failed_by_class;
  size_t kernels = 0;     // cubins in the batch (stored, or stored before)
  std::string kernel_note;  // a cubin kept out of the store, and why (the rows are stored)
  // The batch's baseline rows were refused, and why (BaselinesToStore): a
  // baseline costs only itself, never the configs' rows beside it.
  std::string baseline_note;
  // A final batch's pipeline figures (Results::pipeline) where they fit the
  // unit (units = 1), else zero and pipeline_note says why (the rows stand).
  PipelineFigures pipeline;
  std::string pipeline_note;
  // Cubins of this batch that differ from another worker's image of the same
  // key: an alarm (the stored image stays, and neither ships unverified).
  size_t kernel_conflicts = 0;
  uint64_t failed = 0;    // new rows that record a failure
  std::map<std::string, uint64_t> failed_by_class;  // of those, by FailureClassName
  std::string gpu_model;  // the leased unit's, when there was one
  // The newest row's time as the sender stamped it, less received_unix,
  // when positive (its clock is ahead: a row from the future); 0 otherwise.
  // A row older than its arrival is no sign of a clock behind: a worker
  // resends its spooled rows after an outage, hours later.
  double clock_skew_seconds = 0;
};

// The rows of `results` as they are to be stored (sweep, worker and the
// leased config stamped), or an error naming the first row that `job`'s
// sender may not report. A row must belong to the unit leased to the sender
// (its sweep, op, dtype, shape, model and one of its configs), name one of
// the sender's kernel hashes and backends for that model, carry a pass flag
// only where the unit is of that pass, and finite figures: a row that ran
// (failure kNone) has samples >= 1 and a median, mean, min and max within
// [kMinFigureUs, kMaxFigureUs]; every figure of any row is finite and >= 0;
// energy and power only on a row that ran, power at most kMaxPowerW, energy
// within what that power over the row's time comes to.
// A row's `arch`, where set, must be one of the sender's (job.archs).
Result<std::vector<Measurement>> RowsToStore(const IngestJob& job, const Results& results);

// The baseline rows of `results` as they are stored (sweep, sender and the
// op's default config stamped), or an error naming the first that `job`'s
// sender may not report (the batch's config rows are stored all the same): the op must declare a [baseline] of that library
// (its row says "cublaslt" or "cublaslt <version>"), and each passes the
// checks of a config's screening row (RowsToStore) as a row of the op's
// default config.
Result<std::vector<Measurement>> BaselinesToStore(const IngestJob& job, const Results& results);

// Why the profiles of `results` may not be stored for `job`; OK when they
// may: each of a config and the shape of the unit, of the unit's model, op
// and dtype, with the kernel hash of a row of its config in the batch, and
// values CheckProfile takes.
Status CheckProfiles(const IngestJob& job, const Results& results);

// Why the configs `results` says it reused may not be taken as done for
// `job`; OK when they may: said in the unit's first batch, each a row the
// unit offered under that digest (LeasedUnit::reusable), once, and without
// a row of its own in the batch. (A later batch's row of one of them is
// stored as any row is: the worker measured it after all.)
Status CheckReused(const IngestJob& job, const Results& results);

// Why the cubins of `results` may not be stored for `job`; OK when they may.
// Each must pass CheckKernelImage (an ELF whose SHA-256 is the one claimed,
// of bounded size), name one of the sender's kernel hashes and
// architectures, the unit's dtype and one of its configs, and come with a
// checked row of that config and architecture in the same batch.
Status CheckKernels(const IngestJob& job, const Results& results);

class Ingester {
 public:
  // `store` must outlive the Ingester.
  explicit Ingester(ResultStore* store);
  // Finishes the batch being stored and drops the queued ones: they were
  // never acknowledged, so their workers send them again.
  ~Ingester() = default;
  Ingester(const Ingester&) = delete;
  Ingester& operator=(const Ingester&) = delete;

  // Starts the ingest thread.
  Status Start();
  // Queues a Results frame. Never blocks on the store.
  void Submit(IngestJob job);
  // Outcomes posted since the last call, in submission order; empties
  // wake_fd() of its pending wake-up.
  std::vector<IngestOutcome> TakeOutcomes();
  // Readable while outcomes wait to be taken (an eventfd; poll it).
  int wake_fd() const { return loop_.wake_fd(); }
  // Bytes of the frames submitted and not yet stored.
  size_t queued_bytes() const { return queued_bytes_.load(); }

 private:
  IngestOutcome Store(const IngestJob& job);

  ResultStore* store_;
  std::vector<IngestOutcome> outcomes_;  // taken by the loop's thread
  std::atomic<size_t> queued_bytes_{0};  // frames submitted, not yet stored
  OffLoop loop_;                         // last: its thread stops first
};

}  // namespace tune
