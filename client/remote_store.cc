#include "remote_store.h"

#include <filesystem>
#include <fstream>

#include "store/store_transfer.h"

namespace tune {

namespace {

// Fetches one export into `file`.
Status FetchExport(CoordinatorClient& client, const ResultFilter& filter, const std::string& file) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) return Status::Error(file + ": cannot write");
  StoreRead read;
  read.filter = filter;
  uint64_t total = 0;
  for (;;) {
    auto reply = client.Call(read);
    if (!reply.ok()) return reply.status();
    const auto* chunk = std::get_if<StoreChunk>(&*reply);
    if (!chunk) return Status::Error(std::string("store read: the coordinator sent ") + CommandName(*reply));
    const bool first = read.export_id.empty();
    if (chunk->export_id.empty() || chunk->offset != read.offset || (!first && chunk->export_id != read.export_id) ||
        (!first && chunk->total_bytes != total))
      return Status::Error("store read: a piece at " + std::to_string(chunk->offset) + " of export '" +
                           chunk->export_id + "' does not continue the read");
    total = chunk->total_bytes;
    out.write(chunk->data.data(), static_cast<std::streamsize>(chunk->data.size()));
    read.export_id = chunk->export_id;
    read.offset += chunk->data.size();
    if (read.offset == total) break;
    if (chunk->data.empty()) return Status::Error("store read: an empty piece before the export's end");
  }
  out.close();
  return out ? Status::OK() : Status::Error(file + ": write failed");
}

}  // namespace

Result<std::unique_ptr<ResultStore>> FetchStore(CoordinatorClient& client, const std::vector<ResultFilter>& filters,
                                                bool authenticated, const std::string& folder) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool made = !fs::exists(folder, ec);
  fs::create_directories(folder, ec);
  if (ec) return Status::Error(folder + ": " + ec.message());
  // Nothing half-fetched stays behind a failure.
  struct Cleanup {
    const std::string& folder;
    bool made, keep = false;
    ~Cleanup() {
      std::error_code ec;
      if (!keep) made ? fs::remove_all(folder, ec) : fs::remove_all(fs::path(folder) / "store", ec);
      fs::remove(fs::path(folder) / "fetched.tfx", ec);
    }
  } cleanup{folder, made};
  const std::string file = (fs::path(folder) / "fetched.tfx").string();
  auto store = ResultStore::Open((fs::path(folder) / "store").string());
  if (!store.ok()) return store.status();
  for (const ResultFilter& filter : filters) {
    TUNE_RETURN_IF_ERROR(FetchExport(client, filter, file));
    TransferCounts counts;
    TUNE_RETURN_IF_ERROR(
        ImportStore(**store, file, &counts, authenticated ? ImportTrust::kMirror : ImportTrust::kPeer));
  }
  cleanup.keep = true;
  return store;
}

}  // namespace tune
