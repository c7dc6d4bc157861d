// ResultStore on RocksDB: opening and closing, and the rows (put, get,
// scan, best, counts), leases, the disk reserve and counters. The layout is
// described in store/result_store.h; the records beside the rows are in
// result_store_records.cc, the shared internals in result_store_impl.h.
#include "store/result_store.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string_view>

#include "store/records.h"
#include "store/result_store_impl.h"

namespace tune {

ResultStore::ResultStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ResultStore::~ResultStore() {
  if (Status st = Close(); !st.ok()) log::Warn("store", st.message());
}

Status ResultStore::Close() {
  Impl& impl = *impl_;
  if (impl.db == nullptr) return Status::OK();
  Status result;
  if (!impl.read_only) {
    // RocksDB's own close leaves memtables in the WAL (it flushes at close
    // only when the WAL is off): a stop that lost or damaged the WAL
    // afterwards would lose them. Flushed, the WAL holds nothing needed.
    Status room = impl.CheckWritable();
    if (room.ok()) {
      rocksdb::FlushOptions fo;
      fo.wait = true;
      fo.allow_write_stall = true;
      rocksdb::Status s = impl.db->Flush(fo, impl.handles);
      if (!s.ok()) result = impl.Error("cannot flush at close (the rows stay in the write-ahead log)", s);
    } else {
      result = Status::Unavailable(room.message() +
                                   "; not flushed or synced at close, the rows stay in the write-ahead log");
    }
    if (room.ok())
      if (Status marked = impl.MarkDurable(); !marked.ok() && result.ok()) result = marked;
  }
  impl.CloseDb();
  return result;
}

bool ResultStore::read_only() const { return impl_->read_only; }

const std::string& ResultStore::recovery_report() const { return impl_->recovery_report; }

Result<std::unique_ptr<ResultStore>> ResultStore::OpenReadOnly(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->read_only = true;

  rocksdb::Options options;
  // A writer's compactions delete table files; opening them all now keeps
  // this handle's view readable after they are gone from the directory.
  options.max_open_files = -1;
  // A writer appending while this handle reads may leave a torn last record;
  // anything else that fails its checksum is refused, as Open does.
  options.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  std::vector<std::string> names;
  rocksdb::Status s = rocksdb::DB::ListColumnFamilies(options, path, &names);
  if (!s.ok()) return impl->Error("cannot open read-only: no store at this path", s);
  auto drops = std::make_shared<WalDrops>();
  WatchWalDrops(&options, drops);
  for (const char* want : {kResultsCf, kByShapeCf, kBestCf, kSweepsCf, kMetaCf}) {
    bool found = false;
    for (const auto& n : names) found = found || n == want;
    if (!found) {
      return impl->Error(std::string("not a tunefarm result store (no column family '") + want + "')");
    }
  }
  const rocksdb::ColumnFamilyOptions cf_options = StoreColumnFamilyOptions(options);
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& n : names) descriptors.emplace_back(n, cf_options);
  for (int attempt = 1;; ++attempt) {
    // Read before the database: the writer syncs its WAL before it raises
    // the marker, so the WAL read below holds at least what the marker says
    // unless the writer flushed and deleted that WAL meanwhile: a second
    // look settles that race.
    auto marker = ReadMarker(path);
    if (!marker.ok()) return marker.status();
    s = rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(options), path, descriptors, &impl->handles,
                                     &impl->db);
    if (!s.ok()) {
      if (Status wal = impl->WalCorruption(*drops); !wal.ok()) return wal;
      return impl->Error("cannot open read-only", s);
    }
    Status st = impl->CheckMarker(*marker);
    if (st.ok()) break;
    if (attempt == 3) return st;
    impl->CloseDb();
  }
  impl->BindHandles(names);

  std::string version;
  s = impl->db->Get(rocksdb::ReadOptions(), impl->meta, kFormatVersionKey, &version);
  if (s.IsNotFound()) return impl->Error("not a tunefarm result store (no format version)");
  if (!s.ok()) return impl->Error("cannot read format version", s);
  if (version != std::to_string(kStoreFormatVersion)) return impl->UnsupportedVersion(version);
  return std::unique_ptr<ResultStore>(new ResultStore(std::move(impl)));
}

