// Plain C++ value types shared by every part of tunefarm.
//
// Only the codec stage sees Cap'n Proto; everything else passes these
// structs around. They are cheap to copy and carry no behaviour beyond
// canonical string forms, which are part of the store's key format and must
// never change for existing data.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tune/status.h"

namespace tune {

// An ordered list of (name, integer value). Used for a config's parameter
// assignment (in the op's axis order) and for a problem shape (in the op's
// dims order).
using NamedValues = std::vector<std::pair<std::string, int64_t>>;

// "A=1,B=2" in the given order. Names never contain ',' or '='.
std::string JoinNamedValues(const NamedValues& v);
// Inverse of JoinNamedValues; returns false on malformed text.
bool ParseNamedValues(const std::string& text, NamedValues* out);
// Value of `name`, or `fallback` when absent.
int64_t ValueOf(const NamedValues& v, const std::string& name, int64_t fallback = 0);

// One value of a config param. Most axes are integers; a categorical axis
// holds strings (macro tokens such as `stream_k`) or booleans. Expressions,
// launch programs and models compute in numbers, so every value has one
// (Number()): an integer is itself, a boolean 0 or 1, a string its
// CategoricalCode, fixed by its text alone, so that an op's compiled rules
// in a bundle and a deployment's runtime agree without a table of labels.
class ParamValue {
 public:
  enum class Kind : uint8_t { kInt = 0, kBool = 1, kString = 2 };
  ParamValue(int64_t v = 0) : number_(v) {}  // NOLINT: integers read as themselves
  static ParamValue Bool(bool b);
  // `text` must pass CheckCategoricalText; the caller checked it.
  static ParamValue String(std::string text);
  // From a number and a spelling, as the runtime's NamedInts holds a param:
  // no spelling is an integer, "true"/"false" a boolean, else a string.
  static ParamValue Of(int64_t number, const std::string& text);

  Kind kind() const { return kind_; }
  bool IsInt() const { return kind_ == Kind::kInt; }
  int64_t Number() const { return number_; }
  const std::string& text() const { return text_; }  // strings only; "" otherwise
  // "128", "true", "stream_k": the spelling of Canonical(), tables and JSON.
  std::string ToString() const;
  // Integers by value, then booleans, then strings by text.
  auto operator<=>(const ParamValue& o) const {
    if (kind_ != o.kind_) return kind_ <=> o.kind_;
    if (kind_ == Kind::kString) return text_.compare(o.text_) <=> 0;
    return number_ <=> o.number_;
  }
  bool operator==(const ParamValue& o) const { return kind_ == o.kind_ && number_ == o.number_ && text_ == o.text_; }

