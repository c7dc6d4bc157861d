// ResultStore: measurements, best-so-far, sweeps and metadata in RocksDB.
//
// Column families:
//   results   key (gpu_model, op, dtype, shape, kernel_hash, config_id) -> Measurement
//   by_shape  key (op, dtype, shape, gpu_model, kernel_hash, config_id) -> "" (index)
//   best      key (gpu_model, op, dtype, shape, kernel_hash) -> best valid Measurement
//   sweeps    key sweep_id -> opaque bytes owned by the coordinator (synced)
//   meta      "format_version" -> "1", "counter/<name>" -> decimal,
//             "lease\0<unit id, 16 hex>" -> opaque bytes owned by the coordinator,
//             "op\0<name>\0<package digest>" -> OpRecord (records.h), ...
//   kernels   "kernel_hash/config_id/dtype/arch" -> KernelImage (the cubin measured)
//   (meta)    "profile\0" + a results key -> KernelProfile (base/profile.h)
//   (meta)    "baseline\0" + (gpu_model, op, dtype, shape) -> Measurement of
//             the op's [baseline] library (PutBaseline)
// Key parts are joined with '\0' so that a prefix scan of (gpu, op) answers
// "all results of this op on this GPU" and (op, dtype, shape) in by_shape
// answers "every GPU's results for this shape".
//
// Put is idempotent: a measurement whose key is already stored is ignored
// (a retried or duplicated lease stores once). The exceptions are the later
// passes of a sweep: a refine row (Measurement::Pass::kRefine) replaces a
// stored screening one of its key, and a confirm row (Pass::kConfirm)
// replaces either, once each; the row that replaces keeps the
// config's screening figure (Measurement::screen_us). Each Put is one atomic
// WriteBatch over results, by_shape and best.
//
// The best row of a key is its best valid measurement: a row of a later pass
// outranks every row of an earlier one (confirm, then refine, then
// screening: Measurement::pass), then the lower median wins. A config whose
// row is replaced loses the best row it held unless its new row still wins
// (a failure when refined or confirmed, a confirmed figure slower than
// another confirmed one). Stores whose best rows were picked by the median
// alone (before the pass rule) have them picked again when first opened for
// writing (meta "best_rank").
//
// Thread safety: a ResultStore may be used from several threads; Put calls
// serialise on an internal mutex (best-so-far is read-modify-write).
//
// Read-only handles (OpenReadOnly) take no lock, so reports can read a store
// that a running coordinator owns. Such a handle sees the store as it was
// when opened (including writes still only in the owner's WAL); reopen it to
// see newer results.
//
// Durability. Writes reach RocksDB's write-ahead log (WAL) without fsync,
// except where a call says it syncs. Close (or the destructor) flushes every
// memory table to table files and syncs the WAL, so a store stopped cleanly
// holds nothing only in its WAL. The store keeps, in the file
// kStoreDurableMarker of its folder, the last sequence number known to be
// durable: written after each synced write, with the first other write a
// second or more after the last one (the WAL is synced then), and at close.
// Open refuses, with one line naming what is wrong and what to do:
//   - a WAL record that fails its checksum (a flipped byte; only a torn last
//     record, which a crash may leave, is tolerated), naming the WAL file;
//   - a database whose latest sequence number is below the marker's (its
//     WAL was deleted or truncated after an unclean stop), naming the marker
//     and both numbers.
// StoreOpenOptions::recover opens such a store anyway (see there).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "opspec/op_definition.h"
#include "store/result_reader.h"
#include "base/profile.h"
#include "tune/status.h"
#include "base/types.h"

namespace tune {

inline constexpr int kStoreFormatVersion = 1;
// Free space a store keeps on its filesystem by default (set_min_free_bytes).
inline constexpr uint64_t kDefaultStoreReserveBytes = 64ull << 20;
// The least free space a writable store keeps (set_min_free_bytes raises a
// smaller reserve to it): RocksDB aborts the process when its WAL or a
// memtable flush (up to 64 MiB) meets a full disk, so the store's own check
// must refuse a write well before that.
inline constexpr uint64_t kMinStoreReserveBytes = 64ull << 20;
// Name of the durable-sequence marker file inside a store's folder.
inline constexpr char kStoreDurableMarker[] = "TUNEFARM-DURABLE";

struct StoreOpenOptions {
  // Opens a store that Open would refuse for a corrupt WAL or a sequence
  // number below its marker: WAL records that fail their checksum are
  // skipped (with everything RocksDB cannot replay after them in that
  // record), whatever the database holds is accepted, and the marker is
  // reset to it. recovery_report() says what was dropped and how many result
  // rows were kept. For an operator who has no better copy of the store.
  bool recover = false;
  // The store lives in this process's memory (RocksDB's memory Env): nothing
  // is written to disk, everything is gone once it closes, `path` only names
  // it in messages. The same rules as a folder's store (a remote read's
  // rows, tests, replay); no durable marker, no disk reserve.
  bool in_memory = false;
};

// What PutKernel did with an image.
enum class KernelPut { kNew, kWitnessed, kSame, kConflict };

class ResultStore : public ResultReader {
 public:
  // Opens (creating if missing) the store at `path`. Fails with a clear error
  // if the path holds a store of an unknown format version, is locked by
  // another process, fails its checksums (every table file is read once:
  // the error names the corrupt file), has a corrupt WAL (kCorruption, naming
  // the WAL file) or went back past its durable marker (kCorruption, naming
  // the marker and both sequence numbers); see "Durability" above.
  static Result<std::unique_ptr<ResultStore>> Open(const std::string& path,
                                                   const StoreOpenOptions& options = {});
  // Opens an existing store for reading only, whether or not another process
  // (or another handle in this one) has it open for writing. Creates
  // nothing: fails when `path` holds no tunefarm store or one of an unknown
  // format version, and, as Open does, on a corrupt WAL or a sequence number
  // below the durable marker. On the returned handle Put, PutBatch and
  // PutSweep fail with "store opened read-only" and write nothing.
  static Result<std::unique_ptr<ResultStore>> OpenReadOnly(const std::string& path);
  // Close()s; a failure is logged (one line), not thrown.
  ~ResultStore() override;

