// ResultStore::Impl (private to store/): the open database, its handles,
// and every path that keeps the families' invariants (the best index,
// staging a write, the durable marker), shared by result_store.cc (opening,
// rows) and result_store_records.cc (the records beside the rows).
#pragma once

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/iterator.h>
#include <sys/statvfs.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "protocol/protocol.h"
#include "store/result_store.h"
#include "store/store_durability.h"
#include "store/store_layout.h"

namespace tune {

// The store's own files read the layout's names unqualified.
using namespace store_internal;  // NOLINT(google-build-using-namespace)

struct ResultStore::Impl {
  std::string path;
  // StoreOpenOptions::in_memory: RocksDB's memory Env, which outlives db.
  std::unique_ptr<rocksdb::Env> memory_env;
  rocksdb::DB* db = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::ColumnFamilyHandle* results = nullptr;
  rocksdb::ColumnFamilyHandle* by_shape = nullptr;
  rocksdb::ColumnFamilyHandle* best = nullptr;
  rocksdb::ColumnFamilyHandle* sweeps = nullptr;
  rocksdb::ColumnFamilyHandle* meta = nullptr;
  rocksdb::ColumnFamilyHandle* kernels = nullptr;  // nullptr: an older store, read-only
  // Put is check-then-write (existence, best-so-far), which RocksDB does not
  // make atomic on its own.
  std::mutex put_mu;
  // Rank of the stored best row per best key, filled on first read and
  // updated after each successful write, so that a Put does not read and
  // decode the best row again. Guarded by put_mu; only Put writes best rows.
  BestRanks best_ranks;
  bool read_only = false;
  std::atomic<uint64_t> min_free_bytes{kDefaultStoreReserveBytes};
  std::string recovery_report;  // StoreOpenOptions::recover: what it dropped
  // The marker: written by MarkDurable, serialised by mark_mu; never lowered.
  std::mutex mark_mu;
  uint64_t marked_sequence = 0;
  bool marker_written = false;  // by this handle: a recovery may lower the file's
  std::atomic<int64_t> last_mark_ns{0};
  // Op records' bytes by key, read on first need (MakeRoomForOps) and kept
  // by PutOp and PruneOps, so that a submit does not read every package;
  // and the keys known to have measured rows (a row is never unmeasured).
  // Guarded by ops_mu.
  std::mutex ops_mu;
  bool op_bytes_loaded = false;
  std::map<std::string, uint64_t> op_bytes;
  std::set<std::string> ops_measured;

  ~Impl() { CloseDb(); }

  void CloseDb() {
    if (db == nullptr) return;
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
    handles.clear();
    db->Close();
    delete db;
    db = nullptr;
  }

  static int64_t NowNs() { return NowNanos(); }

