// ResultStore on RocksDB. See store/result_store.h for the key layout.
// Long on purpose: one RocksDB schema (families, keys, the best-so-far
// index) and every path that reads or writes it, so that the invariants
// between the families are kept in one file.
#include "store/result_store.h"
#include "store/records.h"

#include <fcntl.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <tuple>
#include <functional>
#include <unordered_map>

#include "base/clock.h"
#include "base/log.h"
#include "codec/protocol.h"
#include "opspec/op_definition.h"

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
  Measurement::Pass pass = Measurement::Pass::kScreen;
  double median_us = 0;
  std::string config_id;  // whose row it is
  explicit BestRank(const Measurement& m)
      : unchecked(m.unchecked), pass(m.pass), median_us(m.median_us), config_id(m.config_id) {}
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

// What RocksDB said about the WAL records it could not replay. RocksDB's
// Status for a corrupt WAL names no file ("checksum mismatch"); its info log
// does ("<path>/000012.log: dropping 20566 bytes; Corruption: ..."), so the
// store reads that line on its way to the LOG file.
struct WalDrops {
  std::mutex mu;
  std::string first_file;    // base name of the first WAL file with a drop
  std::string first_reason;  // RocksDB's reason for it
  uint64_t bytes = 0;
  size_t count = 0;
};

// RocksDB's info log, read and dropped: it notes WAL drops in `drops`
// (every failure that matters reaches the store as a status). No LOG file
// is written: RocksDB's file logger that meets a full disk asserts on its
// next line (Debian's build keeps assertions), which would abort the
// process at the close that follows, whatever the reserve check did.
class WalDropLogger : public rocksdb::Logger {
 public:
  explicit WalDropLogger(std::shared_ptr<WalDrops> drops)
      : rocksdb::Logger(rocksdb::InfoLogLevel::INFO_LEVEL), drops_(std::move(drops)) {}
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override { Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap); }
  void Logv(const rocksdb::InfoLogLevel, const char* format, va_list ap) override {
    char line[2048];
    const int n = std::vsnprintf(line, sizeof line, format, ap);
    if (n <= 0) return;
    const std::string_view text(line, std::min<size_t>(static_cast<size_t>(n), sizeof line - 1));
    Note(text);
  }

 private:
  void Note(std::string_view line) {
    static constexpr std::string_view kDropping = ": dropping ";
    const size_t at = line.find(kDropping);
    if (at == std::string_view::npos) return;
    const size_t space = line.rfind(' ', at);
    const std::string file(line.substr(space == std::string_view::npos ? 0 : space + 1,
                                       at - (space == std::string_view::npos ? 0 : space + 1)));
    if (file.size() < 4 || file.compare(file.size() - 4, 4, ".log") != 0) return;
    const std::string rest(line.substr(at + kDropping.size()));
    const uint64_t bytes = std::strtoull(rest.c_str(), nullptr, 10);
    const size_t semi = rest.find("; ");
    std::lock_guard<std::mutex> lock(drops_->mu);
    if (drops_->count++ == 0) {
      drops_->first_file = std::filesystem::path(file).filename().string();
      drops_->first_reason = semi == std::string::npos ? std::string() : rest.substr(semi + 2);
    }
    drops_->bytes += bytes;
  }
  std::shared_ptr<WalDrops> drops_;
};

// Gives `options` the in-memory info log above.
void WatchWalDrops(rocksdb::Options* options, const std::shared_ptr<WalDrops>& drops) {
  options->info_log = std::make_shared<WalDropLogger>(drops);
}

// The durable-sequence marker (kStoreDurableMarker): one line,
// "durable_sequence <decimal>".
constexpr char kMarkerField[] = "durable_sequence ";

std::string MarkerPath(const std::string& store) { return store + "/" + kStoreDurableMarker; }

// nullopt when the store has no marker (a new store, or one written before
// markers existed: nothing to hold it to).
Result<std::optional<uint64_t>> ReadMarker(const std::string& store) {
  const std::string path = MarkerPath(store);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<uint64_t>();
    return Status::IOError("result store " + store + ": cannot read " + path + ": " + std::strerror(errno));
  }
  char buf[64];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  const std::string text = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  const std::string field = kMarkerField;
  const bool shaped = text.size() > field.size() + 1 && text.size() < sizeof buf && text.back() == '\n' &&
                      text.compare(0, field.size(), field) == 0 &&
                      std::all_of(text.begin() + static_cast<long>(field.size()), text.end() - 1,
                                  [](char c) { return c >= '0' && c <= '9'; }) &&
                      text.size() - field.size() - 1 <= 19;
  if (!shaped) {
    return Status::Corruption("result store " + store + ": " + path +
                              " is not a durable-sequence marker (expected 'durable_sequence <number>'): "
                              "restore the store from a backup, or start the coordinator with --store-recover "
                              "to accept the store as it is");
  }
  return std::optional<uint64_t>(std::strtoull(text.c_str() + field.size(), nullptr, 10));
}

