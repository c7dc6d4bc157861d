# The wire protocol between coordinator, workers, builders and clients: one Envelope per
# ZeroMQ frame. Mirrors libtune/src/protocol/protocol.h; only the codec in
# libtune/src/protocol.cc sees these types.
#
# Evolution rules: never renumber or delete a field (rename a retired one to
# `...Deprecated`); new commands go at the next free ordinal of the union; a
# change that old peers cannot ignore bumps Envelope.version, which peers
# check before anything else.

@0xfc21cef975d1b1c6;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tune::wire");

using Records = import "records.capnp";

# A file of an op folder. Contents are Data, not Text: sources are sent byte
# for byte because the kernel hash is computed over exactly these bytes.
struct OpFile @0xcc3a4162ec341865 {
  name @0 :Text;
  contents @1 :Data;
}

# An op as it travels: every file of its folder, sorted by name.
struct OpPackage @0xf3cf9cd0de9418b2 {
  files @0 :List(OpFile);
}

# Worker -> coordinator, first message after connecting (and reconnecting).
struct Hello @0xe63c5d3714a13fda {
  workerName @0 :Text;        # host:pid
  farmVersion @1 :Text;
  devices @2 :List(Records.DeviceInfo);
  # A builder's hello (`worker --compile-only`, a key of the builder
  # allow-list): no devices; the architectures it compiles for ("sm_90",
  # "sm_90a") and its toolchain (the NVRTC version, as a device's
  # nvrtcVersion says it): both enter the kernel hash of what it builds.
  builderArchs @3 :List(Text);
  builderToolchain @4 :Text;
}

# Coordinator -> worker: accepted; the heartbeat contract both sides keep.
struct HelloAck @0x8f0d1767ddfdd4f2 {
  heartbeatMs @0 :UInt32;
  liveness @1 :UInt32;        # missed intervals before a peer is dead
}

# Worker -> coordinator: one of my devices is idle.
struct RequestWork @0x94e726bd91bf2cfd {
  deviceIndex @0 :Int32;
}

# Coordinator -> worker: nothing to do now; ask again later.
struct NoWork @0x8bf8d120349c5fa9 {
  retryMs @0 :UInt32;
}

# Coordinator -> worker: a leased chunk of configs of one (sweep, op, dtype,
# GPU model), timed on `shapes` (one shape: sweeps screen shape by shape).
struct WorkUnit @0xc9207a1fbc05099f {
  sweepId @0 :Text;
  unitId @1 :UInt64;
  attempt @2 :UInt32;
  deviceIndex @3 :Int32;
  op @4 :Text;
  opPackage @5 :OpPackage;
  dtype @6 :Text;
  shapes @7 :List(Records.Shape);
  configs @8 :List(Records.Config);
  leaseSeconds @9 :Float64;
  # > 0: a confirm unit. Its configs are the fastest of one (op, dtype,
  # shape) and are timed again together, round-robin, for this long.
  confirmSeconds @10 :Float64;
  confirmTiming @11 :Records.ConfirmTiming;
  # > 0: a refine unit. Its configs came within the timing policy's
  # refine_within of this best figure (us) of the one shape, and are timed
  # again as contenders (to the CI target, whatever their new figure).
  refineBestUs @12 :Float64;
  # A screening unit of a sweep with a refine pass: time every config only
  # to rank it; the contenders get the refine pass.
  screenOnly @13 :Bool;
  # A confirm unit: profile its fastest N configs once they are timed.
  profileTop @14 :UInt32;
  # A screening unit of an op whose hosts add to its kernel hash (include
  # roots, a program's version): the configs the store holds rows of, each
  # with the host digest the rows were measured under. A worker whose own
  # digest for the op is one of them reuses the row (Results.reused) rather
  # than measure the config again.
  reusable @15 :List(StoredDigest);
  # > 0: measure each config's energy over this long a window after its
  # timing (its sweep's objective is energy or edp), whatever the worker's
  # own --energy-seconds; absent (older coordinators): 0.
  energySeconds @16 :Float64;
}

# A config's stored row under one host digest (Measurement.includeDigest).
struct StoredDigest @0x8c576f422d62318d {
  configId @0 :Text;
  digest @1 :Text;
}

