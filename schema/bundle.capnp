# Bundles: the winning configs shipped to deployments (the .tfb file), read
# at start-up by the libtune runtime. Deployments may run a libtune older or
# newer than the farm that wrote the bundle, so the evolution rules matter
# most here: never renumber or delete a field (rename a retired one to
# `...Deprecated`), add at the next free ordinal, and bump formatVersion only
# for changes an old reader must not silently misread.
#
# A signed .tfb file carries this message inside a fixed binary envelope
# (magic, key id, Ed25519 signature; the layout is in
# libtune/include/tune/bundle.h) rather than a signature field here: the
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
}

# The last resort of a lookup: an op's default config, used when no tuned
# shape of the op exists for the caller's GPU model and dtype.
struct OpDefault @0xac6317bd8dc13434 {
  op @0 :Text;
  config @1 :Records.Config;
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
}