 private:
  Kind kind_ = Kind::kInt;
  int64_t number_ = 0;
  std::string text_;
};

// A string value's number: 2^52 plus 52 bits of BLAKE2b-64 of the text, so
// it is exact in a double and never a plausible tile size.
int64_t CategoricalCode(std::string_view text);
// OK when `text` can be a string axis value: a macro token
// ([A-Za-z_][A-Za-z0-9_]*, at most 64 characters) other than "true" and
// "false", which are the booleans' spelling.
Status CheckCategoricalText(std::string_view text);

// A config's params in the op's axis order.
using ParamValues = std::vector<std::pair<std::string, ParamValue>>;

// "BM=128,SCHEDULE=stream_k,TMA=true" in the given order.
std::string JoinParamValues(const ParamValues& v);
// Inverse of JoinParamValues: an integer, "true"/"false", or else a string
// that passes CheckCategoricalText; false on malformed text.
bool ParseParamValues(const std::string& text, ParamValues* out);
// The number of `name`'s value (ParamValue::Number), or `fallback` when absent.
int64_t ValueOf(const ParamValues& v, const std::string& name, int64_t fallback = 0);

// One point of an op's config space.
struct Config {
  ParamValues params;  // axis order of the op spec
  // Canonical text: params sorted by name, "BK=32,BM=128,...". Stable across
  // axis reorderings, so it identifies the config in the store.
  std::string Canonical() const;
  // 16 hex digits: BLAKE2b-64 of Canonical().
  std::string Id() const;
};

// How a lookup key buckets one dim (op.toml [op] buckets): a deployment's
// dims are mapped to their bucket's value before a bundle is searched, so
// that M = 100 finds the config tuned at M = 128 (meTile's key=, vLLM's
// batch-size buckets). The farm tunes the buckets' values.
struct DimBucket {
  enum class Kind : uint8_t { kExact = 0, kPow2 = 1, kList = 2 };
  Kind kind = Kind::kExact;
  std::vector<int64_t> values;  // kList: ascending, positive
  // The value of v's bucket: v (exact); the least power of two >= v (pow2;
  // 1 for v <= 1); the least listed value >= v, else the largest (list).
  int64_t Of(int64_t v) const;
  // OK when the values suit the kind (a list: 1 to 4096 ascending values in
  // [1, 2^40]); errors name the problem.
  Status Check() const;
};
inline constexpr size_t kMaxBucketValues = 4096;

// One problem shape, dims in the op's declared order.
struct Shape {
  NamedValues dims;
  std::string Canonical() const { return JoinNamedValues(dims); }  // "M=4096,N=4096,K=4096"
};

// Why a (config, shape) produced no valid figure. Values match the schema's
// FailureClass enum; never renumber.
enum class FailureClass : uint16_t {
  kNone = 0,
  kCompileError = 1,
  kResources = 2,
  kLaunchError = 3,
  kCrash = 4,
  kTimeout = 5,
  kWrongResult = 6,
  kNan = 7,
  kSkipped = 8,  // stopped early: clearly slower than the best so far
};
const char* FailureClassName(FailureClass c);        // "compile_error", ...
FailureClass FailureClassFromName(const std::string& name);  // kNone when unknown

// How a confirm phase times its contenders. Values match the schema's
// ConfirmTiming enum; never renumber.
//   kSustained: back-to-back windows, round-robin. The figure is the speed
//     under sustained load, which on a GPU at its power limit swings by 5-10%
//     over a few hundred milliseconds and with its temperature, so the same
//     config's figure moves by 1-3% from run to run.
//   kBurst: each timing a short burst after the GPU has idled. The figure is
//     the speed at the clocks the GPU starts from, the same from run to run
//     within a few tenths of a percent whatever ran before; but a kernel of
//     microseconds that never reaches the power limit repeats worse in
//     bursts than in sustained windows (bench/gpu_h100.md, "Fifth session").
//   kAuto: one round of each, then bursts if sustained load made the
//     contenders slower than bursts did (the GPU is at its power limit),
//     else sustained windows.
enum class ConfirmTiming : uint16_t { kSustained = 0, kBurst = 1, kAuto = 2 };
const char* ConfirmTimingName(ConfirmTiming t);      // "sustained", "burst", "auto"
bool ParseConfirmTiming(const std::string& name, ConfirmTiming* out);  // false when unknown

// How each timed sample meets the L2 cache (an op's `timing`, a sweep's
// override: OpSpec::timing). kCold flushes it before every sample: the
// kernel reads its inputs from DRAM, as the first kernel after other work
// does. kHot leaves what the warm-up and the previous sample brought in: a
// decode-sized kernel inside a model, whose inputs the kernel before it
// just wrote, runs like that. A winner under one can lose under the other;
// their rows never mix (the timing is part of the kernel hash).
enum class L2Timing : uint8_t { kCold = 0, kHot = 1 };
const char* L2TimingName(L2Timing t);                        // "cold", "hot"
bool ParseL2Timing(const std::string& name, L2Timing* out);  // false when unknown

// What picks a key's winner: its time (the median), its energy per call, or
// their product (energy-delay, EDP), the last two only among rows whose
// energy was measured (Measurement::energy_uj).
enum class Objective : uint8_t { kTime = 0, kEnergy = 1, kEdp = 2 };
const char* ObjectiveName(Objective o);                        // "time", "energy", "edp"
bool ParseObjective(const std::string& name, Objective* out);  // false when unknown

// What a worker knows about one of its GPUs (or a simulated one).
struct DeviceInfo {
  int index = 0;                 // ordinal on its host
  std::string name;              // as reported, "NVIDIA H100 80GB HBM3"
  std::string model;             // normalised store key, "h100-80gb-hbm3"
  std::string backend;           // "cuda" or "sim"
  int cc_major = 0, cc_minor = 0;
  int num_sms = 0;
  int64_t total_mem_bytes = 0;
  int64_t l2_bytes = 0;
  int64_t smem_per_block_optin = 0;
  int max_threads_per_block = 0;
  int sm_clock_mhz = 0;
  int mem_clock_mhz = 0;
  std::string driver_version;    // "13.0"
  std::string nvrtc_version;     // "13.0", "sim"
  // The board's enforced power limit when the device was listed (NVML;
  // the sim's model), W; 0 = not read. A label only: the farm never sets it.
  double power_limit_w = 0;
};

// Normalises a device name into a store-key model string: lower case, runs
// of non-alphanumerics collapsed to '-', a leading "nvidia-" removed.
std::string NormaliseGpuModel(const std::string& device_name);

// Resource usage of one compiled config.
struct KernelResources {
  int registers = 0;
  int64_t static_smem_bytes = 0;
  int64_t dynamic_smem_bytes = 0;
  int64_t local_bytes = 0;  // spills
  int max_threads_per_block = 0;
  double occupancy = 0;     // active warps / max warps per SM, 0..1
};

// Configs whose medians are within this of each other are a tie, which
// publish breaks by a rule that holds from run to run (publish/publish.h,
// StableWinners); a confirm unit's worker profiles every config within it
// of the fastest, so that whichever wins has its profile.
inline constexpr double kTieWithin = 0.01;

// Which stored rows a read selects (ResultStore::Scan, `store export`, a
// remote read): each part empty = any.
struct ResultFilter {
  std::string gpu_model, op, dtype, shape, kernel_hash;
};

// One (config, shape) outcome on one GPU model. Timing fields are in
// microseconds; they are 0 when `failure != kNone`.
struct Measurement {
  // Key.
  std::string gpu_model, op, dtype, shape, kernel_hash, config_id;
  // For an op whose hosts add to its kernel hash (OpSpec::HostDigested),
  // the digest of what this host added (the headers read from include
  // roots, a program's version output): kernel_hash is
  // KernelHashWithIncludes(op hash, this).
  std::string include_digest;
  // Payload.
  Config config;
  FailureClass failure = FailureClass::kNone;
  std::string failure_message;
  double median_us = 0, mean_us = 0, stdev_us = 0, min_us = 0, max_us = 0, ci95_us = 0;
  uint32_t samples = 0;
  bool check_passed = false;
  // Ran without its output being checked ([check] skip = true): valid, but
  // behind every checked row of its key when the best is picked.
  bool unchecked = false;
  // Checked against the op's default config's outputs ([check] default =
  // true, or a program op's check against its default), not a reference.
  bool against_default = false;
  double max_abs_error = 0, mismatch_ratio = 0;
  KernelResources resources;
  bool throttled = false;
  int sm_clock_mhz = 0;
  // Energy, where the worker measured it (TimingPolicy::energy_seconds):
  // per call (microjoules) and the board's mean power (watts) over a window
  // of back-to-back calls, and the power limit the device enforced then
  // (its label: figures under another limit are other figures). 0: not
  // measured.
  double energy_uj = 0, power_w = 0, power_limit_w = 0;
  std::string backend;        // "cuda" | "sim": sim figures are never hardware results
  std::string device_name, worker, driver_version, nvrtc_version, farm_version;
  int64_t unix_time = 0;
  std::string sweep_id;
  // Which pass of its sweep took the figure, in the order the passes run:
  // kRefine (SweepSubmit::refine_pass) replaces the config's screening row
  // of its key, kConfirm (a confirm unit, SweepSubmit::confirm_top) replaces
  // either, once each. Within a key a later pass's figure outranks an
  // earlier one's: it was timed to a tighter target (confirm: with the
  // other contenders, round by round).
  enum class Pass : uint8_t { kScreen = 0, kRefine = 1, kConfirm = 2 };
  Pass pass = Pass::kScreen;
  ConfirmTiming confirm_timing = ConfirmTiming::kSustained;  // how a kConfirm figure was timed
  L2Timing timing = L2Timing::kCold;                          // how its samples met the L2 (its op's)
  // The config's screening figure (us) that a refine or confirm row
  // replaced, carried on from a refine row to a confirm one (ResultStore
  // sets it); 0 on a screening row.
  double screen_us = 0;
  // The architecture of the measured cubin ("sm_90a"; "" for sim): with the
  // key it names the row's KernelImage.
  std::string arch;
  // The search strategy that proposed the config ("model/1"; set by the
  // coordinator at ingestion, "" on rows stored before).
  std::string proposer;
  // A baseline's row ([baseline] of the op): the library timed and its
  // version ("cublaslt 13.0.0"); the config is the op's default, which
  // only sized the buffers. Empty on a config's row.
  std::string baseline;