  // Flushes every memory table to table files, syncs the WAL, records the
  // durable sequence number and closes the database. Every other call is
  // invalid afterwards; a second Close is OK. When the disk is below the
  // reserve, the memory tables are neither flushed nor the WAL synced (a
  // flush or sync after the log met a full disk would abort the process):
  // the rows stay in the WAL file and Unavailable says so.
  // Not thread-safe: call it once no other thread uses the store.
  Status Close();

  bool read_only() const;
  // What StoreOpenOptions::recover dropped or accepted, in one line (with the
  // number of result rows kept); empty when the store opened cleanly.
  const std::string& recovery_report() const;

  // Stores `m` unless its key exists (or replaces a row of an earlier pass,
  // see above). Returns true when stored. Fails
  // when a key field (gpu_model, op, dtype, shape, kernel_hash, config_id) is
  // empty or contains a NUL byte. Writes go to RocksDB's WAL without fsync:
  // they survive a crash of this process, not of the host.
  Result<bool> Put(const Measurement& m);
  // Which stored rows a batch's rows replace besides those of an earlier
  // pass: a stored failure of one of `retried` (a sweep's retry classes,
  // SweepSubmit::retry) and, when `retime_sweep` is set (a retime,
  // SweepSubmit::retime), any row of another sweep, of whatever pass.
  struct Replacing {
    std::set<FailureClass> retried;
    std::string retime_sweep;
  };
  // Put for many; `*stored` counts the new ones. Atomic as a whole.
  Status PutBatch(const std::vector<Measurement>& ms, size_t* stored, const Replacing& replacing = {});

  // The reads (result_reader.h). Scan uses a prefix scan of results
  // (gpu_model set) or by_shape (gpu_model empty, op set); Best reads the
  // best column family; CountResults iterates.
  std::optional<Measurement> Get(const std::string& gpu_model, const std::string& op,
                                 const std::string& dtype, const std::string& shape,
                                 const std::string& kernel_hash, const std::string& config_id) override;
  Status Scan(const ResultFilter& filter, const std::function<bool(const Measurement&)>& fn) override;
  Result<std::vector<Measurement>> Best(const ResultFilter& filter) override;
  Result<uint64_t> CountResults() override;
  // Bytes the store holds on disk and in memory tables, over every column
  // family (RocksDB's own estimates; cheap, no iteration).
  uint64_t ApproximateBytes();

  // Sweep state owned by the coordinator.
  Status PutSweep(const std::string& sweep_id, const std::string& bytes);
  std::optional<std::string> GetSweep(const std::string& sweep_id);
  Status ForEachSweep(const std::function<void(const std::string& id, const std::string& bytes)>& fn);

  // The op packages sweeps brought, so that publishing and reports read each
  // op's spec from the store rather than from the coordinator's sweep
  // records. PutOp keeps one record per (name, package): submitting the same
  // package again updates its time. A store written before op records
  // existed has them made from its sweeps when first opened for writing (a
  // read-only handle reads the sweeps instead).
  Status PutOp(const std::string& name, int64_t submitted_unix, const OpPackage& package);

