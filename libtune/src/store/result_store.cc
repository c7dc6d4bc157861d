// ResultStore on RocksDB. See tune/result_store.h for the key layout.
// Long on purpose: one RocksDB schema (families, keys, the best-so-far
// index) and every path that reads or writes it, so that the invariants
// between the families are kept in one file.
#include "tune/result_store.h"
#include "tune/records.h"

#include <rocksdb/db.h>
#include <sys/statvfs.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "tune/protocol.h"

namespace tune {
namespace {

constexpr char kResultsCf[] = "results";
constexpr char kByShapeCf[] = "by_shape";
constexpr char kBestCf[] = "best";
constexpr char kSweepsCf[] = "sweeps";
constexpr char kMetaCf[] = "meta";
// Added after the first stores: a read-only handle on an older store has none.
constexpr char kKernelsCf[] = "kernels";
constexpr char kFormatVersionKey[] = "format_version";
// Present once the best rows follow the pass rule (Measurement::RanksAhead).
constexpr char kBestRankKey[] = "best_rank";
constexpr char kBestRankPass[] = "pass";

constexpr char kSep = '\0';

std::string JoinKey(std::initializer_list<std::string_view> parts) {
  std::string key;
  size_t n = 0;
  for (auto p : parts) n += p.size() + 1;
  key.reserve(n);
  bool first = true;
  for (auto p : parts) {
    if (!first) key += kSep;
    first = false;
    key.append(p);
  }
  return key;
}

std::string ResultsKey(const Measurement& m) {
  return JoinKey({m.gpu_model, m.op, m.dtype, m.shape, m.kernel_hash, m.config_id});
}
std::string ByShapeKey(const Measurement& m) {
  return JoinKey({m.op, m.dtype, m.shape, m.gpu_model, m.kernel_hash, m.config_id});
}
std::string BestKey(const Measurement& m) {
  return JoinKey({m.gpu_model, m.op, m.dtype, m.shape, m.kernel_hash});
}

// Splits a stored key into exactly N parts; false when the key has another
// shape (a foreign or corrupt row).
template <size_t N>
bool SplitKey(rocksdb::Slice key, std::array<std::string_view, N>* out) {
  std::string_view rest(key.data(), key.size());
  for (size_t i = 0; i < N; ++i) {
    size_t pos = rest.find(kSep);
    if (i + 1 == N) {
      if (pos != std::string_view::npos) return false;
      (*out)[i] = rest;
    } else {
      if (pos == std::string_view::npos) return false;
      (*out)[i] = rest.substr(0, pos);
      rest.remove_prefix(pos + 1);
    }
  }
  return true;
}

// Keys shown to people: NUL separators as '/'.
std::string Printable(rocksdb::Slice key) {
  std::string s = key.ToString();
  for (char& c : s)
    if (c == kSep) c = '/';
  return s;
}

// The longest run of set fields from the front of `fields` becomes the scan
// prefix (each part followed by the separator, so "h100" never matches
// "h100-nvl"); fields after the first empty one are checked per row.
std::string LeadingPrefix(std::initializer_list<std::string_view> fields) {
  std::string prefix;
  for (auto f : fields) {
    if (f.empty()) break;
    prefix.append(f);
    prefix += kSep;
  }
  return prefix;
}

bool Matches(std::string_view want, std::string_view have) { return want.empty() || want == have; }

Status CheckKeyField(const char* name, const std::string& value) {
  if (value.empty()) return Status::Error(std::string("measurement has no ") + name);
  if (value.find(kSep) != std::string::npos) {
    return Status::Error(std::string("measurement ") + name + " contains a NUL byte");
  }
  return Status::OK();
}

Status CheckKey(const Measurement& m) {
  TUNE_RETURN_IF_ERROR(CheckKeyField("gpu_model", m.gpu_model));
  TUNE_RETURN_IF_ERROR(CheckKeyField("op", m.op));
  TUNE_RETURN_IF_ERROR(CheckKeyField("dtype", m.dtype));
  TUNE_RETURN_IF_ERROR(CheckKeyField("shape", m.shape));
  TUNE_RETURN_IF_ERROR(CheckKeyField("kernel_hash", m.kernel_hash));
  TUNE_RETURN_IF_ERROR(CheckKeyField("config_id", m.config_id));
  return Status::OK();
}

Status CheckFilter(const ResultFilter& f) {
  for (const std::string* s : {&f.gpu_model, &f.op, &f.dtype, &f.shape, &f.kernel_hash}) {
    if (s->find(kSep) != std::string::npos) return Status::Error("result filter contains a NUL byte");
  }
  return Status::OK();
}

bool IsLockError(const rocksdb::Status& s) {
  if (!s.IsIOError()) return false;
  const std::string text = s.ToString();
  return text.find("LOCK") != std::string::npos || text.find("lock") != std::string::npos;
}

// A valid measurement whose figure can be compared. NaN would never lose a
// comparison and would stay best forever.
bool BestCandidate(const Measurement& m) { return m.Valid() && std::isfinite(m.median_us); }

// How a best candidate ranks for its key's best row (Measurement::
// RanksAhead), kept without the rest of the row.
struct BestRank {
  bool unchecked = false;
  int pass = 0;  // Measurement::Pass
  double median_us = 0;
  std::string config_id;  // whose row it is
  explicit BestRank(const Measurement& m)
      : unchecked(m.unchecked), pass(m.Pass()), median_us(m.median_us), config_id(m.config_id) {}
  bool Beats(const BestRank& other) const {
    if (unchecked != other.unchecked) return !unchecked;
    if (pass != other.pass) return pass > other.pass;
    return median_us < other.median_us;
  }
};
using BestRanks = std::unordered_map<std::string, BestRank>;
// Best rows a batch writes: nullopt where it deletes one.
using StagedBest = std::unordered_map<std::string, std::optional<BestRank>>;
// Rows a batch writes, by results key (pointing into the caller's batch or
// Staging::carried).
using StagedRows = std::unordered_map<std::string, const Measurement*>;

// One atomic write being put together (ResultStore::Impl::Stage).
struct Staging {
  rocksdb::WriteBatch batch;
  StagedRows rows;
  StagedBest best;
  // Rows written with what the store adds to them (Measurement::screen_us);
  // a deque, as `rows` points into it.
  std::deque<Measurement> carried;
};


// Every Put first asks whether its key exists, and almost always it does
// not: Bloom filters answer that without reading data blocks, and (for keys
// still in the memtable) without walking its skip list, whose keys share
// long prefixes and cost a memcmp each.
rocksdb::ColumnFamilyOptions StoreColumnFamilyOptions(const rocksdb::Options& options) {
  rocksdb::BlockBasedTableOptions table;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  rocksdb::ColumnFamilyOptions cf_options(options);
  cf_options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  cf_options.memtable_prefix_bloom_size_ratio = 0.1;
  cf_options.memtable_whole_key_filtering = true;
  return cf_options;
}

}  // namespace

struct ResultStore::Impl {
  std::string path;
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

