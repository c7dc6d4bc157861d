// base/log.h over spdlog: spdlog keeps the level, the time stamps, the lock
// and the sink; the line's body (component, message, fields) is built here,
// escaped for its format.
#include "base/log.h"

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "base/text.h"

namespace tune::log {
namespace {

constexpr const char* kTextPattern = "%Y-%m-%dT%H:%M:%S.%e%z %l %v";
constexpr const char* kJsonPattern = R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l",%v})";

// The logger is swapped whole (atomically) and the format flag is atomic,
// so that Configure may run while other threads log.
struct State {
  std::mutex mu;  // serialises Configure and SetStreamForTesting
  std::shared_ptr<spdlog::logger> logger;
  std::atomic<bool> json{false};
  std::shared_ptr<spdlog::logger> Logger() const { return std::atomic_load(&logger); }
};

bool ParseLevel(const std::string& text, spdlog::level::level_enum* out) {
  if (text == "debug") *out = spdlog::level::debug;
  else if (text == "info") *out = spdlog::level::info;
  else if (text == "warn") *out = spdlog::level::warn;
  else if (text == "error") *out = spdlog::level::err;
  else return false;
  return true;
}

State& Get() {
  static State* state = [] {
    auto* s = new State;  // never destroyed: threads may log while the process exits
    s->logger = std::make_shared<spdlog::logger>("tunefarm", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    s->logger->set_pattern(kTextPattern);
    s->logger->set_level(spdlog::level::info);
    s->logger->flush_on(spdlog::level::debug);  // a line is out before the process may die
    spdlog::level::level_enum level;
    if (const char* env = std::getenv("TUNEFARM_LOG_LEVEL"); env && ParseLevel(env, &level)) s->logger->set_level(level);
    if (const char* env = std::getenv("TUNEFARM_LOG_FORMAT"); env && std::string(env) == "json") {
      s->json = true;
      s->logger->set_pattern(kJsonPattern);
    }
    return s;
  }();
  return *state;
}

spdlog::level::level_enum ToSpd(Level level) {
  switch (level) {
    case Level::kDebug: return spdlog::level::debug;
    case Level::kInfo: return spdlog::level::info;
    case Level::kWarn: return spdlog::level::warn;
    case Level::kError: break;
  }
  return spdlog::level::err;
}

// key=value, quoted when the value has spaces, quotes or control bytes;
// newlines never reach the line.
void AppendText(std::string* out, std::string_view key, std::string_view value) {
  out->append(" ").append(key).append("=");
  bool quote = value.empty();
  for (unsigned char c : value) quote = quote || c <= ' ' || c == '"' || c == '=';
  if (!quote) {
    out->append(value);
    return;
  }
  out->push_back('"');
  for (unsigned char c : value) {
    if (c == '"' || c == '\\') out->push_back('\\');
    if (c == '\n') out->append("\\n");
    else if (c < ' ') out->push_back('?');
    else out->push_back(static_cast<char>(c));
  }
  out->push_back('"');
}

}  // namespace

Status Configure(const std::string& level, const std::string& format) {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  spdlog::level::level_enum lv;
  if (!level.empty() && !ParseLevel(level, &lv))
    return Status::Error("--log-level: expected debug, info, warn or error, got '" + level + "'");
  if (!format.empty() && format != "text" && format != "json")
    return Status::Error("--log-format: expected text or json, got '" + format + "'");
  if (!level.empty()) s.Logger()->set_level(lv);
  if (!format.empty()) {
    s.json = format == "json";
    s.Logger()->set_pattern(s.json ? kJsonPattern : kTextPattern);
  }
  return Status::OK();
}

bool Enabled(Level level) { return Get().Logger()->should_log(ToSpd(level)); }

bool WritesJson() { return Get().json; }

void Note(std::string_view component, std::string_view message) {
  if (WritesJson()) return Write(Level::kInfo, component, message);
  std::fprintf(stderr, "%.*s: %.*s\n", static_cast<int>(component.size()), component.data(),
               static_cast<int>(message.size()), message.data());
}

void Write(Level level, std::string_view component, std::string_view message, std::initializer_list<Field> fields) {
  State& s = Get();
  const std::shared_ptr<spdlog::logger> logger = s.Logger();
  const spdlog::level::level_enum lv = ToSpd(level);
  if (!logger->should_log(lv)) return;
  std::string body;
  if (s.json) {
    nlohmann::ordered_json j;
    j["component"] = std::string(component);
    j["message"] = std::string(message);
    for (const Field& f : fields) {
      const std::string key(f.key);
      const bool reserved = key == "time" || key == "level" || key == "component" || key == "message";
      if (f.number) j[reserved ? "field_" + key : key] = nlohmann::ordered_json::parse(f.value, nullptr, false);
      else j[reserved ? "field_" + key : key] = f.value;
    }
    body = DumpJson(j);
    body = body.substr(1, body.size() - 2);  // the pattern holds the braces, time and level
  } else {
    body.append(component).append(": ");
    // No control byte of a peer's text (line breaks, escapes) reaches the line.
    for (char c : ToValidUtf8(message)) body.push_back(static_cast<unsigned char>(c) < ' ' || c == 0x7f ? ' ' : c);
    for (const Field& f : fields) AppendText(&body, f.key, ToValidUtf8(f.value));
  }
  logger->log(lv, body);
}

void SetStreamForTesting(std::ostream* out) {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  const auto level = s.Logger()->level();
  std::shared_ptr<spdlog::logger> next;
  if (out) next = std::make_shared<spdlog::logger>("tunefarm", std::make_shared<spdlog::sinks::ostream_sink_mt>(*out, true));
  else next = std::make_shared<spdlog::logger>("tunefarm", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  next->set_level(level);
  next->set_pattern(s.json ? kJsonPattern : kTextPattern);
  next->flush_on(spdlog::level::debug);
  std::atomic_store(&s.logger, next);
}

}  // namespace tune::log