# Worker -> coordinator: a batch of measurements of one unit.
struct Results @0xb4c1ed0f8fb2828f {
  sweepId @0 :Text;
  unitId @1 :UInt64;
  batch @2 :UInt64;
  final @3 :Bool;             # the last batch of the unit
  measurements @4 :List(Records.Measurement);
  # The cubins of this batch's checked configs, each once per connection:
  # the coordinator stores them beside the rows (ResultStore::PutKernel).
  kernels @5 :List(Records.KernelImage);
  # Profiles of the batch's configs (a confirm unit of a sweep with
  # profileTop): each of a config and the shape of the unit.
  profiles @6 :List(Records.KernelProfile);
  # The op's [baseline] library timed on the unit's shapes (Measurement
  # baseline set): each of the unit's op, dtype and shapes on the sender's
  # GPU, kept apart from the configs' rows.
  baselines @7 :List(Records.Measurement);
  # Configs of the unit not measured again: the sender's host digest for the
  # op is the one the unit offered their stored rows under (WorkUnit.reusable).
  reused @8 :List(StoredDigest);
  # With the final batch: what the worker's pipeline spent on the unit
  # (units = 1); absent (all zero) from older workers and other batches.
  pipeline @9 :PipelineFigures;
}

# Where a pipeline's time went: a unit's (Results.pipeline) or a sweep's
# sum (SweepProgress.pipeline). Counts of configs, each once: compiled
# here, fetched from the coordinator's stored images, or from the cubin
# cache; seconds of compiler time, of devices waiting for compiles, of
# devices checking and timing, and of devices holding the units. The
# compile pool's threads: a unit's, its worker's; a sweep's, summed over the
# workers that sent its units' figures (each once). A sweep's wall seconds
# run from its first lease to its last unit's end (or now); a unit's are 0.
struct PipelineFigures @0x9e79fee032540128 {
  units @0 :UInt64;
  compiled @1 :UInt64;
  fetched @2 :UInt64;
  cached @3 :UInt64;
  compileSeconds @4 :Float64;
  deviceWaitSeconds @5 :Float64;
  measureSeconds @6 :Float64;
  unitSeconds @7 :Float64;
  compileThreads @8 :UInt32;
  wallSeconds @9 :Float64;
}

# Coordinator -> worker: a batch is stored (duplicates counted once).
struct ResultsAck @0xb2e67a25fae994a6 {
  sweepId @0 :Text;
  unitId @1 :UInt64;
  batch @2 :UInt64;
  stored @3 :UInt32;
  # Non-empty: the batch was refused (it does not match what was leased to
  # the sender) and nothing of it was stored; the sender drops it.
  refused @4 :Text;
  # Seconds the sender's clock is ahead of the coordinator's (negative:
  # behind), as its rows of this batch said; the coordinator's time is
  # what the rows are stored with.
  clockSkewSeconds @5 :Float64;
}

# Client -> coordinator: run this sweep.
struct SweepSubmit @0x8cd03b7212028f51 {
  name @0 :Text;
  ops @1 :List(Text);
  opPackages @2 :List(OpPackage);   # one per op, same order
  dtypes @3 :List(Text);
  shapes @4 :List(Records.Shape);
  gpuModels @5 :List(Text);         # "*" = every model present
  configsPerUnit @6 :UInt32;        # 0 = coordinator chooses
  confirmTop @7 :UInt32;            # 0 = no confirm phase
  confirmSeconds @8 :Float64;       # per (op, dtype, shape) and model
  confirmTiming @9 :Records.ConfirmTiming;  # absent (older clients): sustained
  refinePass @10 :Bool;             # absent (older clients): one pass
  profileTop @11 :UInt32;           # profile the fastest N of each key (0 = none)
  strategy @12 :Text;               # which configs to measure; absent (older clients): "exhaustive"
  seed @13 :UInt64;                 # the strategy's seed
  budget @14 :UInt64;               # evaluations per key (0 = the default of a searching strategy)
  budgetSeconds @15 :Float64;       # seconds per key of proposing new configs (0 = no bound)
  retry @16 :List(Text);            # failure classes whose stored rows are measured again
  priority @17 :UInt32 = 50;        # 0..100, higher leased first; absent (older clients): 50
  configs @18 :List(Records.Config);  # an explicit config list measured instead of the op's space; empty: the space
  retime @19 :Bool;                 # measure the configs again where stored; the rows replace other sweeps'; absent: false
  objective @20 :Text;              # what its searches and winners minimise: time | energy | edp; absent: time
}