// Replaces the marker atomically (a reader sees the old or the new one).
// The file is synced before the rename so that a host crash cannot leave an
// empty marker; a rename lost to that crash leaves the older, lower one,
// which only checks less.
Status WriteMarker(const std::string& store, uint64_t sequence) {
  const std::string path = MarkerPath(store), tmp = path + ".tmp";
  const std::string text = kMarkerField + std::to_string(sequence) + "\n";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError("cannot write " + tmp + ": " + std::strerror(errno));
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(ok ? errno : err);
    ::unlink(tmp.c_str());
    return Status::IOError("cannot write " + path + ": " + why);
  }
  return Status::OK();
}

}  // namespace

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

Status ResultStore::PutSweep(const std::string& sweep_id, const std::string& bytes) {
  TUNE_RETURN_IF_ERROR(impl_->CheckWritable());
  if (sweep_id.empty()) return impl_->Error("sweep id is empty");
  // Synced: a sweep's state changes seldom, and a host crash must not bring
  // back a finished sweep or lose an accepted one.
  rocksdb::WriteOptions wo;
  wo.sync = true;
  rocksdb::Status s = impl_->db->Put(wo, impl_->sweeps, sweep_id, bytes);
  if (!s.ok()) return impl_->Error("write of sweep " + sweep_id + " failed", s);
  (void)impl_->MarkDurable();  // synced already: a failure only leaves the marker behind
  return Status::OK();
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
  const std::string key = OpKey(name, package);
  const std::string value = EncodeOpRecord(OpRecord{name, submitted_unix, package});
  std::lock_guard<std::mutex> lock(impl_->ops_mu);
  rocksdb::Status s = impl_->db->Put(rocksdb::WriteOptions(), impl_->meta, key, value);
  if (s.ok()) impl_->MaybeMarkDurable();
  if (s.ok() && impl_->op_bytes_loaded) impl_->op_bytes[key] = value.size();
  return s.ok() ? Status::OK() : impl_->Error("write of op " + name + " failed", s);
}

Result<size_t> ResultStore::PruneOps(const std::string& name, size_t keep, const std::set<std::string>& needed) {
  TUNE_RETURN_IF_ERROR(impl_->CheckWritable());
  const std::string prefix = kOpPrefix + name + kSep;
  std::lock_guard<std::mutex> lock(impl_->ops_mu);
  std::vector<std::pair<int64_t, std::string>> versions;  // (submitted, key)
  TUNE_RETURN_IF_ERROR(impl_->ForPrefix(impl_->meta, prefix, [&](rocksdb::Slice key, rocksdb::Slice value, Status*) {
    auto op = DecodeOpRecord(value.data(), value.size());
    versions.emplace_back(op.ok() ? op->submitted_unix : INT64_MIN, key.ToString());  // unreadable: oldest
    return true;
  }));
  if (versions.size() <= keep) return size_t{0};
  std::sort(versions.begin(), versions.end(), std::greater<>());  // newest first
  size_t removed = 0;
  for (size_t i = keep; i < versions.size(); ++i) {
    if (needed.count(versions[i].second.substr(prefix.size()))) continue;
    rocksdb::Status s = impl_->db->Delete(rocksdb::WriteOptions(), impl_->meta, versions[i].second);
    if (!s.ok()) return impl_->Error("delete of an old version of op " + name + " failed", s);
    impl_->op_bytes.erase(versions[i].second);
    impl_->ops_measured.erase(versions[i].second);
    ++removed;
  }
  return removed;
}

namespace {

// Bytes for a line: KiB below a MiB, rounded up.
std::string Mib(uint64_t bytes) {
  if (bytes < (1u << 20)) return std::to_string((bytes + 1023) >> 10) + " KiB";
  return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB";
}

}  // namespace

