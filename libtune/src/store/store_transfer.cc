#include "store/store_transfer.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "base/known_gpus.h"
#include "base/text.h"
#include "opspec/config_space.h"
#include "opspec/kernel_hash.h"
#include "opspec/op_definition.h"
#include "store/records.h"

namespace tune {
namespace {

constexpr char kMagic[] = "tunefarm store export\n";
constexpr uint32_t kFormat = 1;
// A record is at most a cubin's bound plus its key; a package far less.
constexpr uint64_t kMaxRecordBytes = uint64_t{1} << 30;

enum Kind : uint8_t { kEnd = 0, kOp = 1, kRow = 2, kKernel = 3, kCoverage = 4, kProfile = 5, kBaseline = 6 };

const char* KindName(uint8_t k) {
  switch (k) {
    case kOp: return "op package";
    case kRow: return "row";
    case kKernel: return "cubin";
    case kCoverage: return "coverage record";
    case kProfile: return "profile";
    case kBaseline: return "baseline";
  }
  return "record";
}

void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

class Writer {
 public:
  explicit Writer(std::ofstream& f) : f_(f) {}
  void Add(Kind kind, const std::string& bytes) {
    std::string head(1, static_cast<char>(kind));
    PutU64(&head, bytes.size());
    f_.write(head.data(), static_cast<std::streamsize>(head.size()));
    f_.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    ++records_;
  }
  uint64_t records() const { return records_; }

 private:
  std::ofstream& f_;
  uint64_t records_ = 0;
};

bool Matches(const ResultFilter& f, const std::string& gpu, const std::string& op) {
  return (f.gpu_model.empty() || f.gpu_model == gpu) && (f.op.empty() || f.op == op);
}

// A key part: text without NUL bytes, not empty.
Status CheckKeyText(const std::string& v) {
  if (v.empty()) return Status::InvalidArgument("an empty key part");
  TUNE_RETURN_IF_ERROR(CheckText(v, "key part", kMaxNameBytes));
  if (v.find('\0') != std::string::npos) return Status::InvalidArgument("a key part with a NUL byte");
  return Status::OK();
}

// The value checks a worker's row gets at the coordinator's door.
Status CheckRow(const Measurement& m) {
  const std::pair<const char*, const std::string*> keys[] = {
      {"gpu_model", &m.gpu_model}, {"op", &m.op},           {"dtype", &m.dtype},
      {"shape", &m.shape},         {"kernel_hash", &m.kernel_hash}, {"config_id", &m.config_id}};
  for (const auto& [field, value] : keys) {
    if (value->empty()) return Status::InvalidArgument(std::string("empty ") + field);
    TUNE_RETURN_IF_ERROR(CheckText(*value, field, kMaxNameBytes));
    if (value->find('\0') != std::string::npos) return Status::InvalidArgument(std::string(field) + " holds a NUL byte");
  }
  if (m.config.Id() != m.config_id) return Status::InvalidArgument("config_id is not its config's id");
  for (double v : {m.median_us, m.mean_us, m.stdev_us, m.min_us, m.max_us, m.ci95_us, m.screen_us})
    if (!std::isfinite(v) || v < 0 || v > 3.6e9) return Status::InvalidArgument("a figure of " + std::to_string(v) + " us");
  if (m.Valid() && !(m.median_us > 0)) return Status::InvalidArgument("a valid row without a median");
  return Status::OK();
}

// A peer's rows are held to what a worker's row is held to at the
// coordinator's door, beyond their form: no time in the future (a row
// dated ahead would pass for the newest kernel), and no median below the
// physical floor of its config on its GPU model, where the model is known
// and a package of the row's kernel hash (the file's or the store's) plans
// the config at its shape.
class ImportDoor {
 public:
  ImportDoor(ResultStore& store, const std::vector<OpRecord>& file_ops, const std::vector<Measurement>& rows,
             int64_t now_unix)
      : now_unix_(now_unix) {
    std::set<std::string> names, toolchains;
    for (const Measurement& m : rows) {
      names.insert(m.op);
      toolchains.insert(m.nvrtc_version);
    }
    auto add = [&](const OpRecord& op) {
      if (!names.count(op.name)) return;
      if (auto spec = ParseOpSpec(op.package, op.name); spec.ok()) specs_.push_back(std::move(*spec));
    };
    for (const OpRecord& op : file_ops) add(op);
    (void)store.ForEachOp(add);  // a store that cannot list its packages: the floors the file's give
    std::vector<const OpSpec*> pointers;
    for (const OpSpec& spec : specs_) pointers.push_back(&spec);
    by_hash_ = std::make_unique<SpecsByOpHash>(pointers, toolchains);
  }

