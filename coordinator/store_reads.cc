#include "store_reads.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>

#include "store/store_transfer.h"

namespace tune {

StoreReads::~StoreReads() {
  std::error_code ec;
  if (!folder_.empty()) std::filesystem::remove_all(folder_, ec);
}

Status StoreReads::Start() {
  std::error_code ec;
  const auto base = std::filesystem::temp_directory_path(ec);
  if (ec) return Status::Error("coordinator: no temporary folder for remote reads: " + ec.message());
  folder_ = (base / ("tunefarm-reads-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}())))
                .string();
  std::filesystem::create_directories(folder_, ec);
  if (ec) return Status::Error("coordinator: " + folder_ + ": " + ec.message());
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
    if (read.offset > it->second.size)
      return link_->Send(identity, ErrorReply{"store read: offset " + std::to_string(read.offset) + " past the export's " +
                                              std::to_string(it->second.size) + " bytes"});
    return SendPiece(it->first, it->second, read.offset, now);
  }
  if (making_ + exports_.size() >= kMaxExports)
    return link_->Send(identity, ErrorReply{"store read: " + std::to_string(kMaxExports) +
                                            " remote reads are in progress; try again shortly"});
  const std::string id = std::to_string(++next_) + "-" + std::to_string(std::random_device{}());
  const std::string path = folder_ + "/" + id + ".tfx";
  ++making_;
  CoordinatorLog(log::Level::kDebug, "store read",
                 {{"op", read.filter.op}, {"gpu_model", read.filter.gpu_model}, {"export", id}});
  exporter_.Post([this, identity, id, path, filter = read.filter]() -> OffLoop::Completion {
    TransferCounts counts;
    Status st = ExportStore(*store_, filter, path, &counts);
    std::error_code ec;
    const uint64_t size = st.ok() ? std::filesystem::file_size(path, ec) : 0;
    if (st.ok() && ec) st = Status::Error(path + ": " + ec.message());
    return [this, identity, id, path, size, st] {
      --making_;
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
  const bool last = offset + chunk.data.size() == e.size;
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