Result<size_t> ResultStore::MakeRoomForOps(const std::vector<std::pair<std::string, OpPackage>>& incoming,
                                           uint64_t bound, const std::set<std::string>& needed, uint64_t budget,
                                           uint64_t* new_bytes) {
  std::lock_guard<std::mutex> lock(impl_->ops_mu);
  if (!impl_->op_bytes_loaded) {
    // Records written before the index of ops (IndexOps) are counted once
    // made; until then a store has none to count.
    std::map<std::string, uint64_t> sizes;
    TUNE_RETURN_IF_ERROR(impl_->ForPrefix(impl_->meta, kOpPrefix, [&](rocksdb::Slice key, rocksdb::Slice value, Status*) {
      sizes[key.ToString()] = value.size();
      return true;
    }));
    impl_->op_bytes = std::move(sizes);
    impl_->op_bytes_loaded = true;
  }
  uint64_t stored = 0, added = 0;
  for (const auto& [key, bytes] : impl_->op_bytes) stored += bytes;
  std::set<std::string> incoming_keys;
  for (const auto& [name, package] : incoming) {
    const std::string key = OpKey(name, package);
    if (impl_->op_bytes.count(key) || !incoming_keys.insert(key).second) continue;  // stored already: a new time only
    added += EncodeOpRecord(OpRecord{name, 0, package}).size();
  }
  if (new_bytes) *new_bytes = added;
  if (added > budget)
    return Status::InvalidArgument("op packages: " + std::to_string(added) + " new bytes, more than the " +
                                   std::to_string(budget) + " this client may still bring this hour");
  if (stored + added <= bound) return size_t{0};
  // Only removing writes: a store below its reserve still takes a submit
  // that fits (its sweep waits for the disk, as every write does).
  TUNE_RETURN_IF_ERROR(impl_->CheckWritable());
  // What may go. A package stays while a running sweep uses it (`needed`)
  // and while a stored row was measured with it: publish finds a row's spec
  // by its kernel hash among the stored packages (publish.h, SpecsByOpHash),
  // so removing one would leave its rows without a launch plan or cubin
  // check. The newest package of a name is no exception: a name is the
  // submitter's choice, so keeping each name's newest would let names
  // without rows hold the bound; publish's defaults then come from the
  // newest package that remains (OpsFromStore). Candidates go oldest first.
  struct Candidate {
    int64_t submitted;
    std::string key, name;
  };
  std::vector<Candidate> candidates;
  std::map<std::string, std::vector<std::pair<std::string, OpPackage>>> unchecked;  // by op name
  TUNE_RETURN_IF_ERROR(impl_->ForPrefix(impl_->meta, kOpPrefix, [&](rocksdb::Slice key, rocksdb::Slice value, Status*) {
    const std::string k = key.ToString();
    const std::string digest = k.substr(k.rfind(kSep) + 1);
    if (needed.count(digest) || impl_->ops_measured.count(k) || incoming_keys.count(k)) return true;
    auto op = DecodeOpRecord(value.data(), value.size());
    const std::string name = op.ok() ? op->name : std::string();
    candidates.push_back({op.ok() ? op->submitted_unix : INT64_MIN, k, name});  // unreadable: oldest
    if (op.ok()) unchecked[name].emplace_back(k, std::move(op->package));
    return true;
  }));
  // Which candidates rows were measured with: one scan of each op's rows,
  // only when room is short; a key found measured is remembered.
  for (const auto& [name, packages] : unchecked) {
    std::set<std::tuple<std::string, std::string, std::string>> seen;  // (toolchain, hash, include digest)
    std::vector<Measurement> rows;
    TUNE_RETURN_IF_ERROR(Scan(ResultFilter{"", name, "", "", ""}, [&](const Measurement& m) {
      if (seen.emplace(m.nvrtc_version, m.kernel_hash, m.include_digest).second) rows.push_back(m);
      return true;
    }));
    if (rows.empty()) continue;
    for (const auto& [key, package] : packages) {
      auto spec = ParseOpSpec(package, "stored op '" + name + "'");
      if (!spec.ok()) continue;  // no row can have been measured with what does not parse
      std::map<std::string, std::string> hashes;  // toolchain -> op hash
      for (const Measurement& m : rows) {
        auto [it, fresh] = hashes.try_emplace(m.nvrtc_version);
        if (fresh) it->second = OpHash(*spec, m.nvrtc_version);
        if (MeasuresKernel(m, it->second)) {
          impl_->ops_measured.insert(key);
          break;
        }
      }
    }
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) { return a.submitted < b.submitted; });
  size_t removed = 0;
  for (const Candidate& c : candidates) {
    if (stored + added <= bound) break;
    if (impl_->ops_measured.count(c.key)) continue;
    rocksdb::Status s = impl_->db->Delete(rocksdb::WriteOptions(), impl_->meta, c.key);
    if (!s.ok()) return impl_->Error("delete of an unused package of op " + c.name + " failed", s);
    stored -= std::min(stored, impl_->op_bytes[c.key]);
    impl_->op_bytes.erase(c.key);
    ++removed;
  }
  if (stored + added > bound)
    return Status::Unavailable("op packages: the sweep's new packages (" + Mib(added) + ") would take the store's to " +
                               Mib(stored + added) + ", over the bound of " + Mib(bound) +
                               " (--max-package-store-bytes); every stored package is used by a running sweep "
                               "or by stored rows");
  return removed;
}

