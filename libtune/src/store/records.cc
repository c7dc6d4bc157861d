// The stored records' codec (store/records.h): the same discipline as the
// envelope codec's (codec/codec.h), without the text check.
#include "store/records.h"

#include "codec/codec.h"
#include "protocol/envelope_parts.h"

namespace tune {

using namespace codec;  // NOLINT: this file is a codec

namespace {
// A row may predate the text check and must still be readable.
constexpr FrameRules Stored(const char* what) { return FrameRules{what, kMaxFrameBytes, false}; }
}  // namespace

std::string EncodeMeasurement(const Measurement& m) {
  capnp::MallocMessageBuilder builder(kFirstSegmentWords);
  SetMeasurement(builder.initRoot<wire::Measurement>(), m);
  return ToBytes(builder);
}

Result<Measurement> DecodeMeasurement(const void* data, size_t size) {
  return ReadFrame<Measurement>(data, size, Stored("measurement"),
                                [](capnp::MessageReader& reader, Budget& budget) -> Result<Measurement> {
                                  return GetMeasurement(reader.getRoot<wire::Measurement>(), budget);
                                });
}

std::string EncodeLeaseRecord(const LeaseRecord& rec) {
  capnp::MallocMessageBuilder builder(kFirstSegmentWords);
  auto root = builder.initRoot<wire::LeaseRecord>();
  SetWorkUnit(root.initUnit(), rec.unit);
  root.setGpuModel(TextOf(rec.gpu_model));
  SetStrings(root.initLessees(rec.lessees.size()), rec.lessees);
  return ToBytes(builder);
}

Result<LeaseRecord> DecodeLeaseRecord(const void* data, size_t size) {
  return ReadFrame<LeaseRecord>(data, size, Stored("lease record"),
                                [](capnp::MessageReader& reader, Budget& budget) -> Result<LeaseRecord> {
                                  auto root = reader.getRoot<wire::LeaseRecord>();
                                  LeaseRecord rec;
                                  rec.unit = GetWorkUnit(root.getUnit(), budget);
                                  rec.gpu_model = Txt(root.getGpuModel(), budget, "gpuModel");
                                  rec.lessees = Strings(root.getLessees(), budget, "lessees");
                                  return rec;
                                });
}

std::string EncodeOpRecord(const OpRecord& r) {
  capnp::MallocMessageBuilder builder(kFirstSegmentWords);
  auto root = builder.initRoot<wire::OpRecord>();
  root.setName(TextOf(r.name));
  root.setSubmittedUnix(r.submitted_unix);
  SetOpPackage(root.initPackage(), r.package);
  return ToBytes(builder);
}

Result<OpRecord> DecodeOpRecord(const void* data, size_t size) {
  return ReadFrame<OpRecord>(data, size, Stored("op record"),
                             [](capnp::MessageReader& reader, Budget& budget) -> Result<OpRecord> {
                               auto root = reader.getRoot<wire::OpRecord>();
                               OpRecord r;
                               r.name = Txt(root.getName(), budget, "name");
                               r.submitted_unix = root.getSubmittedUnix();
                               r.package = GetOpPackage(root.getPackage(), budget);
                               return r;
                             });
}

std::string EncodeCoverage(const KeyCoverage& c) {
  capnp::MallocMessageBuilder builder(kFirstSegmentWords);
  auto b = builder.initRoot<wire::KeyCoverage>();
  b.setGpuModel(TextOf(c.gpu_model));
  b.setOp(TextOf(c.op));
  b.setDtype(TextOf(c.dtype));
  b.setShape(TextOf(c.shape));
  b.setKernelHash(TextOf(c.kernel_hash));
  b.setLegal(c.legal);
  b.setLegalExact(c.legal_exact);
  b.setEvaluated(c.evaluated);
  b.setStrategy(TextOf(c.strategy));
  b.setBudget(c.budget);
  b.setSeed(c.seed);
  b.setState(static_cast<wire::CoverageState>(static_cast<uint16_t>(c.state)));
  b.setSweepId(TextOf(c.sweep_id));
  b.setUnixTime(c.unix_time);
  return ToBytes(builder);
}

Result<KeyCoverage> DecodeCoverage(const void* data, size_t size) {
  return ReadFrame<KeyCoverage>(data, size, Stored("coverage record"),
                                [](capnp::MessageReader& reader, Budget& budget) -> Result<KeyCoverage> {
                                  auto r = reader.getRoot<wire::KeyCoverage>();
                                  KeyCoverage c;
                                  c.gpu_model = Txt(r.getGpuModel(), budget, "gpuModel");
                                  c.op = Txt(r.getOp(), budget, "op");
                                  c.dtype = Txt(r.getDtype(), budget, "dtype");
                                  c.shape = Txt(r.getShape(), budget, "shape");
                                  c.kernel_hash = Txt(r.getKernelHash(), budget, "kernelHash");
                                  c.legal = r.getLegal();
                                  c.legal_exact = r.getLegalExact();
                                  c.evaluated = r.getEvaluated();
                                  c.strategy = Txt(r.getStrategy(), budget, "strategy");
                                  c.budget = r.getBudget();
                                  c.seed = r.getSeed();
                                  const auto state = static_cast<uint16_t>(r.getState());
                                  if (state < 1 || state > 3) return Status::Corruption("coverage record: unknown state");
                                  c.state = static_cast<KeyCoverage::State>(state);
                                  c.sweep_id = Txt(r.getSweepId(), budget, "sweepId");
                                  c.unix_time = r.getUnixTime();
                                  return c;
                                });
}

std::string EncodeKernelImage(const KernelImage& k) {
  capnp::MallocMessageBuilder builder(kFirstSegmentWords);
  SetKernelImage(builder.initRoot<wire::KernelImage>(), k);
  return ToBytes(builder);
}

Result<KernelImage> DecodeKernelImage(const void* data, size_t size) {
  return ReadFrame<KernelImage>(data, size, Stored("kernel image"),
                                [](capnp::MessageReader& reader, Budget& budget) -> Result<KernelImage> {
                                  return GetKernelImage(reader.getRoot<wire::KernelImage>(), budget);
                                });
}

std::string EncodeProfile(const KernelProfile& p) {
  capnp::MallocMessageBuilder builder(kFirstSegmentWords);
  SetProfile(builder.initRoot<wire::KernelProfile>(), p);
  return ToBytes(builder);
}

Result<KernelProfile> DecodeProfile(const void* data, size_t size) {
  return ReadFrame<KernelProfile>(data, size, Stored("profile"),
                                [](capnp::MessageReader& reader, Budget& budget) -> Result<KernelProfile> {
                                  return GetProfile(reader.getRoot<wire::KernelProfile>(), budget);
                                });
}

int64_t SweepSubmittedUnix(const std::string& sweep_id) {
  const size_t dash = sweep_id.find('-');
  if (dash == 0 || dash == std::string::npos || dash > 16) return 0;
  int64_t t = 0;
  for (size_t i = 0; i < dash; ++i) {
    const char c = sweep_id[i];
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) return 0;
    t = t * 16 + digit;
  }
  return t;
}