  // A refine or confirm figure: the row took the place of the config's
  // screening row of its key.
  bool ReplacesScreening() const { return pass != Pass::kScreen; }
  // The order of a key's valid rows when the store picks the best: a
  // checked row first, then a later pass's figure, then the faster.
  bool RanksAhead(const Measurement& other) const {
    if (unchecked != other.unchecked) return !unchecked;
    return pass != other.pass ? pass > other.pass : median_us < other.median_us;
  }

  // A config is a candidate winner only when it ran and passed its check (or
  // its op does not check).
  bool Valid() const { return failure == FailureClass::kNone && (check_passed || unchecked) && samples > 0; }
  // The row's status as every output names it (table, CSV, JSON, metrics):
  // "ok", "unchecked" (valid, output not judged), "no_samples",
  // "check_not_passed", or the failure class ("compile_error", ...).
  const char* StatusName() const;
  // What its output was checked against, as every output names it:
  // "reference" (a reference or checker kernel, a program's reference),
  // "default" (the default config's outputs) or "none" (unchecked).
  const char* CheckedAgainst() const { return unchecked ? "none" : against_default ? "default" : "reference"; }
  // Its figure under `o` (smaller is better): median_us, energy_uj or
  // energy_uj * median_us; 0 where it has none (energy not measured).
  double ObjectiveValue(Objective o) const {
    return o == Objective::kTime ? median_us : o == Objective::kEnergy ? energy_uj : energy_uj * median_us;
  }
  // Copies what a measurement found (failure, timings, check, resources,
  // clocks) from `from`, keeping this one's key and provenance.
  void CopyOutcome(const Measurement& from);
};

// How many times faster a median is than its op's baseline (the baseline's
// median over it): above 1 the farm's kernel wins. 0 when either figure is
// missing (not positive).
inline double VsBaseline(double baseline_us, double median_us) {
  return baseline_us > 0 && median_us > 0 ? baseline_us / median_us : 0;
}

// The exact binary a worker measured, keyed by (kernel hash, config id,
// dtype, arch). sha256 is of `image`, 64 lower-case hex digits.
struct KernelImage {
  std::string kernel_hash, config_id, dtype, arch, sha256;
  std::string image;
  // Kept by the store, never taken from a peer: who sent this very image
  // (WitnessOfKey: the key the sender proved it holds), and "witness sha256"
  // of each that sent another one for the same key (at most
  // kMaxKernelWitnesses each).
  std::vector<std::string> witnesses, conflicts;
  // "kernel_hash/config_id/dtype/arch": the store's key.
  std::string Key() const { return KeyOf(kernel_hash, config_id, dtype, arch); }
  static std::string KeyOf(const std::string& kernel_hash, const std::string& config_id, const std::string& dtype,
                           const std::string& arch) {
    return kernel_hash + "/" + config_id + "/" + dtype + "/" + arch;
  }
  // Two keys or more sent this image and none another one: no single
  // peer's word. A witness is a key, whatever names its peer gave: only
  // witnesses of WitnessOfKey's form count (a store's older witnesses,
  // worker names, count for nothing).
  bool Corroborated() const;
};
// The witness a peer's image gets: its CURVE public key (Z85), the one
// identity a peer cannot choose twice. "" (no witness) for an empty key: a
// peer without CURVE vouches for nothing.
std::string WitnessOfKey(const std::string& z85_key);
inline constexpr size_t kMaxKernelWitnesses = 16;
// The largest cubin the farm accepts from a peer or a bundle.
inline constexpr size_t kMaxKernelImageBytes = size_t(16) << 20;
// The dtypes tunefarm knows, a row each: the one home of what a dtype is.
struct DTypeInfo {
  const char* name;
  int bytes;                 // per element
  bool op;                   // an op may be tuned in it ([op] dtypes)
  bool buffer;               // a buffer may hold it (an arg's dtype)
  const char* cuda_type;     // its CUDA C type in generated sources; "" for none
  long long exact_integers;  // integers up to this magnitude are exact in it
};
inline constexpr DTypeInfo kDTypeTable[] = {
    {"f16", 2, true, true, "__half", 2048},
    {"bf16", 2, true, true, "__nv_bfloat16", 256},
    {"f32", 4, true, true, "float", 1ll << 24},
    {"i32", 4, false, true, "int", (1ll << 31) - 1},
    {"i64", 8, false, false, "", (1ll << 53)},
};
// The row of `dtype`; null when unknown.
const DTypeInfo* FindDType(std::string_view dtype);
// Bytes per element of a dtype ("f16" 2, "f32" 4, ...); 0 when unknown.
int DTypeSize(const std::string& dtype);
// SHA-256 of `bytes` as 64 lower-case hex digits.
std::string Sha256Hex(std::string_view bytes);
// Checks a KernelImage's values: key fields are short printable names, the
// image is a cubin (CheckCubin) of at most kMaxKernelImageBytes for `arch`
// whose SHA-256 is `sha256`, witnesses and conflicts are at most
// kMaxKernelWitnesses short printable names each. The error names the field.
Status CheckKernelImage(const KernelImage& k);
// OK when `image` is a CUDA cubin for `arch` ("sm_90", "sm_90a"): a 64-bit
// little-endian ELF executable for the CUDA machine (EM_CUDA) whose flags
// name that SM, with its section table inside the file. An x86 program, a
// zero-filled ELF or a cubin of another SM is refused, the error says why.
Status CheckCubin(std::string_view image, const std::string& arch);
// OK when `image` (a checked cubin) defines each of `entries` as a global
// function symbol: the op's kernel must be there to be launched.
Status CheckCubinEntries(std::string_view image, const std::vector<std::string>& entries);
// The byte sizes of `entry`'s parameters in order, as ptxas recorded them in
// the cubin (its .nv.info.<entry> section, EIATTR_KPARAM_INFO records);
// NotFound when the cubin has no such record of the kernel.
Result<std::vector<uint32_t>> CubinKernelParamSizes(std::string_view image, const std::string& entry);

// What a sweep measured of one (GPU model, op, dtype, shape) of a kernel:
// every legal config (exhausted), what a search strategy chose within its
// budget (searched), or less than it set out to (partial: its sweep was
// cancelled or failed, or stopped waiting for the model). `best`,
// `compare`, the dashboard and bundles show it; a partial key is never
// called exact.
struct KeyCoverage {
  enum class State : uint8_t { kPartial = 1, kExhausted = 2, kSearched = 3 };
  std::string gpu_model, op, dtype, shape, kernel_hash;
  uint64_t legal = 0;       // legal configs of the key (estimated when !legal_exact)
  bool legal_exact = true;
  uint64_t evaluated = 0;   // configs with a row
  std::string strategy;     // "exhaustive/1", "model/1", ...
  uint64_t budget = 0;      // evaluations allowed (0: none, exhaustive)
  uint64_t seed = 0;
  State state = State::kPartial;
  std::string sweep_id;
  int64_t unix_time = 0;
};
const char* CoverageStateName(KeyCoverage::State state);  // "partial", "exhausted", "searched"

}  // namespace tune