namespace {
const std::string kCoveragePrefix = std::string("coverage") + kSep;
std::string CoverageKey(const std::string& gpu_model, const std::string& op, const std::string& dtype,
                        const std::string& shape, const std::string& kernel_hash) {
  return kCoveragePrefix + JoinKey({gpu_model, op, dtype, shape, kernel_hash});
}
}  // namespace

Status ResultStore::PutCoverage(const KeyCoverage& c) {
  TUNE_RETURN_IF_ERROR(impl_->CheckWritable());
  for (const std::string* part : {&c.gpu_model, &c.op, &c.dtype, &c.shape, &c.kernel_hash})
    if (part->find(kSep) != std::string::npos) return Status::InvalidArgument("coverage key with a NUL byte");
  if (c.state == KeyCoverage::State::kPartial) {
    auto stored = GetCoverage(c.gpu_model, c.op, c.dtype, c.shape, c.kernel_hash);
    if (stored.ok() && *stored && (*stored)->state != KeyCoverage::State::kPartial) return Status::OK();
  }
  rocksdb::Status s = impl_->db->Put(rocksdb::WriteOptions(), impl_->meta,
                                     CoverageKey(c.gpu_model, c.op, c.dtype, c.shape, c.kernel_hash), EncodeCoverage(c));
  if (s.ok()) impl_->MaybeMarkDurable();
  return s.ok() ? Status::OK() : impl_->Error("write of a key's coverage failed", s);
}

