# Stored and exchanged records: the values of the result store and the pieces
# that the wire protocol and bundles share.
#
# Evolution rules (this file is read by stores and deployments that outlive
# any one build): never renumber or delete a field, rename a retired one to
# `...Deprecated`; add fields only at the next free ordinal; every enum starts
# with `unknown @0` so that a zeroed or unset value is never mistaken for a
# real one. The codec maps enums explicitly; C++ enum values are not the wire
# values.

@0x875bfa5f1e0114ad;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tune::wire");

# One (name, value) pair: a config parameter or a problem dimension. Lists
# of these keep the order the op spec declares. A dimension and most params
# are integers; a categorical param is a string or a boolean, and `value`
# still holds its number (a string's CategoricalCode, a boolean's 0 or 1),
# which is all a reader older than these fields sees.
struct NamedValue @0xaf43c20a433574c1 {
  name @0 :Text;
  value @1 :Int64;
  text @2 :Text;              # a string param's value; empty otherwise
  isBool @3 :Bool;            # a boolean param
}

# One point of an op's config space, params in the op's axis order.
struct Config @0xa793cffadd27a00e {
  params @0 :List(NamedValue);
}

# One problem shape, dims in the op's declared order.
struct Shape @0x9281cd982d0943f9 {
  dims @0 :List(NamedValue);
}

# Why a (config, shape) produced no valid figure. `none` is an explicit value
# (not the zero default) so that a record written without a class reads as
# `unknown` and is rejected instead of passing as a valid measurement.
enum FailureClass @0xa434dfa7c99e65b9 {
  unknown @0;
  none @1;
  compileError @2;
  resources @3;
  launchError @4;
  crash @5;
  timeout @6;
  wrongResult @7;
  nanResult @8;               # output held NaN (`nan` would clash with the C NAN macro)
  skipped @9;
}

# A GPU as seen by a worker (or a simulated one), sent in `hello` so the
# coordinator can schedule by model and check limits.
struct DeviceInfo @0xb4eef3dbdf701afa {
  index @0 :Int32;
  name @1 :Text;              # as reported by the driver
  model @2 :Text;             # normalised store key, "h100-80gb-hbm3"
  backend @3 :Text;           # "cuda" | "sim"
  ccMajor @4 :Int32;
  ccMinor @5 :Int32;
  numSms @6 :Int32;
  totalMemBytes @7 :Int64;
  l2Bytes @8 :Int64;
  smemPerBlockOptin @9 :Int64;
  maxThreadsPerBlock @10 :Int32;
  smClockMhz @11 :Int32;
  memClockMhz @12 :Int32;
  driverVersion @13 :Text;
  nvrtcVersion @14 :Text;
  powerLimitW @15 :Float64;  # the board's enforced power limit (NVML), W; 0 = not read
}

# Resource usage of one compiled config, kept with every measurement so that
# reports can explain why a config is slow or was rejected.
struct KernelResources @0xd4f8abe56326e9e6 {
  registers @0 :Int32;
  staticSmemBytes @1 :Int64;
  dynamicSmemBytes @2 :Int64;
  localBytes @3 :Int64;       # spills
  maxThreadsPerBlock @4 :Int32;
  occupancy @5 :Float64;      # 0..1
}

# One (config, shape) outcome on one GPU model: the value of the store's
# `results` and `best` rows and the payload of `results` messages. Failures
# are stored like figures so that reports show them. Times in microseconds.
struct Measurement @0xd2e5a7222ba80fd2 {
  # Key; the store derives its row keys from these.
  gpuModel @0 :Text;
  op @1 :Text;
  dtype @2 :Text;
  shape @3 :Text;             # canonical "M=4096,N=4096,K=4096"
  kernelHash @4 :Text;
  configId @5 :Text;

  config @6 :Config;
  failure @7 :FailureClass;
  failureMessage @8 :Text;    # compile log excerpt, error string, ...

  # Figures; 0 when failure != none.
  medianUs @9 :Float64;
  meanUs @10 :Float64;
  stdevUs @11 :Float64;
  minUs @12 :Float64;
  maxUs @13 :Float64;
  ci95Us @14 :Float64;        # half-width of the 95% confidence interval
  samples @15 :UInt32;

  # Check against the op's reference.
  checkPassed @16 :Bool;
  maxAbsError @17 :Float64;
  mismatchRatio @18 :Float64;

  resources @19 :KernelResources;
  throttled @20 :Bool;        # clocks dropped while timing
  smClockMhz @21 :Int32;

