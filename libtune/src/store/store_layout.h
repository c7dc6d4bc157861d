// The store's RocksDB layout (private to store/): column family names, key
// encoding and its checks, how best rows rank, a write being put together,
// and the column families' options. The layout itself is described in
// result_store.h.
#pragma once

#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/status.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/types.h"
#include "tune/status.h"

namespace tune::store_internal {

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

inline std::string JoinKey(std::initializer_list<std::string_view> parts) {
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

inline std::string ResultsKey(const Measurement& m) {
  return JoinKey({m.gpu_model, m.op, m.dtype, m.shape, m.kernel_hash, m.config_id});
}
inline std::string ByShapeKey(const Measurement& m) {
  return JoinKey({m.op, m.dtype, m.shape, m.gpu_model, m.kernel_hash, m.config_id});
}
inline std::string BestKey(const Measurement& m) {
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
inline std::string Printable(rocksdb::Slice key) {
  std::string s = key.ToString();
  for (char& c : s)
    if (c == kSep) c = '/';
  return s;
}

// The longest run of set fields from the front of `fields` becomes the scan
// prefix (each part followed by the separator, so "h100" never matches
// "h100-nvl"); fields after the first empty one are checked per row.
inline std::string LeadingPrefix(std::initializer_list<std::string_view> fields) {
  std::string prefix;
  for (auto f : fields) {
    if (f.empty()) break;
    prefix.append(f);
    prefix += kSep;
  }
  return prefix;
}

inline bool Matches(std::string_view want, std::string_view have) { return want.empty() || want == have; }

inline Status CheckKeyField(const char* name, const std::string& value) {
  if (value.empty()) return Status::Error(std::string("measurement has no ") + name);
  if (value.find(kSep) != std::string::npos) {
    return Status::Error(std::string("measurement ") + name + " contains a NUL byte");
  }
  return Status::OK();
}

inline Status CheckKey(const Measurement& m) {
  TUNE_RETURN_IF_ERROR(CheckKeyField("gpu_model", m.gpu_model));
  TUNE_RETURN_IF_ERROR(CheckKeyField("op", m.op));
  TUNE_RETURN_IF_ERROR(CheckKeyField("dtype", m.dtype));
  TUNE_RETURN_IF_ERROR(CheckKeyField("shape", m.shape));
  TUNE_RETURN_IF_ERROR(CheckKeyField("kernel_hash", m.kernel_hash));
  TUNE_RETURN_IF_ERROR(CheckKeyField("config_id", m.config_id));
  return Status::OK();
}

inline Status CheckFilter(const ResultFilter& f) {
  for (const std::string* s : {&f.gpu_model, &f.op, &f.dtype, &f.shape, &f.kernel_hash}) {
    if (s->find(kSep) != std::string::npos) return Status::Error("result filter contains a NUL byte");
  }
  return Status::OK();
}

inline bool IsLockError(const rocksdb::Status& s) {
  if (!s.IsIOError()) return false;
  const std::string text = s.ToString();
  return text.find("LOCK") != std::string::npos || text.find("lock") != std::string::npos;
}

// A valid measurement whose figure can be compared. NaN would never lose a
// comparison and would stay best forever.
inline bool BestCandidate(const Measurement& m) { return m.Valid() && std::isfinite(m.median_us); }

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
inline rocksdb::ColumnFamilyOptions StoreColumnFamilyOptions(const rocksdb::Options& options) {
  rocksdb::BlockBasedTableOptions table;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  rocksdb::ColumnFamilyOptions cf_options(options);
  cf_options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  cf_options.memtable_prefix_bloom_size_ratio = 0.1;
  cf_options.memtable_whole_key_filtering = true;
  return cf_options;
}

}  // namespace tune::store_internal
