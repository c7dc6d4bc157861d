// The coordinator serving stored kernel images to workers, so that a config
// compiles once per fleet: a worker leased a unit asks (ImageRequest) for
// the cubins of the unit's configs it lacks before it compiles them, and is
// answered (ImageReply) with those the store holds on the word of two
// worker keys (KernelImage::Corroborated) or of a builder whose key is on
// the builder allow-list now (BuilderWitness, build_service.h), with no
// conflicting image either way; it checks each again and compiles the rest. Private to coordinator/; loop thread only (the reader
// thread runs only the work this class posts).
//
// The rules, each broken one answered with a refusal line that names the
// peer (ImageReply::refused), logged, and counted as a violation as a
// refused results batch is (WorkerSessions::NoteViolation: disconnected at
// kMaxViolations): the unit is leased to the peer (Ingestion::GrantImages)
// and of that sweep; each want names one of its configs, its dtype, an
// architecture of the peer's devices of its model and their op hash; at
// most as many wants as the unit has configs; one request of a peer's unit
// in flight at once; and a peer's requests stay within a token bucket
// (kImageRequestBurstPerDevice, kImageRequestsPerSecondPerDevice). Nothing
// stored changes either way.
//
// Store reads run on a thread of their own: a reply carries up to
// kMaxImageReplyBytes (base/limits.h) of cubins, each hashed again on its
// way out of the store, far more than the loop may spend.
//
// What a reply could not serve stays open while the unit is leased: those
// configs are what builders take first (UnservedConfigs: the back half of
// the unit its worker compiles now, all of the units behind it), and when
// a builder's
// images of them are stored (Stored) the worker is sent them in a later
// reply for the unit, read and judged as any reply, so that its compile
// of them need not run.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "coordinator_parts.h"
#include "coordinator_results.h"
#include "off_loop.h"
#include "protocol/protocol.h"
#include "store/result_store.h"
#include "worker_sessions.h"

namespace tune {

// A peer's ImageRequests: a burst of this many per device it announced,
// refilled at this rate per device. An honest worker asks once per unit
// (at most two units per device in hand), far below either.
inline constexpr double kImageRequestBurstPerDevice = 8;
inline constexpr double kImageRequestsPerSecondPerDevice = 4;
// Replies one lease of a unit gets: one per device that may run it again
// after an expired lease, no more (each may carry kMaxImageReplyBytes).
inline constexpr int kMaxImageRepliesPerLease = 2;

class ImageService {
 public:
  // Whether a CURVE key is on the builder allow-list now; called on the
  // reader thread, so it must be thread-safe.
  using IsBuilderFn = std::function<bool(const std::string& key)>;
  // Every pointer must outlive this object. `is_builder` may be empty (no
  // builder's word counts).
  ImageService(ResultStore* store, Ingestion* ingestion, WorkerSessions* sessions, PeerLink* link,
               LoopCounters* counters, IsBuilderFn is_builder = nullptr)
      : store_(store), ingestion_(ingestion), sessions_(sessions), link_(link), counters_(counters),
        is_builder_(std::move(is_builder)), reader_("images") {}

  // Starts the reader thread; its error.
  Status Start() { return reader_.Start(); }
  int wake_fd() const { return reader_.wake_fd(); }
  // Sends the replies whose images were read.
  void RunCompletions() { reader_.RunCompletions(); }

  // `session`'s (`identity`'s) request: refused at once when it breaks a
  // rule (see above), else answered once its images are read.
  void Handle(const std::string& identity, const WorkerSession& session, const ImageRequest& request, double now);

  // A config a worker asked for and was not served, of a unit it holds:
  // it compiles it unless an image comes first.
  struct Unserved {
    std::string sweep_id, op, dtype, arch, kernel_hash;
    Config config;
  };
  // The unserved configs of the units held now, in lease order, each
  // unit's from its back (its worker compiles from its front; of a peer's
  // first unit, the back half only), at most `most`.
  std::vector<Unserved> UnservedConfigs(size_t most) const;
  // Images of these keys (KernelImage::Key) were stored: each worker that
  // still lacks one for a unit it holds is sent it.
  void Stored(const std::set<std::string>& keys);

  // Forgets the rate of peers that are gone, and what units no longer
  // leased lacked.
  void Tick();

 private:
  struct Bucket {
    double tokens = 0;
    double at = 0;  // when `tokens` was counted
  };
  // Why `request` breaks a rule ("" when it keeps them); takes a token.
  std::string Fault(const std::string& identity, const WorkerSession& session, const ImageRequest& request,
                    double now, Ingestion::ImageGrant* grant);
  void Refuse(const std::string& identity, const WorkerSession& session, const ImageRequest& request,
              const std::string& why);
  // Answers `request` with every image missing, as no violation: a late
  // request (its sweep ended, its lease went), a repeated one.
  void AnswerNothing(const std::string& identity, const ImageRequest& request);
  // What a unit's worker asked for and was not served.
  struct Open {
    std::string sweep_id, op;
    std::vector<std::pair<ImageWant, Config>> wants;  // in the unit's order
    size_t workers_half = 0;  // the front wants its worker compiles while the unit is its first
  };
  // Reads `wants` (distinct keys) off the loop and sends `identity` those
  // images that may be served, as unit `unit_id`'s `first` reply (the one
  // its request waits for) or a later one (only when it brings images);
  // what was not served stays open (`open`: the wants' op and configs).
  void Serve(const std::string& identity, const std::string& sweep_id, uint64_t unit_id, size_t asked,
             std::vector<ImageWant> wants, Open open, bool first);

  ResultStore* store_;
  Ingestion* ingestion_;
  WorkerSessions* sessions_;
  PeerLink* link_;
  LoopCounters* counters_;
  IsBuilderFn is_builder_;
  std::map<std::string, Bucket> buckets_;                  // by routing identity
  std::set<std::pair<std::string, uint64_t>> in_flight_;  // (identity, unit) being read
  std::map<std::pair<std::string, uint64_t>, int> replies_;  // (identity, unit) -> replies sent (live leases)
  std::map<std::pair<std::string, uint64_t>, Open> open_;    // (identity, unit) -> unserved (live leases)
  OffLoop reader_;  // last: its thread stops first
};

}  // namespace tune
