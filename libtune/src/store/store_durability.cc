#include "store/store_durability.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>

#include <rocksdb/env.h>

#include "store/result_store.h"

namespace tune::store_internal {

// RocksDB's info log, read and dropped: it notes WAL drops in `drops`
// (every failure that matters reaches the store as a status). No LOG file
// is written: RocksDB's file logger that meets a full disk asserts on its
// next line (Debian's build keeps assertions), which would abort the
// process at the close that follows, whatever the reserve check did.
class WalDropLogger : public rocksdb::Logger {
 public:
  explicit WalDropLogger(std::shared_ptr<WalDrops> drops)
      : rocksdb::Logger(rocksdb::InfoLogLevel::INFO_LEVEL), drops_(std::move(drops)) {}
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override { Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap); }
  void Logv(const rocksdb::InfoLogLevel, const char* format, va_list ap) override {
    char line[2048];
    const int n = std::vsnprintf(line, sizeof line, format, ap);
    if (n <= 0) return;
    const std::string_view text(line, std::min<size_t>(static_cast<size_t>(n), sizeof line - 1));
    Note(text);
  }

 private:
  void Note(std::string_view line) {
    static constexpr std::string_view kDropping = ": dropping ";
    const size_t at = line.find(kDropping);
    if (at == std::string_view::npos) return;
    const size_t space = line.rfind(' ', at);
    const std::string file(line.substr(space == std::string_view::npos ? 0 : space + 1,
                                       at - (space == std::string_view::npos ? 0 : space + 1)));
    if (file.size() < 4 || file.compare(file.size() - 4, 4, ".log") != 0) return;
    const std::string rest(line.substr(at + kDropping.size()));
    const uint64_t bytes = std::strtoull(rest.c_str(), nullptr, 10);
    const size_t semi = rest.find("; ");
    std::lock_guard<std::mutex> lock(drops_->mu);
    if (drops_->count++ == 0) {
      drops_->first_file = std::filesystem::path(file).filename().string();
      drops_->first_reason = semi == std::string::npos ? std::string() : rest.substr(semi + 2);
    }
    drops_->bytes += bytes;
  }
  std::shared_ptr<WalDrops> drops_;
};

// Gives `options` the in-memory info log above.
void WatchWalDrops(rocksdb::Options* options, const std::shared_ptr<WalDrops>& drops) {
  options->info_log = std::make_shared<WalDropLogger>(drops);
}

// The durable-sequence marker (kStoreDurableMarker): one line,
// "durable_sequence <decimal>".
constexpr char kMarkerField[] = "durable_sequence ";

std::string MarkerPath(const std::string& store) { return store + "/" + kStoreDurableMarker; }

// nullopt when the store has no marker (a new store, or one written before
// markers existed: nothing to hold it to).
Result<std::optional<uint64_t>> ReadMarker(const std::string& store) {
  const std::string path = MarkerPath(store);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<uint64_t>();
    return Status::IOError("result store " + store + ": cannot read " + path + ": " + std::strerror(errno));
  }
  char buf[64];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  const std::string text = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  const std::string field = kMarkerField;
  const bool shaped = text.size() > field.size() + 1 && text.size() < sizeof buf && text.back() == '\n' &&
                      text.compare(0, field.size(), field) == 0 &&
                      std::all_of(text.begin() + static_cast<long>(field.size()), text.end() - 1,
                                  [](char c) { return c >= '0' && c <= '9'; }) &&
                      text.size() - field.size() - 1 <= 19;
  if (!shaped) {
    return Status::Corruption("result store " + store + ": " + path +
                              " is not a durable-sequence marker (expected 'durable_sequence <number>'): "
                              "restore the store from a backup, or start the coordinator with --store-recover "
                              "to accept the store as it is");
  }
  return std::optional<uint64_t>(std::strtoull(text.c_str() + field.size(), nullptr, 10));
}

// Replaces the marker atomically (a reader sees the old or the new one).
// The file is synced before the rename so that a host crash cannot leave an
// empty marker; a rename lost to that crash leaves the older, lower one,
// which only checks less.
Status WriteMarker(const std::string& store, uint64_t sequence) {
  const std::string path = MarkerPath(store), tmp = path + ".tmp";
  const std::string text = kMarkerField + std::to_string(sequence) + "\n";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError("cannot write " + tmp + ": " + std::strerror(errno));
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(ok ? errno : err);
    ::unlink(tmp.c_str());
    return Status::IOError("cannot write " + path + ": " + why);
  }
  return Status::OK();
}

}  // namespace tune::store_internal
