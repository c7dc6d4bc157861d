// Bundles: the best configs for deployments, and their run-time lookup.
//
// A bundle holds, per (op, dtype, GPU model, shape), the winning config with
// its kernel hash, latency, spread and provenance, plus each op's default
// config. Stored as Cap'n Proto binary (schema/bundle.capnp) for deployments
// and JSON for people.
//
// Signed bundle files. What the farm ships is a .tfb file that wraps the
// Cap'n Proto message in a fixed binary envelope (integers little-endian):
//
//   offset    size  field
//   0         8     magic "TFBUNDLE"
//   8         4     envelope version, 1
//   12        4     signature algorithm, 1 = Ed25519
//   16        8     N, size of the payload in bytes (a multiple of 8)
//   24        8     signer's key id (signing.h)
//   32        N     payload: the Cap'n Proto Bundle message (EncodeBundle)
//   32+N      64    Ed25519 signature of bytes [0, 32+N)
//
// The envelope is plain bytes rather than a Cap'n Proto struct so that a
// deployment parses nothing from an untrusted file before the signature has
// been checked, and the signature covers the header too (the key id and the
// version cannot be swapped). A bare Cap'n Proto bundle (WriteBundleFiles)
// is an unsigned bundle; verified reads refuse it.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/launch_program.h"
#include "bundle/signing.h"
#include "tune/status.h"
#include "base/types.h"
#include "bundle/shape_selector.h"

