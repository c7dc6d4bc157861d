// What keeps a store honest across crashes (private to store/): the WAL
// records RocksDB dropped at open, and the durable-sequence marker
// (kStoreDurableMarker; "Durability" in result_store.h).
#pragma once

#include <rocksdb/options.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "tune/status.h"

namespace tune::store_internal {

// What RocksDB said about the WAL records it could not replay. RocksDB's
// Status for a corrupt WAL names no file ("checksum mismatch"); its info log
// does ("<path>/000012.log: dropping 20566 bytes; Corruption: ..."), so the
// store reads that line on its way to the LOG file.
struct WalDrops {
  std::mutex mu;
  std::string first_file;    // base name of the first WAL file with a drop
  std::string first_reason;  // RocksDB's reason for it
  uint64_t bytes = 0;
  size_t count = 0;
};

// Gives `options` an info log that notes WAL drops in `drops` and writes no
// LOG file.
void WatchWalDrops(rocksdb::Options* options, const std::shared_ptr<WalDrops>& drops);

// The marker's path in the store folder `store`.
std::string MarkerPath(const std::string& store);
// The durable sequence number the marker records; nullopt when the store
// has none (a new store, or one written before markers existed).
// Corruption, with what to do, when the file is not a marker.
Result<std::optional<uint64_t>> ReadMarker(const std::string& store);
// Replaces the marker atomically, synced before the rename.
Status WriteMarker(const std::string& store, uint64_t sequence);

}  // namespace tune::store_internal