# Coordinator -> client: the sweep's id.
struct SweepAccepted @0xd0708a5fc9f05b01 {
  sweepId @0 :Text;
}

# Client -> coordinator: stop a running sweep (answered with its status).
struct SweepCancel @0xb4f1f43930d409a1 {
  sweepId @0 :Text;
}

# Client -> coordinator: the store's rows a filter selects, read remotely
# (`results --coordinator`, Python's Farm.connect), as a `store export`
# file fetched in pieces. The first request (empty exportId) makes the
# export; later ones page through it by offset.
struct StoreRead @0xeeb39619ac4ee989 {
  gpuModel @0 :Text;          # empty = any, like each filter field
  op @1 :Text;
  dtype @2 :Text;
  shape @3 :Text;
  kernelHash @4 :Text;
  exportId @5 :Text;          # empty: make the export
  offset @6 :UInt64;
}

# Coordinator -> client: a piece of an export (StoreRead).
struct StoreChunk @0x8ddd9eeb12c2b5ce {
  exportId @0 :Text;
  offset @1 :UInt64;
  totalBytes @2 :UInt64;      # the whole export's size
  data @3 :Data;
}

# Client -> coordinator: progress of one sweep, or of all when empty.
struct SweepStatusRequest @0xd742bc9eb7d74948 {
  sweepId @0 :Text;
}

# Progress of one sweep.
struct SweepProgress @0xe65b164663caf056 {
  sweepId @0 :Text;
  name @1 :Text;
  state @2 :Text;             # "running" | "done" | "failed"
  unitsTotal @3 :UInt64;
  unitsDone @4 :UInt64;
  pairsTotal @5 :UInt64;
  pairsDone @6 :UInt64;
  pairsFailed @7 :UInt64;
  gpuModels @8 :List(Text);
  startedUnix @9 :Int64;
  finishedUnix @10 :Int64;
  error @11 :Text;            # why a failed sweep failed
  waitingFor @12 :List(Text); # models it has work for and no live worker
  expanding @13 :List(Text);  # models whose config spaces are being expanded
  failedByClass @14 :List(ClassCount);  # pairsFailed by failure class
  waits @15 :List(Text);      # what it waits for, a line per model
  skipped @16 :List(Text);    # models a "*" sweep stopped waiting for, a line each
  priority @17 :UInt32 = 50;  # SweepSubmit.priority
  pipeline @18 :PipelineFigures;  # summed over its units' final batches
  inFlight @19 :UInt64;       # searched keys' configs proposed, not yet measured
  inFlightDepth @20 :UInt64;  # the most its searched keys may keep in flight, summed
}

# A count of one failure class ("compile_error", "timeout", ...).
struct ClassCount @0xd732b94f63c42570 {
  name @0 :Text;
  count @1 :UInt64;
}

# Coordinator -> client: answer to SweepStatusRequest.
struct SweepStatus @0xe19eb29d97a24191 {
  sweeps @0 :List(SweepProgress);
  workers @1 :UInt32;
  storeFault @2 :Text;        # non-empty while store writes fail (no leasing)
  devices @3 :List(Records.DeviceInfo);  # one device of each live GPU model
}

# Either direction: a request was refused; the text is for people.
struct ErrorReply @0xc8cb88aecd5e9d7d {
  message @0 :Text;
}

# Either direction: the sender is going away (or tells the peer to).
struct Disconnect @0xb6915457d2ce13fc {
  reason @0 :Text;
}

# Worker -> coordinator: before compiling configs of a unit leased to it,
# the stored images of those it lacks (a config compiles once per fleet).
struct ImageRequest @0xd3a1c7e95b2f4068 {
  sweepId @0 :Text;
  unitId @1 :UInt64;
  wants @2 :List(ImageWant);
}

