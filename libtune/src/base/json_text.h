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

namespace tune {

// `indent` < 0: one line; otherwise pretty-printed with that many spaces.
// Takes nlohmann::json and nlohmann::ordered_json alike (keys keep their
// order).
template <typename Json>
std::string DumpJson(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace tune