  // Why `m` is refused; "" when it is admitted.
  std::string Refusal(const Measurement& m) const {
    if (m.unix_time > now_unix_ + kMaxImportedClockAheadSeconds)
      return "dated " + std::to_string(m.unix_time - now_unix_) + " s after this host's clock";
    if (!m.Valid()) return "";
    const DeviceInfo* known = FindKnownGpu(m.gpu_model);
    const OpSpec* spec = by_hash_->Find(m.op, m.kernel_hash);
    Shape shape;
    if (!known || !spec || !ParseNamedValues(m.shape, &shape.dims)) return "";
    DeviceInfo device = *known;
    if (device.sm_clock_mhz <= 0) device.sm_clock_mhz = kMaxSmClockMhz;
    auto plan = PlanLaunch(*spec, m.dtype, m.config, shape, device);
    if (!plan.ok()) return "";
    const double floor = PhysicalFloorUs(plan->flops, plan->bytes, device);
    if (m.median_us >= floor) return "";
    return "a median of " + std::to_string(m.median_us) + " us, below the physical floor of " +
           std::to_string(floor) + " us on " + m.gpu_model + ": impossible";
  }

 private:
  // A farm's clock may run a little ahead of this host's.
  static constexpr int64_t kMaxImportedClockAheadSeconds = 3600;
  int64_t now_unix_;
  std::vector<OpSpec> specs_;
  std::unique_ptr<SpecsByOpHash> by_hash_;
};

// A row's store key as one string (key parts hold no NUL: CheckRow).
std::string RowKey(const Measurement& m) {
  std::string key;
  for (const std::string* part : {&m.gpu_model, &m.op, &m.dtype, &m.shape, &m.kernel_hash, &m.config_id})
    key.append(*part).push_back('\0');
  return key;
}

}  // namespace

Status ExportStore(ResultReader& store, const ResultFilter& filter, const std::string& path, TransferCounts* counts) {
  TransferCounts n;
  const std::string tmp = path + ".tmp";
  std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
  if (!f) return Status::IOError(path + ": cannot write");
  // A failed export leaves no half-written file behind.
  struct RemoveUnlessKept {
    const std::string& file;
    bool keep = false;
    ~RemoveUnlessKept() {
      std::error_code ec;
      if (!keep) std::filesystem::remove(file, ec);
    }
  } cleanup{tmp};
  f.write(kMagic, sizeof kMagic - 1);
  std::string version;
  PutU64(&version, kFormat);
  f.write(version.data(), 4);
  Writer w(f);
  // The rows first, noting what else they need.
  std::set<std::string> hashes, ops;
  TUNE_RETURN_IF_ERROR(store.Scan(filter, [&](const Measurement& m) {
    w.Add(kRow, EncodeMeasurement(m));
    hashes.insert(m.kernel_hash);
    ops.insert(m.op);
    ++n.rows;
    return true;
  }));
  // Every package of the ops, whichever kernel hash: a few, and publish
  // picks the one of each row's hash.
  TUNE_RETURN_IF_ERROR(store.ForEachOp([&](const OpRecord& op) {
    if (!ops.count(op.name)) return;
    w.Add(kOp, EncodeOpRecord(op));
    ++n.ops;
  }));
  TUNE_RETURN_IF_ERROR(store.ForEachKernel([&](const KernelImage& k) {
    if (!hashes.count(k.kernel_hash)) return;
    w.Add(kKernel, EncodeKernelImage(k));
    ++n.kernels;
  }));
  TUNE_RETURN_IF_ERROR(store.ForEachCoverage([&](const KeyCoverage& c) {
    if (!hashes.count(c.kernel_hash) || !Matches(filter, c.gpu_model, c.op)) return;
    w.Add(kCoverage, EncodeCoverage(c));
    ++n.coverage;
  }));
  TUNE_RETURN_IF_ERROR(store.ForEachProfile([&](const KernelProfile& p) {
    if (!hashes.count(p.kernel_hash) || !Matches(filter, p.gpu_model, p.op)) return;
    w.Add(kProfile, EncodeProfile(p));
    ++n.profiles;
  }));
  TUNE_RETURN_IF_ERROR(store.ForEachBaseline([&](const Measurement& b) {
    if (!ops.count(b.op) || !Matches(filter, b.gpu_model, b.op)) return;
    w.Add(kBaseline, EncodeMeasurement(b));
    ++n.baselines;
  }));
  // The end marker carries the record count: a truncated file is refused.
  std::string end(1, static_cast<char>(kEnd));
  PutU64(&end, w.records());
  f.write(end.data(), static_cast<std::streamsize>(end.size()));
  f.close();
  if (!f) return Status::IOError(path + ": write failed");
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::IOError(path + ": " + ec.message());
  cleanup.keep = true;
  if (counts) *counts = n;
  return Status::OK();
}

Status ImportStore(ResultStore& store, const std::string& path, TransferCounts* counts, ImportTrust trust, Env& env) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::IOError(path + ": cannot read");
  return ImportStore(store, f, path, counts, trust, env);
}