Result<std::unique_ptr<ResultStore>> ResultStore::Open(const std::string& path,
                                                       const StoreOpenOptions& open_options) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;

  // RocksDB creates only the last path component; a fresh host's
  // /var/lib/tunefarm/store should not need a mkdir first. Failures surface
  // from DB::Open with RocksDB's own message.
  rocksdb::Options options;
  if (open_options.in_memory) {
    impl->memory_env.reset(rocksdb::NewMemEnv(rocksdb::Env::Default()));
    options.env = impl->memory_env.get();
  } else {
    std::error_code mkdir_error;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), mkdir_error);
  }
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  // RocksDB's default (point in time) replays a WAL up to its first bad
  // record and silently drops the rest: a flipped byte would cost every row
  // after it. kTolerateCorruptedTailRecords refuses a record that fails its
  // checksum anywhere and tolerates only a torn last record, which a crash
  // in mid-write leaves and which held no write the marker calls durable
  // (a tail cut deeper than that is refused by the marker check below).
  // kAbsoluteConsistency would also refuse that torn tail, making every
  // power loss a manual recovery.
  options.wal_recovery_mode = open_options.recover ? rocksdb::WALRecoveryMode::kSkipAnyCorruptedRecords
                                                   : rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  auto marker = open_options.in_memory ? Result<std::optional<uint64_t>>(std::optional<uint64_t>()) : ReadMarker(path);
  if (!marker.ok() && !open_options.recover) return marker.status();
  auto drops = std::make_shared<WalDrops>();

  // RocksDB refuses to open a database without naming every column family
  // it holds, so families from newer builds are opened too (and left alone).
  std::vector<std::string> names;
  const bool existed = rocksdb::DB::ListColumnFamilies(options, path, &names).ok();
  bool had_meta = false;
  for (const char* want : {rocksdb::kDefaultColumnFamilyName.c_str(), kResultsCf, kByShapeCf,
                           kBestCf, kSweepsCf, kMetaCf, kKernelsCf}) {
    bool found = false;
    for (const auto& n : names) found = found || n == want;
    if (found && std::string_view(want) == kMetaCf) had_meta = true;
    if (!found) names.emplace_back(want);
  }

  WatchWalDrops(&options, drops);
  const rocksdb::ColumnFamilyOptions cf_options = StoreColumnFamilyOptions(options);
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& n : names) descriptors.emplace_back(n, cf_options);
  rocksdb::Status s =
      rocksdb::DB::Open(rocksdb::DBOptions(options), path, descriptors, &impl->handles, &impl->db);
  if (!s.ok()) {
    if (IsLockError(s)) {
      return impl->Error(
          "locked by another process (or already open in this one); only one coordinator may "
          "own a store (" + s.ToString() + ")");
    }
    if (Status wal = impl->WalCorruption(*drops); !wal.ok()) return wal;
    return impl->Error("cannot open", s);
  }
  impl->BindHandles(names);
  std::vector<std::string> recovered;
  if (open_options.recover) {
    std::lock_guard<std::mutex> lock(drops->mu);
    if (drops->count) {
      recovered.push_back("skipped " + std::to_string(drops->bytes) + " bytes of corrupt write-ahead log (" +
                          drops->first_file + (drops->count > 1 ? " and more" : "") + ")");
    }
  }
  if (!marker.ok()) {
    recovered.push_back(marker.status().message().substr(0, marker.status().message().find(": restore")) +
                        "; replaced");
  } else if (Status st = impl->CheckMarker(*marker); !st.ok()) {
    if (!open_options.recover) return st;
    recovered.push_back("the database ends at sequence " + std::to_string(impl->db->GetLatestSequenceNumber()) +
                        ", below the " + std::to_string(**marker) + " that " + kStoreDurableMarker +
                        " recorded; accepted");
  }
  // A flipped byte in a table file would otherwise pass unnoticed until a
  // read or a compaction met it, and then fail every write that followed:
  // refused here with RocksDB's message, which names the file.
  s = impl->db->VerifyChecksum();
  if (!s.ok()) return impl->Error("checksum or corruption error (restore the store from a copy)", s);

  const std::string want_version = std::to_string(kStoreFormatVersion);
  std::string version;
  s = impl->db->Get(rocksdb::ReadOptions(), impl->meta, kFormatVersionKey, &version);
  if (s.ok()) {
    if (version != want_version) return impl->UnsupportedVersion(version);
  } else if (s.IsNotFound()) {
    // Only a store we just created may be stamped: an existing database
    // without our metadata is someone else's, and writing into it would be
    // worse than refusing.
    if (existed && !had_meta) {
      std::unique_ptr<rocksdb::Iterator> it(impl->db->NewIterator(rocksdb::ReadOptions()));
      it->SeekToFirst();
      if (it->Valid()) return impl->Error("not a tunefarm result store (no format version)");
    }
    bool has_results = false;
    {
      std::unique_ptr<rocksdb::Iterator> it(impl->db->NewIterator(rocksdb::ReadOptions(), impl->results));
      it->SeekToFirst();
      has_results = it->Valid();
    }
    if (has_results) return impl->Error("store holds results but no format version");
    rocksdb::WriteOptions wo;
    wo.sync = true;
    s = impl->db->Put(wo, impl->meta, kFormatVersionKey, want_version);
    if (!s.ok()) return impl->Error("cannot write format version", s);
  } else {
    return impl->Error("cannot read format version", s);
  }
  TUNE_RETURN_IF_ERROR(impl->RepickBestRows());
  std::unique_ptr<ResultStore> store(new ResultStore(std::move(impl)));
  // Not fatal (a full disk must not keep the store from opening): until it
  // succeeds, ForEachOp reads the ops from the sweeps, and the next open
  // tries again.
  if (Status st = store->IndexOps(); !st.ok()) {
    std::fprintf(stderr, "result store %s: op records not made yet: %s\n", path.c_str(), st.message().c_str());
  }
  // From here the marker holds this store to what it holds now (after a
  // recovery, to what was kept).
  if (Status st = store->impl_->MarkDurable(); !st.ok()) log::Warn("store", st.message());
  if (!recovered.empty()) {
    auto rows = store->CountResults();
    std::string report = "result store " + path + " recovered: ";
    for (size_t i = 0; i < recovered.size(); ++i) report += (i ? "; " : "") + recovered[i];
    report += "; kept " + (rows.ok() ? std::to_string(*rows) : std::string("an unknown number of")) +
              " result rows";
    store->impl_->recovery_report = std::move(report);
  }
  return store;
}

