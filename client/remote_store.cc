#include "remote_store.h"

#include <sstream>

#include "store/store_transfer.h"

namespace tune {

namespace {

// Fetches one export into `out`.
Status FetchExport(CoordinatorClient& client, const ResultFilter& filter, std::ostream& out) {
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
  return out ? Status::OK() : Status::Error("store read: the export does not fit in memory");
}

}  // namespace

Result<std::unique_ptr<ResultStore>> FetchStore(CoordinatorClient& client, const std::vector<ResultFilter>& filters,
                                                bool authenticated) {
  auto store = ResultStore::Open("the coordinator's rows", {.in_memory = true});
  if (!store.ok()) return store.status();
  for (const ResultFilter& filter : filters) {
    std::stringstream file;
    TUNE_RETURN_IF_ERROR(FetchExport(client, filter, file));
    TransferCounts counts;
    TUNE_RETURN_IF_ERROR(ImportStore(**store, file, "the coordinator's export", &counts,
                                     authenticated ? ImportTrust::kMirror : ImportTrust::kPeer));
  }
  return store;
}

}  // namespace tune
