// Status and Result<T>: how every libtune call reports failure.
//
// A Status is either OK or carries one human-readable line that names what
// failed (file, field, peer). Library code never throws across its public
// boundary; exceptions from third-party libraries (toml++, capnp, cppzmq,
// RocksDB) are caught at the adapter and turned into a Status.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace tune {

class Status {
 public:
  Status() = default;
  static Status OK() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !message_.has_value(); }
  // The error line; empty for OK.
  const std::string& message() const {
    static const std::string kEmpty;
    return message_ ? *message_ : kEmpty;
  }
  std::string ToString() const { return ok() ? "OK" : *message_; }

 private:
  explicit Status(std::string m) : message_(std::move(m)) {}
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
