// The wire protocol between coordinator, workers, builders and clients, as plain C++
// structs. The codec stage (protocol/protocol.cc, which with the record and
// bundle codecs alone sees the generated Cap'n Proto types) turns them into
// frames; it speaks no transport, and libtune's wire stage carries the frames
// over ZeroMQ.
//
// Pattern: ROUTER (coordinator) / DEALER (workers, clients). Every message is
// one Envelope in one frame (after the ROUTER's identity frame). Any command
// a peer receives counts as a heartbeat from the sender.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "opspec/op_definition.h"
#include "base/profile.h"
#include "tune/status.h"
#include "opspec/sweep_file.h"
#include "base/types.h"

namespace tune {

inline constexpr uint16_t kProtocolVersion = 1;
// Frames larger than this are dropped and the peer disconnected.
inline constexpr size_t kMaxFrameBytes = 64u << 20;

struct Hello {
  std::string worker_name;           // host:pid
  std::string farm_version;
  std::vector<DeviceInfo> devices;
  // A builder's (`worker --compile-only`): no devices; the architectures it
  // compiles for ("sm_90", "sm_90a"; at most kMaxBuilderArchs) and its
  // toolchain (NvrtcVersionString), which enters the kernel hash of what
  // it builds. Empty for a GPU worker.
  std::vector<std::string> builder_archs;
  std::string builder_toolchain;
  bool builder() const { return !builder_archs.empty(); }
};
inline constexpr size_t kMaxBuilderArchs = 16;
struct HelloAck {
  uint32_t heartbeat_ms = 1000;      // both sides send at this interval
  uint32_t liveness = 5;             // missed intervals before a peer is dead
};
struct Heartbeat {};
// A device asks for work while it holds fewer units than this: the one it
// times and those whose configs compile meanwhile (the worker's compile
// pool works ahead of its devices). The coordinator sizes a search's
// configs in flight by it.
inline constexpr size_t kUnitsHeldPerDevice = 3;
struct RequestWork {
  int device_index = 0;              // which of the worker's devices may take a unit
};
struct NoWork {
  uint32_t retry_ms = 200;
};
// A config's stored row under one host digest (Measurement::include_digest).
struct StoredDigest {
  std::string config_id, digest;
  bool operator==(const StoredDigest&) const = default;
  auto operator<=>(const StoredDigest&) const = default;
};
// A work unit: chunk of configs of one (sweep, op, dtype, GPU model), timed
// on `shapes`: one shape from this coordinator (sweeps screen shape by
// shape); a worker times every shape it is given.
struct WorkUnit {
  std::string sweep_id;
  uint64_t unit_id = 0;
  uint32_t attempt = 0;              // leases of this unit so far, from 1
  int device_index = 0;
  std::string op;
  OpPackage op_package;
  std::string dtype;
  std::vector<Shape> shapes;
  std::vector<Config> configs;
  double lease_seconds = 0;          // the coordinator's deadline for this unit
  // > 0: a confirm unit; `configs` are the fastest of `shapes` (one shape)
  // and are timed again together, round-robin, for this long.
  double confirm_seconds = 0;
  ConfirmTiming confirm_timing = ConfirmTiming::kSustained;
  // > 0: a refine unit; `configs` came within TimingPolicy::refine_within of
  // this best (us, in screening terms) of `shapes` (one shape), timed again as
  // contenders (to the CI target, whatever their new figure).
  double refine_best_us = 0;
  // A screening unit of a sweep with a refine pass: every config is timed
  // to rank it only (TimingPolicy::rank_rel_ci, no refine window).
  bool screen_only = false;
  // A confirm unit of a sweep with profile_top: its fastest `profile_top`
  // configs are profiled (Backend::ProfileKernel) once timed.
  uint32_t profile_top = 0;
  // A screening unit of an op whose hosts add to its kernel hash
  // (OpSpec::HostDigested): its configs the store holds rows of, with the
  // host digest of each row. A worker whose digest for the op is one of
  // them reuses that row (Results::reused) instead of measuring the config.
  std::vector<StoredDigest> reusable;
  // > 0: measure each config's energy over a window this long after its
  // timing (TimingPolicy::energy_seconds): its sweep's objective is energy
  // or edp (SweepSubmit::objective).
  double energy_seconds = 0;
  bool confirm() const { return confirm_seconds > 0; }
  bool refine() const { return refine_best_us > 0; }
};
// Where a pipeline's time went (schema PipelineFigures): a unit's, sent by
// its worker with the final batch, or a sweep's sum of them.
inline constexpr uint32_t kMaxCompileThreads = 4096;  // a worker's pool, at most
struct PipelineFigures {
  uint64_t units = 0;                   // units summed (1 for a unit's)
  uint64_t compiled = 0, fetched = 0, cached = 0;  // configs, each once
  double compile_seconds = 0;           // compiler time
  double device_wait_seconds = 0;       // devices waiting for compiles
  double measure_seconds = 0;           // devices checking and timing
  double unit_seconds = 0;              // devices holding the units, first config to last row
  // The compile pool's threads: a unit's worker's, or a sweep's workers'
  // summed (each once, Scheduler::AddPipeline); and a sweep's wall seconds
  // from its first lease to its last unit's end or now (a unit's are 0).
  // Neither is summed by +=.
  uint32_t compile_threads = 0;
  double wall_seconds = 0;
  PipelineFigures& operator+=(const PipelineFigures& o);
  // Why a unit's figures cannot be so (`configs` the unit's), or "": counts
  // over the unit's configs, seconds not finite, negative or over `bound`,
  // more compile threads than kMaxCompileThreads, wall seconds not 0.
  std::string Invalid(size_t configs, double bound) const;
};
struct Results {
  std::string sweep_id;
  uint64_t unit_id = 0;
  uint64_t batch = 0;                // per-unit batch number, for acks
  bool final = false;                // the last batch of the unit
  std::vector<Measurement> measurements;
  // The cubins of the batch's checked configs (each sent once per
  // connection); every one must belong to the unit and the sender's device.
  std::vector<KernelImage> kernels;
  // Profiles of the batch's configs on the unit's shape (a confirm unit of a
  // sweep with profile_top); each must be of a config of the unit.
  std::vector<KernelProfile> profiles;
  // The op's [baseline] timed on the unit's shapes (Measurement::baseline
  // set), each of the unit's op, dtype and shapes on the sender's GPU.
  std::vector<Measurement> baselines;
  // Configs of the unit the sender did not measure: its host digest for the
  // op is the one `reusable` offered their rows under.
  std::vector<StoredDigest> reused;
  PipelineFigures pipeline;          // with the final batch (units = 1)
};
// A worker whose rows are stamped this far from the coordinator's clock is
// told so and flagged (its rows are stored with the coordinator's time).
inline constexpr double kClockSkewWarnSeconds = 120;

struct ResultsAck {
  std::string sweep_id;
  uint64_t unit_id = 0;
  uint64_t batch = 0;
  uint32_t stored = 0;               // new rows; duplicates are not stored twice
  // Non-empty: the batch was refused (why, for the sender's log): it does not
  // match what was leased to the sender, and nothing of it was stored. The
  // sender drops it rather than send it again.
  std::string refused;
  // How far the sender's clock is ahead of the coordinator's, from the rows'
  // times (0: not ahead; rows older than their arrival may be resent ones).
  // Rows are stored with the coordinator's time.
  double clock_skew_seconds = 0;
};
// From a client: run this sweep (SweepSubmit, opspec/sweep_file.h).
struct SweepAccepted {
  std::string sweep_id;
};
// From a client: stop this running sweep. Answered with its SweepStatus
// (state "cancelled"), or an ErrorReply when it is unknown or ended.
struct SweepCancel {
  std::string sweep_id;
};
// From a client: the store's rows `filter` selects, as a `store export`
// file (store/store_transfer.h) read in pieces. An empty export_id asks the
// coordinator to make the export; the reply's id pages through it.
struct StoreRead {
  ResultFilter filter;
  std::string export_id;
  uint64_t offset = 0;
};
// A piece of an export: bytes [offset, offset + data.size()) of total_bytes.
struct StoreChunk {
  std::string export_id;
  uint64_t offset = 0, total_bytes = 0;
  std::string data;
};
// The most bytes of an export one StoreChunk carries.
inline constexpr size_t kStoreChunkBytes = 16u << 20;
struct SweepStatusRequest {
  std::string sweep_id;              // empty = all sweeps
};
struct SweepProgress {
  std::string sweep_id, name, state;  // state: "running" | "done" | "failed"
  uint64_t units_total = 0, units_done = 0;
  uint64_t pairs_total = 0, pairs_done = 0, pairs_failed = 0;
  std::map<std::string, uint64_t> failed_by_class;  // of pairs_failed, by FailureClassName
  std::vector<std::string> gpu_models;
  int64_t started_unix = 0, finished_unix = 0;
  std::string error;                  // why a failed sweep failed
  // Models the sweep has work for that no live worker has (named in the
  // sweep and never seen, or gone since): it waits for them.
  std::vector<std::string> waiting_for;
  // Models whose config spaces are being expanded (off the coordinator's
  // loop): their units come when that is done.
  std::vector<std::string> expanding;
  // What a running sweep waits for, a line per model as `status` prints it
  // after "waiting for ": "sim-h100: 120 pairs queued, no device has taken
  // work for 75 s; skipped after 300 s".
  std::vector<std::string> waits;
  // Models a `gpus = ["*"]` sweep stopped waiting for, a line each: no
  // device took work while work was queued; their unmeasured pairs are
  // dropped from pairs_total.
  std::vector<std::string> skipped;
  uint32_t priority = kDefaultSweepPriority;  // SweepSubmit::priority
  PipelineFigures pipeline;                  // summed over its units
  uint64_t in_flight = 0, in_flight_depth = 0;  // its searched keys' configs, summed
};
struct SweepStatus {
  std::vector<SweepProgress> sweeps;
  uint32_t workers = 0;
  // Non-empty while the coordinator's store refuses writes (disk full):
  // why; no units are leased until writes succeed again.
  std::string store_fault;
  // One device of each GPU model that a live worker serves: the farm's
  // models with their limits (`op check --coordinator` counts spaces on them).
  std::vector<DeviceInfo> devices;
};
// From a worker, before it compiles configs of a unit leased to it: the
// stored images of those (each by its KernelImage key) it lacks.
struct ImageWant {
  std::string kernel_hash, config_id, dtype, arch;
  std::string Key() const { return KernelImage::KeyOf(kernel_hash, config_id, dtype, arch); }
  bool operator==(const ImageWant&) const = default;
};
struct ImageRequest {
  std::string sweep_id;
  uint64_t unit_id = 0;
  std::vector<ImageWant> wants;
};
// The coordinator's answer: the wanted images two worker keys vouch for
// (KernelImage::Corroborated) or a key on the builder allow-list built,
// without their witnesses; `missing` of the
// wants are not among them (the worker compiles those). A non-empty
// `refused` says why the request broke a rule (naming the peer): no images.
// Later replies of the same unit may follow unasked while the worker holds
// it, bringing images of missing wants a builder built meanwhile; a worker
// judges them as the first and takes only images of wants still open.
struct ImageReply {
  std::string sweep_id;
  uint64_t unit_id = 0;
  std::vector<KernelImage> images;
  uint32_t missing = 0;
  std::string refused;
};
// The most configs one BuildWork hands out (and one BuiltImages brings
// images of): a frame of them stays far below kMaxFrameBytes.
inline constexpr size_t kMaxBuildConfigs = 64;
// From a builder: configs to compile, please; answered with a BuildWork,
// or NoWork when nothing waits to be built for its architectures.
struct BuildRequest {
  uint32_t max_configs = 8;          // the most it takes at once (1..kMaxBuildConfigs)
};
// To a builder: configs of one (sweep, op, dtype, arch) whose images the
// store lacks, handed to it alone for a while (coordinator/build_service.h).
// Each image it sends back must be of one of them, under `kernel_hash`:
// the op's hash for the builder's toolchain.
struct BuildWork {
  std::string sweep_id;
  uint64_t work_id = 0;
  std::string op;
  OpPackage op_package;
  std::string dtype, arch, kernel_hash;
  std::vector<Config> configs;       // at most kMaxBuildConfigs
};
// From a builder: the images of a BuildWork's configs that compiled
// (witnesses are the coordinator's to record); `failed` did not.
struct BuiltImages {
  uint64_t work_id = 0;
  std::vector<KernelImage> images;   // at most kMaxBuildConfigs
  uint32_t failed = 0;
};
struct ErrorReply {
  std::string message;
};
struct Disconnect {
  std::string reason;
};

using Command = std::variant<Hello, HelloAck, Heartbeat, RequestWork, NoWork, WorkUnit, Results,
                             ResultsAck, SweepSubmit, SweepAccepted, SweepStatusRequest,
                             SweepStatus, ErrorReply, Disconnect, SweepCancel, StoreRead, StoreChunk,
                             ImageRequest, ImageReply, BuildRequest, BuildWork, BuiltImages>;

struct Envelope {
  uint16_t version = kProtocolVersion;
  uint64_t seq = 0;
  std::string sender;
  Command command;
};

// Serialises one envelope into one frame.
std::string EncodeEnvelope(const Envelope& env);
// Parses one frame. Malformed, truncated, oversized (> kMaxFrameBytes) or
// wrong-version input is an error, never a crash; safe for hostile input.
// So is a Text field that is not valid UTF-8 or is longer than its bound
// (base/text.h: kMaxLogBytes for a failure message, kMaxMessageBytes for an
// error or disconnect text, kMaxNameBytes for the rest); the error names the
// field.
Result<Envelope> DecodeEnvelope(const void* data, size_t size);

// A Results command without its rows.
struct ResultsHead {
  std::string sweep_id;
  uint64_t unit_id = 0;
  uint64_t batch = 0;
  bool final = false;
};
// Reads the head of a Results frame in time independent of its row count,
// so a receiver can route a batch before paying for its rows. nullopt when
// the frame carries another command (decode it with DecodeEnvelope). Checks
// size, framing and version as DecodeEnvelope does; the rows are not read,
// so a frame that peeks fine may still fail DecodeEnvelope.
Result<std::optional<ResultsHead>> PeekResults(const void* data, size_t size);

// Name of a command alternative, for logs: "hello", "work_unit", ...
const char* CommandName(const Command& c);

}  // namespace tune
