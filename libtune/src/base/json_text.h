// DumpJson: the one way tunefarm writes a JSON document.
//
// nlohmann::json throws on a string that is not valid UTF-8, and a store
// written before the codec checked text (base/text.h) may hold such bytes:
// every writer (HTTP API, `results`, `compare`, nightly, bundles) replaces
// them with U+FFFD instead, so no stored byte can make a report fail or a
// coordinator abort.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/types.h"

namespace tune {

// `indent` < 0: one line; otherwise pretty-printed with that many spaces.
// Takes nlohmann::json and nlohmann::ordered_json alike (keys keep their
// order).
template <typename Json>
std::string DumpJson(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

// Params as a JSON object in their order (an ordered_json keeps it): an
// integer as a number, a boolean as a boolean, a string as a string.
template <typename Json>
Json ParamsJson(const ParamValues& params) {
  Json j = Json::object();
  for (const auto& [name, v] : params) {
    if (v.kind() == ParamValue::Kind::kBool) j[name] = v.Number() != 0;
    else if (v.kind() == ParamValue::Kind::kString) j[name] = v.text();
    else j[name] = v.Number();
  }
  return j;
}

// Inverse of ParamsJson; throws std::runtime_error naming `what` and the
// param for a value that is no integer, boolean or macro token.
template <typename Json>
ParamValues ParamsFromJson(const Json& j, const std::string& what) {
  if (!j.is_object()) throw std::runtime_error(what + " must be an object");
  ParamValues out;
  for (const auto& [name, value] : j.items()) {
    if (value.is_number_integer()) {
      out.emplace_back(name, value.template get<int64_t>());
    } else if (value.is_boolean()) {
      out.emplace_back(name, ParamValue::Bool(value.template get<bool>()));
    } else if (value.is_string()) {
      const std::string text = value.template get<std::string>();
      if (Status st = CheckCategoricalText(text); !st.ok()) throw std::runtime_error(what + "." + name + ": " + st.message());
      out.emplace_back(name, ParamValue::String(text));
    } else {
      throw std::runtime_error(what + "." + name + " must be an integer, a boolean or a string");
    }
  }
  return out;
}

}  // namespace tune
