#include "publish/engine_configs.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "base/dim_names.h"
#include "base/json_text.h"
#include "base/text.h"

namespace tune {

namespace {

std::string DeviceInName(std::string name) {
  std::replace(name.begin(), name.end(), ' ', '_');
  return name;
}

// `format` with its {fields} replaced; "" and *why set for an unknown field.
std::string FillName(const std::string& format, const std::map<std::string, std::string>& fields, std::string* why) {
  std::string out;
  for (size_t i = 0; i < format.size();) {
    if (format[i] != '{') {
      out += format[i++];
      continue;
    }
    const size_t close = format.find('}', i);
    if (close == std::string::npos) {
      *why = "an unclosed '{' in the file name format '" + format + "'";
      return "";
    }
    const std::string field = format.substr(i + 1, close - i - 1);
    auto it = fields.find(field);
    if (it == fields.end()) {
      *why = "the file name format's {" + field + "} names no field (op, dtype, gpu, device, dims or a dim)";
      return "";
    }
    out += it->second;
    i = close + 1;
  }
  return out;
}

}  // namespace

Result<std::vector<EngineFile>> EngineFiles(const std::vector<Measurement>& winners, const std::string& key_dim,
                                            const std::string& name_format, size_t* skipped) {
  std::map<std::string, EngineFile> files;  // by name
  *skipped = 0;
  for (const Measurement& m : winners) {
    if (!m.Valid()) continue;
    NamedValues dims;
    if (!ParseNamedValues(m.shape, &dims)) continue;
    const auto key = std::find_if(dims.begin(), dims.end(), [&](const auto& d) { return d.first == key_dim; });
    if (key == dims.end()) {
      ++*skipped;
      continue;
    }
    NamedValues fixed;
    std::map<std::string, std::string> fields = {{"op", m.op},
                                                 {"dtype", m.dtype},
                                                 {"gpu", m.gpu_model},
                                                 {"device", DeviceInName(m.device_name.empty() ? m.gpu_model
                                                                                              : m.device_name)}};
    for (const auto& d : dims) {
      fields[d.first] = std::to_string(d.second);
      if (d.first != key_dim) fixed.push_back(d);
    }
    fields["dims"] = JoinNamedValues(fixed);
    // With no fixed dims, "{dims}," leaves no stray comma: "device_name=X.json".
    std::string format = name_format;
    if (fixed.empty())
      for (const std::string sep : {"{dims},", ",{dims}"})
        for (size_t at; (at = format.find(sep)) != std::string::npos;) format.erase(at, sep.size());
    std::string why;
    const std::string name = FillName(format, fields, &why);
    if (!why.empty()) return Status::Error(why);
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        !CheckText(name, "file name", 255).ok())
      return Status::Error("file name '" + ToValidUtf8(name) + "' (from the format '" + name_format +
                           "') is not a plain file name");
    EngineFile& f = files[name];
    if (f.name.empty()) {
      f = EngineFile{name, m.op, m.dtype, m.gpu_model, m.device_name, fixed, {}};
    } else if (f.op != m.op || f.dtype != m.dtype || f.gpu_model != m.gpu_model || f.fixed != fixed) {
      return Status::Error("two kernels would write " + name + ": " + f.op + "/" + f.dtype + " on " + f.gpu_model +
                           " " + JoinNamedValues(f.fixed) + " and " + m.op + "/" + m.dtype + " on " + m.gpu_model +
                           " " + JoinNamedValues(fixed) + " (name the files with {op}, {dtype} or {gpu})");
    }
    f.configs[key->second] = m.config.params;
  }
  std::vector<EngineFile> out;
  for (auto& [name, f] : files) out.push_back(std::move(f));
  return out;
}

std::string EngineFileJson(const EngineFile& file) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [key, params] : file.configs) j[std::to_string(key)] = ParamsJson<nlohmann::ordered_json>(params);
  return DumpJson(j, 2) + "\n";
}

Result<std::vector<EngineEntry>> ReadEngineFile(const std::string& text, const std::string& path,
                                               const std::vector<std::string>& params) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return Status::Error(path + ": not JSON");
  if (!j.is_object()) return Status::Error(path + ": not a JSON object of key value to config");
  if (j.size() > kMaxEngineEntries)
    return Status::Error(path + ": " + std::to_string(j.size()) + " entries, more than " +
                         std::to_string(kMaxEngineEntries));
  std::vector<EngineEntry> out;
  for (const auto& [key, value] : j.items()) {
    const std::string at = path + ": \"" + ToValidUtf8(key.substr(0, 40)) + "\"";
    int64_t v = 0;
    size_t used = 0;
    try {
      v = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != key.size() || v < 1 || v > kMaxDimValue)
      return Status::Error(at + ": the key is not an integer from 1 to 2^40");
    EngineEntry e;
    e.key = v;
    try {
      e.config.params = ParamsFromJson(value, at);
    } catch (const std::runtime_error& err) {
      return Status::Error(err.what());
    }
    if (e.config.params.empty()) return Status::Error(at + ": an empty config");
    for (const auto& [name, pv] : e.config.params) {
      if (!params.empty() && std::find(params.begin(), params.end(), name) == params.end())
        return Status::Error(at + "." + ToValidUtf8(name.substr(0, 40)) + ": no param of the op (it has " +
                             Join(params, ", ") + ")");
    }
    out.push_back(std::move(e));
  }
  if (out.empty()) return Status::Error(path + ": no entries");
  return out;
}

NamedValues DimsOfEngineFileName(const std::string& name) {
  std::string stem = name.substr(name.find_last_of('/') + 1);
  if (const size_t dot = stem.rfind(".json"); dot != std::string::npos && dot + 5 == stem.size()) stem.resize(dot);
  NamedValues dims;
  size_t at = 0;
  while (at <= stem.size()) {
    const size_t comma = std::min(stem.find(',', at), stem.size());
    const std::string part = stem.substr(at, comma - at);
    const size_t eq = part.find('=');
    if (eq != std::string::npos && eq > 0) {
      const std::string dim = part.substr(0, eq), value = part.substr(eq + 1);
      const bool digits = !value.empty() && value.size() <= 13 &&
                          std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (digits && IsDimName(dim)) {
        const int64_t v = std::stoll(value);
        if (v >= 1 && v <= kMaxDimValue) dims.emplace_back(dim, v);
      }
    }
    at = comma + 1;
  }
  return dims;
}

}  // namespace tune