Result<bool> ResultStore::Put(const Measurement& m) {
  TUNE_RETURN_IF_ERROR(impl_->CheckWritable());
  std::lock_guard<std::mutex> lock(impl_->put_mu);
  Staging staging;
  Result<bool> added = impl_->Stage(m, &staging);
  if (!added.ok() || !*added) return added;
  TUNE_RETURN_IF_ERROR(impl_->Write(&staging));
  return true;
}

Status ResultStore::PutBatch(const std::vector<Measurement>& ms, size_t* stored, const Replacing& replacing) {
  if (stored) *stored = 0;
  TUNE_RETURN_IF_ERROR(impl_->CheckWritable());
  std::lock_guard<std::mutex> lock(impl_->put_mu);
  Staging staging;
  size_t added = 0;
  for (const auto& m : ms) {
    Result<bool> r = impl_->Stage(m, &staging, replacing);
    if (!r.ok()) return r.status();
    if (*r) ++added;
  }
  TUNE_RETURN_IF_ERROR(impl_->Write(&staging));
  if (stored) *stored = added;
  return Status::OK();
}

std::optional<Measurement> ResultStore::Get(const std::string& gpu_model, const std::string& op,
                                            const std::string& dtype, const std::string& shape,
                                            const std::string& kernel_hash,
                                            const std::string& config_id) {
  rocksdb::PinnableSlice value;
  const std::string key = JoinKey({gpu_model, op, dtype, shape, kernel_hash, config_id});
  if (!impl_->db->Get(rocksdb::ReadOptions(), impl_->results, key, &value).ok()) return std::nullopt;
  auto m = DecodeMeasurement(value.data(), value.size());
  if (!m.ok()) return std::nullopt;
  return std::move(m).value();
}

