#include "report/t4.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "base/backend_kinds.h"
#include "base/json_text.h"
#include "base/limits.h"
#include "base/text.h"

namespace tune {
namespace {

using Json = nlohmann::ordered_json;

// T4's invalidity of a row (t4.h says which status maps to which).
const char* Invalidity(const Measurement& m) {
  if (m.Valid()) return "correct";
  switch (m.failure) {
    case FailureClass::kCompileError: return "compile";
    case FailureClass::kWrongResult:
    case FailureClass::kNan: return "correctness";
    case FailureClass::kTimeout:
    case FailureClass::kSkipped: return "timeout";
    case FailureClass::kResources:
    case FailureClass::kLaunchError:
    case FailureClass::kCrash: return "runtime";
    case FailureClass::kNone: break;
  }
  return !m.check_passed && !m.unchecked ? "correctness" : "runtime";  // check_not_passed, no_samples
}

std::string IsoTime(int64_t unix_time) {
  const std::time_t t = static_cast<std::time_t>(unix_time);
  std::tm tm{};
  if (!gmtime_r(&t, &tm)) return "";
  char buf[32];
  if (std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) return "";
  return buf;
}

Json Ms(const char* name, double us) { return Json{{"name", name}, {"value", us / 1000.0}, {"unit", "ms"}}; }

// NaN, Infinity and -Infinity outside strings (Python's json writes them;
// JSON has no such tokens) become strings starting with this, so that the
// field holding one is named when it is refused.
constexpr char kNonFinite[] = "\x01nonfinite ";

std::string MarkNonFinite(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) out += text[++i];
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    bool replaced = false;
    for (const char* token : {"NaN", "Infinity", "-Infinity"}) {
      const size_t n = std::char_traits<char>::length(token);
      if (text.compare(i, n, token) == 0) {
        out += "\"\\u0001nonfinite ";
        out += token;
        out += '"';
        i += n - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += c;
  }
  return out;
}

// A refusal of the document: the field and why.
struct T4Error {
  std::string field, why;
};

[[noreturn]] void Refuse(const std::string& field, const std::string& why) { throw T4Error{field, why}; }

std::string Kind(const Json& v) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s.rfind(kNonFinite, 0) == 0) return s.substr(sizeof kNonFinite - 1);
    return "a string";
  }
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "a number";
}

double FiniteNumber(const Json& v, const std::string& field) {
  if (!v.is_number()) Refuse(field, Kind(v) + ", not a finite number");
  const double d = v.get<double>();
  if (!std::isfinite(d)) Refuse(field, "not a finite number");
  return d;
}

double PositiveNumber(const Json& v, const std::string& field) {
  const double d = FiniteNumber(v, field);
  if (d <= 0) Refuse(field, "not a positive number");
  return d;
}

const Json& Need(const Json& obj, const char* key, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end()) Refuse(where + "." + key, "missing (required by T4)");
  return *it;
}

std::string KeyText(const Json& meta, const char* key, const std::string& where, const std::string& fallback) {
  const auto it = meta.find(key);
  if (it == meta.end()) return fallback;
  const std::string field = where + ".metadata." + key;
  if (!it->is_string()) Refuse(field, Kind(*it) + ", not a string");
  const std::string& s = it->get_ref<const std::string&>();
  if (s.empty()) Refuse(field, "empty");
  if (Status st = CheckText(s, "text", 256); !st.ok()) Refuse(field, st.message());
  return s;
}