  # Provenance: sim figures are never presented as hardware results.
  backend @22 :Text;          # "cuda" | "sim"
  deviceName @23 :Text;
  worker @24 :Text;
  driverVersion @25 :Text;
  nvrtcVersion @26 :Text;
  farmVersion @27 :Text;
  unixTime @28 :Int64;
  sweepId @29 :Text;
  # Timed again with the other fastest configs of its key at the end of the
  # sweep; outranks every unconfirmed figure of that key.
  confirmed @30 :Bool;
  # How the confirmed figure was timed (never `auto`); rows confirmed before
  # the field existed were sustained.
  confirmTiming @31 :ConfirmTiming;
  # From the refine pass of a sweep (SweepSubmit.refinePass): timed again as
  # a contender of its key's best screening figure; replaces the config's
  # screening row, and is replaced by a confirmed one.
  refined @32 :Bool;
  # The config's screening figure (us) that a refined or confirmed row
  # replaced, carried on from a refined row to a confirmed one; 0 on a
  # screening row. The refine pass compares refined and screening figures
  # through it (ResultStore, NearBestOf).
  screenUs @33 :Float64;
  # The architecture the measured cubin was compiled for ("sm_90a"); its
  # image is the KernelImage of (kernelHash, configId, dtype, arch). Empty
  # for sim rows and rows stored before the field existed.
  arch @34 :Text;
  # Ran, but its output was not checked (its op's [check] skip = true, or a
  # program op that gave no check result where the op allows that): a
  # candidate winner only where no checked row of its key passed.
  unchecked @35 :Bool;
  # For an op whose hosts add to its kernel hash: the digest of what this
  # host added (headers read from include roots, a program's version
  # output); kernelHash derives from the op's hash and this. Empty otherwise.
  includeDigest @36 :Text;
  # Which search strategy proposed the config ("model/1", "exhaustive/1"),
  # set by the coordinator; empty on rows stored before the field existed.
  proposer @37 :Text;
  # Set on a baseline's row: the library that was timed, with its version
  # ("cublaslt 13.0.0"), on the key's shape and inputs, not a config of the
  # op; such rows are kept apart from the configs' (ResultStore baselines).
  baseline @38 :Text;
  # Timed with a hot L2 (its op's `timing = "hot"`: no flush before a
  # sample); false: flushed before every sample, as every row before the
  # field existed. Part of the kernel hash too, so the two never share a key.
  hotL2 @39 :Bool;
  # Checked against the op's default config's outputs ([check] default =
  # true) rather than a reference; false on rows stored before the field
  # existed, which were checked against a reference (or unchecked).
  checkedAgainstDefault @40 :Bool;
  # Energy per call (microjoules) and the board's mean power (watts) over a
  # window of back-to-back calls, and the power limit enforced then (watts);
  # 0 where not measured (the worker's --energy-seconds was 0, or the device
  # has no energy counter).
  energyUj @41 :Float64;
  powerW @42 :Float64;
  powerLimitW @43 :Float64;
}

# What a sweep measured of one (GPU model, op, dtype, shape) of a kernel
# (tune::KeyCoverage).
struct KeyCoverage @0xa11480b3a391b4d4 {
  gpuModel @0 :Text;
  op @1 :Text;
  dtype @2 :Text;
  shape @3 :Text;
  kernelHash @4 :Text;
  legal @5 :UInt64;
  legalExact @6 :Bool;
  evaluated @7 :UInt64;
  strategy @8 :Text;
  budget @9 :UInt64;
  seed @10 :UInt64;
  state @11 :CoverageState;
  sweepId @12 :Text;
  unixTime @13 :Int64;
}

enum CoverageState {
  unknown @0;
  partial @1;     # less than it set out to: cancelled, failed, a model skipped
  exhausted @2;   # every legal config
  searched @3;    # what a strategy chose, within its budget
}

# The exact binary a worker measured: one cubin per (kernel hash, config,
# dtype, architecture), as NVRTC made it with the op's recorded options.
struct KernelImage @0xc3b0a5f1d2e47a19 {
  kernelHash @0 :Text;
  configId @1 :Text;
  dtype @2 :Text;
  arch @3 :Text;              # "sm_90a", "sm_80"
  sha256 @4 :Text;            # of image, 64 hex digits
  image @5 :Data;             # the cubin (ELF)
  # Kept by the store, never taken from a peer (tune::KernelImage).
  witnesses @6 :List(Text);   # the workers that sent this image
  conflicts @7 :List(Text);   # "worker sha256" of each that sent another one
}

# Nsight Compute figures of one measured (config, shape) (tune::KernelProfile),
# kept beside its measurement under the same key.
struct KernelProfile @0xfce40c96b0d5b966 {
  gpuModel @0 :Text;
  op @1 :Text;
  dtype @2 :Text;
  shape @3 :Text;
  kernelHash @4 :Text;
  configId @5 :Text;
  computePct @6 :Float64;
  memoryPct @7 :Float64;
  occupancyPct @8 :Float64;
  dramBytes @9 :Float64;
  durationUs @10 :Float64;
  stalls @11 :List(NamedFigure);   # largest first
  bottleneck @12 :Text;            # "memory" | "compute" | "latency"
  why @13 :Text;
  tool @14 :Text;                  # "ncu 2025.3.1" | "sim"
  report @15 :Data;                # the .ncu-rep file; empty for sim
}

# A named figure (a stall reason and its cycles per issued instruction).
struct NamedFigure @0xe2a4c31e6d7b5f08 {
  name @0 :Text;
  value @1 :Float64;
}

# How a confirm phase times its contenders (tune::ConfirmTiming).
enum ConfirmTiming {
  sustained @0;   # back-to-back windows, round-robin: speed under load
  burst @1;       # short bursts from an idle GPU: speed at its starting clocks
  auto @2;        # bursts where sustained load slows the contenders, else sustained
}
