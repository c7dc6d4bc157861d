#include "store_reads.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "store/store_transfer.h"

namespace tune {

namespace fs = std::filesystem;

namespace {

// Bytes for a line: KiB below a MiB, rounded up.
std::string Mib(uint64_t bytes) {
  if (bytes < (1u << 20)) return std::to_string((bytes + 1023) >> 10) + " KiB";
  return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB";
}

// Whether `path` is a real folder (not a link) of this user's.
bool OwnFolder(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::getuid();
}

// Folders that coordinators made in the temporary folder before exports
// moved beside the store, "tunefarm-reads-<pid>-<n>": this user's, of a
// process no longer alive (a pid that lives, whoever's, keeps its folder).
void RemoveDeadTemporaryFolders() {
  std::error_code ec;
  const fs::path base = fs::temp_directory_path(ec);
  if (ec) return;
  const std::string prefix = "tunefarm-reads-";
  for (fs::directory_iterator it(base, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    const size_t dash = rest.find('-');
    if (dash == 0 || dash == std::string::npos || dash > 9 ||
        rest.find_first_not_of("0123456789") != dash)
      continue;
    const pid_t pid = static_cast<pid_t>(std::stol(rest.substr(0, dash)));
    if (pid <= 0 || pid == ::getpid() || !(::kill(pid, 0) == -1 && errno == ESRCH)) continue;
    if (!OwnFolder(it->path().string())) continue;
    std::error_code removed;
    fs::remove_all(it->path(), removed);
    if (!removed) CoordinatorLog(log::Level::kInfo, "removed a dead coordinator's remote-read exports",
                                 {{"folder", it->path().string()}});
  }
}

// ExportStore(store, filter, path) with its bytes counted as they are
// written: it writes through a pipe (the FIFO where it writes "<path>.tmp")
// to "<path>.part" (0600), and once `limit` bytes would be passed the pipe
// closes, its writes fail and every file goes. Runs on the export thread,
// with SIGPIPE held there (a write to the closed pipe fails with EPIPE
// instead of stopping the process). Returns the export's size.
Result<uint64_t> BoundedExport(ResultStore& store, const ResultFilter& filter, const std::string& path,
                               uint64_t limit, bool* over) {
  const std::string tmp = path + ".tmp", part = path + ".part";
  struct Files {
    const std::string &path, &tmp, &part;
    bool keep = false;
    ~Files() {
      std::error_code ec;
      fs::remove(tmp, ec);
      fs::remove(part, ec);
      if (!keep) fs::remove(path, ec);
    }
  } files{path, tmp, part};
  if (::mkfifo(tmp.c_str(), 0600) != 0) return Status::Error(tmp + ": " + std::strerror(errno));
  // The reading end first (a FIFO opened to write waits for a reader), then
  // a writer of ours that keeps it from an end of file until ExportStore
  // has returned, whether or not it opened the pipe.
  const int in = ::open(tmp.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (in < 0) return Status::Error(tmp + ": " + std::strerror(errno));
  const int hold = ::open(tmp.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  const int out = ::open(part.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (hold < 0 || out < 0) {
    const std::string why = std::strerror(errno);
    ::close(in);
    if (hold >= 0) ::close(hold);
    if (out >= 0) ::close(out);
    return Status::Error((out < 0 ? part : tmp) + ": " + why);
  }
  ::fcntl(in, F_SETFL, ::fcntl(in, F_GETFL) & ~O_NONBLOCK);
  sigset_t pipe_signal, before;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, &before);
  uint64_t written = 0;
  bool write_failed = false;
  std::thread copier([&] {
    char buf[1 << 16];
    for (;;) {
      const ssize_t n = ::read(in, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      if (written + uint64_t(n) > limit) {
        *over = true;
        break;
      }
      for (ssize_t done = 0; done < n;) {
        const ssize_t w = ::write(out, buf + done, size_t(n - done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
          write_failed = true;
          break;
        }
        done += w;
      }
      if (write_failed) break;
      written += uint64_t(n);
    }
    ::close(in);  // from now on the export's writes fail
  });
  TransferCounts counts;
  Status st = ExportStore(store, filter, path, &counts);
  ::close(hold);
  copier.join();
  const bool synced = ::fsync(out) == 0;
  ::close(out);
  // A SIGPIPE raised by a write to the closed pipe is taken, not left
  // pending for whatever unblocks it.
  const timespec none{0, 0};
  while (sigtimedwait(&pipe_signal, nullptr, &none) == SIGPIPE) {
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (*over)
    return Status::Error("the rows the filter selects make more than " + Mib(limit) + ", what this read may take");
  if (!st.ok()) return st;
  if (write_failed || !synced) return Status::Error(part + ": write failed");
  // ExportStore renamed the pipe to `path`: the copy takes its place.
  std::error_code ec;
  fs::rename(part, path, ec);
  if (ec) return Status::Error(path + ": " + ec.message());
  files.keep = true;
  return written;
}

}  // namespace

std::string StoreReadsFolder(const std::string& store_path) {
  fs::path p = fs::path(store_path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "store/"
  return p.string() + ".reads";
}

StoreReads::Folder::~Folder() {
  std::error_code ec;
  if (!path.empty()) fs::remove_all(path, ec);
}

Status StoreReads::Start() {
  if (options_.folder.empty()) return Status::Error("coordinator: no folder for remote reads");
  RemoveDeadTemporaryFolders();
  const std::string& folder = options_.folder;
  std::error_code ec;
  struct stat st;
  if (::lstat(folder.c_str(), &st) == 0) {
    // Left by a coordinator of this store that was killed: its exports
    // are of no read any longer.
    if (!OwnFolder(folder))
      return Status::Error("coordinator: " + folder + " (remote reads) is not a folder of this user's; remove it");
    fs::remove_all(folder, ec);
    if (ec) return Status::Error("coordinator: cannot empty " + folder + ": " + ec.message());
    CoordinatorLog(log::Level::kInfo, "removed the remote-read exports of an earlier run", {{"folder", folder}});
  }
  if (::mkdir(folder.c_str(), 0700) != 0 || ::chmod(folder.c_str(), 0700) != 0)
    return Status::Error("coordinator: " + folder + " (remote reads): " + std::strerror(errno));
  folder_.path = folder;
  return exporter_.Start();
}

void StoreReads::Handle(const std::string& identity, const std::string& client, const StoreRead& read,
                        double now) {
  if (!read.export_id.empty()) {
    auto it = exports_.find(read.export_id);
    // An export is its maker's: another peer cannot page through it.
    if (it == exports_.end() || it->second.identity != identity)
      return link_->Send(identity, ErrorReply{"store read: no export " + read.export_id +
                                              " of this client (idle ones are dropped after " +
                                              std::to_string(int(options_.idle_seconds)) + " s): read again"});
    Export& e = it->second;
    if (read.offset != e.next && read.offset != e.last)
      return link_->Send(identity, ErrorReply{"store read: offset " + std::to_string(read.offset) +
                                              " is not the next piece (" + std::to_string(e.next) + ") of export " +
                                              read.export_id});
    return SendPiece(it->first, e, read.offset, now);
  }
  bool has_one = making_.count(identity) > 0;
  size_t of_client = 0;
  uint64_t held = 0;
  for (const auto& [peer, m] : making_) {
    of_client += m.client == client;
    held += m.allowance;
  }
  for (const auto& [id, e] : exports_) {
    has_one = has_one || e.identity == identity;
    of_client += e.client == client;
    held += e.size;
  }
  if (has_one) return link_->Send(identity, ErrorReply{"store read: this client is reading an export already"});
  if (of_client >= options_.max_per_client)
    return link_->Send(identity, ErrorReply{"store read: this client has " + std::to_string(of_client) +
                                            " remote reads in progress, the most one client may have; "
                                            "try again shortly"});
  if (making_.size() + exports_.size() >= options_.max_exports)
    return link_->Send(identity, ErrorReply{"store read: " + std::to_string(options_.max_exports) +
                                            " remote reads are in progress; try again shortly"});
  std::error_code ec;
  const auto space = fs::space(folder_.path, ec);
  if (ec || space.available < kMinFreeBytes)
    return link_->Send(identity, ErrorReply{"store read: the coordinator's folder for remote reads " + folder_.path +
                                            " has too little free space for an export"});
  // What this export may take: its own bound, what the others leave of the
  // bound on all, and what the disk has above its reserve.
  const uint64_t left = options_.max_held_bytes > held ? options_.max_held_bytes - held : 0;
  const uint64_t allowance = std::min({options_.max_read_bytes, left, space.available - kMinFreeBytes});
  if (allowance < std::min<uint64_t>(options_.max_read_bytes, uint64_t{1} << 20))
    return link_->Send(identity, ErrorReply{"store read: other remote reads hold " + Mib(held) + " of the " +
                                            Mib(options_.max_held_bytes) + " they may hold; try again shortly"});
  const std::string id = std::to_string(++next_) + "-" + std::to_string(std::random_device{}());
  const std::string path = folder_.path + "/" + id + ".tfx";
  making_[identity] = Making{client, allowance};
  CoordinatorLog(log::Level::kDebug, "store read",
                 {{"op", read.filter.op}, {"gpu_model", read.filter.gpu_model}, {"export", id}});
  const bool narrowed = allowance < options_.max_read_bytes;
  exporter_.Post([this, identity, client, id, path, allowance, narrowed, filter = read.filter]() -> OffLoop::Completion {
    bool over = false;
    auto size = BoundedExport(*store_, filter, path, allowance, &over);
    Status st = size.status();
    if (over)
      st = Status::Error(st.message() + (narrowed ? " now (other reads hold the rest): try again shortly, or narrow it"
                                                  : " (--max-read-bytes): narrow it (--op, --gpu, --dtype)"));
    return [this, identity, client, id, path, size = size.ok() ? *size : 0, st] {
      making_.erase(identity);
      if (!st.ok()) {
        CoordinatorLog(log::Level::kWarn, "store read failed", {{"error", st.message()}});
        return link_->Send(identity, ErrorReply{"store read: " + st.message()});
      }
      Export& e = exports_[id];
      e.identity = identity;
      e.client = client;
      e.path = path;
      e.size = size;
      SendPiece(id, e, 0, 0);
    };
  });
}

void StoreReads::SendPiece(const std::string& id, Export& e, uint64_t offset, double now) {
  StoreChunk chunk;
  chunk.export_id = id;
  chunk.offset = offset;
  chunk.total_bytes = e.size;
  chunk.data.resize(
      std::min<uint64_t>(std::clamp<uint64_t>(options_.piece_bytes, 1, kStoreChunkBytes), e.size - offset));
  std::ifstream f(e.path, std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  f.read(chunk.data.data(), static_cast<std::streamsize>(chunk.data.size()));
  if (!f) {
    link_->Send(e.identity, ErrorReply{"store read: " + e.path + ": cannot read"});
    return Drop(id);
  }
  e.last_read = now;
  e.last = offset;
  e.next = offset + chunk.data.size();
  const bool last = e.next == e.size;
  const std::string identity = e.identity;
  if (last) Drop(id);  // the client has every byte once this piece is sent
  link_->Send(identity, std::move(chunk));
}

void StoreReads::Drop(const std::string& id) {
  auto it = exports_.find(id);
  if (it == exports_.end()) return;
  std::error_code ec;
  fs::remove(it->second.path, ec);
  exports_.erase(it);
}

void StoreReads::Tick(double now) {
  std::vector<std::string> idle;
  for (auto& [id, e] : exports_) {
    if (e.last_read == 0) e.last_read = now;  // made since the last tick
    if (now - e.last_read > options_.idle_seconds) idle.push_back(id);
  }
  for (const auto& id : idle) Drop(id);
}

}  // namespace tune