  // Records in the marker a sequence number the WAL holds on disk. The
  // number is read before the sync: every write up to it is in the WAL file
  // already (RocksDB publishes a sequence number after its log write), so
  // the sync makes it durable, and the marker never claims a write that a
  // host crash could take back. A store whose database ends below its
  // marker has lost writes that were durable: Open refuses it.
  Status MarkDurable() {
    if (read_only || db == nullptr || memory_env) return Status::OK();
    // A WAL writer that met a full disk must not be synced (RocksDB asserts
    // on a sync after a failed append, aborting the process): below the
    // reserve the marker waits for room.
    TUNE_RETURN_IF_ERROR(CheckWritable());
    std::lock_guard<std::mutex> lock(mark_mu);
    const uint64_t sequence = db->GetLatestSequenceNumber();
    rocksdb::Status s = db->SyncWAL();
    if (!s.ok()) return Error("cannot sync the write-ahead log", s);
    last_mark_ns = NowNs();
    if (marker_written && sequence <= marked_sequence) return Status::OK();
    Status st = WriteMarker(path, sequence);
    if (!st.ok()) return st.WithPrefix("result store " + path + ": ");
    marked_sequence = sequence;
    marker_written = true;
    return Status::OK();
  }
  // After an unsynced write: the marker follows within about a second of
  // writes (one WAL sync a second at most), so that a WAL lost after an
  // unclean stop is refused whenever it held more than the last second of
  // writes. A failure here is not the write's: the marker only lags.
  void MaybeMarkDurable() {
    if (NowNs() - last_mark_ns.load() < 1'000'000'000) return;
    (void)MarkDurable();
  }

  Status Error(const std::string& what) const {
    return Status::Error("result store " + path + ": " + what);
  }
  // RocksDB's failure as a Status of the same kind.
  Status Error(const std::string& what, const rocksdb::Status& s) const {
    const std::string line = "result store " + path + ": " + what + ": " + s.ToString();
    if (s.IsCorruption()) return Status::Corruption(line);
    if (s.IsNoSpace()) return Status::Unavailable(line);
    if (s.IsIOError()) return Status::IOError(line);
    if (s.IsNotFound()) return Status::NotFound(line);
    return Status::Error(line);
  }
  // Points the named handles at the families opened in `names` order.
  void BindHandles(const std::vector<std::string>& names) {
    for (size_t i = 0; i < names.size(); ++i) {
      auto* h = handles[i];
      if (names[i] == kResultsCf) results = h;
      if (names[i] == kByShapeCf) by_shape = h;
      if (names[i] == kBestCf) best = h;
      if (names[i] == kSweepsCf) sweeps = h;
      if (names[i] == kMetaCf) meta = h;
      if (names[i] == kKernelsCf) kernels = h;
    }
  }
  // The one line for a WAL that RocksDB refused to replay; OK when `drops`
  // saw no WAL record dropped (the failure was something else).
  Status WalCorruption(WalDrops& drops) const {
    std::lock_guard<std::mutex> lock(drops.mu);
    if (drops.count == 0) return Status::OK();
    return Status::Corruption("result store " + path + ": write-ahead log " + drops.first_file + " is corrupt (" +
                              (drops.first_reason.empty() ? "unreadable record" : drops.first_reason) +
                              "): restore the store from a backup, or start the coordinator with "
                              "--store-recover to skip the corrupt records");
  }
  // Refuses a database that ends below the marker read before it was opened.
  Status CheckMarker(const std::optional<uint64_t>& marker) const {
    const uint64_t latest = db->GetLatestSequenceNumber();
    if (!marker || latest >= *marker) return Status::OK();
    return Status::Corruption("result store " + path + ": the database ends at sequence " + std::to_string(latest) +
                              " but " + MarkerPath(path) + " records " + std::to_string(*marker) +
                              " as durable (its write-ahead log was deleted or cut short): restore the store "
                              "from a backup, or start the coordinator with --store-recover to keep what is left");
  }
  Status UnsupportedVersion(const std::string& version) const {
    return Error("store format version '" + version + "' is not supported by this build (it reads version " +
                 std::to_string(kStoreFormatVersion) + "); open it with the tunefarm that wrote it");
  }
  // Writes stop short of a full disk: RocksDB that meets ENOSPC in its log
  // leaves the database unwritable (and Debian's build asserts on the next
  // write), so the reserve is checked before each write instead.
  Status CheckWritable() const {
    if (read_only) return Error("store opened read-only");
    const uint64_t reserve = min_free_bytes.load();
    struct statvfs fs {};
    if (reserve > 0 && !memory_env && ::statvfs(path.c_str(), &fs) == 0) {
      const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
      if (free_bytes < reserve) {
        return Status::Unavailable("result store " + path + ": disk nearly full: " +
                                   std::to_string(free_bytes >> 20) + " MiB free, below the reserve of " +
                                   std::to_string(reserve >> 20) + " MiB");
      }
    }
    return Status::OK();
  }

  // Visits rows of `cf` whose key starts with `prefix`, in key order, until
  // `fn` returns false.
  template <typename Fn>
  Status ForPrefix(rocksdb::ColumnFamilyHandle* cf, const std::string& prefix, Fn&& fn) const {
    rocksdb::ReadOptions ro;
    // Every prefix ends with the separator '\0', so bumping that byte to
    // '\1' gives the first key past the prefix; RocksDB then stops at the
    // bound instead of scanning on.
    std::string upper;
    rocksdb::Slice upper_slice;
    if (!prefix.empty()) {
      upper = prefix;
      upper.back() = static_cast<char>(kSep + 1);
      upper_slice = rocksdb::Slice(upper);
      ro.iterate_upper_bound = &upper_slice;
    }
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro, cf));
    for (it->Seek(prefix); it->Valid(); it->Next()) {
      Status st;
      if (!fn(it->key(), it->value(), &st)) {
        if (!st.ok()) return st;
        break;
      }
    }
    if (!it->status().ok()) return Error("scan of " + cf->GetName() + " failed", it->status());
    return Status::OK();
  }