# One image asked for: the key of a KernelImage (Records.KernelImage).
struct ImageWant @0xe8b4f2a17c6d3915 {
  kernelHash @0 :Text;
  configId @1 :Text;
  dtype @2 :Text;
  arch @3 :Text;
}

# Coordinator -> worker: the answer to an ImageRequest. `images` are stored
# images two worker keys vouch for, or a key of the builder allow-list
# (without their witnesses); the wants
# not among them are `missing` (the worker compiles those).
struct ImageReply @0x9c5e2d7b4a1f8036 {
  sweepId @0 :Text;
  unitId @1 :UInt64;
  images @2 :List(Records.KernelImage);
  missing @3 :UInt32;
  # Non-empty: the request was refused (why, naming the peer); no images.
  refused @4 :Text;
}

# Builder -> coordinator: configs to compile, please (answered with a
# BuildWork, or NoWork when there is nothing to build).
struct BuildRequest @0x85bdaa2bf84e21d6 {
  maxConfigs @0 :UInt32;      # the most configs it takes in one BuildWork
}

# Coordinator -> builder: configs of one (sweep, op, dtype, arch) whose
# images the store lacks, handed to this builder alone for a while. Each
# image it sends back must be of one of them, under `kernelHash` (the op's
# hash for the builder's toolchain).
struct BuildWork @0x9a2524acf6520470 {
  sweepId @0 :Text;
  workId @1 :UInt64;
  op @2 :Text;
  opPackage @3 :OpPackage;
  dtype @4 :Text;
  arch @5 :Text;
  kernelHash @6 :Text;
  configs @7 :List(Records.Config);
}

# Builder -> coordinator: the images of a BuildWork's configs that
# compiled (without witnesses: the coordinator records the sender's key);
# `failed` of its configs did not (the GPU workers compile those, and
# record why).
struct BuiltImages @0xdcebb2700ea2cea4 {
  workId @0 :UInt64;
  images @1 :List(Records.KernelImage);
  failed @2 :UInt32;
}

# Stored by the coordinator (ResultStore leases), not sent: a unit as it was
# leased (without its op package) and the peers it was leased to, so that a
# restarted coordinator still accepts their honest resends.
struct LeaseRecord @0xa7d3f57bfffcee9f {
  unit @0 :WorkUnit;
  gpuModel @1 :Text;
  lessees @2 :List(Text);     # LeaseRecord::lessees in protocol.h
}

# Stored, not sent (ResultStore ops): an op package a sweep brought, and
# when, so that publishing and reports read each op's spec from the store.
struct OpRecord @0xfe3f68b7b3558509 {
  name @0 :Text;
  submittedUnix @1 :Int64;
  package @2 :OpPackage;
}

# The one message type on the wire. `unknown` comes first so that an envelope
# whose command was never set (or was zeroed) is not read as a `hello`.
struct Envelope @0xc9f1b97194c69d99 {
  version @0 :UInt16;         # tune::kProtocolVersion; checked first
  seq @1 :UInt64;             # per-sender sequence number
  sender @2 :Text;

  command :union {
    unknown @3 :Void;
    hello @4 :Hello;
    helloAck @5 :HelloAck;
    heartbeat @6 :Void;
    requestWork @7 :RequestWork;
    noWork @8 :NoWork;
    workUnit @9 :WorkUnit;
    results @10 :Results;
    resultsAck @11 :ResultsAck;
    sweepSubmit @12 :SweepSubmit;
    sweepAccepted @13 :SweepAccepted;
    sweepStatusRequest @14 :SweepStatusRequest;
    sweepStatus @15 :SweepStatus;
    error @16 :ErrorReply;
    disconnect @17 :Disconnect;
    sweepCancel @18 :SweepCancel;
    storeRead @19 :StoreRead;
    storeChunk @20 :StoreChunk;
    imageRequest @21 :ImageRequest;
    imageReply @22 :ImageReply;
    buildRequest @23 :BuildRequest;
    buildWork @24 :BuildWork;
    builtImages @25 :BuiltImages;
  }
}
