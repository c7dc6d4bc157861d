// ResultStore: the records kept beside the rows (sweeps, op packages,
// coverage, cubins, profiles, baselines).
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "store/records.h"
#include "store/result_store.h"
#include "store/result_store_impl.h"

namespace tune {

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
      auto shared = SharedOpSpec(package, "stored op '" + name + "'");
      if (!shared.ok()) continue;  // no row can have been measured with what does not parse
      const OpSpec* spec = shared->get();
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
