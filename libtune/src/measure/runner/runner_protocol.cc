#include "measure/runner/runner_protocol.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace tune::runner {
namespace {

template <typename T>
void PutLe(std::string* buf, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // hosts are little-endian (x86-64, aarch64)
  buf->append(b, sizeof(T));
}

Status WriteAll(int fd, const char* p, size_t n) {
  struct stat st{};
  bool is_socket = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
  while (n > 0) {
    ssize_t k = is_socket ? send(fd, p, n, MSG_NOSIGNAL) : write(fd, p, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      return Status::Error(std::string("runner pipe write failed: ") + std::strerror(errno));
    }
    p += k;
    n -= size_t(k);
  }
  return Status::OK();
}

// 0 = all read, 1 = clean EOF before the first byte, -1 = error/short.
int ReadAll(int fd, char* p, size_t n, std::string* why) {
  size_t got = 0;
  while (got < n) {
    ssize_t k = read(fd, p + got, n - got);
    if (k < 0) {
      if (errno == EINTR) continue;
      *why = std::string("runner pipe read failed: ") + std::strerror(errno);
      return -1;
    }
    if (k == 0) {
      if (got == 0) return 1;
      *why = "runner pipe closed mid-frame";
      return -1;
    }
    got += size_t(k);
  }
  return 0;
}

}  // namespace

void WireWriter::U32(uint32_t v) { PutLe(&buf_, v); }
void WireWriter::I64(int64_t v) { PutLe(&buf_, v); }
void WireWriter::F64(double v) { PutLe(&buf_, v); }
void WireWriter::Str(const std::string& s) {
  U32(uint32_t(s.size()));
  buf_.append(s);
}
void WireWriter::Values(const NamedValues& v) {
  U32(uint32_t(v.size()));
  for (const auto& [name, value] : v) {
    Str(name);
    I64(value);
  }
}

void WireWriter::Params(const ParamValues& v) {
  U32(uint32_t(v.size()));
  for (const auto& [name, value] : v) {
    Str(name);
    I64(value.Number());
    Str(value.IsInt() ? std::string() : value.ToString());
  }
}

bool WireReader::Take(void* dst, size_t n) {
  if (!ok_ || s_.size() - pos_ < n) {
    ok_ = false;
    std::memset(dst, 0, n);
    return false;
  }
  std::memcpy(dst, s_.data() + pos_, n);
  pos_ += n;
  return true;
}
MsgType WireReader::Type() { return MsgType(U8()); }
uint8_t WireReader::U8() {
  uint8_t v;
  Take(&v, 1);
  return v;
}
uint32_t WireReader::U32() {
  uint32_t v;
  Take(&v, 4);
  return v;
}
int64_t WireReader::I64() {
  int64_t v;
  Take(&v, 8);
  return v;
}
double WireReader::F64() {
  double v;
  Take(&v, 8);
  return v;
}
std::string WireReader::Str() {
  uint32_t n = U32();
  if (!ok_ || s_.size() - pos_ < n) {
    ok_ = false;
    return {};
  }
  std::string s = s_.substr(pos_, n);
  pos_ += n;
  return s;
}
NamedValues WireReader::Values() {
  NamedValues v;
  uint32_t n = U32();
  for (uint32_t i = 0; i < n && ok_; ++i) {
    std::string name = Str();
    int64_t value = I64();
    v.emplace_back(std::move(name), value);
  }
  return v;
}

ParamValues WireReader::Params() {
  ParamValues v;
  uint32_t n = U32();
  for (uint32_t i = 0; i < n && ok_; ++i) {
    std::string name = Str();
    const int64_t number = I64();
    const std::string text = Str();
    if (!text.empty() && text != "true" && text != "false" && !CheckCategoricalText(text).ok()) ok_ = false;
    if (ok_) v.emplace_back(std::move(name), ParamValue::Of(number, text));
  }
  return v;
}

Status WriteFrame(int fd, const std::string& payload) {
  if (payload.size() > kMaxFrameBytes) return Status::Error("runner frame too large");
  std::string header;
  PutLe(&header, uint32_t(payload.size()));
  TUNE_RETURN_IF_ERROR(WriteAll(fd, header.data(), header.size()));
  return WriteAll(fd, payload.data(), payload.size());
}

Result<std::string> ReadFrame(int fd) {
  char hdr[4];
  std::string why;
  int r = ReadAll(fd, hdr, 4, &why);
  if (r == 1) return Status::EndOfStream("runner pipe closed");
  if (r < 0) return Status::Error(why);
  uint32_t n;
  std::memcpy(&n, hdr, 4);
  if (n == 0 || n > kMaxFrameBytes) return Status::Error("runner frame has bad length " + std::to_string(n));
  std::string payload(n, '\0');
  r = ReadAll(fd, payload.data(), n, &why);
  if (r != 0) return Status::Error(r == 1 ? "runner pipe closed mid-frame" : why);
  return payload;
}

void EncodeMeasureRequest(const MeasureRequest& r, WireWriter* w) {
  w->Str(r.package_digest);
  w->Str(r.dtype);
  w->Params(r.config.params);
  w->Str(r.config_id);
  w->Values(r.shape.dims);
  w->Str(r.image_key);
  w->Str(r.image);
  w->I64(r.compile_resources.registers);
  w->I64(r.compile_resources.static_smem_bytes);
  w->I64(r.compile_resources.local_bytes);
  const TimingPolicy& p = r.policy;
  w->I64(p.warmup);
  w->I64(p.min_samples);
  w->I64(p.max_samples);
  w->F64(p.target_rel_ci);
  w->F64(p.rank_rel_ci);
  w->F64(p.max_seconds);
  w->F64(p.early_stop_factor);
  w->F64(p.timeout_seconds);
  w->F64(p.refine_within);
  w->F64(p.refine_seconds);
  w->U8(p.new_buffers ? 1 : 0);
  w->I64(p.placements);
  w->F64(p.idle_seconds);
  w->F64(p.energy_seconds);
  w->F64(r.best_so_far_us);
  w->Str(r.baseline);
  w->Str(r.default_image_key);
  w->Str(r.default_image);
}

