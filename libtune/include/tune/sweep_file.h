// Sweep files: what a user (or the nightly job) submits.
//
//   [sweep]
//   name   = "nightly-gemm"
//   ops    = ["gemm"]
//   dtypes = ["f16"]
//   gpus   = ["*"]                      # every GPU model present, or a list
//   shapes = [ { M = 4096, N = 4096, K = 4096 } ]
//   configs_per_unit = 16               # optional
//   confirm_top = 4                     # optional: confirm phase, see SweepSubmit
//   confirm_seconds = 2.0               # optional, per shape (default 2)
//   confirm_timing = "auto"             # optional: or "burst", "sustained" (ConfirmTiming)
//
// A shape applies to every op whose dims it names; each op needs at least one.
#pragma once

#include <string>

#include "tune/protocol.h"
#include "tune/status.h"

namespace tune {

// Reads `path` and the op folders it names from `ops_dir` (ops_dir/<op>/).
// Errors name the file and field.
Result<SweepSubmit> LoadSweepFile(const std::string& path, const std::string& ops_dir);

// Builds a submit from parts (used by `tunefarm tune --op ... --shape ...`).
// `shapes` are "M=4096,N=4096,K=4096" strings.
Result<SweepSubmit> MakeSweep(const std::string& name, const std::vector<std::string>& ops,
                              const std::vector<std::string>& dtypes,
                              const std::vector<std::string>& shapes,
                              const std::vector<std::string>& gpus, const std::string& ops_dir);

// The shapes of `submit` that name exactly the dims of `spec`, reordered to
// the spec's dims order.
std::vector<Shape> ShapesForOp(const SweepSubmit& submit, const OpSpec& spec);

// A sweep as the coordinator stores it (ResultStore's sweeps family): its
// state ("running" | "done" | "failed") and the submit, with the op packages.
struct SweepRecord {
  std::string state;
  SweepSubmit submit;
};
std::string EncodeSweepRecord(const SweepRecord& r);
Result<SweepRecord> DecodeSweepRecord(const std::string& bytes);

}  // namespace tune
