// What a program op and the worker say to each other (docs/program-ops.md),
// as pure code: the environment and request lines the worker gives, and
// the reading of what the program prints. A program is a peer like any
// other: every value it prints is checked here before it becomes a row.
#pragma once

#include <string>
#include <vector>

#include "measure/backend.h"
#include "opspec/op_definition.h"
#include "base/types.h"

namespace tune::program {

// The protocol's version, in every request and (optionally) in answers.
inline constexpr int kProtocolVersion = 1;
// Samples one answer may carry.
inline constexpr size_t kMaxSamples = 100000;

// What one measurement request asks.
struct Request {
  uint64_t id = 0;
  std::string op, dtype;
  Config config;
  Shape shape;
  std::string build_dir;          // the config's build folder (build command's output)
  TimingPolicy timing;
  double best_so_far_us = 0;
  CheckSpec check;                // mode and tolerances
  // [check] default: the op's default config, whose outputs the program
  // compares every config's with.
  Config default_config;
  uint64_t seed = 0;              // of the inputs: the same for every config of a shape
  L2Timing l2 = L2Timing::kCold;  // the op's timing: hot = no L2 flush before a sample
  // Not empty: time the op's [baseline] (its library's name) instead of
  // `config`, which is then the op's default.
  std::string baseline;
};

// "NAME=value" entries of `request` for a run or build process (TUNEFARM_*,
// documented in docs/program-ops.md); DeviceEnvironment's come beside them.
std::vector<std::string> RequestEnvironment(const Request& request);
// The variables of the device (CUDA programs see only it, as device 0), of
// its share of the host's cores (`cpus`, 0 = not said) and of the Python
// package: what a serve process starts with.
std::vector<std::string> DeviceEnvironment(const DeviceInfo& device, unsigned cpus, const std::string& python_path);
// One JSON line: {"tunefarm":1,"cmd":"measure","id":..,"config":{..},"dims":{..},...}.
std::string MeasureLine(const Request& request);
// One JSON line telling a serve process which configs come next and on
// which shapes, so that it may compile them ahead:
// {"tunefarm":1,"cmd":"plan","dtype":..,"configs":[..],"shapes":[..]}.
std::string PlanLine(const std::string& op, const std::string& dtype, const std::vector<Config>& configs,
                     const std::vector<Shape>& shapes);

// What a program said about one measurement.
struct Outcome {
  bool answered = false;          // a result line (JSON or the croq-tune VERIFY/TFLOPS lines)
  bool checked = false, check_passed = false;
  FailureClass failure = FailureClass::kNone;
  std::string message;
  double max_abs_error = 0, mismatch_ratio = 0;
  std::vector<double> samples_us;
  int sm_clock_mhz = 0;
  double energy_uj = 0, power_w = 0, power_limit_w = 0;  // where the request asked (timing.energy_seconds)
  std::string baseline_version;   // a baseline's answer: its library's version ("2.9.0")
};

// Folds one line of a program's stdout into `out`. Lines that are neither
// a JSON object with a "tunefarm" key nor a croq-tune line ("VERIFY: PASS
// max_abs_err=1e-3", "TFLOPS: 512.3 time_ms: 0.27") are its own chatter and
// are ignored (false). A JSON answer to a serve request counts only when
// its "id" is `want_id` (0: any). A value out of range (a sample that is not
// finite and positive, an unknown failure class, too many samples) makes the
// outcome a failure naming the field.
bool ReadLine(const std::string& line, uint64_t want_id, Outcome* out);

// The row an outcome makes: a failure (with `log_tail` after its message),
// a wrong result, or the figures of its samples; `baseline` holds the
// answer's baseline_version, for the backend to prefix with the library. An answer without samples
// is a failure that says so; so is one without a check result, unless the
// op skips its check (`check` kSkip): then the row is unchecked. Under
// kDefault the row was checked against the default config's outputs.
Measurement ToMeasurement(const Outcome& outcome, CheckSpec::Mode check, const std::string& log_tail);

}  // namespace tune::program
