#include "measure/program/program_protocol.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <cstdio>

#include "base/backend_kinds.h"
#include "base/json_text.h"
#include "base/limits.h"
#include "measure/sampling.h"
#include "base/stats.h"
#include "base/text.h"

namespace tune::program {
namespace {

using nlohmann::json;

// A message a program sends, as text a row may hold.
constexpr size_t kMaxMessageBytes = 4096;
// No kernel runs for a day; a figure beyond it is not a timing.
constexpr double kMaxSampleUs = 86400e6;

std::string Clip(const std::string& s) { return ToValidUtf8(s.substr(0, kMaxMessageBytes)); }

// A value the program sent, for a message: scalars as written, the rest by
// type (dumping a deeply nested value would recurse as deep).
std::string Shown(const nlohmann::json& v) {
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  return Clip(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

// Nesting of a JSON text, strings skipped: parsing, destroying and printing
// deep values recurse, and no answer needs more than a few levels.
bool NestsAtMost(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > limit) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

json Object(const NamedValues& values) {
  json o = json::object();
  for (const auto& [k, v] : values) o[k] = v;
  return o;
}

json TimingJson(const Request& r) {
  return json{{"warmup", r.timing.warmup},
              {"min_samples", r.timing.min_samples},
              {"max_samples", r.timing.max_samples},
              {"target_rel_ci", r.timing.target_rel_ci},
              {"rank_rel_ci", r.timing.rank_rel_ci},
              {"refine_within", r.timing.refine_within},
              {"max_seconds", r.timing.max_seconds},
              {"early_stop_factor", r.timing.early_stop_factor},
              {"best_so_far_us", r.best_so_far_us},
              {"energy_seconds", r.timing.energy_seconds},
              {"l2", L2TimingName(r.l2)}};
}

const char* CheckAgainst(const CheckSpec& c) {
  return c.mode == CheckSpec::Mode::kSkip ? "none" : c.mode == CheckSpec::Mode::kDefault ? "default" : "reference";
}

json CheckJson(const Request& r) {
  const CheckSpec& c = r.check;
  json j{{"rtol", c.rtol},
         {"atol", c.atol},
         {"max_mismatch", c.max_mismatch},
         {"skip", c.mode == CheckSpec::Mode::kSkip},
         {"against", CheckAgainst(c)}};
  if (c.mode == CheckSpec::Mode::kDefault) j["default"] = ParamsJson<json>(r.default_config.params);
  return j;
}

void Fail(Outcome* out, FailureClass c, const std::string& why) {
  out->answered = true;
  out->failure = c;
  out->message = why;
}

// A finite number >= 0 at `key`, or false.
bool NonNegative(const json& j, const char* key, double* out) {
  auto it = j.find(key);
  if (it == j.end()) return true;
  if (!it->is_number()) return false;
  *out = it->get<double>();
  return std::isfinite(*out) && *out >= 0;
}

bool ReadJson(const json& j, uint64_t want_id, Outcome* out) {
  if (want_id != 0) {
    auto id = j.find("id");
    if (id == j.end() || !id->is_number_unsigned() || id->get<uint64_t>() != want_id) return false;
  }
  out->answered = true;
  if (auto m = j.find("message"); m != j.end() && m->is_string()) out->message = Clip(m->get<std::string>());
  if (auto f = j.find("failure"); f != j.end() && !f->is_null()) {
    const FailureClass c = f->is_string() ? FailureClassFromName(f->get<std::string>()) : FailureClass::kNone;
    if (c == FailureClass::kNone || c == FailureClass::kSkipped) {
      Fail(out, FailureClass::kCrash, "the program answered an unknown failure class: " + Shown(*f));
      return true;
    }
    out->failure = c;
    if (out->message.empty()) out->message = "the program reported " + std::string(FailureClassName(c));
    return true;
  }
  if (auto c = j.find("check"); c != j.end()) {
    const std::string v = c->is_string() ? c->get<std::string>() : "";
    if (v != "pass" && v != "fail") {
      Fail(out, FailureClass::kCrash, "the program answered check = " + Shown(*c) + " (expected pass | fail)");
      return true;
    }
    // Every check must pass: a FAIL is never undone by a later PASS.
    out->check_passed = (out->checked ? out->check_passed : true) && v == "pass";
    out->checked = true;
  }
  if (!NonNegative(j, "max_abs_err", &out->max_abs_error) || !NonNegative(j, "mismatch", &out->mismatch_ratio)) {
    Fail(out, FailureClass::kCrash, "the program answered a max_abs_err or mismatch that is not a finite number >= 0");
    return true;
  }
  if (auto s = j.find("samples_us"); s != j.end()) {
    if (!s->is_array() || s->size() + out->samples_us.size() > kMaxSamples) {
      Fail(out, FailureClass::kCrash, "samples_us: expected an array of at most 100000 numbers");
      return true;
    }
    for (const json& v : *s) {
      const double us = v.is_number() ? v.get<double>() : -1;
      if (!(std::isfinite(us) && us > 0 && us < kMaxSampleUs)) {
        Fail(out, FailureClass::kCrash, "samples_us: " + Shown(v) + " is not a time in microseconds (finite, > 0)");
        return true;
      }
      out->samples_us.push_back(us);
    }
  }
  // Energy, where asked (timing.energy_seconds): finite, >= 0, a power no
  // board draws refused; the row's own checks (energy with its power) are
  // the ingester's.
  for (auto [name, field] : {std::pair<const char*, double*>{"energy_uj", &out->energy_uj},
                             {"power_w", &out->power_w}, {"power_limit_w", &out->power_limit_w}}) {
    if (!NonNegative(j, name, field) || (field != &out->energy_uj && *field > kMaxPowerW)) {
      Fail(out, FailureClass::kCrash,
           std::string("the program answered ") + name + " that is not a finite number >= 0" +
               (field != &out->energy_uj ? " and at most 5000 W" : ""));
      return true;
    }
  }
  if (auto c = j.find("clock_mhz"); c != j.end() && c->is_number()) {
    const double mhz = c->get<double>();
    if (std::isfinite(mhz) && mhz > 0 && mhz < 100000) out->sm_clock_mhz = static_cast<int>(mhz);
  }
  // A version is a short printable word ("2.9.0+cu130"); anything else is dropped.
  if (auto v = j.find("baseline_version"); v != j.end() && v->is_string()) {
    const std::string text = v->get<std::string>();
    if (!text.empty() && text.size() <= 63 &&
        std::all_of(text.begin(), text.end(), [](char ch) { return ch > ' ' && ch < 127; }))
      out->baseline_version = text;
  }
  return true;
}

// croq-tune's lines: "VERIFY: PASS max_abs_err=0.0012" and
// "TFLOPS: 512.3 time_ms: 0.268" (each TFLOPS line is one sample).
bool ReadCroqLine(const std::string& line, Outcome* out) {
  static const std::regex kVerify(R"(^\s*VERIFY:\s*(PASS|FAIL)\b(.*)$)", std::regex::icase);
  static const std::regex kErr(R"(max_abs_err\s*=\s*([-+0-9.eEinfaINFA]+))");
  static const std::regex kTime(R"(^\s*TFLOPS:\s*\S+\s+time_ms:\s*([-+0-9.eEinfaINFA]+)\s*$)");
  // Such lines are short; std::regex recurses per character, so a long
  // line is never handed to it.
  if (line.size() > 512) return false;
  std::smatch m;
  if (std::regex_match(line, m, kVerify)) {
    out->answered = true;
    const bool pass = m[1].str()[0] == 'P' || m[1].str()[0] == 'p';
    out->check_passed = (out->checked ? out->check_passed : true) && pass;
    out->checked = true;
    const std::string rest = m[2].str();
    std::smatch e;
    if (std::regex_search(rest, e, kErr)) {
      const double v = std::strtod(e[1].str().c_str(), nullptr);
      if (!(std::isfinite(v) && v >= 0)) {
        // NaN error: whatever the line says, nothing passed.
        out->check_passed = false;
        if (out->failure == FailureClass::kNone) Fail(out, FailureClass::kNan, "max_abs_err is " + e[1].str());
      } else {
        out->max_abs_error = v;
      }
    }
    if (!out->check_passed && out->message.empty()) out->message = Clip(line);
    return true;
  }
  if (std::regex_match(line, m, kTime)) {
    out->answered = true;
    const double us = std::strtod(m[1].str().c_str(), nullptr) * 1000.0;
    if (!(std::isfinite(us) && us > 0 && us < kMaxSampleUs)) {
      Fail(out, FailureClass::kCrash, "time_ms " + m[1].str() + " is not a time (finite, > 0)");
    } else if (out->samples_us.size() < kMaxSamples) {
      out->samples_us.push_back(us);
    }
    return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> DeviceEnvironment(const DeviceInfo& device, unsigned cpus, const std::string& python_path) {
  std::vector<std::string> env = {
      "TUNEFARM_PROTOCOL=" + std::to_string(kProtocolVersion),
      "TUNEFARM_GPU_MODEL=" + device.model,
      "TUNEFARM_BACKEND=" + device.backend,
      "TUNEFARM_DEVICE=" + std::to_string(device.index),
      "TUNEFARM_ARCH=sm_" + std::to_string(device.cc_major) + std::to_string(device.cc_minor),
  };
  const BackendKind* kind = FindBackendKind(device.backend);
  if (kind && !kind->visible_devices_env.empty()) {
    // One program per GPU: it sees its own device only, as device 0. An
    // ordinal of the worker's is one of its own visible devices.
    const std::string var(kind->visible_devices_env);
    std::string visible = std::to_string(device.index);
    if (const char* v = std::getenv(var.c_str()); v && *v) {
      std::vector<std::string> ids;
      std::stringstream list(v);
      for (std::string id; std::getline(list, id, ',');) ids.push_back(id);
      if (device.index >= 0 && size_t(device.index) < ids.size()) visible = ids[size_t(device.index)];
    }
    env.push_back(var + "=" + visible);
  }
  if (cpus > 0) env.push_back("TUNEFARM_CPUS=" + std::to_string(cpus));
  if (!python_path.empty()) {
    const char* old = std::getenv("PYTHONPATH");
    env.push_back("PYTHONPATH=" + python_path + (old && *old ? ":" + std::string(old) : ""));
  }
  return env;
}

std::vector<std::string> RequestEnvironment(const Request& r) {
  std::vector<std::string> env = {"TUNEFARM_OP=" + r.op};
  env.push_back("TUNEFARM_DTYPE=" + r.dtype);
  env.push_back("TUNEFARM_CONFIG=" + r.config.Canonical());
  env.push_back("TUNEFARM_CONFIG_ID=" + r.config.Id());
  for (const auto& [k, v] : r.config.params) env.push_back("TUNEFARM_PARAM_" + k + "=" + v.ToString());
  env.push_back("TUNEFARM_DIMS=" + r.shape.Canonical());
  for (const auto& [k, v] : r.shape.dims) env.push_back("TUNEFARM_DIM_" + k + "=" + std::to_string(v));
  env.push_back("TUNEFARM_BUILD_DIR=" + r.build_dir);
  env.push_back("TUNEFARM_SEED=" + std::to_string(r.seed));
  env.push_back(std::string("TUNEFARM_L2=") + L2TimingName(r.l2));
  if (!r.baseline.empty()) env.push_back("TUNEFARM_BASELINE=" + r.baseline);
  env.push_back("TUNEFARM_RTOL=" + Number(r.check.rtol));
  env.push_back("TUNEFARM_ATOL=" + Number(r.check.atol));
  env.push_back("TUNEFARM_MAX_MISMATCH=" + Number(r.check.max_mismatch));
  env.push_back(std::string("TUNEFARM_CHECK_AGAINST=") + CheckAgainst(r.check));
  if (r.check.mode == CheckSpec::Mode::kDefault) env.push_back("TUNEFARM_DEFAULT_CONFIG=" + r.default_config.Canonical());
  env.push_back("TUNEFARM_REQUEST=" + MeasureLine(r));
  return env;
}

std::string MeasureLine(const Request& r) {
  json j = {{"tunefarm", kProtocolVersion},
            {"cmd", "measure"},
            {"id", r.id},
            {"op", r.op},
            {"dtype", r.dtype},
            {"config", ParamsJson<json>(r.config.params)},
            {"config_id", r.config.Id()},
            {"dims", Object(r.shape.dims)},
            {"build_dir", r.build_dir},
            {"seed", r.seed},
            {"timing", TimingJson(r)},
            {"check", CheckJson(r)}};
  if (!r.baseline.empty()) j["baseline"] = r.baseline;
  return DumpJson(j);
}

std::string PlanLine(const std::string& op, const std::string& dtype, const std::vector<Config>& configs,
                     const std::vector<Shape>& shapes) {
  json list = json::array(), dims = json::array();
  for (const Config& c : configs) list.push_back(ParamsJson<json>(c.params));
  for (const Shape& s : shapes) dims.push_back(Object(s.dims));
  return DumpJson(json{{"tunefarm", kProtocolVersion}, {"cmd", "plan"},     {"op", op},
                       {"dtype", dtype},               {"configs", std::move(list)}, {"shapes", std::move(dims)}});
}

bool ReadLine(const std::string& line, uint64_t want_id, Outcome* out) {
  size_t start = line.find_first_not_of(" \t\r");
  if (start == std::string::npos) return false;
  if (line[start] == '{') {
    if (!NestsAtMost(line, 16)) return false;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("tunefarm")) return false;
    return ReadJson(j, want_id, out);
  }
  if (want_id != 0) return false;  // a serve process answers in JSON
  return ReadCroqLine(line, out);
}

Measurement ToMeasurement(const Outcome& o, CheckSpec::Mode check, const std::string& log_tail) {
  const bool check_skipped = check == CheckSpec::Mode::kSkip;
  Measurement m;
  auto fail = [&](FailureClass c, const std::string& why) {
    m.failure = c;
    m.failure_message = why + (log_tail.empty() ? "" : "\n" + log_tail);
    return m;
  };
  if (!o.answered) return fail(FailureClass::kCrash, "the program printed no result");
  if (o.failure != FailureClass::kNone) return fail(o.failure, o.message);
  m.max_abs_error = o.max_abs_error;
  m.mismatch_ratio = o.mismatch_ratio;
  m.baseline = o.baseline_version;
  m.sm_clock_mhz = o.sm_clock_mhz;
  m.energy_uj = o.energy_uj;
  m.power_w = o.power_w;
  m.power_limit_w = o.power_limit_w;
  if (!o.checked && !check_skipped)
    return fail(FailureClass::kWrongResult, "the program printed no check result (check = pass | fail)");
  if (o.checked && !o.check_passed)
    return fail(FailureClass::kWrongResult, o.message.empty() ? "the program's check failed" : o.message);
  if (o.samples_us.empty()) return fail(FailureClass::kCrash, "the program printed no timing samples");
  m.check_passed = o.checked;
  m.unchecked = !o.checked;
  m.against_default = o.checked && check == CheckSpec::Mode::kDefault;
  SetFigures(ComputeStats(o.samples_us), &m);
  return m;
}

}  // namespace tune::program