namespace tune {

struct BundleEntry {
  std::string op, dtype, gpu_model;
  Shape shape;
  Config config;
  std::string config_id, kernel_hash;
  double median_us = 0, stdev_us = 0, ci95_us = 0;
  uint32_t samples = 0;
  double default_median_us = 0;     // the op's default config on the same key (0 = not measured)
  // The op's [baseline] on the same key ("cublaslt 13.1.0") and its median
  // (0 = not measured).
  std::string baseline;
  double baseline_median_us = 0;
  std::string backend;              // "cuda" | "sim"
  std::string device_name, nvrtc_version, driver_version;
  std::string arch;                 // of the measured cubin ("sm_90a"; "" for sim)
  // What the farm measured of the key (KeyCoverage): "exhausted",
  // "searched" or "partial" ("" where the store kept no record), legal and
  // evaluated configs, the strategy and its budget.
  struct Coverage {
    std::string state, strategy;
    uint64_t legal = 0, evaluated = 0, budget = 0;
  } coverage;
  // What its outputs were checked against (Measurement::CheckedAgainst:
  // "reference" | "default" | "none"; "" in older bundles).
  std::string checked_against;
  // Where measured: a call's energy, the mean power and the power limit
  // then (0 = not measured); and what picked it ("time" | "energy" |
  // "edp"; "" = time).
  double energy_uj = 0, power_w = 0, power_limit_w = 0;
  std::string objective;
};

struct BundleLaunchArg {
  std::string name;
  bool buffer = true;
  std::string dtype, dir;           // buffers ("$dtype" is the entry's dtype)
  std::string scalar_type;          // scalars: "i32" | "i64" | "f32"; tensor maps: "tensormap"
  LaunchProgram value;              // scalars
  // Tensor maps (base/tensor_map.h): the buffer described (an index into
  // the plan's args), its extents and the box, outermost dim first.
  int map_of = -1;
  std::vector<LaunchProgram> extents, box;
  int swizzle = 0;                  // bytes
  bool tensor_map() const { return map_of >= 0; }
};
inline constexpr char kTensorMapArg[] = "tensormap";

// How to launch one op's kernel at one kernel hash: the op spec's launch
// geometry and argument layout as programs over `vars` (the op's params,
// then its dims, then "dsize" and the device limits of opspec/expr.h).
struct BundleLaunchPlan {
  std::string op, kernel_hash;
  std::string function;             // the kernel's name in the cubin
  std::vector<std::string> vars;
  LaunchProgram grid[3], block[3], smem;
  std::vector<BundleLaunchArg> args;
};

// The default of one (op, dtype, GPU model), which the runtime answers
// before the op-wide one: the op's default config when it passed its check
// on every tuned shape of the model, else the config that passed on the
// most of them (ties: the smallest geometric mean of median / best).
struct ModelDefault {
  std::string op, dtype, gpu_model;
  Config config;
  std::string config_id, kernel_hash, arch;
  double median_us = 0;             // geometric mean over the model's tuned shapes
};

// An op's default for GPUs of one architecture (op.toml [arch_defaults]).
struct ArchDefault {
  std::string op, arch;             // "sm_80", "sm_90a"
  Config config;
};

// The device limits a launch plan's programs may read (opspec/expr.h names).
struct LaunchDevice {
  int64_t smem_optin = 48 * 1024, max_threads = 1024, num_sms = 1, sm = 0, l2_bytes = 0;
};
// The variables after a plan's params and dims, in this order.
inline constexpr const char* kLaunchDeviceVars[] = {"dsize", "smem_optin", "max_threads", "num_sms", "sm", "l2_bytes"};

// One launch, evaluated: what cuLaunchKernel takes, and each scalar
// argument's value (0 for buffers).
struct LaunchGeometry {
  int64_t grid[3] = {1, 1, 1};
  int64_t block[3] = {1, 1, 1};
  int64_t smem_bytes = 0;
  std::vector<double> scalars;
  // Per tensor-map arg: the described buffer's extents and the box (empty
  // for other args).
  std::vector<std::vector<int64_t>> map_extents, map_box;
};
// The values of `plan`'s variables: each from `config`, then `dims`, then
// dsize (of `dtype`) and `device`. Errors name a variable none of them has.
Result<std::vector<double>> LaunchVariables(const BundleLaunchPlan& plan, const ParamValues& config,
                                            const NamedValues& dims, const std::string& dtype,
                                            const LaunchDevice& device);
// Evaluates a plan whose programs passed CheckLaunchProgram (DecodeBundle
// checks them) with the farm's rounding (ProgramValueToInt). Errors: a grid
// or block value below 1 or above the driver's limits, a negative or
// non-finite shared memory size, a non-finite scalar.
Result<LaunchGeometry> EvaluateLaunchPlan(const BundleLaunchPlan& plan, std::span<const double> vars);

// An op's shape rules (OpSpec::shape_constraints) as programs over `vars`:
// its params (the first `params` of them), then its dims, then "dsize". A
// lookup answers a tuned config only at dims where every rule holds; rules
// that read device limits stay out of bundles (a lookup does not know them).
struct BundleShapeRules {
  std::vector<std::string> vars;
  size_t params = 0;
  std::vector<LaunchProgram> rules;
};

// The selector of one (op, dtype, GPU model) for shapes never tuned
// (bundle/shape_selector.h): its tree's leaves name `entries`, indices
// into Bundle::entries of the same op, dtype and model.
struct BundleSelector {
  std::string op, dtype, gpu_model;
  std::vector<std::string> dims;
  std::vector<uint32_t> entries;
  std::vector<SelectorNode> nodes;
};

struct Bundle {
  uint32_t format_version = 1;
  std::string name;
  std::string farm_version;
  int64_t created_unix = 0;
  std::map<std::string, Config> defaults;   // op -> default config
  std::vector<BundleEntry> entries;
  std::vector<BundleLaunchPlan> launch_plans;
  // The measured cubins of entries and model defaults, one per KernelImage::
  // Key(). Decoding checks each (CheckKernelImage): a changed byte fails it.
  // The JSON form lists them without their bytes.
  std::vector<KernelImage> kernels;
  std::vector<ModelDefault> model_defaults;
  std::vector<ArchDefault> arch_defaults;
  // op -> dim -> bucket, for the dims that are not exact (OpSpec::buckets).
  std::map<std::string, std::map<std::string, DimBucket>> buckets;
  // op -> its shape rules (BundleShapeRules).
  std::map<std::string, BundleShapeRules> shape_rules;
  std::vector<BundleSelector> selectors;
};

std::string EncodeBundle(const Bundle& b);                         // Cap'n Proto binary
Result<Bundle> DecodeBundle(const void* data, size_t size);
std::string BundleToJson(const Bundle& b);                         // pretty, stable order
// Unsigned .tfb (bare Cap'n Proto) + .json; for tests and tools. Deployments
// should get signed files (WriteSignedBundleFiles).
Status WriteBundleFiles(const Bundle& b, const std::string& path_without_ext);
// Reads a .tfb, signed or not, WITHOUT checking any signature: for people
// and tools that inspect bundles, never for deployments. When the file is
// signed, `signer_key_id` (if given) receives the key id it claims, else "".
Result<Bundle> ReadBundleFile(const std::string& path, std::string* signer_key_id = nullptr);

// The signed envelope (see the top of this file) around EncodeBundle(b).
std::string EncodeSignedBundle(const Bundle& b, const SecretKey& key);
// Checks the envelope and its signature against `trusted`, then decodes the
// payload. Refused, with a one-line reason: an unsigned or damaged envelope,
// a signer that is not in `trusted` (or an empty `trusted`), a signature that
// does not match (any byte changed after signing), then any DecodeBundle
// error. `signed_by` (if given) receives the trusted key that verified it.
Result<Bundle> DecodeVerifiedBundle(const void* data, size_t size, const std::vector<PublicKey>& trusted,
                                    PublicKey* signed_by = nullptr);
// Writes <path_without_ext>.tfb (signed envelope) and .json (for people; not
// signed, never read by deployments). Each file is replaced atomically.
Status WriteSignedBundleFiles(const Bundle& b, const SecretKey& key, const std::string& path_without_ext);
// DecodeVerifiedBundle on the contents of `path`; every error starts with
// "bundle <path>: ".
Result<Bundle> ReadVerifiedBundleFile(const std::string& path, const std::vector<PublicKey>& trusted,
                                      PublicKey* signed_by = nullptr);

}  // namespace tune