// A sweep record is its state line and the submit as a SweepSubmit envelope.
// "STATE\n" and the submit's envelope; with a progress, "STATE;N\n", the
// submit's envelope of N bytes and a SweepStatus envelope holding it.
std::string EncodeSweepRecord(const SweepRecord& r) {
  Envelope env;
  env.command = r.submit;
  const std::string submit = EncodeEnvelope(env);
  if (!r.progress) return r.state + "\n" + submit;
  SweepStatus one;
  one.sweeps = {*r.progress};
  Envelope status;
  status.command = std::move(one);
  return r.state + ";" + std::to_string(submit.size()) + "\n" + submit + EncodeEnvelope(status);
}

Result<SweepRecord> DecodeSweepRecord(const std::string& bytes) {
  const auto nl = bytes.find('\n');
  if (nl == std::string::npos || nl > 32) return Status::Corruption("sweep record: no state line");
  SweepRecord r;
  r.state = bytes.substr(0, nl);
  size_t submit_size = bytes.size() - nl - 1;
  if (const auto semi = r.state.find(';'); semi != std::string::npos) {
    const std::string size = r.state.substr(semi + 1);
    r.state.resize(semi);
    if (size.empty() || size.size() > 12 || size.find_first_not_of("0123456789") != std::string::npos ||
        std::stoull(size) > submit_size)
      return Status::Corruption("sweep record: a state line without the submit's size");
    submit_size = std::stoull(size);
  }
  if (r.state.empty() || r.state.size() > 16) return Status::Corruption("sweep record: no state");
  auto env = DecodeEnvelope(bytes.data() + nl + 1, submit_size);
  if (!env.ok()) return Status::Corruption("sweep record: " + env.status().message());
  auto* submit = std::get_if<SweepSubmit>(&env->command);
  if (!submit) return Status::Corruption("sweep record: not a sweep submit");
  r.submit = std::move(*submit);
  const size_t rest = nl + 1 + submit_size;
  if (rest < bytes.size()) {
    auto status = DecodeEnvelope(bytes.data() + rest, bytes.size() - rest);
    if (!status.ok()) return Status::Corruption("sweep record: progress: " + status.status().message());
    auto* s = std::get_if<SweepStatus>(&status->command);
    if (!s || s->sweeps.size() != 1) return Status::Corruption("sweep record: progress: not one sweep's");
    r.progress = std::move(s->sweeps.front());
  }
  return r;
}

}  // namespace tune
