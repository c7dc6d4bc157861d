// Builders: hosts without a GPU that compile for the fleet
// (`tunefarm worker --compile-only --arch sm_90a`, keys of the builder
// allow-list). A builder asks (BuildRequest) and is handed (BuildWork)
// configs that the GPU workers will time next and whose images the store
// lacks: first those of units held now that their workers asked images for
// and were not served (ImageService::UnservedConfigs; the worker is sent
// the image once stored, ImageService::Stored), then configs of the
// scheduler's pools not yet cut into units (a searched key is asked for
// its next batch ahead of its devices: Scheduler::ProposeAhead), of GPU
// models whose target (CudaArchOf) is one of the builder's and whose
// toolchain is the builder's (else the kernel hash differs and no device
// would ask for the image). It compiles them and sends the images back
// (BuiltImages); they are stored with the builder's witness, and the image
// service serves them on that word while the key stays on the builder
// allow-list. Private to coordinator/; loop thread only (the reader
// thread runs only the work this class posts).
//
// Each (kernel hash, config, dtype, arch) is handed to one builder at a
// time, for kBuildWorkSeconds; what a builder sent or could not compile is
// not handed again. Candidates are read against the store on the reader
// thread (a stored image is never built twice), and so are the images that
// come back: every image of a BuiltImages must belong to the work handed to
// that builder (its kernel hash, dtype, arch, one of its configs, once),
// be of an architecture the builder said it builds for, pass
// CheckKernelImage (a cubin for its arch whose SHA-256 is the one claimed,
// at most kMaxKernelImageBytes) and define the op's kernel
// (CheckCubinEntries). One bad image refuses the whole batch: nothing is
// stored, the builder is told in one line naming it (ErrorReply), the line
// is logged, and it counts as a violation (WorkerSessions::NoteViolation:
// disconnected at kMaxViolations), as a refused results batch does.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "coordinator_parts.h"
#include "image_service.h"
#include "off_loop.h"
#include "opspec/kernel_hash.h"
#include "scheduler.h"
#include "store/result_store.h"
#include "worker_sessions.h"

namespace tune {

// How long a config handed to a builder is its alone: long enough for a
// builder of one thread to compile kMaxBuildConfigs of a large op.
inline constexpr double kBuildWorkSeconds = 600;
// BuildWorks one builder holds at once; past it, its requests get NoWork.
inline constexpr size_t kMaxBuildWorksPerBuilder = 2;
// Configs one BuildRequest reads against the store at most.
inline constexpr size_t kBuildCandidatesPerRequest = 4 * kMaxBuildConfigs;

// The witness a builder's image is stored with: "builder:" and its CURVE
// public key (Z85); "" for an empty key. Never counted by
// KernelImage::Corroborated: a builder's word stands alone, and only while
// its key is on the builder allow-list.
std::string BuilderWitness(const std::string& z85_key);
// The key of a BuilderWitness, "" when `witness` is none.
std::string BuilderKeyOf(const std::string& witness);

// Why a builder's hello cannot be taken ("" when it can): each of its
// architectures is "sm_" and two or three digits, "a" optional, and its
// toolchain is named.
std::string CheckBuilderHello(const Hello& hello);

// Whether a builder of `archs` builds for target `arch`: "sm_90" and
// "sm_90a" are one compute capability, and a builder of either compiles
// both (the op says which, CudaArchOf).
bool BuilderBuildsFor(const std::vector<std::string>& archs, const std::string& arch);

class BuildService {
 public:
  // Every pointer must outlive this object.
  // `images` may be null (no worker is sent what a builder built for it).
  BuildService(ResultStore* store, Scheduler* scheduler, WorkerSessions* sessions, PeerLink* link,
               LoopCounters* counters, ImageService* images = nullptr)
      : store_(store), scheduler_(scheduler), sessions_(sessions), link_(link), counters_(counters),
        images_(images), reader_("builds") {}

  Status Start() { return reader_.Start(); }
  int wake_fd() const { return reader_.wake_fd(); }
  // Sends the replies whose store reads or writes are done.
  void RunCompletions() { reader_.RunCompletions(); }

  // `builder`'s (`identity`'s) request: answered with a BuildWork once the
  // candidates are read against the store, or NoWork.
  // `now_unix` (wall seconds) stamps the end of a sweep whose search ends
  // as it is asked ahead (Scheduler::ProposeAhead).
  void Request(const std::string& identity, const WorkerSession& builder, const BuildRequest& request, double now,
               int64_t now_unix);
  // `builder`'s images: refused at once or after their checks (see above),
  // else stored.
  void Built(const std::string& identity, const WorkerSession& builder, BuiltImages built, double now);

  // Hands again what expired or what builders gone held; forgets sweeps
  // that no longer run.
  void Tick(double now);

 private:
  struct Work {
    std::string identity, sweep_id, op, dtype, arch, kernel_hash;
    std::map<std::string, Config> configs;  // by Config::Id()
    std::vector<std::string> entries;       // the op's kernel
    double expires = 0;
    bool expired = false;                   // its configs were released (a late answer is still taken)
  };
  struct Candidate {
    std::string sweep_id, op, dtype, arch, kernel_hash;
    Config config;
    std::string Key() const { return KernelImage::KeyOf(kernel_hash, config.Id(), dtype, arch); }
  };
  std::vector<Candidate> Candidates(const WorkerSession& builder, size_t wanted, double now, int64_t now_unix);
  // Hands `builder` the first group of `missing` (one sweep, op, dtype and
  // arch) not handed meanwhile, or NoWork.
  void Hand(const std::string& identity, uint32_t max_configs, const std::vector<Candidate>& missing, double now);
  void Refuse(const std::string& identity, const WorkerSession& builder, uint64_t work_id, const std::string& why);
  // Releases the configs of `work_id` still handed to it.
  void Release(uint64_t work_id);
  // Configs not to hand again (stored, or a builder's failed compile).
  void Settle(const std::string& key);

  ResultStore* store_;
  Scheduler* scheduler_;
  WorkerSessions* sessions_;
  PeerLink* link_;
  LoopCounters* counters_;
  ImageService* images_;
  std::map<uint64_t, Work> works_;
  std::map<std::string, uint64_t> handed_;     // image key -> work id
  std::set<std::string> settled_;
  std::set<std::string> asking_;               // builders whose request is being read
  std::map<std::string, OpHashMemo> hashes_;   // by sweep id
  uint64_t next_work_ = 1;
  OffLoop reader_;  // last: its thread stops first
};

}  // namespace tune
