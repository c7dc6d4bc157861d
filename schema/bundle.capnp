# Bundles: the winning configs shipped to deployments (the .tfb file), read
# at start-up by the libtune runtime. Deployments may run a libtune older or
# newer than the farm that wrote the bundle, so the evolution rules matter
# most here: never renumber or delete a field (rename a retired one to
# `...Deprecated`), add at the next free ordinal, and bump formatVersion only
# for changes an old reader must not silently misread.
#
# A signed .tfb file carries this message inside a fixed binary envelope
# (magic, key id, Ed25519 signature; the layout is in
# libtune/src/bundle/bundle.h) rather than a signature field here: the
# signature must cover exact bytes, and a deployment should parse nothing
# from an untrusted file before it has checked them.

@0xa61b59d475c3ccd9;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tune::wire");

using Records = import "records.capnp";

# The winner for one (op, dtype, GPU model, shape), with the figures and
# provenance that justify it.
struct BundleEntry @0xec8c2249722130d6 {
  op @0 :Text;
  dtype @1 :Text;
  gpuModel @2 :Text;
  shape @3 :Records.Shape;
  config @4 :Records.Config;
  configId @5 :Text;
  kernelHash @6 :Text;
  medianUs @7 :Float64;
  stdevUs @8 :Float64;
  ci95Us @9 :Float64;
  samples @10 :UInt32;
  defaultMedianUs @11 :Float64;   # the op's default config on the same key; 0 = not measured
  backend @12 :Text;              # "cuda" | "sim"
  deviceName @13 :Text;
  nvrtcVersion @14 :Text;
  driverVersion @15 :Text;
  arch @16 :Text;                 # of the measured cubin ("sm_90a"); its image is in Bundle.kernels
  # What the farm measured of the key (tune::KeyCoverage); state "" when it
  # kept no record (a store older than coverage records).
  coverageState @17 :Text;        # "exhausted" | "searched" | "partial"
  coverageLegal @18 :UInt64;
  coverageEvaluated @19 :UInt64;
  coverageStrategy @20 :Text;
  coverageBudget @21 :UInt64;
  # The op's [baseline] on the same key, timed by the farm's method:
  # the library and version ("cublaslt 13.1.0") and its median; 0 = not
  # measured.
  baseline @22 :Text;
  baselineMedianUs @23 :Float64;
  # What the winner's outputs were checked against: "reference", "default"
  # (the op's default config's outputs) or "none" ("" in bundles older
  # than the field).
  checkedAgainst @24 :Text;
  # Where measured (tune --energy-seconds, an energy objective): a call's
  # energy, the mean power and the board's power limit then; 0 = not measured.
  energyUj @25 :Float64;
  powerW @26 :Float64;
  powerLimitW @27 :Float64;
  # What picked the winner among the key's rows: "time", "energy" or "edp"
  # ("" = time).
  objective @28 :Text;
}

# The last resort of a lookup: an op's default config, used when no tuned
# shape of the op exists for the caller's GPU model and dtype.
struct OpDefault @0xac6317bd8dc13434 {
  op @0 :Text;
  config @1 :Records.Config;
}

# A launch expression as postfix code (base/launch_program.h): opcodes, the
# operands kConst and kVar consume in order, and the text it came from.
struct LaunchProgram @0xd7c1a3e5f9b20461 {
  code @0 :Data;
  operands @1 :List(Float64);
  text @2 :Text;
}

# One kernel argument. Buffers come from the caller, in this order among the
# buffers; a scalar's value is its program's.
struct LaunchArg @0xe2a9f4c6b8d13570 {
  name @0 :Text;
  buffer @1 :Bool;
  dtype @2 :Text;                 # buffers: "$dtype" (the entry's dtype) or a fixed one
  dir @3 :Text;                   # buffers: "in" | "out" | "inout"
  scalarType @4 :Text;            # scalars: "i32" | "i64" | "f32"; tensor maps: "tensormap"
  value @5 :LaunchProgram;        # scalars
  # Tensor maps (a CUtensorMap the launcher encodes per launch): the buffer
  # described (its index among args), its extents and the box, outermost
  # dim first, and the shared-memory swizzle in bytes. Readers before these
  # fields see a scalar with no program and refuse the plan.
  mapOf @6 :Int32 = -1;
  extents @7 :List(LaunchProgram);
  box @8 :List(LaunchProgram);
  swizzle @9 :UInt16;
}

