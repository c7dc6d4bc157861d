// Winners as the per-device config files serving engines read, and back.
//
// vLLM's and SGLang's fused-MoE kernels (and the Triton kernels written
// like them) read one JSON file per (kernel, device name, the fixed dims):
// "E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json" holding
// {"1": {"BLOCK_SIZE_M": 16, ..., "num_warps": 4, "num_stages": 4}, "2": ...}:
// the value of one key dim (the batch size M) to the config tuned for it.
// EngineFiles groups a store's winners that way; ReadEngineFile reads such
// a file back (untrusted: every error names the file and the field).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/types.h"
#include "tune/status.h"

namespace tune {

struct EngineFile {
  std::string name;         // the file's name (EngineFiles' name_format)
  std::string op, dtype, gpu_model, device_name;
  NamedValues fixed;        // the shape's dims but the key dim, in its order
  std::map<int64_t, ParamValues> configs;  // key dim value -> the winner's config
};

// The default name: the fixed dims, then the device name as
// torch.cuda.get_device_name() spells it with spaces as '_' (vLLM's).
inline constexpr char kEngineFileName[] = "{dims},device_name={device}.json";

// `winners` (one valid row per key, publish::Winners) grouped into files:
// rows whose shape lacks `key_dim` are left out (counted in *skipped).
// `name_format` may hold {op}, {dtype}, {gpu}, {device}, {dims} and {DIM}
// for any dim of the shape. Fails naming both keys when two groups would
// write one file name, or on a name that is no plain file name.
Result<std::vector<EngineFile>> EngineFiles(const std::vector<Measurement>& winners, const std::string& key_dim,
                                            const std::string& name_format, size_t* skipped);

// The file's JSON: key values ascending, as strings, each config's params
// in its axis order (ints as numbers, booleans, tokens as strings).
std::string EngineFileJson(const EngineFile& file);

// One entry of a per-device file: a key dim value and its config.
struct EngineEntry {
  int64_t key = 0;
  Config config;
};
// Reads `text`, a per-device file named `path`: an object whose keys are
// positive integers (1..2^40) and whose values are objects of params
// (ints, booleans, macro tokens). `params`, when non-empty, are the op's
// param names: a field outside them is refused. At most kMaxEngineEntries.
inline constexpr size_t kMaxEngineEntries = 4096;
Result<std::vector<EngineEntry>> ReadEngineFile(const std::string& text, const std::string& path,
                                               const std::vector<std::string>& params);

// The fixed dims a file name gives: its "NAME=<integer>" parts, split at
// commas (device_name=..., dtype=... and the extension are not dims).
NamedValues DimsOfEngineFileName(const std::string& name);

}  // namespace tune