Status ImportStore(ResultStore& store, std::istream& f, const std::string& path, TransferCounts* counts,
                   ImportTrust trust, Env& env) {
  f.seekg(0, std::ios::end);
  const uint64_t file_bytes = static_cast<uint64_t>(f.tellg());
  f.seekg(0);
  std::string magic(sizeof kMagic - 1, '\0');
  f.read(magic.data(), static_cast<std::streamsize>(magic.size()));
  if (!f || magic != kMagic) return Status::InvalidArgument(path + ": not a tunefarm store export");
  unsigned char v[4];
  f.read(reinterpret_cast<char*>(v), 4);
  const uint32_t format = v[0] | (v[1] << 8) | (v[2] << 16) | (uint32_t(v[3]) << 24);
  if (!f || format != kFormat)
    return Status::InvalidArgument(path + ": export format " + std::to_string(format) + ", this tunefarm reads " +
                                   std::to_string(kFormat));
  // Everything is read and checked before anything is written.
  std::vector<OpRecord> ops;
  std::vector<Measurement> rows, baselines;
  std::vector<KernelImage> kernels;
  std::vector<KeyCoverage> coverage;
  std::vector<KernelProfile> profiles;
  uint64_t index = 0;
  for (;; ++index) {
    unsigned char head[9];
    f.read(reinterpret_cast<char*>(head), 9);
    if (!f) return Status::InvalidArgument(path + ": truncated after record " + std::to_string(index));
    uint64_t size = 0;
    for (int i = 7; i >= 0; --i) size = (size << 8) | head[1 + i];
    if (head[0] == kEnd) {
      if (size != index)
        return Status::InvalidArgument(path + ": " + std::to_string(index) + " records where the file says " +
                                       std::to_string(size));
      break;
    }
    const std::string where = path + ": record " + std::to_string(index) + " (" + KindName(head[0]) + "): ";
    if (size > kMaxRecordBytes) return Status::InvalidArgument(where + std::to_string(size) + " bytes, over the bound");
    // Nothing is allocated for bytes the file does not hold.
    if (size > file_bytes - static_cast<uint64_t>(f.tellg())) return Status::InvalidArgument(where + "truncated");
    std::string bytes(size, '\0');
    f.read(bytes.data(), static_cast<std::streamsize>(size));
    if (!f) return Status::InvalidArgument(where + "truncated");
    Status st;
    switch (head[0]) {
      case kOp: {
        auto op = DecodeOpRecord(bytes.data(), bytes.size());
        if (!op.ok()) return op.status().WithPrefix(where);
        auto spec = ParseOpSpec(op->package, op->name);
        if (!spec.ok()) return spec.status().WithPrefix(where);
        if (spec->name != op->name)
          return Status::InvalidArgument(where + "a package of op '" + spec->name + "' filed as '" + op->name + "'");
        ops.push_back(std::move(*op));
        break;
      }
      case kRow:
      case kBaseline: {
        auto m = DecodeMeasurement(bytes.data(), bytes.size());
        if (!m.ok()) return m.status().WithPrefix(where);
        st = CheckRow(*m);
        if (st.ok() && (head[0] == kBaseline) == m->baseline.empty())
          st = Status::InvalidArgument(head[0] == kBaseline ? "no library named" : "a config's row that names a baseline");
        if (st.ok() && !m->baseline.empty()) st = CheckText(m->baseline, "baseline", 128);
        if (!st.ok()) return st.WithPrefix(where);
        (head[0] == kRow ? rows : baselines).push_back(std::move(*m));
        break;
      }
      case kKernel: {
        auto k = DecodeKernelImage(bytes.data(), bytes.size());
        if (!k.ok()) return k.status().WithPrefix(where);
        if (st = CheckKernelImage(*k); !st.ok()) return st.WithPrefix(where);
        kernels.push_back(std::move(*k));
        break;
      }
      case kCoverage: {
        auto c = DecodeCoverage(bytes.data(), bytes.size());
        if (!c.ok()) return c.status().WithPrefix(where);
        for (const std::string* key : {&c->gpu_model, &c->op, &c->dtype, &c->shape, &c->kernel_hash})
          if (st = CheckKeyText(*key); !st.ok()) return st.WithPrefix(where);
        coverage.push_back(std::move(*c));
        break;
      }
      case kProfile: {
        auto p = DecodeProfile(bytes.data(), bytes.size());
        if (!p.ok()) return p.status().WithPrefix(where);
        if (st = CheckProfile(*p); !st.ok()) return st.WithPrefix(where);
        profiles.push_back(std::move(*p));
        break;
      }
      default:
        return Status::InvalidArgument(where + "unknown kind " + std::to_string(head[0]) + " (a newer tunefarm's?)");
    }
  }
  TransferCounts n;
  const int64_t now = env.NowUnixSeconds();
  // A peer's package dated ahead would stay its op's newest (publish's
  // defaults) and be pruned last: it is dated no later than now.
  for (const OpRecord& op : ops)
    TUNE_RETURN_IF_ERROR(store.PutOp(op.name, trust == ImportTrust::kPeer ? std::min(op.submitted_unix, now)
                                                                          : op.submitted_unix,
                                     op.package));
  n.ops = ops.size();
  n.rows = rows.size();
  // The (kernel hash, config, dtype) of rows refused, and of rows stored or
  // admitted: a cubin comes in only beside a row of its own.
  std::set<std::string> refused_kernels, kept_kernels;
  auto kernel_of = [](const std::string& hash, const std::string& config_id, const std::string& dtype) {
    return hash + '\0' + config_id + '\0' + dtype;
  };
  if (trust == ImportTrust::kPeer) {
    // Insert-only: a peer's row never replaces a stored one (a pass rule
    // would let a "confirmed" row of the file override the farm's own), the
    // file's first row of a key is its word, and each row passes the door.
    const ImportDoor door(store, ops, rows, now);
    auto refuse = [&](const Measurement& m, const std::string& why) {
      if (n.refusals.size() < kMaxReportedRefusals)
        n.refusals.push_back(m.gpu_model + " " + m.op + " " + m.dtype + " " + m.shape + " " +
                             (m.baseline.empty() ? m.config_id : m.baseline) + ": " + why);
      ++n.rows_refused;
    };
    std::vector<Measurement> admitted;
    std::set<std::string> keys;
    for (Measurement& m : rows) {
      const std::string kernel = kernel_of(m.kernel_hash, m.config_id, m.dtype);
      if (!keys.insert(RowKey(m)).second || store.Get(m.gpu_model, m.op, m.dtype, m.shape, m.kernel_hash, m.config_id)) {
        ++n.rows_present;
        kept_kernels.insert(kernel);
        continue;
      }
      if (std::string why = door.Refusal(m); !why.empty()) {
        refuse(m, why);
        refused_kernels.insert(kernel);
        continue;
      }
      kept_kernels.insert(kernel);
      admitted.push_back(std::move(m));
    }
    rows = std::move(admitted);
    // A baseline keeps the newer figure: one dated ahead or below the
    // floor would replace this farm's for good.
    std::vector<Measurement> fair;
    for (Measurement& b : baselines) {
      if (std::string why = door.Refusal(b); !why.empty()) refuse(b, why);
      else fair.push_back(std::move(b));
    }
    baselines = std::move(fair);
  }
  TUNE_RETURN_IF_ERROR(store.PutBatch(rows, &n.rows_new));
  if (trust == ImportTrust::kPeer) n.rows_present += rows.size() - n.rows_new;
  // After the rows: a cubin in the store always has its measured row. A
  // file is no witness, whatever workers it names: a peer's cubin is stored
  // without one and ships once this farm recompiles it or two of its own
  // workers' keys send the same bytes (publish's rule); one the exporting
  // farm saw contradicted is left out.
  for (const KernelImage& k : kernels) {
    if (!k.conflicts.empty()) continue;
    const std::string kernel = kernel_of(k.kernel_hash, k.config_id, k.dtype);
    if (refused_kernels.count(kernel) && !kept_kernels.count(kernel)) continue;
    std::vector<std::string> witnesses{""};
    if (trust == ImportTrust::kMirror && !k.witnesses.empty()) witnesses = k.witnesses;
    for (const std::string& w : witnesses) {
      KernelPut put = KernelPut::kNew;
      Status st = store.PutKernel(k, w, &put);
      if (!st.ok() && put != KernelPut::kConflict) return st;  // a conflict is recorded, the stored image kept
    }
    ++n.kernels;
  }
  for (const KeyCoverage& c : coverage) TUNE_RETURN_IF_ERROR(store.PutCoverage(c));
  n.coverage = coverage.size();
  for (const KernelProfile& p : profiles) TUNE_RETURN_IF_ERROR(store.PutProfile(p));
  n.profiles = profiles.size();
  for (const Measurement& b : baselines) TUNE_RETURN_IF_ERROR(store.PutBaseline(b));
  n.baselines = baselines.size();
  if (counts) *counts = n;
  return Status::OK();
}

}  // namespace tune