  // Reads the stored best row of `key` (not staged ones); nullopt when
  // there is none or it is unreadable, which lets the next candidate
  // replace it rather than a corrupt row block every future winner.
  std::optional<Measurement> StoredBest(const std::string& key) {
    std::string value;
    if (!db->Get(rocksdb::ReadOptions(), best, key, &value).ok()) return std::nullopt;
    auto m = DecodeMeasurement(value.data(), value.size());
    if (!m.ok() || !BestCandidate(*m)) return std::nullopt;
    return std::move(m).value();
  }

  // The rank of the current best row of `key`, staged rows first.
  // Caller holds put_mu.
  std::optional<BestRank> CurrentBest(const std::string& key, const StagedBest& staged) {
    if (auto it = staged.find(key); it != staged.end()) return it->second;
    if (auto it = best_ranks.find(key); it != best_ranks.end()) return it->second;
    auto m = StoredBest(key);
    if (!m) return std::nullopt;
    best_ranks.emplace(key, BestRank(*m));
    return BestRank(*m);
  }

  // The row of `replaced` was replaced, and that config held the best row of
  // its key: the best row goes to the best candidate among the key's other
  // rows (as this batch leaves them), or is deleted. Stage then offers the
  // new row itself.
  // Caller holds put_mu.
  Status ReplaceBest(const Measurement& replaced, Staging* staging) {
    const StagedRows& staged = staging->rows;
    const std::string best_key = BestKey(replaced);
    const std::string replaced_key = ResultsKey(replaced);
    std::optional<Measurement> next;
    auto offer = [&](const Measurement& m) {
      if (BestCandidate(m) && (!next || BestRank(m).Beats(BestRank(*next)))) next = m;
    };
    Status scan = ForPrefix(results, best_key + kSep, [&](rocksdb::Slice key, rocksdb::Slice value, Status*) {
      const std::string k = key.ToString();
      if (k == replaced_key || staged.count(k)) return true;
      auto m = DecodeMeasurement(value.data(), value.size());
      if (m.ok()) offer(*m);
      return true;
    });
    TUNE_RETURN_IF_ERROR(scan);
    for (const auto& [k, m] : staged) {
      if (k != replaced_key && BestKey(*m) == best_key) offer(*m);
    }
    rocksdb::Status ws;
    if (next) {
      ws = staging->batch.Put(best, best_key, EncodeMeasurement(*next));
      staging->best.insert_or_assign(best_key, BestRank(*next));
    } else {
      ws = staging->batch.Delete(best, best_key);
      staging->best.insert_or_assign(best_key, std::nullopt);
    }
    return ws.ok() ? Status::OK() : Error("cannot stage write", ws);
  }

  // Adds `m` to the staged write unless its key is stored or already
  // staged; a row of a later pass replaces a stored one of an earlier pass.
  // Caller holds put_mu.
  Result<bool> Stage(const Measurement& m, Staging* staging, const ResultStore::Replacing& replacing = {}) {
    TUNE_RETURN_IF_ERROR(CheckKey(m));
    std::string key = ResultsKey(m);
    if (staging->rows.count(key)) return false;
    rocksdb::PinnableSlice existing;
    rocksdb::Status s = db->Get(rocksdb::ReadOptions(), results, key, &existing);
    if (!s.ok() && !s.IsNotFound()) return Error("read of " + Printable(key) + " failed", s);
    // Which row of a key stays: a confirmed row replaces any other, a
    // refined row a screening one (once each); any other arrival is a
    // duplicate.
    const bool replaces = s.ok();
    const Measurement* row = &m;
    if (replaces) {
      auto stored = DecodeMeasurement(existing.data(), existing.size());
      // A failure of a retried class gives way, whatever pass stored it;
      // so does a row of another sweep to a retime's.
      const bool retry = stored.ok() && !stored->Valid() && replacing.retried.count(stored->failure);
      const bool retimed = stored.ok() && !replacing.retime_sweep.empty() && stored->sweep_id != replacing.retime_sweep;
      if (stored.ok() && stored->pass >= m.pass && !retry && !retimed) return false;
      if (!stored.ok() && !m.ReplacesScreening()) return false;
      // The replaced row's screening figure stays with the config: the
      // refine pass weighs refined figures against screening ones by it
      // (not an earlier sweep's: a retime's passes start over).
      const double screen_us = !stored.ok() || retimed        ? 0
                               : !stored->ReplacesScreening() ? stored->median_us
                                                              : stored->screen_us;
      if (screen_us != m.screen_us && std::isfinite(screen_us)) {
        row = &staging->carried.emplace_back(m);
        staging->carried.back().screen_us = screen_us;
      }
    }

    const std::string value = EncodeMeasurement(*row);
    auto check = [&](rocksdb::Status ws) -> Status {
      return ws.ok() ? Status::OK() : Error("cannot stage write", ws);
    };
    TUNE_RETURN_IF_ERROR(check(staging->batch.Put(results, key, value)));
    if (!replaces) TUNE_RETURN_IF_ERROR(check(staging->batch.Put(by_shape, ByShapeKey(m), rocksdb::Slice())));
    const std::string best_key = BestKey(m);
    if (replaces) {
      // The config's old figure may hold the best row: a config that fails
      // when refined or confirmed must not stay the winner, and a confirmed
      // figure may be slower than another config's.
      std::optional<BestRank> holder = CurrentBest(best_key, staging->best);
      if (holder && holder->config_id == m.config_id) TUNE_RETURN_IF_ERROR(ReplaceBest(m, staging));
    }
    if (BestCandidate(m)) {
      std::optional<BestRank> current = CurrentBest(best_key, staging->best);
      if (!current || BestRank(m).Beats(*current)) {
        TUNE_RETURN_IF_ERROR(check(staging->batch.Put(best, best_key, value)));
        staging->best.insert_or_assign(best_key, BestRank(m));
      }
    }
    staging->rows.emplace(std::move(key), row);
    return true;
  }

