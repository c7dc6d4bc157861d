// OpSpec: an op the farm tunes, loaded from a folder (op.toml + CUDA sources).
//
// Ops are data, not code compiled into the farm. The spec format is
// documented in ops/README.md. An op travels between processes as an
// OpPackage (file name -> contents) so that workers need no copy of ops/ and
// every process hashes exactly the same bytes.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tune/status.h"
#include "base/types.h"

namespace tune {

// File name (relative to the op folder) -> file contents. Always holds
// "op.toml", the kernel source, the reference source and every file they
// #include with quotes.
using OpPackage = std::map<std::string, std::string>;

// Reads op.toml from `dir` and every file it names or #includes (quoted, same
// folder), and for a program op every file [program] files names (a folder:
// its files, hidden ones left out). Every file is read through
// ReadOpFolderFile (opspec/op_confine.h): a symbolic link under `dir`, or a
// FIFO or device, refuses the package. Errors are one line naming the file.
Result<OpPackage> ReadOpPackage(const std::string& dir);

// One named, typed axis of the config space (nvbench style).
// Its values are of one kind: integers, booleans or strings (macro tokens).
struct Axis {
  std::string name;
  std::vector<ParamValue> values;
  ParamValue::Kind kind() const { return values.empty() ? ParamValue::Kind::kInt : values[0].kind(); }
};

// [baseline]: the vendor library an op's figures are put beside, timed by
// the worker with the farm's own method (inputs, L2 flush, check against
// the reference, stopping rule) on the same buffers and shapes. Not in the
// kernel hash: it changes no config's figure.
struct BaselineSpec {
  // "cublaslt", loaded at run time on the worker; for a program op any name
  // ("torch"): its harness module's baseline(dtype) is what is timed.
  std::string library;
  // cublaslt: C[M,N] = A[M,K] * B[N,K]^T, row-major, the sweep's dtype in
  // and out, fp32 accumulation (the farm's GEMM layout).
  std::string a, b, c;  // [[args]] buffer names
  std::string m, n, k;  // expressions over dims
};
inline constexpr const char* kBaselineLibraries[] = {"cublaslt"};

// One kernel parameter, in the kernel's parameter order.
struct ArgSpec {
  enum class Kind { kBuffer, kScalar, kTensorMap };
  std::string name;
  Kind kind = Kind::kBuffer;
  // Buffers.
  std::string dir;                  // "in" | "out" | "inout"
  std::string dtype;                // "$dtype" (the sweep's dtype) or "f16" | "bf16" | "f32" | "i32"
  std::vector<std::string> shape;   // expressions over dims and params
  std::string init;                 // "uniform(lo,hi)" | "normal(mean,std)" | "ones"; inputs only
  // Scalars.
  std::string scalar_type;          // "i32" | "i64" | "f32"
  std::string value;                // expression over dims and params
  // Tensor maps: a CUtensorMap (128 bytes, passed by value; the kernel
  // declares `const __grid_constant__ CUtensorMap`) that the runner and the
  // launcher encode for each launch from the buffer it describes, so that a
  // kernel can use the copy engine (cp.async.bulk.tensor). Reference and
  // checker kernels receive the arguments without the tensor maps.
  std::string map_of;               // the [[args]] buffer described (its dtype and shape)
  std::vector<std::string> box;     // tile copied per transfer, one expression per dim of the buffer's shape
  int swizzle = 0;                  // bytes: 0 | 32 | 64 | 128 (shared-memory swizzle of each box)
};

struct CheckSpec {
  // How a config's output is judged:
  //   kReference: compared with a reference kernel's (rtol, atol, max_mismatch);
  //   kChecker: a checker kernel of the op reads the kernel's arguments after
  //     its run and counts the failing elements (argmax, sort, sampling:
  //     outputs with more than one right answer);
  //   kDefault: compared with the op's default config's outputs (rtol,
  //     atol, max_mismatch), run once per problem: for an op with no
  //     reference, a config that is fast because it is wrong still fails.
  //     Its buffers and scalars are sized by dims alone;
  //   kSkip: not at all; rows are marked unchecked.
  enum class Mode { kReference, kChecker, kDefault, kSkip };
  Mode mode = Mode::kReference;
  // Whether the op has a kernel of its own to check with (reference or
  // checker), compiled like a config.
  bool HasKernel() const { return mode == Mode::kReference || mode == Mode::kChecker; }
  std::string reference_file;       // "reference.cu" (kChecker: the checker's file)
  std::string reference_kernel;     // "gemm_ref" (kChecker: the checker kernel)
  std::vector<std::string> grid;    // launch of the reference/checker (3 expressions over dims)
  std::vector<std::string> block;
  double rtol = 1e-2, atol = 1e-2;
  double max_mismatch = 0.0;        // ratio of elements allowed outside tolerance
};

// [program]: an op measured by a program of its own rather than by the
// farm's CUDA runner (a Python-DSL kernel, a CUTLASS binary, a croq-tune
// script). The worker runs it in the op's package folder with the config,
// dims, dtype and device in its environment; the program checks and times
// the kernel itself and prints the outcome (docs/program-ops.md has the
// protocol). Its rows are stored, ranked, published (config-only) and
// compared like any op's.
struct ProgramSpec {
  std::vector<std::string> files;  // package files besides op.toml (folders expanded)
  std::string build;               // once per (config, dtype), optional
  std::string run;                 // once per (config, shape): one of run | serve
  std::string serve;               // a long-lived process per GPU, fed requests on stdin
  // Prints what the host brings to the kernel that the package does not
  // (the versions of torch and Triton, from their package metadata); run
  // once per worker and package, its output is
  // part of the kernel hash (KernelHashWithIncludes), so that a framework
  // upgrade starts new rows. Optional.
  std::string version;
  double timeout_seconds = 120;    // per run, or per request to a serve process
  double build_timeout_seconds = 600;
  double start_timeout_seconds = 300;  // a serve process's start, before its first answer
};

struct OpSpec {
  std::string name;
  std::string origin;               // folder or "<package>", for error messages
  std::string source_file;          // "gemm.cu"
  std::string kernel;               // entry point (extern "C")
  std::vector<std::string> dims;    // ["M", "N", "K"]
  // [op] buckets: how a bundle's lookups bucket each dim (absent: exact).
  // Not in the kernel hash: it changes what a lookup answers, not a figure.
  std::map<std::string, DimBucket> buckets;
  std::vector<std::string> dtypes;  // ["f16", "bf16"]
  Config default_config;
  // [arch_defaults]: per GPU architecture ("sm_80", "sm_90a"), a default for
  // GPUs the farm never measured; bundles carry them (bundle/bundle.h).
  std::map<std::string, Config> arch_defaults;
  std::vector<Axis> axes;           // spec order
  std::vector<std::string> constraints;  // over params + device limits
  // [constraints] rules that read dims: a config is legal on some shapes
  // only, and is timed only where it is (ConfigsForShape). Written among
  // the rules; the parser puts those that name a dim here.
  std::vector<std::string> shape_constraints;
  std::vector<std::string> grid, block;  // 3 expressions each
  std::string smem = "0";           // dynamic shared memory bytes expression
  std::vector<ArgSpec> args;
  CheckSpec check;
  // [op] timing: "cold" (the default) or "hot" (base/types.h L2Timing); a
  // sweep's `timing` overrides it by rewriting the package (WithTiming).
  L2Timing timing = L2Timing::kCold;
  std::string flops = "0", bytes = "0";  // metrics expressions over dims
  std::vector<std::string> compile_options;  // extra NVRTC options
  // [op] include: folders of the package searched for #include <...> and
  // "..." (a copy of CuTe or CUTLASS inside the op): after the includer's
  // own folder (quoted only), before the package root. Their files travel
  // with the sweep.
  std::vector<std::string> include_dirs;
  // [op] include_roots: named folders outside the package (a CUTLASS
  // checkout), searched after include_dirs. Each compiling host maps a name
  // to a folder of its own (IncludeRoots); the content of every header a
  // compile reaches there is part of the kernel hash (IncludeRootsDigest).
  std::vector<std::string> include_roots;
  bool arch_specific = false;       // compile for sm_XYa (wgmma/setmaxnreg)
  // Set for a program op: it has no source/kernel, [launch], [[args]] or
  // reference ([check] gives only tolerances, handed to the program); its
  // launch fields hold the trivial launch so that metrics still plan.
  std::optional<ProgramSpec> program;
  std::optional<BaselineSpec> baseline;
  OpPackage package;                // every file of the op

