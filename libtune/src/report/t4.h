// T4: the open autotuning results format that Kernel Tuner writes and its
// tools (and papers' scripts) read; schema version 1.0.0, kept as
// tests/data/t4/results-schema.json.
//
// Written by `tunefarm results|best --format t4`; read as ground truth by
// `tunefarm search replay --results FILE.json`.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tune/status.h"
#include "base/types.h"

namespace tune {

inline constexpr char kT4SchemaVersion[] = "1.0.0";
// How deep a T4 document may nest (arrays and objects); the format itself
// needs five levels.
inline constexpr int kMaxT4Depth = 32;

// One T4 results document of `rows`, one result per row, in their order:
//   configuration  the config's params (integers, booleans, strings);
//   objectives     ["time"];
//   times          runtimes: [the median, ms] for a valid row, [] for
//                  another (the store keeps each config's statistics, not
//                  its samples);
//   measurements   time (the median), time_mean, time_stdev, time_min,
//                  time_max, time_ci95 (ms) and samples, for a valid row;
//   invalidity     "correct" (ok, unchecked), "compile" (compile_error),
//                  "correctness" (wrong_result, nan, check_not_passed),
//                  "timeout" (timeout, and skipped: stopped early as clearly
//                  slower), "runtime" (crash, launch_error, resources,
//                  no_samples);
//   correctness    1, or 0 for a row that failed its check;
//   timestamp      ISO 8601, UTC, when the row was measured;
//   metadata       what T4 has no field for (its schema allows more):
//                  gpu_model, device_name, op, dtype, shape, kernel_hash,
//                  config_id, status, backend and `simulated` (true for a
//                  sim row: never a hardware figure), sweep_id.
// The document's own `metadata` names the producer. Text is written as
// DumpJson writes it (invalid UTF-8 replaced).
std::string T4ResultsJson(const std::vector<Measurement>& rows);

// The key of a T4 result that carries no `metadata` of its own (as Kernel
// Tuner writes them: one kernel, one device, one problem per file).
struct T4Key {
  std::string gpu_model = "t4", op = "t4", dtype = "t4", shape = "problem=1";
};

// One result of a T4 document, as ground truth.
struct T4Row {
  size_t index = 0;  // in results[]
  std::string gpu_model, op, dtype, shape;  // shape unchecked: the caller parses it
  Config config;
  std::optional<double> us;  // the figure of a "correct" result, microseconds
};

// Reads the T4 results document `text` (named `name` in errors), calling
// `row` with each result as it is parsed (one result in memory at a time)
// and stopping at the first error it returns. Every value is checked:
// schema_version is 1.x.y; results is an array of objects, each with
// configuration (1 to kMaxOpParams params named by identifiers, values
// integers, booleans or strings), times (an object; its numbers finite, its
// runtimes finite and positive, ms), invalidity (T4's values), correctness
// (a finite number); objectives, when given, start with "time". A correct
// result's figure is its "time" measurement (unit ms, us or s), else the
// median of its runtimes; it must have one. Its key is its metadata's
// gpu_model, op, dtype and shape where given (text of at most 256 bytes),
// `defaults` otherwise. NaN and Infinity (which Python's json writes) are
// refused by the field that holds them; nesting past kMaxT4Depth is
// refused. Errors are one line, "NAME: results[3].times.runtimes[0]: ...",
// or what `row` returned, prefixed with "NAME: results[i]: ".
Status ReadT4Results(const std::string& text, const std::string& name, const T4Key& defaults,
                     const std::function<Status(const T4Row&)>& row);

// Whether `head` (a file's first bytes) starts a JSON object, as a T4
// document does and a results CSV never does.
bool LooksLikeT4(const std::string& head);

}  // namespace tune
