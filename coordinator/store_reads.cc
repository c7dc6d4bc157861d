#include "store_reads.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>

#include "store/store_transfer.h"

namespace tune {

StoreReads::Folder::~Folder() {
  std::error_code ec;
  if (!path.empty()) std::filesystem::remove_all(path, ec);
}

Status StoreReads::Start() {
  std::error_code ec;
  const auto base = std::filesystem::temp_directory_path(ec);
  if (ec) return Status::Error("coordinator: no temporary folder for remote reads: " + ec.message());
  folder_.path =
      (base / ("tunefarm-reads-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}()))).string();
  std::filesystem::create_directories(folder_.path, ec);
  if (ec) return Status::Error("coordinator: " + folder_.path + ": " + ec.message());
  return exporter_.Start();
}

void StoreReads::Handle(const std::string& identity, const StoreRead& read, double now) {
  if (!read.export_id.empty()) {
    auto it = exports_.find(read.export_id);
    // An export is its maker's: another peer cannot page through it.
    if (it == exports_.end() || it->second.identity != identity)
      return link_->Send(identity, ErrorReply{"store read: no export " + read.export_id +
                                              " of this client (idle ones are dropped after " +
                                              std::to_string(int(kIdleSeconds)) + " s): read again"});
    Export& e = it->second;
    if (read.offset != e.next && read.offset != e.last)
      return link_->Send(identity, ErrorReply{"store read: offset " + std::to_string(read.offset) +
                                              " is not the next piece (" + std::to_string(e.next) + ") of export " +
                                              read.export_id});
    return SendPiece(it->first, e, read.offset, now);
  }
  bool has_one = making_.count(identity) > 0;
  for (const auto& [id, e] : exports_) has_one = has_one || e.identity == identity;
  if (has_one) return link_->Send(identity, ErrorReply{"store read: this client is reading an export already"});
  if (making_.size() + exports_.size() >= kMaxExports)
    return link_->Send(identity, ErrorReply{"store read: " + std::to_string(kMaxExports) +
                                            " remote reads are in progress; try again shortly"});
  std::error_code ec;
  const auto space = std::filesystem::space(folder_.path, ec);
  if (ec || space.available < kMinFreeBytes)
    return link_->Send(identity, ErrorReply{"store read: the coordinator's temporary folder " + folder_.path +
                                            " has too little free space for an export"});
  const std::string id = std::to_string(++next_) + "-" + std::to_string(std::random_device{}());
  const std::string path = folder_.path + "/" + id + ".tfx";
  making_.insert(identity);
  CoordinatorLog(log::Level::kDebug, "store read",
                 {{"op", read.filter.op}, {"gpu_model", read.filter.gpu_model}, {"export", id}});
  exporter_.Post([this, identity, id, path, filter = read.filter]() -> OffLoop::Completion {
    TransferCounts counts;
    Status st = ExportStore(*store_, filter, path, &counts);
    std::error_code ec;
    const uint64_t size = st.ok() ? std::filesystem::file_size(path, ec) : 0;
    if (st.ok() && ec) st = Status::Error(path + ": " + ec.message());
    if (st.ok() && size > kMaxExportBytes)
      st = Status::Error("the rows the filter selects make " + std::to_string(size >> 20) + " MiB, over the " +
                         std::to_string(kMaxExportBytes >> 20) + " MiB a read may take: narrow it (--op, --gpu, --dtype)");
    if (!st.ok()) std::filesystem::remove(path, ec);
    return [this, identity, id, path, size, st] {
      making_.erase(identity);
      if (!st.ok()) {
        CoordinatorLog(log::Level::kWarn, "store read failed", {{"error", st.message()}});
        return link_->Send(identity, ErrorReply{"store read: " + st.message()});
      }
      Export& e = exports_[id];
      e.identity = identity;
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
  chunk.data.resize(std::min<uint64_t>(kStoreChunkBytes, e.size - offset));
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
  std::filesystem::remove(it->second.path, ec);
  exports_.erase(it);
}

void StoreReads::Tick(double now) {
  std::vector<std::string> idle;
  for (auto& [id, e] : exports_) {
    if (e.last_read == 0) e.last_read = now;  // made since the last tick
    if (now - e.last_read > kIdleSeconds) idle.push_back(id);
  }
  for (const auto& id : idle) Drop(id);
}

}  // namespace tune