  // Digest of everything in the spec that changes the machine code: kernel
  // and reference sources with included headers, kernel name, compile
  // options, arch_specific; for a program op, every package file but
  // op.toml and the commands. Excludes axes, shapes and metrics. 32 hex
  // digits.
  std::string SourceDigest() const;
  // Digest of the rest of what changes a figure or whether it passes: launch
  // geometry and shared memory, the argument layout (kinds, directions,
  // dtypes, shapes, init distributions, scalar values) and the check (the
  // reference's launch, tolerances, mismatch ratio). Excludes axes (a
  // config's parameter values are in its own key), constraints, defaults
  // and metrics. 32 hex digits.
  std::string MeasureDigest() const;
  const Axis* FindAxis(const std::string& name) const;
  // Expressions hold numbers where their text compared a string param with
  // one of its values (LowerCategorical, expr.h); `written` maps each such
  // expression back to its op.toml text, which Written gives for messages
  // and listings (any other text: itself).
  std::map<std::string, std::string> written;
  const std::string& Written(const std::string& expr) const;
  // Whether a compiling host adds to the kernel hash (include roots, a
  // program's version command): its rows carry the digest of what the host
  // added (Measurement::include_digest), and their kernel hashes derive from
  // KernelHash by KernelHashWithIncludes.
  bool HostDigested() const { return !include_roots.empty() || (program && !program->version.empty()); }
};

// Parses an op from its package. `origin` is used in error messages:
// "ops/gemm/op.toml: [launch] grid: expected 3 expressions". A package that
// could make NVRTC read files of the compiling host is refused: file names
// must be plain relative names, [op] options come from an allow-list (no
// include paths or pre-includes), and every #include of the sources names a
// package file ("...") or a toolkit header (<...>, relative, no "..")
// (src/op_confine.h has the rules).
Result<OpSpec> ParseOpSpec(const OpPackage& package, const std::string& origin);
// `package` with its op.toml's [op] timing set to `timing`: a sweep's
// override, made in the package itself so that every host that parses it
// (coordinator, workers, builders) and every hash of it agrees. The rest
// of op.toml, comments included, stays as written. Errors: an op.toml that
// does not parse or has no [op] table.
Result<OpPackage> WithTiming(OpPackage package, L2Timing timing);

// ParseOpSpec, once per process for each (package digest, origin): the
// sweep file, the scheduler, a worker, a builder and publish in one process
// (`tune`, a local farm) share one parse. The spec is shared and immutable.
// Errors are not kept (the next call parses again). Bounded by
// kMaxSharedSpecBytes of packages: past it the oldest are dropped (specs in
// use stay alive with their holders). Thread-safe.
Result<std::shared_ptr<const OpSpec>> SharedOpSpec(const OpPackage& package, const std::string& origin);
inline constexpr size_t kMaxSharedSpecBytes = size_t(256) << 20;
// ReadOpPackage + ParseOpSpec.
Result<OpSpec> LoadOpSpec(const std::string& dir);
// The ops of an ops folder: the names of its sub-folders that hold an
// op.toml, sorted (not parsed: `op check` judges each).
std::vector<std::string> OpNamesIn(const std::string& ops_dir);

// The macros a kernel of `config` is compiled with ("NAME=VALUE", without
// -D), the documented spelling of params in kernel source:
//   an integer:  NAME=128
//   a boolean:   NAME=1 or NAME=0
//   a string:    NAME=stream_k (a token: `Schedule::NAME`), and for each
//                value v of the axis NAME_v=1 for the chosen one, 0 for the
//                others (`#if NAME_stream_k`).
std::vector<std::string> ParamMacros(const OpSpec& spec, const Config& config);

// Version of how the farm times and checks a config (input generator,
// poisoning, sample statistics, stopping rules): bumped when a change makes
// new figures incomparable with stored ones, so those start new rows.
inline constexpr int kTimingPolicyVersion = 1;

// Kernel hash: the identity of a measurement, the key part under which its
// rows are stored. Covers SourceDigest, MeasureDigest, kTimingPolicyVersion
// and the toolchain (NVRTC version, or "sim"): changing any of them starts
// new rows, and the old ones stay queryable under their old hash. 32 hex.
std::string KernelHash(const OpSpec& spec, const std::string& toolchain);

// The op hash: the kernel hash that a device's rows of `spec` carry (those
// of a HostDigested op carry hashes derived from it, KernelHashWithIncludes
// and MeasuresKernel). It is KernelHash for the toolchain of the device
// that measured them: the NVRTC version it announces
// (DeviceInfo::nvrtc_version, "sim" on the sim backend), which its backend
// compiles with (Backend::toolchain()) and its rows repeat
// (Measurement::nvrtc_version). Every part that keys rows by op asks here;
// opspec/kernel_hash.h memoizes it.
std::string OpHash(const OpSpec& spec, const DeviceInfo& device);
// The same for a device known by its toolchain only.
std::string OpHash(const OpSpec& spec, const std::string& toolchain);

// The target a config of `spec` compiles for on a device of compute
// capability cc_major.cc_minor: "sm_90", or "sm_90a" when spec.arch_specific
// and the device has arch-specific features (9.0 and later). One rule for
// the workers (CudaArchFor) and the coordinator, which hands builders the
// configs of a GPU model's target without linking the CUDA backend.
std::string CudaArchOf(const OpSpec& spec, int cc_major, int cc_minor);

// Where a compiling host keeps the include roots that ops name: name ->
// folder. Set by the host's operator (`tunefarm worker --include-root
// NAME=PATH`), never by a package.
using IncludeRoots = std::map<std::string, std::string>;
// "NAME=PATH" arguments as IncludeRoots; errors name the argument (a name of
// [A-Za-z0-9_.-], a path that is an existing folder, each name once).
Result<IncludeRoots> ParseIncludeRoots(const std::vector<std::string>& args);

// BLAKE2b-128 of every header in `roots` that the op's sources reach through
// #include, directly or through other such headers (each as its root name,
// path in the root and content), 32 hex digits; "" for an op that names no
// include roots. Includes are followed without evaluating #if, so a header
// of a branch not taken counts too. Errors: a root the op names that
// `roots` lacks, a header that cannot be read. Thread-safe; a digest is
// reused while no header it read changed size or time.
Result<std::string> IncludeRootsDigest(const OpSpec& spec, const IncludeRoots& roots);
// The kernel hash of a compile that read headers of include roots: the op's
// KernelHash and their IncludeRootsDigest, 32 hex digits.
std::string KernelHashWithIncludes(const std::string& kernel_hash, const std::string& include_digest);
// Whether `m` measured the op whose KernelHash is `op_hash`: its kernel hash
// is that, or derives from it and its include_digest.
bool MeasuresKernel(const Measurement& m, const std::string& op_hash);

// BLAKE2b-128 of every file name and content of `package`, 32 hex digits:
// what identifies a package as shipped (runner caches, the store's op
// records), whatever its files mean.
std::string PackageDigest(const OpPackage& package);

}  // namespace tune
