// Logging of the farm's long-running processes (coordinator, workers): one
// line per event with its time, level and component, and the context it
// belongs to as fields (sweep, unit, worker, op, dtype, shape, ...), either
// as text for people or as JSON lines for a fleet's log pipeline. Over
// spdlog; every call is thread-safe.
//
//   tune::log::Info("coordinator", "leased a unit", {{"sweep", id}, {"unit", std::to_string(u)}});
//   text: 2026-11-25T19:55:01.123+00:00 info coordinator: leased a unit sweep=nightly-3 unit=42
//   json: {"time":"2026-11-25T19:55:01.123+00:00","level":"info","component":"coordinator",
//          "message":"leased a unit","sweep":"nightly-3","unit":"42"}
//
// Levels print as debug, info, warning, error. A field named time, level,
// component or message is written as field_<name>. Field values and messages
// may hold any bytes: text mode quotes values with
// spaces, JSON mode escapes and replaces invalid UTF-8 (no peer's text can
// break a line or the JSON).
#pragma once

#include <initializer_list>
#include <iosfwd>
#include <string>
#include <string_view>
#include <cmath>
#include <type_traits>
#include <utility>

#include "tune/status.h"

namespace tune::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// A field's value: text, or a number (given as one), which JSON lines write
// as a JSON number rather than a string.
struct Field {
  Field(std::string_view k, std::string v) : key(k), value(std::move(v)) {}
  Field(std::string_view k, const char* v) : key(k), value(v) {}
  Field(std::string_view k, std::string_view v) : key(k), value(v) {}
  template <typename N>
    requires std::is_arithmetic_v<N> && (!std::is_same_v<N, bool>) && (!std::is_same_v<N, char>)
  Field(std::string_view k, N v) : key(k), value(std::to_string(v)), number(std::isfinite(static_cast<double>(v))) {}
  Field(std::string_view k, bool v) : key(k), value(v ? "true" : "false") {}

  std::string_view key;
  std::string value;
  bool number = false;
};

// Sets the level ("debug", "info", "warn", "error") and the format ("text",
// "json"); "" keeps the current one. Errors name the value refused. The
// defaults are $TUNEFARM_LOG_LEVEL and $TUNEFARM_LOG_FORMAT when set and
// valid, else info and text.
Status Configure(const std::string& level, const std::string& format);

// Whether a line of `level` would be written: to skip building costly ones.
bool Enabled(Level level);
// Whether lines are JSON: a command's own lines for people on stderr go
// through the log instead, so that stderr stays JSON lines alone.
bool WritesJson();
// A command's line for people ("publish: 2 keys partial"): "COMPONENT:
// MESSAGE" on stderr as it is, or an info line when the log writes JSON.
void Note(std::string_view component, std::string_view message);

void Write(Level level, std::string_view component, std::string_view message,
           std::initializer_list<Field> fields = {});
inline void Info(std::string_view component, std::string_view message, std::initializer_list<Field> fields = {}) {
  Write(Level::kInfo, component, message, fields);
}
inline void Warn(std::string_view component, std::string_view message, std::initializer_list<Field> fields = {}) {
  Write(Level::kWarn, component, message, fields);
}
inline void Error(std::string_view component, std::string_view message, std::initializer_list<Field> fields = {}) {
  Write(Level::kError, component, message, fields);
}

// Tests: lines go to `out` (nullptr: to stderr again); `out` must outlive
// the lines written to it.
void SetStreamForTesting(std::ostream* out);

}  // namespace tune::log
