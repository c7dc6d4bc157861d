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
#include <string>
#include <vector>

#include "tune/signing.h"
#include "tune/status.h"
#include "tune/types.h"

namespace tune {

struct BundleEntry {
  std::string op, dtype, gpu_model;
  Shape shape;
  Config config;
  std::string config_id, kernel_hash;
  double median_us = 0, stdev_us = 0, ci95_us = 0;
  uint32_t samples = 0;
  double default_median_us = 0;     // the op's default config on the same key (0 = not measured)
  std::string backend;              // "cuda" | "sim"
  std::string device_name, nvrtc_version, driver_version;
};

struct Bundle {
  uint32_t format_version = 1;
  std::string name;
  std::string farm_version;
  int64_t created_unix = 0;
  std::map<std::string, Config> defaults;   // op -> default config
  std::vector<BundleEntry> entries;
};

std::string EncodeBundle(const Bundle& b);                         // Cap'n Proto binary
Result<Bundle> DecodeBundle(const void* data, size_t size);
std::string BundleToJson(const Bundle& b);                         // pretty, stable order
// Inverse of BundleToJson, for bundles edited or assembled by hand. Errors
// name the offending field.
Result<Bundle> BundleFromJson(const std::string& json);
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
