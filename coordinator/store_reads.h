// Remote reads of the coordinator's store: a client's StoreRead is answered
// with a `store export` file (store/store_transfer.h) of the rows its filter
// selects, made off the loop and sent in StoreChunk pieces the client asks
// for by offset, so that `results`, `best`, `compare`, `publish` and
// Python's Farm read a farm without its disk. Private to coordinator/; loop
// thread only (the export thread runs only the work this class posts).
//
// Exports live in a folder beside the store (StoreReadsFolder), mode 0700,
// each file 0600: only the coordinator's user reads what a client asked
// for. The store is the coordinator's alone (RocksDB locks it), so the
// folder is too: Start empties what a coordinator killed before its
// destructor ran left there, and removes the folders that coordinators
// before this layout made in the temporary folder (tunefarm-reads-<pid>-*,
// this user's, of processes no longer alive).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "coordinator_parts.h"
#include "off_loop.h"
#include "base/limits.h"
#include "protocol/protocol.h"
#include "store/result_store.h"

namespace tune {

// "<store path>.reads": the exports' folder of the store at `store_path`.
std::string StoreReadsFolder(const std::string& store_path);

struct StoreReadsOptions {
  std::string folder;  // required: StoreReadsFolder(store path) for a coordinator
  // One export's bytes, counted while it is written: past them the export
  // stops, its file goes and the read is refused with a line.
  uint64_t max_read_bytes = kDefaultMaxReadBytes;
  // Bytes of every export made (at most its bound) or held, at once.
  uint64_t max_held_bytes = kMaxHeldReadBytes;
  // Exports made or held at once, by all and by one client (the CURVE key,
  // else the address): more are refused with a line to try again.
  size_t max_exports = 8;
  size_t max_per_client = kMaxReadsPerClient;
  uint64_t piece_bytes = kStoreChunkBytes;  // StoreChunk data at most
  // An export no client asked for a piece of this long is dropped.
  double idle_seconds = 60;
};

class StoreReads {
 public:
  // None is made while the exports' folder has less free space than this
  // (and none may take the folder's disk below it).
  static constexpr uint64_t kMinFreeBytes = uint64_t{256} << 20;

  // `store` and `link` must outlive this object.
  StoreReads(ResultStore* store, PeerLink* link, StoreReadsOptions options)
      : store_(store), link_(link), options_(std::move(options)), exporter_("export") {}

  // Makes the exports' folder (emptied, 0700), removes leftovers of dead
  // coordinators in the temporary folder, and starts the export thread.
  // Errors: a folder that cannot be made, or a path there that is not a
  // folder of this user's (a link, another owner's).
  Status Start();
  int wake_fd() const { return exporter_.wake_fd(); }
  void RunCompletions() { exporter_.RunCompletions(); }

  // Answers `identity`'s read (`client`: who it counts against): a new
  // export's first piece once made (an ErrorReply when it fails or a bound
  // refuses it), or the piece at `offset` of one it made.
  void Handle(const std::string& identity, const std::string& client, const StoreRead& read, double now);
  // Drops exports idle for options.idle_seconds.
  void Tick(double now);

 private:
  struct Export {
    std::string identity, client, path;
    uint64_t size = 0;
    double last_read = 0;
    // A peer reads its export in order: the next piece, or the last one
    // again (its answer lost); so no peer queues more than the export.
    uint64_t next = 0, last = 0;
  };
  struct Making {
    std::string client;
    uint64_t allowance = 0;  // the bytes it may take, counted as held
  };
  void SendPiece(const std::string& id, Export& e, uint64_t offset, double now);
  void Drop(const std::string& id);

  // Removes the exports' folder once the export thread has stopped
  // (destroyed after exporter_, which is declared after it).
  struct Folder {
    std::string path;
    ~Folder();
  };

  ResultStore* store_;
  PeerLink* link_;
  const StoreReadsOptions options_;
  Folder folder_;
  uint64_t next_ = 0;
  std::map<std::string, Making> making_;  // by peer: exports being made
  std::map<std::string, Export> exports_;
  OffLoop exporter_;                      // last: its thread stops first
};

}  // namespace tune