Result<std::optional<KeyCoverage>> ResultStore::GetCoverage(const std::string& gpu_model, const std::string& op,
                                                            const std::string& dtype, const std::string& shape,
                                                            const std::string& kernel_hash) {
  std::string bytes;
  rocksdb::Status s = impl_->db->Get(rocksdb::ReadOptions(), impl_->meta,
                                     CoverageKey(gpu_model, op, dtype, shape, kernel_hash), &bytes);
  if (s.IsNotFound()) return std::optional<KeyCoverage>();
  if (!s.ok()) return impl_->Error("read of a key's coverage failed", s);
  auto c = DecodeCoverage(bytes.data(), bytes.size());
  if (!c.ok()) return c.status();
  return std::optional<KeyCoverage>(std::move(c).value());
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

Status ResultStore::PutKernel(const KernelImage& image, const std::string& witness, KernelPut* outcome) {
  KernelPut ignored;
  KernelPut& put = outcome ? *outcome : ignored;
  put = KernelPut::kNew;
  TUNE_RETURN_IF_ERROR(impl_->CheckWritable());
  KernelImage k = image;
  k.witnesses.clear();
  k.conflicts.clear();
  if (!witness.empty()) k.witnesses.push_back(witness);
  TUNE_RETURN_IF_ERROR(CheckKernelImage(k));
  std::lock_guard<std::mutex> lock(impl_->put_mu);
  const std::string key = k.Key();
  std::string stored;
  Status refusal = Status::OK();
  rocksdb::Status s = impl_->db->Get(rocksdb::ReadOptions(), impl_->kernels, key, &stored);
  if (s.ok()) {
    auto old = DecodeKernelImage(stored.data(), stored.size());
    if (old.ok()) {
      auto note = [&](std::vector<std::string>* list, const std::string& what) {
        if (witness.empty() || list->size() >= kMaxKernelWitnesses ||
            std::find(list->begin(), list->end(), what) != list->end())
          return false;
        list->push_back(what);
        return true;
      };
      if (old->sha256 == k.sha256) {
        put = note(&old->witnesses, witness) ? KernelPut::kWitnessed : KernelPut::kSame;
        if (put == KernelPut::kSame) return Status::OK();
      } else {
        put = KernelPut::kConflict;
        refusal = Status::InvalidArgument("kernel image " + key + ": " + (witness.empty() ? std::string("a peer without a key") : witness) + " sent sha256 " + k.sha256 +
                                          ", which differs from the stored " + old->sha256 +
                                          " (kept; neither ships unverified)");
        if (!note(&old->conflicts, witness + " " + k.sha256)) return refusal;
      }
      k = std::move(old).value();
    }
  } else if (!s.IsNotFound()) {
    return impl_->Error("read of kernel " + key + " failed", s);
  }
  s = impl_->db->Put(rocksdb::WriteOptions(), impl_->kernels, key, EncodeKernelImage(k));
  if (s.ok() && !refusal.ok()) {
    impl_->MaybeMarkDurable();
    return refusal;
  }
  if (s.ok()) impl_->MaybeMarkDurable();
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
  if (s.ok()) impl_->MaybeMarkDurable();
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

namespace {
std::string BaselineKey(const std::string& gpu_model, const std::string& op, const std::string& dtype,
                        const std::string& shape) {
  return JoinKey({"baseline", gpu_model, op, dtype, shape});
}
}  // namespace

Status ResultStore::PutBaseline(const Measurement& m) {
  TUNE_RETURN_IF_ERROR(impl_->CheckWritable());
  if (m.baseline.empty()) return Status::InvalidArgument("a baseline row without its library");
  std::lock_guard<std::mutex> lock(impl_->put_mu);
  if (auto stored = GetBaseline(m.gpu_model, m.op, m.dtype, m.shape); stored.ok()) {
    if (stored->Valid() && !m.Valid()) return Status::OK();   // a host without the library
    if (stored->Valid() == m.Valid() && stored->unix_time > m.unix_time) return Status::OK();  // an older figure
  }
  rocksdb::Status s = impl_->db->Put(rocksdb::WriteOptions(), impl_->meta,
                                     BaselineKey(m.gpu_model, m.op, m.dtype, m.shape), EncodeMeasurement(m));
  if (s.ok()) impl_->MaybeMarkDurable();
  return s.ok() ? Status::OK() : impl_->Error("write of the baseline of " + m.op + " " + m.shape + " failed", s);
}

Status ResultStore::ForEachKernel(const std::function<void(const KernelImage&)>& fn) {
  if (!impl_->kernels) return Status::OK();
  return impl_->ForPrefix(impl_->kernels, "", [&](rocksdb::Slice, rocksdb::Slice value, Status*) {
    if (auto k = DecodeKernelImage(value.data(), value.size()); k.ok()) fn(*k);
    return true;
  });
}

Status ResultStore::ForEachCoverage(const std::function<void(const KeyCoverage&)>& fn) {
  return impl_->ForPrefix(impl_->meta, kCoveragePrefix, [&](rocksdb::Slice, rocksdb::Slice value, Status*) {
    if (auto c = DecodeCoverage(value.data(), value.size()); c.ok()) fn(*c);
    return true;
  });
}

Status ResultStore::ForEachProfile(const std::function<void(const KernelProfile&)>& fn) {
  return impl_->ForPrefix(impl_->meta, std::string("profile") + kSep, [&](rocksdb::Slice, rocksdb::Slice value, Status*) {
    if (auto p = DecodeProfile(value.data(), value.size()); p.ok()) fn(*p);
    return true;
  });
}

Status ResultStore::ForEachBaseline(const std::function<void(const Measurement&)>& fn) {
  return impl_->ForPrefix(impl_->meta, std::string("baseline") + kSep, [&](rocksdb::Slice, rocksdb::Slice value, Status*) {
    if (auto m = DecodeMeasurement(value.data(), value.size()); m.ok()) fn(*m);
    return true;
  });
}

Result<Measurement> ResultStore::GetBaseline(const std::string& gpu_model, const std::string& op,
                                             const std::string& dtype, const std::string& shape) {
  std::string stored;
  rocksdb::Status s =
      impl_->db->Get(rocksdb::ReadOptions(), impl_->meta, BaselineKey(gpu_model, op, dtype, shape), &stored);
  if (s.IsNotFound()) return Status::NotFound("no baseline of " + op + " " + shape);
  if (!s.ok()) return impl_->Error("read of the baseline of " + op + " " + shape + " failed", s);
  auto m = DecodeMeasurement(stored.data(), stored.size());
  if (!m.ok()) return m.status().WithPrefix("result store " + impl_->path + ": baseline: ");
  return m;
}

Result<KernelImage> ResultStore::GetKernel(const std::string& kernel_hash, const std::string& config_id,
                                           const std::string& dtype, const std::string& arch) {
  const std::string key = KernelImage::KeyOf(kernel_hash, config_id, dtype, arch);
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
