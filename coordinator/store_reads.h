// Remote reads of the coordinator's store: a client's StoreRead is answered
// with a `store export` file (store/store_transfer.h) of the rows its filter
// selects, made off the loop and sent in StoreChunk pieces the client asks
// for by offset, so that `results`, `best`, `compare`, `publish` and
// Python's Farm read a farm without its disk. Private to coordinator/; loop
// thread only (the export thread runs only the work this class posts).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "coordinator_parts.h"
#include "off_loop.h"
#include "codec/protocol.h"
#include "store/result_store.h"

namespace tune {

class StoreReads {
 public:
  // At most this many exports are made or held at once (one per peer);
  // more are refused with a line saying to try again.
  static constexpr size_t kMaxExports = 4;
  // An export larger than this is refused (narrow the filter), and none is
  // made while the temporary folder has less free space than this.
  static constexpr uint64_t kMaxExportBytes = uint64_t{8} << 30;
  static constexpr uint64_t kMinFreeBytes = uint64_t{256} << 20;
  // An export no client asked for a piece of this long is dropped.
  static constexpr double kIdleSeconds = 120;

  // `store` and `link` must outlive this object.
  StoreReads(ResultStore* store, PeerLink* link) : store_(store), link_(link), exporter_("export") {}

  // Makes the folder of the exports (under the system's temporary folder)
  // and starts the export thread.
  Status Start();
  int wake_fd() const { return exporter_.wake_fd(); }
  void RunCompletions() { exporter_.RunCompletions(); }

  // Answers `identity`'s read: a new export's first piece once made (an
  // ErrorReply when it fails), or the piece at `offset` of one it made.
  void Handle(const std::string& identity, const StoreRead& read, double now);
  // Drops exports idle for kIdleSeconds.
  void Tick(double now);

 private:
  struct Export {
    std::string identity, path;
    uint64_t size = 0;
    double last_read = 0;
    // A peer reads its export in order: the next piece, or the last one
    // again (its answer lost); so no peer queues more than the export.
    uint64_t next = 0, last = 0;
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
  Folder folder_;
  uint64_t next_ = 0;
  std::set<std::string> making_;        // peers whose export is being made
  std::map<std::string, Export> exports_;
  OffLoop exporter_;                    // last: its thread stops first
};

}  // namespace tune