  ~Impl() {
    if (db == nullptr) return;
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
    db->Close();
    delete db;
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
    if (reserve > 0 && ::statvfs(path.c_str(), &fs) == 0) {
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
  Result<bool> Stage(const Measurement& m, Staging* staging) {
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
      if (stored.ok() && stored->Pass() >= m.Pass()) return false;
      if (!stored.ok() && m.Pass() == 0) return false;
      // The replaced row's screening figure stays with the config: the
      // refine pass weighs refined figures against screening ones by it.
      const double screen_us = !stored.ok()            ? 0
                               : stored->Pass() == 0 ? stored->median_us
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
    return Status::OK();
  }
};

ResultStore::ResultStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ResultStore::~ResultStore() = default;

bool ResultStore::read_only() const { return impl_->read_only; }

Result<std::unique_ptr<ResultStore>> ResultStore::OpenReadOnly(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->read_only = true;

  rocksdb::Options options;
  // A writer's compactions delete table files; opening them all now keeps
  // this handle's view readable after they are gone from the directory.
  options.max_open_files = -1;
  std::vector<std::string> names;
  rocksdb::Status s = rocksdb::DB::ListColumnFamilies(options, path, &names);
  if (!s.ok()) return impl->Error("cannot open read-only: no store at this path", s);
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
  s = rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(options), path, descriptors, &impl->handles,
                                   &impl->db);
  if (!s.ok()) return impl->Error("cannot open read-only", s);
  impl->BindHandles(names);

  std::string version;
  s = impl->db->Get(rocksdb::ReadOptions(), impl->meta, kFormatVersionKey, &version);
  if (s.IsNotFound()) return impl->Error("not a tunefarm result store (no format version)");
  if (!s.ok()) return impl->Error("cannot read format version", s);
  if (version != std::to_string(kStoreFormatVersion)) return impl->UnsupportedVersion(version);
  return std::unique_ptr<ResultStore>(new ResultStore(std::move(impl)));
}

Result<std::unique_ptr<ResultStore>> ResultStore::Open(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;

  // RocksDB creates only the last path component; a fresh host's
  // /var/lib/tunefarm/store should not need a mkdir first. Failures surface
  // from DB::Open with RocksDB's own message.
  std::error_code mkdir_error;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), mkdir_error);