Status ResultStore::Scan(const ResultFilter& f, const std::function<bool(const Measurement&)>& fn) {
  TUNE_RETURN_IF_ERROR(CheckFilter(f));
  Impl& impl = *impl_;
  auto decode = [&](rocksdb::Slice key, rocksdb::Slice value, Status* st) -> std::optional<Measurement> {
    auto m = DecodeMeasurement(value.data(), value.size());
    if (!m.ok()) {
      *st = impl.Error("corrupt record at " + Printable(key) + ": " + m.status().message());
      return std::nullopt;
    }
    return std::move(m).value();
  };

  if (f.gpu_model.empty() && !f.op.empty()) {
    // Every GPU's rows for an (op[, dtype[, shape]]): walk the index, then
    // fetch each row from results.
    const std::string prefix = LeadingPrefix({f.op, f.dtype, f.shape});
    return impl.ForPrefix(impl.by_shape, prefix, [&](rocksdb::Slice key, rocksdb::Slice, Status* st) {
      std::array<std::string_view, 6> p;  // op, dtype, shape, gpu, kernel_hash, config_id
      if (!SplitKey(key, &p)) return true;
      if (!Matches(f.dtype, p[1]) || !Matches(f.shape, p[2]) || !Matches(f.kernel_hash, p[4])) {
        return true;
      }
      rocksdb::PinnableSlice value;
      const std::string rkey = JoinKey({p[3], p[0], p[1], p[2], p[4], p[5]});
      rocksdb::Status s = impl.db->Get(rocksdb::ReadOptions(), impl.results, rkey, &value);
      if (s.IsNotFound()) return true;  // index and rows are written together; tolerate a stray
      if (!s.ok()) {
        *st = impl.Error("read of " + Printable(rkey) + " failed", s);
        return false;
      }
      auto m = decode(rkey, value, st);
      if (!m) return false;
      return fn(*m);
    });
  }

  const std::string prefix =
      LeadingPrefix({f.gpu_model, f.op, f.dtype, f.shape, f.kernel_hash});
  return impl.ForPrefix(impl.results, prefix, [&](rocksdb::Slice key, rocksdb::Slice value, Status* st) {
    std::array<std::string_view, 6> p;  // gpu, op, dtype, shape, kernel_hash, config_id
    if (!SplitKey(key, &p)) return true;
    if (!Matches(f.gpu_model, p[0]) || !Matches(f.op, p[1]) || !Matches(f.dtype, p[2]) ||
        !Matches(f.shape, p[3]) || !Matches(f.kernel_hash, p[4])) {
      return true;
    }
    auto m = decode(key, value, st);
    if (!m) return false;
    return fn(*m);
  });
}

Result<std::vector<Measurement>> ResultStore::Best(const ResultFilter& f) {
  TUNE_RETURN_IF_ERROR(CheckFilter(f));
  Impl& impl = *impl_;
  std::vector<Measurement> out;
  const std::string prefix =
      LeadingPrefix({f.gpu_model, f.op, f.dtype, f.shape, f.kernel_hash});
  Status st = impl.ForPrefix(impl.best, prefix, [&](rocksdb::Slice key, rocksdb::Slice value, Status* err) {
    std::array<std::string_view, 5> p;  // gpu, op, dtype, shape, kernel_hash
    if (!SplitKey(key, &p)) return true;
    if (!Matches(f.gpu_model, p[0]) || !Matches(f.op, p[1]) || !Matches(f.dtype, p[2]) ||
        !Matches(f.shape, p[3]) || !Matches(f.kernel_hash, p[4])) {
      return true;
    }
    auto m = DecodeMeasurement(value.data(), value.size());
    if (!m.ok()) {
      *err = impl.Error("corrupt best record at " + Printable(key) + ": " + m.status().message());
      return false;
    }
    out.push_back(std::move(m).value());
    return true;
  });
  if (!st.ok()) return st;
  return out;
}

Result<uint64_t> ResultStore::CountResults() {
  uint64_t n = 0;
  Status st = impl_->ForPrefix(impl_->results, std::string(), [&](rocksdb::Slice, rocksdb::Slice, Status*) {
    ++n;
    return true;
  });
  if (!st.ok()) return st;
  return n;
}