  // A key's coverage (base/types.h KeyCoverage), one record per (GPU model,
  // op, dtype, shape, kernel hash). A partial record never replaces a
  // complete one (exhausted or searched) of the same key: a cancelled rerun
  // does not undo what an earlier sweep finished. Errors: unwritable store,
  // a key part with a NUL byte.
  Status PutCoverage(const KeyCoverage& c);
  Result<std::optional<KeyCoverage>> GetCoverage(const std::string& gpu_model, const std::string& op,
                                                 const std::string& dtype, const std::string& shape,
                                                 const std::string& kernel_hash) override;
  Status ForEachOp(const std::function<void(const OpRecord& op)>& fn) override;
  // Removes the records of op `name` beyond its `keep` most recently
  // submitted, except those whose PackageDigest is in `needed` (packages of
  // running sweeps); returns how many it removed. Reads every record of the
  // op. Thread-safe, like every call here.
  Result<size_t> PruneOps(const std::string& name, size_t keep, const std::set<std::string>& needed);
  // Makes room for the `incoming` (name, package) pairs of a submit under
  // `bound` bytes of op records in all (base/limits.h
  // kDefaultMaxStoredPackageBytes): a package stored already counts once.
  // When the new ones would pass the bound, stored packages that nothing
  // needs are removed, oldest first, until they fit; a package is needed
  // while its PackageDigest is in `needed` (running sweeps') and once a
  // stored row was measured with it (publish finds a row's spec by kernel
  // hash). Returns how many it removed; Unavailable, with a line naming the
  // bound, when even then they would not fit (nothing is written then but
  // the removals). Reads every op record's size once per handle, and the
  // rows of ops with candidates only when room is short. Thread-safe.
  // `budget`: the most new package bytes these may bring (a client's share,
  // coordinator/coordinator.cc); past it nothing is removed and the call
  // fails with InvalidArgument naming both. *new_bytes (when given): the
  // bytes of packages not stored before.
  Result<size_t> MakeRoomForOps(const std::vector<std::pair<std::string, OpPackage>>& incoming, uint64_t bound,
                                const std::set<std::string>& needed, uint64_t budget = UINT64_MAX,
                                uint64_t* new_bytes = nullptr);

  // The cubins workers measured (types.h KernelImage), kept for bundles,
  // with who vouches for them. The first image of a key is stored with
  // `witness` (WitnessOfKey of the sender's key; "" for none); the same image again adds
  // its witness (kWitnessed, or kSame when already known); another image
  // under a stored key (which NVRTC's determinism rules out for one kernel
  // hash: one of the two is not what the config compiles to) is recorded
  // as a conflict of the stored one, which is kept, and refused with
  // kInvalidArgument (kConflict). The k's own witnesses and conflicts are
  // ignored. Values are checked (CheckKernelImage) on the way in and out.
  Status PutKernel(const KernelImage& k, const std::string& witness = "", KernelPut* outcome = nullptr);
  Result<KernelImage> GetKernel(const std::string& kernel_hash, const std::string& config_id,
                                const std::string& dtype, const std::string& arch) override;

  // Profiles of measured configs (base/profile.h), in meta under "profile"
  // and the measurement's key: a later profile of a key replaces the
  // earlier. Values are checked (CheckProfile) on the way in and out.
  Status PutProfile(const KernelProfile& p);
  Result<KernelProfile> GetProfile(const std::string& gpu_model, const std::string& op, const std::string& dtype,
                                   const std::string& shape, const std::string& kernel_hash,
                                   const std::string& config_id) override;

  // The op's [baseline] library timed on a key (Measurement::baseline set):
  // one row per (gpu_model, op, dtype, shape), apart from the configs'
  // rows, which it never joins in a scan or a best. A row replaces the
  // stored one unless it failed where the stored one has a figure (a host
  // without the library does not erase another host's figure) or is older
  // (an import of an old export does not roll the figure back).
  Status PutBaseline(const Measurement& m);
  Status ForEachKernel(const std::function<void(const KernelImage&)>& fn) override;
  Status ForEachCoverage(const std::function<void(const KeyCoverage&)>& fn) override;
  Status ForEachProfile(const std::function<void(const KernelProfile&)>& fn) override;
  Status ForEachBaseline(const std::function<void(const Measurement&)>& fn) override;
  Result<Measurement> GetBaseline(const std::string& gpu_model, const std::string& op, const std::string& dtype,
                                  const std::string& shape) override;

  // Leases the coordinator has handed out (opaque bytes it owns, in meta), so that a restarted coordinator still accepts
  // the honest resends of units leased before it stopped. Not synced: a
  // host crash loses recent leases, and their resends are refused and redone.
  Status PutLease(uint64_t unit_id, const std::string& bytes);
  Status DeleteLease(uint64_t unit_id);
  Status ForEachLease(const std::function<void(uint64_t unit_id, const std::string& bytes)>& fn);

  // Every write fails, writing nothing, while the store's filesystem has
  // less than `bytes` free ("disk nearly full: ..."). A value below
  // kMinStoreReserveBytes (0 included) is raised to it.
  void set_min_free_bytes(uint64_t bytes);
  // The reserve in force.
  uint64_t min_free_bytes() const;

  // After a failed write (disk full, I/O error): makes the store writable
  // again if it can be (RocksDB's Resume, then a synced probe write). OK once
  // writes succeed; the error says why not otherwise. Call it again later.
  Status Recover();

  // Adds one to the counter `name` in meta and returns the new value (1 the
  // first time). The write is synced before it returns, so no two calls on
  // the same store, across crashes of the host, return the same value.
  Result<uint64_t> IncrementCounter(const std::string& name);

 private:
  // Makes the op records of a store written before they existed (once;
  // tried again at each open until it succeeds).
  Status IndexOps();
  struct Impl;
  explicit ResultStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tune
