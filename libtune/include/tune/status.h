// Status and Result<T>: how every libtune call reports failure.
//
// A Status is either OK or carries a code and one human-readable line that
// names what failed (file, field, peer). Callers branch on the code, never on
// the text. Library code never throws across its public boundary; exceptions
// from third-party libraries (toml++, capnp, cppzmq, RocksDB) are caught at
// the adapter and turned into a Status.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace tune {

// What kind of failure a Status is, for callers that act on it.
enum class StatusCode : uint8_t {
  kOk = 0,
  kError,            // no more specific kind
  kInvalidArgument,  // a value, file or field that is not what it must be
  kNotFound,         // a named thing (file, key, variable, sweep) does not exist
  kCorruption,       // stored or received bytes fail their checks
  kIOError,          // the operating system refused a read or write
  kUnavailable,      // cannot be done now, may succeed later (disk full, busy)
  kEndOfStream,      // the other end closed the stream cleanly
};

class Status {
 public:
  Status() = default;
  static Status OK() { return Status(); }
  static Status Error(std::string message) { return Status(StatusCode::kError, std::move(message)); }
  static Status InvalidArgument(std::string message) {
    return Status(StatusCode::kInvalidArgument, std::move(message));
  }
  static Status NotFound(std::string message) { return Status(StatusCode::kNotFound, std::move(message)); }
  static Status Corruption(std::string message) { return Status(StatusCode::kCorruption, std::move(message)); }
  static Status IOError(std::string message) { return Status(StatusCode::kIOError, std::move(message)); }
  static Status Unavailable(std::string message) { return Status(StatusCode::kUnavailable, std::move(message)); }
  static Status EndOfStream(std::string message) { return Status(StatusCode::kEndOfStream, std::move(message)); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  // The error line; empty for OK.
  const std::string& message() const {
    static const std::string kEmpty;
    return message_ ? *message_ : kEmpty;
  }
  std::string ToString() const { return ok() ? "OK" : *message_; }
  // The same kind of failure with `prefix` before the line ("file: ..."),
  // for callers that add where it happened.
  Status WithPrefix(const std::string& prefix) const { return ok() ? *this : Status(code_, prefix + *message_); }
  Status WithSuffix(const std::string& suffix) const { return ok() ? *this : Status(code_, *message_ + suffix); }

 private:
  Status(StatusCode code, std::string m) : code_(code), message_(std::move(m)) {}
  StatusCode code_ = StatusCode::kOk;
  std::optional<std::string> message_;
};

// Result<T> holds either a value or an error Status (never an OK Status).
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}           // NOLINT: implicit by design
  Result(Status error) : v_(std::move(error)) {}      // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace tune

#define TUNE_RETURN_IF_ERROR(expr)            \
  do {                                        \
    ::tune::Status _st = (expr);              \
    if (!_st.ok()) return _st;                \
  } while (0)