uint64_t ResultStore::ApproximateBytes() {
  uint64_t total = 0;
  for (rocksdb::ColumnFamilyHandle* h : impl_->handles) {
    for (const char* property : {"rocksdb.total-sst-files-size", "rocksdb.cur-size-all-mem-tables"}) {
      uint64_t v = 0;
      if (impl_->db->GetIntProperty(h, property, &v)) total += v;
    }
  }
  return total;
}


namespace {
// "lease\0<16 hex digits>": ForPrefix's prefixes end with the separator.
const std::string kLeasePrefix = std::string("lease") + kSep;
std::string LeaseKey(uint64_t unit_id) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(unit_id));
  return kLeasePrefix + buf;
}
}  // namespace

Status ResultStore::PutLease(uint64_t unit_id, const std::string& bytes) {
  TUNE_RETURN_IF_ERROR(impl_->CheckWritable());
  rocksdb::Status s = impl_->db->Put(rocksdb::WriteOptions(), impl_->meta, LeaseKey(unit_id), bytes);
  if (s.ok()) impl_->MaybeMarkDurable();
  return s.ok() ? Status::OK() : impl_->Error("write of lease " + std::to_string(unit_id) + " failed", s);
}

Status ResultStore::DeleteLease(uint64_t unit_id) {
  TUNE_RETURN_IF_ERROR(impl_->CheckWritable());
  rocksdb::Status s = impl_->db->Delete(rocksdb::WriteOptions(), impl_->meta, LeaseKey(unit_id));
  if (s.ok()) impl_->MaybeMarkDurable();
  return s.ok() ? Status::OK() : impl_->Error("delete of lease " + std::to_string(unit_id) + " failed", s);
}

Status ResultStore::ForEachLease(const std::function<void(uint64_t unit_id, const std::string& bytes)>& fn) {
  return impl_->ForPrefix(impl_->meta, kLeasePrefix, [&](rocksdb::Slice key, rocksdb::Slice value, Status*) {
    const std::string hex = key.ToString().substr(kLeasePrefix.size());
    char* end = nullptr;
    const unsigned long long id = std::strtoull(hex.c_str(), &end, 16);
    if (hex.size() == 16 && *end == '\0') fn(id, value.ToString());
    return true;
  });
}

void ResultStore::set_min_free_bytes(uint64_t bytes) {
  impl_->min_free_bytes = std::max(bytes, kMinStoreReserveBytes);
}

uint64_t ResultStore::min_free_bytes() const { return impl_->min_free_bytes.load(); }

Status ResultStore::Recover() {
  TUNE_RETURN_IF_ERROR(impl_->CheckWritable());
  // After a write error (disk full) RocksDB keeps the database read-only
  // until told to resume; Resume() fails while the cause persists.
  rocksdb::Status s = impl_->db->Resume();
  if (!s.ok()) return impl_->Error("not writable yet", s);
  rocksdb::WriteOptions wo;
  wo.sync = true;
  s = impl_->db->Put(wo, impl_->meta, "probe", std::to_string(NowUnixSeconds()));
  if (!s.ok()) return impl_->Error("not writable yet", s);
  (void)impl_->MarkDurable();
  return Status::OK();
}

Result<uint64_t> ResultStore::IncrementCounter(const std::string& name) {
  TUNE_RETURN_IF_ERROR(impl_->CheckWritable());
  const std::string key = "counter/" + name;
  std::lock_guard<std::mutex> lock(impl_->put_mu);
  std::string value;
  rocksdb::Status s = impl_->db->Get(rocksdb::ReadOptions(), impl_->meta, key, &value);
  if (!s.ok() && !s.IsNotFound()) return impl_->Error("read of " + key + " failed", s);
  uint64_t count = 0;
  if (s.ok()) {
    char* end = nullptr;
    count = std::strtoull(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0') return impl_->Error("meta " + key + " holds '" + value + "', not a count");
  }
  ++count;
  rocksdb::WriteOptions wo;
  wo.sync = true;
  s = impl_->db->Put(wo, impl_->meta, key, std::to_string(count));
  if (!s.ok()) return impl_->Error("write of " + key + " failed", s);
  (void)impl_->MarkDurable();  // synced already: a failure only leaves the marker behind
  return count;
}

}  // namespace tune