MeasureRequest DecodeMeasureRequest(WireReader* rd) {
  MeasureRequest r;
  r.package_digest = rd->Str();
  r.dtype = rd->Str();
  r.config.params = rd->Params();
  r.config_id = rd->Str();
  r.shape.dims = rd->Values();
  r.image_key = rd->Str();
  r.image = rd->Str();
  r.compile_resources.registers = int(rd->I64());
  r.compile_resources.static_smem_bytes = rd->I64();
  r.compile_resources.local_bytes = rd->I64();
  TimingPolicy& p = r.policy;
  p.warmup = int(rd->I64());
  p.min_samples = int(rd->I64());
  p.max_samples = int(rd->I64());
  p.target_rel_ci = rd->F64();
  p.rank_rel_ci = rd->F64();
  p.max_seconds = rd->F64();
  p.early_stop_factor = rd->F64();
  p.timeout_seconds = rd->F64();
  p.refine_within = rd->F64();
  p.refine_seconds = rd->F64();
  p.new_buffers = rd->U8() != 0;
  p.placements = int(rd->I64());
  p.idle_seconds = rd->F64();
  p.energy_seconds = rd->F64();
  r.best_so_far_us = rd->F64();
  r.baseline = rd->Str();
  r.default_image_key = rd->Str();
  r.default_image = rd->Str();
  return r;
}

void EncodeDeviceInfo(const DeviceInfo& d, WireWriter* w) {
  w->I64(d.index);
  w->Str(d.name);
  w->Str(d.model);
  w->Str(d.backend);
  w->I64(d.cc_major);
  w->I64(d.cc_minor);
  w->I64(d.num_sms);
  w->I64(d.total_mem_bytes);
  w->I64(d.l2_bytes);
  w->I64(d.smem_per_block_optin);
  w->I64(d.max_threads_per_block);
  w->I64(d.sm_clock_mhz);
  w->I64(d.mem_clock_mhz);
  w->Str(d.driver_version);
  w->Str(d.nvrtc_version);
}

DeviceInfo DecodeDeviceInfo(WireReader* r) {
  DeviceInfo d;
  d.index = int(r->I64());
  d.name = r->Str();
  d.model = r->Str();
  d.backend = r->Str();
  d.cc_major = int(r->I64());
  d.cc_minor = int(r->I64());
  d.num_sms = int(r->I64());
  d.total_mem_bytes = r->I64();
  d.l2_bytes = r->I64();
  d.smem_per_block_optin = r->I64();
  d.max_threads_per_block = int(r->I64());
  d.sm_clock_mhz = int(r->I64());
  d.mem_clock_mhz = int(r->I64());
  d.driver_version = r->Str();
  d.nvrtc_version = r->Str();
  return d;
}

void EncodeMeasurement(const Measurement& m, WireWriter* w) {
  w->U32(uint32_t(m.failure));
  w->Str(m.failure_message);
  for (double v : {m.median_us, m.mean_us, m.stdev_us, m.min_us, m.max_us, m.ci95_us}) w->F64(v);
  w->U32(m.samples);
  w->U8((m.check_passed ? 1 : 0) | (m.unchecked ? 2 : 0) | (m.against_default ? 4 : 0));
  w->F64(m.max_abs_error);
  w->F64(m.mismatch_ratio);
  const KernelResources& k = m.resources;
  w->I64(k.registers);
  w->I64(k.static_smem_bytes);
  w->I64(k.dynamic_smem_bytes);
  w->I64(k.local_bytes);
  w->I64(k.max_threads_per_block);
  w->F64(k.occupancy);
  w->U8(m.throttled ? 1 : 0);
  w->I64(m.sm_clock_mhz);
  w->Str(m.baseline);
  for (double v : {m.energy_uj, m.power_w, m.power_limit_w}) w->F64(v);
}

Measurement DecodeMeasurement(WireReader* r) {
  Measurement m;
  m.failure = FailureClass(r->U32());
  m.failure_message = r->Str();
  m.median_us = r->F64();
  m.mean_us = r->F64();
  m.stdev_us = r->F64();
  m.min_us = r->F64();
  m.max_us = r->F64();
  m.ci95_us = r->F64();
  m.samples = r->U32();
  const uint8_t check = r->U8();
  m.check_passed = (check & 1) != 0;
  m.unchecked = (check & 2) != 0;
  m.against_default = (check & 4) != 0;
  m.max_abs_error = r->F64();
  m.mismatch_ratio = r->F64();
  KernelResources& k = m.resources;
  k.registers = int(r->I64());
  k.static_smem_bytes = r->I64();
  k.dynamic_smem_bytes = r->I64();
  k.local_bytes = r->I64();
  k.max_threads_per_block = int(r->I64());
  k.occupancy = r->F64();
  m.throttled = r->U8() != 0;
  m.sm_clock_mhz = int(r->I64());
  m.baseline = r->Str();
  m.energy_uj = r->F64();
  m.power_w = r->F64();
  m.power_limit_w = r->F64();
  return m;
}

void EncodePackage(const std::string& digest, const std::string& origin, const OpPackage& pkg, WireWriter* w) {
  w->Str(digest);
  w->Str(origin);
  w->U32(uint32_t(pkg.size()));
  for (const auto& [name, text] : pkg) {
    w->Str(name);
    w->Str(text);
  }
}


}  // namespace tune::runner