  // Picks every key's best row again by BestRank, once: stores written
  // before the pass rule picked by the median alone, so a screening row may
  // hold the best of a key that has refined rows, and a later Put compares
  // with that row only. Stamps the store when done.
  Status RepickBestRows() {
    std::string stamp;
    rocksdb::Status s = db->Get(rocksdb::ReadOptions(), meta, kBestRankKey, &stamp);
    if (s.ok() && stamp == kBestRankPass) return Status::OK();
    if (!s.ok() && !s.IsNotFound()) return Error("cannot read the best-row stamp", s);
    rocksdb::WriteBatch batch;
    std::string group;  // best key of the rows read since the last one
    std::optional<Measurement> top;
    auto pick = [&]() -> Status {
      if (group.empty()) return Status::OK();
      rocksdb::Status ws = top ? batch.Put(best, group, EncodeMeasurement(*top)) : batch.Delete(best, group);
      return ws.ok() ? Status::OK() : Error("cannot stage write", ws);
    };
    TUNE_RETURN_IF_ERROR(ForPrefix(results, std::string(), [&](rocksdb::Slice, rocksdb::Slice value, Status* st) {
      auto m = DecodeMeasurement(value.data(), value.size());
      if (!m.ok()) return true;  // as every reader does
      // Rows of one best key are adjacent: it is their results key less
      // the config id.
      if (std::string key = BestKey(*m); key != group) {
        if (Status picked = pick(); !picked.ok()) {
          *st = picked;
          return false;
        }
        group = std::move(key);
        top.reset();
      }
      if (BestCandidate(*m) && (!top || BestRank(*m).Beats(BestRank(*top)))) top = std::move(m).value();
      return true;
    }));
    TUNE_RETURN_IF_ERROR(pick());
    if (rocksdb::Status ws = batch.Put(meta, kBestRankKey, kBestRankPass); !ws.ok())
      return Error("cannot stage write", ws);
    rocksdb::WriteOptions wo;
    wo.sync = true;
    if (rocksdb::Status ws = db->Write(wo, &batch); !ws.ok()) return Error("cannot pick the best rows again", ws);
    best_ranks.clear();
    return Status::OK();
  }

  // Writes the staged rows and, once they are written, their best ranks.
  // Caller holds put_mu.
  Status Write(Staging* staging) {
    if (staging->batch.Count() == 0) return Status::OK();
    rocksdb::Status s = db->Write(rocksdb::WriteOptions(), &staging->batch);
    if (!s.ok()) return Error("write failed", s);
    for (const auto& [key, rank] : staging->best) {
      if (rank) best_ranks.insert_or_assign(key, *rank);
      else best_ranks.erase(key);
    }
    MaybeMarkDurable();
    return Status::OK();
  }
};

}  // namespace tune
