#include "remote_store.h"

#include <filesystem>
#include <fstream>

#include "store/store_transfer.h"

namespace tune {

Result<std::unique_ptr<ResultStore>> FetchStore(CoordinatorClient& client, const ResultFilter& filter,
                                                const std::string& folder) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) return Status::Error(folder + ": " + ec.message());
  const std::string file = (fs::path(folder) / "fetched.tfx").string();
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    if (!out) return Status::Error(file + ": cannot write");
    StoreRead read;
    read.filter = filter;
    for (;;) {
      auto reply = client.Call(read);
      if (!reply.ok()) return reply.status();
      const auto* chunk = std::get_if<StoreChunk>(&*reply);
      if (!chunk) return Status::Error(std::string("store read: the coordinator sent ") + CommandName(*reply));
      if (chunk->offset != read.offset || (!read.export_id.empty() && chunk->export_id != read.export_id))
        return Status::Error("store read: a piece at " + std::to_string(chunk->offset) + " of export " +
                             chunk->export_id + " where " + std::to_string(read.offset) + " was asked");
      out.write(chunk->data.data(), static_cast<std::streamsize>(chunk->data.size()));
      read.export_id = chunk->export_id;
      read.offset += chunk->data.size();
      if (read.offset == chunk->total_bytes) break;
      if (chunk->data.empty()) return Status::Error("store read: an empty piece before the export's end");
    }
    out.close();
    if (!out) return Status::Error(file + ": write failed");
  }
  auto store = ResultStore::Open((fs::path(folder) / "store").string());
  if (!store.ok()) return store.status();
  TransferCounts counts;
  Status st = ImportStore(**store, file, &counts, ImportTrust::kMirror);
  fs::remove(file, ec);
  if (!st.ok()) return st;
  return store;
}

}  // namespace tune