bool Identifier(const std::string& s) {
  if (s.empty() || s.size() > 64 || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// One results[i] as ground truth; throws T4Error.
T4Row RowOf(const Json& r, size_t index, const T4Key& defaults) {
  const std::string where = "results[" + std::to_string(index) + "]";
  if (!r.is_object()) Refuse(where, Kind(r) + ", not an object");
  T4Row row;
  row.index = index;

  const Json& config = Need(r, "configuration", where);
  const std::string cfield = where + ".configuration";
  if (!config.is_object()) Refuse(cfield, Kind(config) + ", not an object");
  if (config.empty()) Refuse(cfield, "no params");
  if (config.size() > kMaxOpParams)
    Refuse(cfield, std::to_string(config.size()) + " params, over the bound of " + std::to_string(kMaxOpParams) +
                       " (kMaxOpParams)");
  for (const auto& [name, value] : config.items()) {
    if (!Identifier(name)) Refuse(cfield, "'" + ToValidUtf8(name.substr(0, 80)) + "' is not an identifier param name");
    if (value.is_string() && value.get_ref<const std::string&>().rfind(kNonFinite, 0) == 0)
      Refuse(cfield + "." + name, Kind(value) + ", not an integer, a boolean or a string");
  }
  try {
    row.config.params = ParamsFromJson(config, cfield);
  } catch (const std::runtime_error& e) {
    Refuse(e.what(), "");
  }

  const Json& times = Need(r, "times", where);
  const std::string tfield = where + ".times";
  if (!times.is_object()) Refuse(tfield, Kind(times) + ", not an object");
  std::vector<double> runtimes;
  for (const auto& [key, value] : times.items()) {
    const std::string field = tfield + "." + key;
    if (key == "runtimes") {
      if (!value.is_array()) Refuse(field, Kind(value) + ", not an array");
      for (size_t i = 0; i < value.size(); ++i)
        runtimes.push_back(PositiveNumber(value[i], field + "[" + std::to_string(i) + "]"));
    } else if (!value.is_array() && !value.is_object()) {
      FiniteNumber(value, field);  // compilation_time, framework, ...: numbers, NaN refused
    }
  }

  const Json& invalidity = Need(r, "invalidity", where);
  static const char* const kInvalidity[] = {"timeout", "compile", "runtime", "correctness", "constraints", "correct"};
  if (!invalidity.is_string() ||
      std::none_of(std::begin(kInvalidity), std::end(kInvalidity),
                   [&](const char* v) { return invalidity.get_ref<const std::string&>() == v; }))
    Refuse(where + ".invalidity", "not one of timeout, compile, runtime, correctness, constraints, correct");
  FiniteNumber(Need(r, "correctness", where), where + ".correctness");

  if (const auto it = r.find("objectives"); it != r.end()) {
    if (!it->is_array()) Refuse(where + ".objectives", Kind(*it) + ", not an array");
    if (!it->empty() && !((*it)[0].is_string() && (*it)[0].get_ref<const std::string&>() == "time"))
      Refuse(where + ".objectives[0]", "replay takes the objective \"time\" (kernel time, lower is better)");
  }
  std::optional<double> time_us;
  if (const auto it = r.find("measurements"); it != r.end()) {
    if (!it->is_array()) Refuse(where + ".measurements", Kind(*it) + ", not an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& m = (*it)[i];
      const std::string field = where + ".measurements[" + std::to_string(i) + "]";
      if (!m.is_object()) Refuse(field, Kind(m) + ", not an object");
      const auto name = m.find("name");
      if (name == m.end() || !name->is_string() || name->get_ref<const std::string&>() != "time") {
        if (const auto v = m.find("value"); v != m.end() && v->is_string() &&
                                            v->get_ref<const std::string&>().rfind(kNonFinite, 0) == 0)
          Refuse(field + ".value", Kind(*v) + ", not a finite number");
        continue;
      }
      const double v = PositiveNumber(Need(m, "value", field), field + ".value");
      const auto unit = m.find("unit");
      const std::string u = unit != m.end() && unit->is_string() ? unit->get<std::string>() : "ms";
      if (u == "ms") time_us = v * 1e3;
      else if (u == "us") time_us = v;
      else if (u == "s") time_us = v * 1e6;
      else Refuse(field + ".unit", "'" + ToValidUtf8(u.substr(0, 40)) + "' is no time unit (ms, us, s)");
    }
  }
  if (invalidity.get_ref<const std::string&>() == "correct") {
    if (time_us) {
      row.us = time_us;
    } else if (!runtimes.empty()) {
      std::sort(runtimes.begin(), runtimes.end());
      const size_t n = runtimes.size();
      row.us = 1e3 * (n % 2 ? runtimes[n / 2] : (runtimes[n / 2 - 1] + runtimes[n / 2]) / 2);
    } else {
      Refuse(tfield + ".runtimes", "empty, and no \"time\" measurement: a correct result needs a figure");
    }
    if (!std::isfinite(*row.us) || *row.us <= 0) Refuse(tfield, "the figure is not a finite positive time");
  }

  row.gpu_model = defaults.gpu_model;
  row.op = defaults.op;
  row.dtype = defaults.dtype;
  row.shape = defaults.shape;
  if (const auto it = r.find("metadata"); it != r.end()) {
    if (!it->is_object()) Refuse(where + ".metadata", Kind(*it) + ", not an object");
    row.gpu_model = KeyText(*it, "gpu_model", where, defaults.gpu_model);
    row.op = KeyText(*it, "op", where, defaults.op);
    row.dtype = KeyText(*it, "dtype", where, defaults.dtype);
    row.shape = KeyText(*it, "shape", where, defaults.shape);
  }
  return row;
}

}  // namespace

std::string T4ResultsJson(const std::vector<Measurement>& rows) {
  Json doc;
  doc["schema_version"] = kT4SchemaVersion;
  doc["metadata"] = {{"producer", std::string("tunefarm ") + TUNEFARM_VERSION},
                     {"objective", "time: the median of the samples, ms"}};
  Json results = Json::array();
  for (const Measurement& m : rows) {
    Json r;
    if (m.unix_time > 0) r["timestamp"] = IsoTime(m.unix_time);
    r["configuration"] = ParamsJson<Json>(m.config.params);
    r["objectives"] = Json::array({"time"});
    const bool valid = m.Valid() && std::isfinite(m.median_us) && m.median_us > 0;
    r["times"] = {{"runtimes", valid ? Json::array({m.median_us / 1000.0}) : Json::array()}};
    const std::string invalidity = valid ? "correct" : Invalidity(m);
    r["invalidity"] = invalidity;
    r["correctness"] = invalidity == "correctness" ? 0 : 1;
    Json ms = Json::array();
    if (valid) {
      ms.push_back(Ms("time", m.median_us));
      const std::pair<const char*, double> stats[] = {{"time_mean", m.mean_us}, {"time_stdev", m.stdev_us},
                                                      {"time_min", m.min_us},   {"time_max", m.max_us},
                                                      {"time_ci95", m.ci95_us}};
      for (const auto& [name, us] : stats)
        if (std::isfinite(us)) ms.push_back(Ms(name, us));
      ms.push_back({{"name", "samples"}, {"value", m.samples}, {"unit", ""}});
    }
    r["measurements"] = std::move(ms);
    r["metadata"] = {{"gpu_model", m.gpu_model},
                     {"device_name", m.device_name},
                     {"op", m.op},
                     {"dtype", m.dtype},
                     {"shape", m.shape},
                     {"kernel_hash", m.kernel_hash},
                     {"config_id", m.config_id},
                     {"status", m.StatusName()},
                     {"backend", m.backend},
                     {"simulated", IsSimulatedBackend(m.backend)},
                     {"sweep_id", m.sweep_id}};
    results.push_back(std::move(r));
  }
  doc["results"] = std::move(results);
  return DumpJson(doc, 2) + "\n";
}

bool LooksLikeT4(const std::string& head) {
  for (char c : head) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    return c == '{';
  }
  return false;
}