# How to launch an op's kernel (at one kernel hash) for any config and dims:
# what a deployment evaluates instead of the op's spec.
struct LaunchPlan @0xf5b3c8e1a6d92047 {
  op @0 :Text;
  kernelHash @1 :Text;
  function @2 :Text;              # the kernel's name in the cubin
  vars @3 :List(Text);            # what programs read, by index: params, dims, dsize, device limits
  grid @4 :List(LaunchProgram);   # 3
  block @5 :List(LaunchProgram);  # 3
  smem @6 :LaunchProgram;         # dynamic shared memory bytes
  args @7 :List(LaunchArg);       # in the kernel's parameter order
}

# The default of one (op, dtype, GPU model): legal there, measured there
# where the farm could (publish picks it; see bundle/bundle.h).
struct ModelDefault @0xa4e6b2d8c1f37590 {
  op @0 :Text;
  dtype @1 :Text;
  gpuModel @2 :Text;
  config @3 :Records.Config;
  configId @4 :Text;
  kernelHash @5 :Text;
  arch @6 :Text;
  medianUs @7 :Float64;           # its median over the model's tuned shapes (geometric); 0 = not measured
}

# An op's default for GPUs of one architecture (op.toml [arch_defaults]),
# for deployments on GPUs the farm never measured.
struct ArchDefault @0xb8d4e2f6a1c35097 {
  op @0 :Text;
  arch @1 :Text;                  # "sm_80", "sm_90a"
  config @2 :Records.Config;
}

# How lookups of an op bucket one of its dims (op.toml [op] buckets).
enum BucketKind @0xbc605dc9ad8abf81 {
  unknown @0;
  exact @1;
  pow2 @2;                        # the least power of two >= the dim
  list @3;                        # the least listed value >= the dim, else the largest
}

struct DimBucket @0xdbbc4c37d1abd925 {
  op @0 :Text;
  dim @1 :Text;
  kind @2 :BucketKind;
  values @3 :List(Int64);         # list: ascending, in [1, 2^40]
}

# An op's shape rules (op.toml rules that read dims) as programs over
# `vars`: the op's params, then its dims, then dsize. A lookup answers a tuned
# config only at dims where every rule holds.
struct ShapeRules @0xb26441aa4a58af1d {
  op @0 :Text;
  vars @1 :List(Text);
  params @2 :UInt32;              # how many of vars are params; dims follow, then dsize
  rules @3 :List(LaunchProgram);
}

# A node of a shape selector's tree (bundle/shape_selector.h): a leaf
# names a candidate; a split sends features[feature] <= threshold left.
# Children come after their parent.
struct SelectorNode @0xbf9dbc78be0dc352 {
  leaf @0 :Bool;
  feature @1 :UInt32;             # log2 of each dim, then of each pair's product
  threshold @2 :Float64;
  left @3 :UInt32;
  right @4 :UInt32;
  candidate @5 :UInt32;           # an index into ShapeSelector.entries
}

# What a deployment answers, at the `predicted` level, for shapes of one
# (op, dtype, GPU model) the farm never tuned: a tree over the shape whose
# leaves name tuned entries of the same key, the few configs that covered
# every tuned shape within a slowdown bound.
struct ShapeSelector @0xe0ee82dd00ed12a3 {
  op @0 :Text;
  dtype @1 :Text;
  gpuModel @2 :Text;
  dims @3 :List(Text);            # the order the features read the dims in
  entries @4 :List(UInt32);       # indices into Bundle.entries
  nodes @5 :List(SelectorNode);   # nodes[0] is the root
}

# A whole bundle. Defaults are sorted by op; entries keep the order the farm
# wrote them in, which breaks ties in nearest-shape lookups.
struct Bundle @0xfe3fc7ee90181824 {
  formatVersion @0 :UInt32;
  name @1 :Text;
  farmVersion @2 :Text;
  createdUnix @3 :Int64;
  defaults @4 :List(OpDefault);
  entries @5 :List(BundleEntry);
  launchPlans @6 :List(LaunchPlan);
  kernels @7 :List(Records.KernelImage);   # empty in a config-only bundle
  modelDefaults @8 :List(ModelDefault);
  archDefaults @9 :List(ArchDefault);
  buckets @10 :List(DimBucket);   # dims without one are exact
  shapeRules @11 :List(ShapeRules);
  selectors @12 :List(ShapeSelector);
}
