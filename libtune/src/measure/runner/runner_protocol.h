// The wire between a CudaBackend and its runner process.
//
// A frame is a little-endian u32 length, then that many bytes: a u8 message
// type and its fields. Both ends are the same build of tunefarm (the runner is
// the worker's own binary), so the encoding is a plain field sequence with a
// protocol version checked once at start-up rather than a schema.
//
//   backend -> runner   kInit       version, cache dir, include roots (count, name, path)
//   runner  -> backend  kHello      version, ok, error, DeviceInfo
//   backend -> runner   kPackage    digest, origin, files        (once per op digest)
//   backend -> runner   kMeasure    MeasureRequest
//   runner  -> backend  kStarted    (problem ready; the per-config clock starts)
//   runner  -> backend  kResult     Measurement, fatal flag
#pragma once

#include <cstdint>
#include <string>

#include "measure/backend.h"
#include "opspec/op_definition.h"
#include "tune/status.h"
#include "base/types.h"

namespace tune::runner {

constexpr uint32_t kRunnerProtocolVersion = 10;
constexpr uint32_t kMaxFrameBytes = 1u << 30;

enum class MsgType : uint8_t {
  kInit = 1,
  kHello = 2,
  kPackage = 3,
  kMeasure = 4,
  kStarted = 5,
  kResult = 6,
};

class WireWriter {
 public:
  explicit WireWriter(MsgType type) { buf_.push_back(char(type)); }
  void U8(uint8_t v) { buf_.push_back(char(v)); }
  void U32(uint32_t v);
  void I64(int64_t v);
  void F64(double v);
  void Str(const std::string& s);
  void Values(const NamedValues& v);
  void Params(const ParamValues& v);  // a config's: numbers and spellings
  const std::string& bytes() const { return buf_; }

 private:
  std::string buf_;
};

class WireReader {
 public:
  explicit WireReader(const std::string& frame) : s_(frame) {}
  MsgType Type();
  uint8_t U8();
  uint32_t U32();
  int64_t I64();
  double F64();
  std::string Str();
  NamedValues Values();
  ParamValues Params();
  // False once any read ran past the end; reads then return zeros.
  bool ok() const { return ok_; }

 private:
  bool Take(void* dst, size_t n);
  const std::string& s_;
  size_t pos_ = 0;
  bool ok_ = true;
};

// Blocking whole-frame I/O. WriteFrame uses send(MSG_NOSIGNAL) on sockets so a
// dead peer is an error, not SIGPIPE; on other fds it uses write().
Status WriteFrame(int fd, const std::string& payload);
// Reads one frame; error on EOF (StatusCode::kEndOfStream when the peer closed
// cleanly between frames) or malformed length.
Result<std::string> ReadFrame(int fd);

// What the backend asks the runner to do with one (config, shape).
struct MeasureRequest {
  std::string package_digest;
  std::string dtype;
  Config config;
  std::string config_id;
  Shape shape;
  std::string image_key;    // identifies `image`; empty image = reuse the runner's last one
  std::string image;
  KernelResources compile_resources;
  TimingPolicy policy;
  double best_so_far_us = 0;
  // Not empty: time the op's [baseline] library ("cublaslt") on the
  // buffers `config` (the op's default) sizes, instead of a cubin.
  std::string baseline;
  // [check] default: the op's default config's cubin, whose outputs are the
  // reference of every problem (Runner::RunDefault). Sent once per key; an
  // empty image = the runner holds it already.
  std::string default_image_key;
  std::string default_image;
};

void EncodeMeasureRequest(const MeasureRequest& r, WireWriter* w);
MeasureRequest DecodeMeasureRequest(WireReader* r);

void EncodeDeviceInfo(const DeviceInfo& d, WireWriter* w);
DeviceInfo DecodeDeviceInfo(WireReader* r);

// The runner-produced part of a Measurement.
void EncodeMeasurement(const Measurement& m, WireWriter* w);
Measurement DecodeMeasurement(WireReader* r);

void EncodePackage(const std::string& digest, const std::string& origin, const OpPackage& pkg, WireWriter* w);

}  // namespace tune::runner