  rocksdb::Options options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  // The store lives as long as the farm; keep its log files bounded.
  options.keep_log_file_num = 5;
  options.max_log_file_size = 16u << 20;

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
    return impl->Error("cannot open", s);
  }
  impl->BindHandles(names);
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

Status ResultStore::PutBatch(const std::vector<Measurement>& ms, size_t* stored) {
  if (stored) *stored = 0;
  TUNE_RETURN_IF_ERROR(impl_->CheckWritable());
  std::lock_guard<std::mutex> lock(impl_->put_mu);
  Staging staging;
  size_t added = 0;
  for (const auto& m : ms) {
    Result<bool> r = impl_->Stage(m, &staging);
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

Status ResultStore::PutSweep(const std::string& sweep_id, const std::string& bytes) {
  TUNE_RETURN_IF_ERROR(impl_->CheckWritable());
  if (sweep_id.empty()) return impl_->Error("sweep id is empty");
  // Synced: a sweep's state changes seldom, and a host crash must not bring
  // back a finished sweep or lose an accepted one.
  rocksdb::WriteOptions wo;
  wo.sync = true;
  rocksdb::Status s = impl_->db->Put(wo, impl_->sweeps, sweep_id, bytes);
  return s.ok() ? Status::OK() : impl_->Error("write of sweep " + sweep_id + " failed", s);
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
  return s.ok() ? Status::OK() : impl_->Error("write of lease " + std::to_string(unit_id) + " failed", s);
}

Status ResultStore::DeleteLease(uint64_t unit_id) {
  TUNE_RETURN_IF_ERROR(impl_->CheckWritable());
  rocksdb::Status s = impl_->db->Delete(rocksdb::WriteOptions(), impl_->meta, LeaseKey(unit_id));
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

void ResultStore::set_min_free_bytes(uint64_t bytes) { impl_->min_free_bytes = bytes; }

Status ResultStore::Recover() {
  TUNE_RETURN_IF_ERROR(impl_->CheckWritable());
  // After a write error (disk full) RocksDB keeps the database read-only
  // until told to resume; Resume() fails while the cause persists.
  rocksdb::Status s = impl_->db->Resume();
  if (!s.ok()) return impl_->Error("not writable yet", s);
  rocksdb::WriteOptions wo;
  wo.sync = true;
  s = impl_->db->Put(wo, impl_->meta, "probe", std::to_string(std::time(nullptr)));
  return s.ok() ? Status::OK() : impl_->Error("not writable yet", s);
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
  return count;
}

std::optional<std::string> ResultStore::GetSweep(const std::string& sweep_id) {
  std::string value;
  if (!impl_->db->Get(rocksdb::ReadOptions(), impl_->sweeps, sweep_id, &value).ok()) return std::nullopt;
  return value;
}

namespace {

const std::string kOpPrefix = std::string("op") + kSep;
// Set once the op records were made from the sweep records (IndexOps).
constexpr char kOpsIndexedKey[] = "ops_indexed";

// "op\0<name>\0<digest of the package>": one record per (name, package).
std::string OpKey(const std::string& name, const OpPackage& package) {
  return kOpPrefix + name + kSep + PackageDigest(package);
}

// The op records of a sweep record: its packages, submitted when the sweep
// was (SweepSubmittedUnix).
std::vector<OpRecord> OpsOfSweep(const std::string& sweep_id, const std::string& bytes) {
  auto rec = DecodeSweepRecord(bytes);
  if (!rec.ok()) return {};
  const int64_t submitted = SweepSubmittedUnix(sweep_id);
  std::vector<OpRecord> out;
  for (size_t i = 0; i < rec->submit.ops.size() && i < rec->submit.op_packages.size(); ++i) {
    out.push_back(OpRecord{rec->submit.ops[i], submitted, rec->submit.op_packages[i]});
  }
  return out;
}

}  // namespace

Status ResultStore::PutOp(const std::string& name, int64_t submitted_unix, const OpPackage& package) {
  TUNE_RETURN_IF_ERROR(impl_->CheckWritable());
  if (name.empty()) return impl_->Error("op record without a name");
  rocksdb::Status s = impl_->db->Put(rocksdb::WriteOptions(), impl_->meta, OpKey(name, package),
                                     EncodeOpRecord(OpRecord{name, submitted_unix, package}));
  return s.ok() ? Status::OK() : impl_->Error("write of op " + name + " failed", s);
}

Status ResultStore::ForEachOp(const std::function<void(const OpRecord& op)>& fn) {
  std::string indexed;
  if (!impl_->db->Get(rocksdb::ReadOptions(), impl_->meta, kOpsIndexedKey, &indexed).ok()) {
    // Written before op records: read them from the sweeps.
    return ForEachSweep([&](const std::string& id, const std::string& bytes) {
      for (const OpRecord& op : OpsOfSweep(id, bytes)) fn(op);
    });
  }
  return impl_->ForPrefix(impl_->meta, kOpPrefix, [&](rocksdb::Slice, rocksdb::Slice value, Status*) {
    auto op = DecodeOpRecord(value.data(), value.size());
    if (op.ok()) fn(*op);
    return true;
  });
}

Status ResultStore::IndexOps() {
  std::string indexed;
  if (impl_->db->Get(rocksdb::ReadOptions(), impl_->meta, kOpsIndexedKey, &indexed).ok()) return Status::OK();
  std::vector<OpRecord> ops;
  TUNE_RETURN_IF_ERROR(ForEachSweep([&](const std::string& id, const std::string& bytes) {
    for (OpRecord& op : OpsOfSweep(id, bytes)) ops.push_back(std::move(op));
  }));
  for (const OpRecord& op : ops) TUNE_RETURN_IF_ERROR(PutOp(op.name, op.submitted_unix, op.package));
  rocksdb::WriteOptions wo;
  wo.sync = true;
  rocksdb::Status s = impl_->db->Put(wo, impl_->meta, kOpsIndexedKey, "1");
  return s.ok() ? Status::OK() : impl_->Error("cannot mark op records made", s);
}

Status ResultStore::ForEachSweep(
    const std::function<void(const std::string& id, const std::string& bytes)>& fn) {
  return impl_->ForPrefix(impl_->sweeps, std::string(), [&](rocksdb::Slice key, rocksdb::Slice value, Status*) {
    fn(key.ToString(), value.ToString());
    return true;
  });
}

Status ResultStore::PutKernel(const KernelImage& k) {
  TUNE_RETURN_IF_ERROR(impl_->CheckWritable());
  TUNE_RETURN_IF_ERROR(CheckKernelImage(k));
  std::lock_guard<std::mutex> lock(impl_->put_mu);
  const std::string key = k.Key();
  std::string stored;
  rocksdb::Status s = impl_->db->Get(rocksdb::ReadOptions(), impl_->kernels, key, &stored);
  if (s.ok()) {
    auto old = DecodeKernelImage(stored.data(), stored.size());
    if (old.ok() && old->sha256 == k.sha256) return Status::OK();
    if (old.ok()) {
      return Status::InvalidArgument("kernel image " + key + ": sha256 " + k.sha256 + " differs from the stored " +
                                     old->sha256 + " (kept)");
    }
  } else if (!s.IsNotFound()) {
    return impl_->Error("read of kernel " + key + " failed", s);
  }
  s = impl_->db->Put(rocksdb::WriteOptions(), impl_->kernels, key, EncodeKernelImage(k));
  return s.ok() ? Status::OK() : impl_->Error("write of kernel " + key + " failed", s);
}

namespace {
std::string ProfileKey(const std::string& gpu_model, const std::string& op, const std::string& dtype,
                       const std::string& shape, const std::string& kernel_hash, const std::string& config_id) {
  return JoinKey({"profile", gpu_model, op, dtype, shape, kernel_hash, config_id});
}
}  // namespace

Status ResultStore::PutProfile(const KernelProfile& p) {
  TUNE_RETURN_IF_ERROR(impl_->CheckWritable());
  TUNE_RETURN_IF_ERROR(CheckProfile(p));
  const std::string key = ProfileKey(p.gpu_model, p.op, p.dtype, p.shape, p.kernel_hash, p.config_id);
  rocksdb::Status s = impl_->db->Put(rocksdb::WriteOptions(), impl_->meta, key, EncodeProfile(p));
  return s.ok() ? Status::OK() : impl_->Error("write of the profile of " + p.config_id + " failed", s);
}

Result<KernelProfile> ResultStore::GetProfile(const std::string& gpu_model, const std::string& op,
                                              const std::string& dtype, const std::string& shape,
                                              const std::string& kernel_hash, const std::string& config_id) {
  std::string stored;
  rocksdb::Status s = impl_->db->Get(rocksdb::ReadOptions(), impl_->meta,
                                     ProfileKey(gpu_model, op, dtype, shape, kernel_hash, config_id), &stored);
  if (s.IsNotFound()) return Status::NotFound("no profile of " + config_id);
  if (!s.ok()) return impl_->Error("read of the profile of " + config_id + " failed", s);
  auto p = DecodeProfile(stored.data(), stored.size());
  if (!p.ok()) return p.status().WithPrefix("result store " + impl_->path + ": profile: ");
  if (Status st = CheckProfile(*p); !st.ok()) return st.WithPrefix("result store " + impl_->path + ": ");
  return p;
}

Result<KernelImage> ResultStore::GetKernel(const std::string& kernel_hash, const std::string& config_id,
                                           const std::string& dtype, const std::string& arch) {
  const std::string key = KernelImage{kernel_hash, config_id, dtype, arch, "", ""}.Key();
  if (!impl_->kernels) return Status::NotFound("no kernel " + key + " (the store predates kernel images)");
  std::string stored;
  rocksdb::Status s = impl_->db->Get(rocksdb::ReadOptions(), impl_->kernels, key, &stored);
  if (s.IsNotFound()) return Status::NotFound("no kernel " + key);
  if (!s.ok()) return impl_->Error("read of kernel " + key + " failed", s);
  auto k = DecodeKernelImage(stored.data(), stored.size());
  if (!k.ok()) return k.status().WithPrefix("result store " + impl_->path + ": kernel " + key + ": ");
  // Checked again on the way out: a bundle must never carry a damaged cubin.
  if (Status st = CheckKernelImage(*k); !st.ok()) return st.WithPrefix("result store " + impl_->path + ": ");
  return k;
}

}  // namespace tune