Status ReadT4Results(const std::string& text, const std::string& name, const T4Key& defaults,
                     const std::function<Status(const T4Row&)>& row) {
  const std::string marked = MarkNonFinite(text);
  std::string top_key;          // the last key of the top-level object
  bool in_results = false;      // inside the top-level "results" array
  size_t index = 0;             // of the next results[] element
  Status from_row;              // what `row` returned, when not OK
  struct Stop {};
  auto callback = [&](int depth, Json::parse_event_t event, Json& parsed) -> bool {
    if (depth > kMaxT4Depth) Refuse("(document)", "nested over " + std::to_string(kMaxT4Depth) + " deep (kMaxT4Depth)");
    if (depth == 1 && event == Json::parse_event_t::key) top_key = parsed.get<std::string>();
    if (depth == 1 && event == Json::parse_event_t::array_start && top_key == "results") in_results = true;
    if (depth == 1 && event == Json::parse_event_t::array_end) in_results = false;
    if (in_results && depth == 2 &&
        (event == Json::parse_event_t::object_end || event == Json::parse_event_t::array_end ||
         event == Json::parse_event_t::value)) {
      const T4Row r = RowOf(parsed, index++, defaults);
      if (Status st = row(r); !st.ok()) {
        from_row = Status::InvalidArgument(name + ": results[" + std::to_string(r.index) + "]: " + st.message());
        throw Stop{};
      }
      return false;  // processed: not kept in the document
    }
    return true;
  };
  Json doc;
  try {
    doc = Json::parse(marked, callback);
    if (!doc.is_object()) Refuse("(document)", "not a JSON object");
    const std::string vfield = "schema_version";
    if (!doc.contains(vfield)) Refuse(vfield, "missing (required by T4)");
    const Json& version = doc[vfield];
    if (!version.is_string()) Refuse(vfield, Kind(version) + ", not a string");
    const std::string& v = version.get_ref<const std::string&>();
    const size_t dot1 = v.find('.'), dot2 = dot1 == std::string::npos ? dot1 : v.find('.', dot1 + 1);
    const bool digits = !v.empty() && std::all_of(v.begin(), v.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; });
    if (!digits || dot2 == std::string::npos || v.find('.', dot2 + 1) != std::string::npos || dot1 == 0 ||
        dot2 == dot1 + 1 || dot2 + 1 == v.size())
      Refuse(vfield, "'" + ToValidUtf8(v.substr(0, 40)) + "' is not MAJOR.MINOR.PATCH");
    if (v.substr(0, dot1) != "1") Refuse(vfield, "'" + v + "': this reader takes T4 version 1.x.y");
    const auto results = doc.find("results");
    if (results == doc.end()) Refuse("results", "missing (required by T4)");
    if (!results->is_array()) Refuse("results", Kind(*results) + ", not an array");
  } catch (const T4Error& e) {
    if (e.why.empty()) return Status::InvalidArgument(name + ": " + e.field);  // the field is in the message
    const std::string field = e.field == "(document)" ? "" : e.field + ": ";
    return Status::InvalidArgument(name + ": " + field + e.why);
  } catch (const Stop&) {
    return from_row;
  } catch (const Json::parse_error& e) {
    std::string what = e.what();
    if (const size_t at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
    return Status::InvalidArgument(name + ": not a JSON document: " + what.substr(0, 200));
  } catch (const std::exception& e) {
    return Status::InvalidArgument(name + ": " + std::string(e.what()).substr(0, 200));
  }
  return Status::OK();
}

}  // namespace tune
