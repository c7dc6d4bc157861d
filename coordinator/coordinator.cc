#include "coordinator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <cstdio>
#include <ctime>
#include <random>
#include <set>
#include <mutex>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "tune/curve.h"
#include "tune/records.h"
#include "tune/json_text.h"
#include "tune/protocol.h"
#include "http_server.h"
#include "metrics.h"
#include "ingester.h"
#include "off_loop.h"
#include "zap_authenticator.h"
#include "tune/sweep_file.h"

namespace tune {
namespace {

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string NewSweepId() {
  std::random_device rd;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%08lx-%04x", static_cast<long>(std::time(nullptr)),
                static_cast<unsigned>(rd() & 0xffff));
  return buf;
}

std::string Printable(const std::string& identity) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : identity) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

// What the HTTP thread serves: documents the coordinator loop rebuilds and
// swaps in under a mutex, so a slow browser never holds up the loop.
class HttpSnapshot final : public HttpStatusSource {
 public:
  std::string Json(const std::string& what) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = docs_.find(what);
    return it == docs_.end() ? "" : it->second;
  }
  std::string Metrics() override {
    std::lock_guard<std::mutex> lock(mu_);
    return metrics_;
  }
  void Publish(std::map<std::string, std::string> docs, std::string metrics) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [k, v] : docs) docs_[k] = std::move(v);
    metrics_ = std::move(metrics);
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::string> docs_;
  std::string metrics_;
};

}  // namespace

// What a peer of `role` may send: workers what keeps a worker going,
// clients sweeps; both may ask for status and say goodbye.
Status MayUse(PeerRole role, const Command& cmd) {
  const bool worker_only = std::holds_alternative<Hello>(cmd) || std::holds_alternative<Heartbeat>(cmd) ||
                           std::holds_alternative<RequestWork>(cmd) || std::holds_alternative<Results>(cmd);
  const bool client_only = std::holds_alternative<SweepSubmit>(cmd);
  if ((role == PeerRole::kClient && worker_only) || (role == PeerRole::kWorker && client_only)) {
    return Status::Error(std::string("a ") + PeerRoleName(role) + " key may not send " + CommandName(cmd));
  }
  return Status::OK();
}

// What the rows of `unit`, leased for `model`, must match.
std::shared_ptr<const LeasedUnit> LeasedUnitOf(const WorkUnit& unit, const std::string& model) {
  auto u = std::make_shared<LeasedUnit>();
  u->sweep_id = unit.sweep_id;
  u->op = unit.op;
  u->dtype = unit.dtype;
  u->gpu_model = model;
  u->shape = unit.shapes.empty() ? "" : unit.shapes.front().Canonical();
  for (const auto& c : unit.configs) u->configs.emplace(c.Id(), c);
  u->confirm = unit.confirm();
  u->refine = unit.refine();
  return u;
}

// How often a store that refused writes is tried again.
constexpr double kStoreRetrySeconds = 2;

// Devices a hello may name: a host with more GPUs than this is no farm host.
constexpr size_t kMaxDevicesPerWorker = 64;

// The devices of a hello, checked before they can name a model: model names
// are store keys (as NormaliseGpuModel writes them), indices unique.
Status CheckDevices(const std::vector<DeviceInfo>& devices) {
  if (devices.size() > kMaxDevicesPerWorker) {
    return Status::Error(std::to_string(devices.size()) + " devices, more than " + std::to_string(kMaxDevicesPerWorker));
  }
  std::set<int> indices;
  for (const auto& d : devices) {
    const std::string where = "device " + std::to_string(d.index) + ": ";
    if (!indices.insert(d.index).second) return Status::Error(where + "index given twice");
    if (d.model.empty() || d.model.size() > 64 ||
        d.model.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos) {
      return Status::Error(where + "model '" + d.model + "' is not a model name ([a-z0-9-], 1 to 64)");
    }
    if (d.backend != "cuda" && d.backend != "sim") return Status::Error(where + "unknown backend '" + d.backend + "'");
  }
  return Status::OK();
}

// Refused results batches after which a peer is disconnected.
constexpr uint32_t kMaxViolations = 3;

uint32_t NoWorkRetryMs(size_t workers) {
  // About 5,000 idle requests/s over the farm at most (coordinator.h).
  constexpr double kIdleRequestsPerSecond = 5000;
  return static_cast<uint32_t>(std::clamp(1000.0 * double(workers) / kIdleRequestsPerSecond, 20.0, 1000.0));
}

struct Coordinator::Impl {
  CoordinatorOptions opts;
  zmq::context_t ctx{1};
  std::unique_ptr<ZapAuthenticator> zap;  // declared before router: outlives it
  std::unique_ptr<zmq::socket_t> router;
  std::unique_ptr<ResultStore> store;
  std::unique_ptr<Ingester> ingester;  // declared after store: stops before it closes
  // Expands sweeps' config spaces (Expand); declared after store, whose
  // reads a resumed sweep's expansion makes.
  std::unique_ptr<OffLoop> expander;
  Scheduler scheduler;
  uint64_t seq = 0;

  struct Peer {
    std::string name;
    std::string key;       // CURVE public key (Z85) it was admitted with; "" in plaintext
    uint32_t violations = 0;  // batches refused since it said hello
    // Indices of devices that asked for work: only those make their model
    // live (Scheduler::AddDevice), so a model that a hello names and no
    // device ever serves makes no sweep wait for it.
    std::set<int> serving;
    std::vector<DeviceInfo> devices;
    double last_seen = 0;
    double last_sent = 0;
  };
  std::map<std::string, Peer> workers;  // routing identity -> worker
  // (worker identity, unit) whose batch failed to store: the unit must not
  // complete on that worker's final batch until the batch is stored.
  std::set<std::pair<std::string, uint64_t>> unstored_batches;

  // Every unit leased, in this run or (LeaseRecord) the one before: what its
  // rows must match, and who may report them. Dropped with its sweep.
  struct LeaseBook {
    std::shared_ptr<const LeasedUnit> unit;
    LeaseRecord record;  // the unit without its package, and its lessees
  };
  std::map<uint64_t, LeaseBook> lease_book;
  // Kernel hash of an op package per toolchain: sweep '\0' op '\0' nvrtc.
  std::map<std::string, std::string> kernel_hashes;

  // Counters for /metrics.
  uint64_t results_stored = 0, results_duplicate = 0, leases = 0, dropped_messages = 0;
  uint64_t batches_refused = 0, protocol_errors = 0;
  // Set while the store refuses writes (disk full, I/O error): no leases are
  // given out, since their results could not be stored, and the store is
  // tried again every kStoreRetrySeconds until a write succeeds.
  std::string store_fault;
  double store_retry_at = 0;

  void StoreFailed(const std::string& what, double now) {
    if (store_fault.empty()) {
      std::fprintf(stderr, "coordinator: store writes fail, leasing stops until they succeed: %s\n", what.c_str());
    }
    store_fault = what;
    store_retry_at = now + kStoreRetrySeconds;
  }
  void MaybeRecoverStore(double now) {
    if (store_fault.empty() || now < store_retry_at) return;
    Status st = store->Recover();
    if (!st.ok()) {
      store_retry_at = now + kStoreRetrySeconds;
      return;
    }
    std::fprintf(stderr, "coordinator: store writes succeed again; leasing resumes\n");
    store_fault.clear();
  }
  HttpSnapshot snapshot;
  std::unique_ptr<HttpServer> http;
  double last_publish = 0, last_best_publish = 0, last_key_check = 0;

  explicit Impl(CoordinatorOptions o) : opts(std::move(o)), scheduler(opts.scheduler) {}

  void Log(const std::string& line) {
    if (opts.verbose) std::fprintf(stderr, "coordinator: %s\n", line.c_str());
  }

  void Send(const std::string& identity, Command cmd) {
    Envelope env;
    env.seq = ++seq;
    env.sender = "coordinator";
    env.command = std::move(cmd);
    const std::string frame = EncodeEnvelope(env);
    try {
      router->send(zmq::buffer(identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      router->send(zmq::buffer(frame), zmq::send_flags::dontwait);
    } catch (const zmq::error_t& e) {
      Log(std::string("send to ") + Printable(identity) + " failed: " + e.what());
    }
    auto it = workers.find(identity);
    if (it != workers.end()) it->second.last_sent = NowSeconds();
  }

  void PersistSweep(const std::string& id) {
    const SweepState* s = scheduler.FindSweep(id);
    if (!s) return;
    Status st = store->PutSweep(id, EncodeSweepRecord({RunStateName(s->state), s->submit}));
    if (!st.ok()) StoreFailed("cannot persist sweep " + id + ": " + st.message(), NowSeconds());
  }

  void Disconnect(const std::string& identity, const std::string& reason) {
    Log("disconnect " + Printable(identity) + ": " + reason);
    dropped_messages++;
    Send(identity, tune::Disconnect{reason});
    DropWorker(identity);
  }

  void DropWorker(const std::string& identity) {
    auto it = workers.find(identity);
    if (it == workers.end()) return;
    for (const auto& d : it->second.devices) {
      if (it->second.serving.count(d.index)) scheduler.RemoveDevice(d.model);
    }
    workers.erase(it);
    scheduler.DropWorker(identity);
  }

  // Any command is a heartbeat. Returns the sender's entry, if it said hello.
  std::map<std::string, Peer>::iterator Heard(const std::string& identity, double now) {
    auto wit = workers.find(identity);
    if (wit != workers.end()) wit->second.last_seen = now;
    return wit;
  }

  void Handle(const std::string& identity, const std::string& key, Envelope env) {
    const double now = NowSeconds();
    auto wit = Heard(identity, now);

    std::visit(
        [&](auto& cmd) {
          using T = std::decay_t<decltype(cmd)>;
          if constexpr (std::is_same_v<T, Hello>) {
            if (Status st = CheckDevices(cmd.devices); !st.ok()) {
              protocol_errors++;
              return Disconnect(identity, "hello: " + st.message());
            }
            DropWorker(identity);  // a second hello starts over
            Peer p;
            p.name = cmd.worker_name;
            p.key = key;
            p.devices = cmd.devices;
            p.last_seen = now;
            workers[identity] = std::move(p);
            Log("hello from " + cmd.worker_name + " with " + std::to_string(cmd.devices.size()) +
                " device(s)");
            Send(identity, HelloAck{opts.heartbeat_ms, opts.liveness});
          } else if constexpr (std::is_same_v<T, SweepSubmit>) {
            const std::string id = NewSweepId();
            auto r = scheduler.AddSweep(cmd, id, std::time(nullptr));
            if (!r.ok()) {
              Send(identity, ErrorReply{r.status().message()});
              return;
            }
            PersistSweep(id);
            Log("sweep " + id + " '" + cmd.name + "' accepted");
            Send(identity, SweepAccepted{id});
          } else if constexpr (std::is_same_v<T, SweepStatusRequest>) {
            SweepStatus st;
            st.sweeps = scheduler.Progress(cmd.sweep_id);
            st.workers = static_cast<uint32_t>(workers.size());
            st.store_fault = store_fault;
            if (!cmd.sweep_id.empty() && st.sweeps.empty()) {
              Send(identity, ErrorReply{"unknown sweep '" + cmd.sweep_id + "'"});
              return;
            }
            Send(identity, std::move(st));
          } else if constexpr (std::is_same_v<T, Heartbeat>) {
            if (wit == workers.end()) Disconnect(identity, "unknown worker: say hello first");
          } else if constexpr (std::is_same_v<T, RequestWork>) {
            if (wit == workers.end()) return Disconnect(identity, "unknown worker: say hello first");
            const Peer& peer = wit->second;
            const DeviceInfo* dev = nullptr;
            for (const auto& d : peer.devices) {
              if (d.index == cmd.device_index) dev = &d;
            }
            if (!dev) return Disconnect(identity, "request for unknown device " +
                                                      std::to_string(cmd.device_index));
            if (wit->second.serving.insert(dev->index).second) scheduler.AddDevice(*dev);
            const bool store_behind =
                !store_fault.empty() || ingester->queued_bytes() > opts.max_ingest_backlog_bytes;
            auto unit = store_behind ? std::nullopt : scheduler.Lease(identity, dev->model, now);
            if (!unit) {
              Send(identity, NoWork{NoWorkRetryMs(workers.size())});
              return;
            }
            unit->device_index = cmd.device_index;
            leases++;
            BookLease(*unit, dev->model, peer);
            Log("lease unit " + std::to_string(unit->unit_id) + " (" + unit->op + "/" +
                unit->dtype + ", " + std::to_string(unit->configs.size()) + " configs) to " +
                peer.name);
            Send(identity, std::move(*unit));
          } else if constexpr (std::is_same_v<T, tune::Disconnect>) {
            Log("worker " + (wit != workers.end() ? wit->second.name : Printable(identity)) +
                " left: " + cmd.reason);
            DropWorker(identity);
          } else {
            Disconnect(identity, std::string("unexpected command ") + CommandName(env.command));
          }
        },
        env.command);
  }

  // A Results frame goes to the ingester undecoded. Its unit counts as
  // making progress until the batch is stored: rows waiting in the queue
  // never make a straggler.
  // Who a lease is booked to: the CURVE key a peer proved it holds, or its
  // name where the coordinator runs without CURVE.
  static std::string Lessee(const Peer& peer) { return peer.key.empty() ? peer.name : peer.key; }

  // Records that `unit` (of `model`) was leased to `peer`, here and in the
  // store, so that its results are accepted from it, also after a restart.
  void BookLease(const WorkUnit& unit, const std::string& model, const Peer& peer) {
    LeaseBook& book = lease_book[unit.unit_id];
    if (!book.unit) {
      book.unit = LeasedUnitOf(unit, model);
      book.record.unit = unit;
      book.record.unit.op_package.clear();
      book.record.gpu_model = model;
    }
    const std::string who = Lessee(peer);
    auto& lessees = book.record.lessees;
    if (std::find(lessees.begin(), lessees.end(), who) != lessees.end()) return;
    lessees.push_back(who);
    Status st = store->PutLease(unit.unit_id, EncodeLeaseRecord(book.record));
    if (!st.ok()) StoreFailed("cannot record lease of unit " + std::to_string(unit.unit_id) + ": " + st.message(), NowSeconds());
  }

  // Leases of sweeps that no longer run: kept, the book would grow for good.
  // Late batches of such a sweep (a duplicate lease's) are acknowledged
  // unstored (SubmitResults): every row of an ended sweep is stored already.
  void ForgetLeases(const std::string& sweep_id) {
    for (auto it = lease_book.begin(); it != lease_book.end();) {
      if (it->second.unit->sweep_id != sweep_id) {
        ++it;
        continue;
      }
      (void)store->DeleteLease(it->first);
      it = lease_book.erase(it);
    }
  }

  // KernelHash of the sweep's op for a toolchain, computed once.
  std::string KernelHashOf(const std::string& sweep_id, const std::string& op, const std::string& toolchain) {
    const std::string key = sweep_id + '\0' + op + '\0' + toolchain;
    auto it = kernel_hashes.find(key);
    if (it != kernel_hashes.end()) return it->second;
    const SweepState* s = scheduler.FindSweep(sweep_id);
    if (!s) return "";
    for (const auto& spec : s->specs) {
      if (spec.name == op) return kernel_hashes[key] = KernelHash(spec, toolchain);
    }
    return "";
  }

  // A Results frame goes to the ingester undecoded, with what it must match:
  // the unit as leased to this peer, its devices' kernel hashes and backends.
  // Its unit counts as making progress until the batch is stored: rows
  // waiting in the queue never make a straggler.
  void SubmitResults(const std::string& identity, zmq::message_t frame, const ResultsHead& head) {
    const double now = NowSeconds();
    auto wit = Heard(identity, now);
    if (wit == workers.end()) return Disconnect(identity, "unknown worker: say hello first");
    const size_t queued = ingester->queued_bytes();
    if (queued > 0 && queued + frame.size() > opts.max_ingest_queue_bytes) {
      return Disconnect(identity, "results queue full: keep the batch and send it again later");
    }
    const Peer& peer = wit->second;
    auto book = lease_book.find(head.unit_id);
    const SweepState* sweep = scheduler.FindSweep(head.sweep_id);
    if (book == lease_book.end() && sweep && sweep->state != RunState::kRunning) {
      return Send(identity, ResultsAck{head.sweep_id, head.unit_id, head.batch, 0, ""});
    }
    scheduler.BatchQueued(head.sweep_id, head.unit_id, now);
    IngestJob job;
    job.identity = identity;
    job.worker = peer.name;
    if (book != lease_book.end()) {
      const auto& lessees = book->second.record.lessees;
      if (std::find(lessees.begin(), lessees.end(), Lessee(peer)) != lessees.end()) {
        job.unit = book->second.unit;
        for (const auto& d : peer.devices) {
          if (d.model != job.unit->gpu_model) continue;
          job.backends.insert(d.backend);
          job.kernel_hashes.insert(KernelHashOf(job.unit->sweep_id, job.unit->op, d.nvrtc_version));
        }
      }
    }
    job.head = head;
    job.frame = std::move(frame);
    ingester->Submit(std::move(job));
  }

  // Leases of the run before this one, so their honest resends are stored.
  Status LoadLeases() {
    std::vector<uint64_t> stale;
    Status st = store->ForEachLease([&](uint64_t id, const std::string& bytes) {
      auto rec = DecodeLeaseRecord(bytes.data(), bytes.size());
      const SweepState* s = rec.ok() ? scheduler.FindSweep(rec->unit.sweep_id) : nullptr;
      if (!s || s->state != RunState::kRunning) {
        stale.push_back(id);
        return;
      }
      auto u = LeasedUnitOf(rec->unit, rec->gpu_model);
      lease_book[id] = LeaseBook{std::move(u), std::move(rec).value()};
    });
    for (uint64_t id : stale) (void)store->DeleteLease(id);
    if (!lease_book.empty()) Log(std::to_string(lease_book.size()) + " lease(s) of the last run still open");
    return st;
  }

  // A batch of `unit_id` from this worker is not in the store: a reconnect
  // makes the worker send every batch it holds unacknowledged again.
  void AskToResend(const std::string& identity, uint64_t unit_id) {
    Log("unit " + std::to_string(unit_id) + " of " + Printable(identity) +
        " lacks a batch that failed to store; asking for it again");
    Send(identity, tune::Disconnect{"a results batch could not be stored; send it again"});
    DropWorker(identity);
  }

  // A batch that does not match its lease: nothing of it is stored, the
  // sender is told so (it drops the batch) and gives up its lease of the
  // unit, which goes back to the queue for an honest worker. A peer that
  // keeps sending such batches is disconnected.
  void Refuse(const IngestOutcome& o) {
    batches_refused++;
    auto wit = workers.find(o.identity);
    const std::string who = wit != workers.end() ? wit->second.name + " (" + Lessee(wit->second) + ")" : Printable(o.identity);
    std::fprintf(stderr, "coordinator: refused results of unit %llu from %s: %s\n",
                 static_cast<unsigned long long>(o.head.unit_id), who.c_str(), o.error.c_str());
    Send(o.identity, ResultsAck{o.head.sweep_id, o.head.unit_id, o.head.batch, 0, o.error});
    scheduler.GiveUpLease(o.identity, o.head.unit_id);
    if (wit != workers.end() && ++wit->second.violations >= kMaxViolations) {
      Disconnect(o.identity, std::to_string(kMaxViolations) + " results batches refused");
    }
  }

  // Stored batches are acknowledged and counted here, on the loop, so the
  // scheduler sees a unit complete only once all its rows are stored.
  void ApplyIngestOutcomes() {
    for (auto& o : ingester->TakeOutcomes()) {
      scheduler.BatchIngested(o.head.sweep_id, o.head.unit_id, o.stored, o.failed, NowSeconds());
      switch (o.kind) {
        case IngestOutcome::Kind::kRejected:
          protocol_errors++;
          Disconnect(o.identity, o.error);
          break;
        case IngestOutcome::Kind::kRefused:
          Refuse(o);
          break;
        case IngestOutcome::Kind::kStoreFailed:
          // Not acknowledged: the worker keeps the batch and sends it again
          // when it reconnects. Until then the unit must not complete on a
          // later final batch, and a failed final batch asks for that now.
          StoreFailed(o.error, NowSeconds());
          if (o.head.final) AskToResend(o.identity, o.head.unit_id);
          else unstored_batches.insert({o.identity, o.head.unit_id});
          break;
        case IngestOutcome::Kind::kStored: {
          results_stored += o.stored;
          results_duplicate += o.rows - o.stored;
          if (o.head.final && unstored_batches.erase({o.identity, o.head.unit_id})) {
            AskToResend(o.identity, o.head.unit_id);  // the final batch stays unacknowledged
            break;
          }
          Send(o.identity, ResultsAck{o.head.sweep_id, o.head.unit_id, o.head.batch,
                                      static_cast<uint32_t>(o.stored), ""});
          if (!o.head.final) break;
          scheduler.CompleteUnit(o.identity, o.head.sweep_id, o.head.unit_id, NowSeconds(),
                                 std::time(nullptr));
          break;
        }
      }
    }
  }

  // The valid rows of a (model, op, dtype, shape) key of the current kernel
  // hash, for a pass that times its fastest again. False when the pass has
  // nothing to do there: a row of the key is confirmed (final: a resumed
  // sweep whose confirm unit ran, or an earlier sweep's), or the scan failed
  // (logged, naming the pass).
  bool RowsToTimeAgain(const DeviceInfo& dev, const OpSpec& spec, const std::string& dtype, const Shape& shape,
                       const char* pass, std::vector<Measurement>* rows) {
    const ResultFilter key{dev.model, spec.name, dtype, shape.Canonical(), KernelHash(spec, dev.nvrtc_version)};
    bool confirmed = false;
    Status st = store->Scan(key, [&](const Measurement& m) {
      confirmed = confirmed || m.confirmed;
      if (m.Valid() && std::isfinite(m.median_us)) rows->push_back(m);
      return !confirmed;
    });
    if (!st.ok()) Log(std::string(pass) + " skips " + shape.Canonical() + ": " + st.message());
    return st.ok() && !confirmed;
  }

  // The confirm phase's contenders (ContendersOf) among the key's stored
  // rows.
  ContendersFn Contenders() {
    return [this](const DeviceInfo& dev, const OpSpec& spec, const std::string& dtype, const Shape& shape,
                  uint32_t top) {
      std::vector<Measurement> valid;
      if (!RowsToTimeAgain(dev, spec, dtype, shape, "confirm phase", &valid)) return std::vector<Config>{};
      return ContendersOf(std::move(valid), top);
    };
  }

  // The refine pass's contenders (NearBestOf) among the key's stored rows.
  NearBestFn NearBestConfigs() {
    return [this](const DeviceInfo& dev, const OpSpec& spec, const std::string& dtype, const Shape& shape,
                  double within) {
      std::vector<Measurement> valid;
      if (!RowsToTimeAgain(dev, spec, dtype, shape, "refine pass", &valid)) return NearBest{};
      return NearBestOf(valid, within);
    };
  }

  // Hands a sweep's space expansion to the expander thread: enumerating a
  // space of millions of raw points takes seconds, which the loop's leases
  // and heartbeats cannot wait for.
  void Expand(SpaceExpansion job) {
    Log("expanding the config spaces of sweep " + job.sweep_id + " for " + job.device.model);
    expander->Post([this, job = std::move(job)]() -> OffLoop::Completion {
      const auto start = std::chrono::steady_clock::now();
      auto space = std::make_shared<Result<ExpandedSpace>>(ExpandSpace(job));
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return [this, id = job.sweep_id, model = job.device.model, space, seconds] {
        if (space->ok()) {
          Log("sweep " + id + ": " + std::to_string((*space)->pairs_total) + " (config, shape) pairs for " + model +
              " (" + std::to_string((*space)->pairs_done) + " stored before), expanded in " +
              std::to_string(seconds) + " s");
        }
        scheduler.ApplyExpansion(id, model, std::move(*space));
      };
    });
  }

  // Sweeps that ended (done, or failed: units out of attempts, a space over
  // the bounds) since the last call: their state is made durable and their
  // leases forgotten. The one place a sweep's end is recorded.
  std::set<std::string> ended_sweeps;
  void RecordEndedSweeps() {
    for (const auto& [id, s] : scheduler.sweeps()) {
      if (s.state == RunState::kRunning || !ended_sweeps.insert(id).second) continue;
      PersistSweep(id);
      ForgetLeases(id);
      Log("sweep " + id + " " + RunStateName(s.state) + (s.error.empty() ? "" : ": " + s.error));
    }
  }

  // Sweeps that were running when the last coordinator stopped (or was
  // killed) run on; configs whose every shape is stored are not leased again.
  Status ResumeSweeps() {
    std::vector<std::pair<std::string, SweepRecord>> running;
    Status st = store->ForEachSweep([&](const std::string& id, const std::string& bytes) {
      auto rec = DecodeSweepRecord(bytes);
      if (!rec.ok()) {
        Log("skipping unreadable sweep " + id + ": " + rec.status().message());
        return;
      }
      if (rec->state == "running") running.emplace_back(id, std::move(rec).value());
    });
    TUNE_RETURN_IF_ERROR(st);
    ResultStore* db = store.get();
    auto measured = [db](const DeviceInfo& dev, const OpSpec& spec, const std::string& dtype,
                         const Config& config, const std::vector<Shape>& shapes) {
      const std::string hash = KernelHash(spec, dev.nvrtc_version);
      const std::string id = config.Id();
      for (const auto& s : shapes) {
        if (!db->Get(dev.model, spec.name, dtype, s.Canonical(), hash, id)) return false;
      }
      return true;
    };
    for (auto& [id, rec] : running) {
      auto r = scheduler.ResumeSweep(rec.submit, id, std::time(nullptr), measured);
      if (!r.ok()) {
        // Failed for good rather than tried again on every start.
        std::fprintf(stderr, "coordinator: sweep %s cannot resume and is marked failed: %s\n", id.c_str(),
                     r.status().message().c_str());
        Status st = store->PutSweep(id, EncodeSweepRecord({"failed", rec.submit}));
        if (!st.ok()) Log("cannot mark sweep " + id + " failed: " + st.message());
      } else {
        Log("resuming sweep " + id + " '" + rec.submit.name + "'");
      }
    }
    return Status::OK();
  }

  void Tick(double now) {
    const double hb = opts.heartbeat_ms / 1000.0;
    std::vector<std::string> dead;
    std::vector<std::string> revoked;
    // Silent peers' keys are looked at once a second (a key's messages are
    // checked as they arrive): the allow-lists are re-read every 2 s anyway.
    const bool check_keys = zap && now - last_key_check >= 1.0;
    if (check_keys) last_key_check = now;
    for (auto& [id, peer] : workers) {
      if (check_keys && zap->RoleOf(peer.key) != PeerRole::kWorker) {
        revoked.push_back(id);
      } else if (now - peer.last_seen > hb * opts.liveness) {
        dead.push_back(id);
      } else if (now - peer.last_sent >= hb) {
        Send(id, Heartbeat{});
      }
    }
    for (const auto& id : revoked) Disconnect(id, "key " + workers[id].key + " is no longer on the worker allow-list");
    for (const auto& id : dead) {
      Log("worker " + workers[id].name + " missed " + std::to_string(opts.liveness) +
          " heartbeats: its leases go back to the queue");
      DropWorker(id);
    }
    const size_t expired = scheduler.ExpireLeases(now);
    if (expired) Log(std::to_string(expired) + " lease(s) expired");
    RecordEndedSweeps();
    MaybeRecoverStore(now);
    if (http && now - last_publish >= 1.0) {
      PublishSnapshot(now);
      last_publish = now;
    }
  }

  void PublishSnapshot(double now) {
    using nlohmann::json;
    std::map<std::string, std::string> docs;
    json sweeps = json::array();
    std::vector<Metric> metrics;
    for (const auto& p : scheduler.Progress("")) {
      sweeps.push_back({{"id", p.sweep_id}, {"name", p.name}, {"state", p.state},
                        {"pairs_done", p.pairs_done}, {"pairs_total", p.pairs_total},
                        {"pairs_failed", p.pairs_failed}, {"units_done", p.units_done},
                        {"units_total", p.units_total}, {"gpu_models", p.gpu_models},
                        {"started_unix", p.started_unix}, {"finished_unix", p.finished_unix},
                        {"error", p.error}, {"waiting_for", p.waiting_for},
                        {"expanding", p.expanding}});
      const MetricLabels labels = {{"sweep", p.sweep_id}, {"name", p.name}};
      metrics.push_back(Metric::Gauge("tunefarm_sweep_pairs_done", "(config, shape) pairs stored",
                                      p.pairs_done, labels));
      metrics.push_back(Metric::Gauge("tunefarm_sweep_pairs_total", "(config, shape) pairs to measure",
                                      p.pairs_total, labels));
      metrics.push_back(Metric::Gauge("tunefarm_sweep_pairs_failed", "pairs stored as failures",
                                      p.pairs_failed, labels));
    }
    docs["sweeps"] = DumpJson(json{{"now_unix", std::time(nullptr)}, {"sweeps", sweeps}, {"store_fault", store_fault}});
    json ws = json::array();
    size_t devices = 0;
    for (const auto& [id, peer] : workers) {
      json devs = json::array();
      for (const auto& d : peer.devices) {
        devs.push_back({{"index", d.index}, {"name", d.name}, {"model", d.model},
                        {"backend", d.backend},
                        {"cc", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
                        {"num_sms", d.num_sms}, {"total_mem_bytes", d.total_mem_bytes}});
      }
      devices += peer.devices.size();
      ws.push_back({{"name", peer.name}, {"last_seen_seconds", now - peer.last_seen}, {"devices", devs}});
    }
    docs["workers"] = DumpJson(json{{"workers", ws}});
    metrics.push_back(Metric::Gauge("tunefarm_workers", "workers connected", workers.size()));
    metrics.push_back(Metric::Gauge("tunefarm_devices", "devices of connected workers", devices));
    metrics.push_back(Metric::Counter("tunefarm_results_stored_total", "measurements stored", results_stored));
    metrics.push_back(Metric::Counter("tunefarm_results_duplicate_total",
                                      "measurements received again and not stored twice",
                                      results_duplicate));
    metrics.push_back(Metric::Counter("tunefarm_leases_total", "work units leased", leases));
    metrics.push_back(Metric::Gauge("tunefarm_store_writable",
                                    "1 while store writes succeed; 0 while they fail and leasing stops",
                                    store_fault.empty() ? 1 : 0));
    metrics.push_back(Metric::Gauge("tunefarm_ingest_queue_bytes",
                                    "bytes of results received and not yet stored",
                                    ingester->queued_bytes()));
    metrics.push_back(Metric::Counter("tunefarm_results_refused_total",
                                      "results batches refused: not what was leased to their sender",
                                      batches_refused));
    metrics.push_back(Metric::Counter("tunefarm_protocol_errors_total",
                                      "frames that failed to decode (framing, version, text)",
                                      protocol_errors));
    if (http) {
      const HttpServerCounters c = http->counters();
      metrics.push_back(Metric::Gauge("tunefarm_http_connections", "HTTP connections open", c.open));
      metrics.push_back(Metric::Counter("tunefarm_http_evicted_total",
                                        "HTTP connections closed to give their slot to a newer one", c.evicted));
      metrics.push_back(Metric::Counter("tunefarm_http_refused_total",
                                        "HTTP connections closed at once: caps full, no slot to take", c.refused));
      metrics.push_back(Metric::Counter("tunefarm_http_timeouts_total", "HTTP connections that missed a deadline",
                                        c.header_timeouts + c.body_timeouts + c.write_timeouts + c.idle_timeouts));
    }
    metrics.push_back(Metric::Counter("tunefarm_peers_disconnected_total",
                                      "peers disconnected for bad or unexpected messages",
                                      dropped_messages));
    // Best rows scan the store: refreshed less often than the rest.
    if (now - last_best_publish >= 5.0) {
      last_best_publish = now;
      auto best = store->Best({});
      if (best.ok()) {
        json rows = json::array();
        std::map<std::string, json> groups;
        for (const auto& m : *best) {
          rows.push_back({{"op", m.op}, {"dtype", m.dtype}, {"shape", m.shape},
                          {"gpu_model", m.gpu_model}, {"config", m.config.Canonical()},
                          {"config_id", m.config_id}, {"kernel_hash", m.kernel_hash},
                          {"median_us", m.median_us}, {"stdev_us", m.stdev_us},
                          {"samples", m.samples}, {"backend", m.backend}, {"sweep_id", m.sweep_id}});
          json& g = groups[m.op + '\0' + m.dtype + '\0' + m.shape];
          if (g.is_null()) g = {{"op", m.op}, {"dtype", m.dtype}, {"shape", m.shape}, {"gpus", json::array()}};
          g["gpus"].push_back({{"gpu_model", m.gpu_model}, {"median_us", m.median_us},
                               {"config", m.config.Canonical()}, {"backend", m.backend}});
        }
        json garr = json::array();
        for (auto& [k, g] : groups) garr.push_back(std::move(g));
        docs["best"] = DumpJson(json{{"best", rows}});
        docs["compare"] = DumpJson(json{{"groups", garr}});
      }
    }
    snapshot.Publish(std::move(docs), RenderMetrics(metrics));
  }
};

Coordinator::Coordinator(CoordinatorOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {}
Coordinator::~Coordinator() = default;

Status Coordinator::Start() {
  auto store = ResultStore::Open(impl_->opts.store_path);
  if (!store.ok()) return store.status();
  impl_->store = std::move(store).value();
  impl_->store->set_min_free_bytes(impl_->opts.store_reserve_bytes);
  // Each run over this store numbers its units in a range of its own
  // (2^32 ids per run): a worker may still send results of a unit that the
  // run before a restart leased, and they must not complete another unit.
  auto run = impl_->store->IncrementCounter("coordinator_runs");
  if (!run.ok()) return run.status();
  impl_->scheduler.NumberUnitsFrom((*run << 32) | 1);
  impl_->scheduler.SetContenders(impl_->Contenders());
  impl_->scheduler.SetNearBest(impl_->NearBestConfigs());
  impl_->expander = std::make_unique<OffLoop>("expand");
  TUNE_RETURN_IF_ERROR(impl_->expander->Start());
  impl_->scheduler.SetExpander([impl = impl_.get()](SpaceExpansion job) { impl->Expand(std::move(job)); });
  TUNE_RETURN_IF_ERROR(impl_->ResumeSweeps());
  TUNE_RETURN_IF_ERROR(impl_->LoadLeases());
  impl_->ingester = std::make_unique<Ingester>(impl_->store.get());
  TUNE_RETURN_IF_ERROR(impl_->ingester->Start());
  const auto& o = impl_->opts;
  std::optional<CurveKeyPair> keys;
  if (!o.curve_secret_key.empty()) {
    auto loaded = LoadCurveKeyPair(o.curve_secret_key);
    if (!loaded.ok()) return loaded.status();
    keys = *loaded;
    if (o.curve_allow_list.empty()) {
      return Status::Error("coordinator: --curve-key needs --allow-list (the worker keys to admit)");
    }
    ZapAuthenticatorOptions zo;
    zo.allow_list_path = o.curve_allow_list;
    zo.client_allow_list_path = o.curve_client_allow_list;
    zo.log_accepted = o.verbose;
    auto zap = ZapAuthenticator::FromFile(impl_->ctx, o.curve_allow_list, zo);
    if (!zap.ok()) return zap.status();
    impl_->zap = std::move(zap).value();
    TUNE_RETURN_IF_ERROR(impl_->zap->Start());
  } else if (!IsLoopbackEndpoint(o.endpoint) && !o.insecure_plaintext) {
    return Status::Error("coordinator: " + o.endpoint +
                         " is not loopback: give --curve-key and --allow-list "
                         "(or --insecure-plaintext on a trusted network)");
  }
  try {
    impl_->router = std::make_unique<zmq::socket_t>(impl_->ctx, zmq::socket_type::router);
    impl_->router->set(zmq::sockopt::linger, 0);
    impl_->router->set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(kMaxFrameBytes));
    impl_->router->set(zmq::sockopt::router_handover, 1);
    if (keys) TUNE_RETURN_IF_ERROR(ConfigureCurveServer(*impl_->router, *keys));
    impl_->router->bind(impl_->opts.endpoint);
  } catch (const zmq::error_t& e) {
    return Status::Error("coordinator: cannot bind " + impl_->opts.endpoint + ": " + e.what());
  }
  if (o.http_port >= 0) {
    HttpServerOptions ho;
    ho.address = o.http_address;
    ho.port = static_cast<uint16_t>(o.http_port);
    impl_->http = std::make_unique<HttpServer>(ho, &impl_->snapshot);
    impl_->PublishSnapshot(NowSeconds());
    TUNE_RETURN_IF_ERROR(impl_->http->Start());
  }
  return Status::OK();
}

std::string Coordinator::http_url() const { return impl_->http ? impl_->http->url() : ""; }

std::string Coordinator::bound_endpoint() const {
  return impl_->router ? impl_->router->get(zmq::sockopt::last_endpoint) : "";
}

ResultStore* Coordinator::store() { return impl_->store.get(); }

Status Coordinator::Run(const std::atomic<bool>* stop) {
  auto& router = *impl_->router;
  double last_tick = 0;
  while (!stop->load()) {
    zmq::pollitem_t items[] = {{router.handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, impl_->ingester->wake_fd(), ZMQ_POLLIN, 0},
                               {nullptr, impl_->expander->wake_fd(), ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 3, std::chrono::milliseconds(50));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      return Status::Error(std::string("coordinator: poll: ") + e.what());
    }
    // A stop signal can land inside a receive (libzmq polls its mailbox
    // there), which cppzmq reports as EINTR: the loop head looks at the stop
    // flag again. Any other socket error ends the run with its message.
    try {
      if (items[0].revents & ZMQ_POLLIN) {
        // Drain what is queued, bounded so heartbeats still go out under load.
        for (int i = 0; i < 1000; ++i) {
          zmq::message_t identity, frame;
          if (!router.recv(identity, zmq::recv_flags::dontwait)) break;
          std::vector<zmq::message_t> parts;
          bool more = router.get(zmq::sockopt::rcvmore);
          while (more) {
            parts.emplace_back();
            // The rest of a message is already queued: finish it even when
            // a signal interrupts, so that no part is read as a new message.
            for (;;) {
              try {
                (void)router.recv(parts.back());
                break;
              } catch (const zmq::error_t& e) {
                if (e.num() != EINTR) throw;
              }
            }
            more = router.get(zmq::sockopt::rcvmore);
          }
          const std::string id = identity.to_string();
          // Fail closed: with CURVE on, a frame whose connection the
          // authenticator did not admit is dropped unread.
          const std::string key = impl_->zap && !parts.empty() ? AdmittedKey(parts[0]) : std::string();
          if (impl_->zap && key.empty()) continue;
          std::optional<PeerRole> role;
          if (impl_->zap) {
            role = impl_->zap->RoleOf(key);
            if (!role) {
              impl_->Disconnect(id, "key " + key + " is no longer on an allow-list");
              continue;
            }
          }
          if (parts.size() != 1) {
            impl_->Disconnect(id, "expected one frame, got " + std::to_string(parts.size()));
            continue;
          }
          // Results are routed by their head alone: decoding and storing the
          // rows is the ingester's work, and leases must not wait for it.
          auto head = PeekResults(parts[0].data(), parts[0].size());
          if (head.ok() && head->has_value()) {
            if (role == PeerRole::kClient) {
              impl_->Disconnect(id, "a client key may not send results");
              continue;
            }
            impl_->SubmitResults(id, std::move(parts[0]), **head);
            continue;
          }
          auto env = DecodeEnvelope(parts[0].data(), parts[0].size());
          if (!env.ok()) {
            impl_->protocol_errors++;
            impl_->Disconnect(id, "malformed message: " + env.status().message());
            continue;
          }
          if (role) {
            if (Status may = MayUse(*role, env->command); !may.ok()) {
              impl_->Disconnect(id, may.message());
              continue;
            }
          }
          impl_->Handle(id, key, std::move(env).value());
        }
      }
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) return Status::Error(std::string("coordinator: receive: ") + e.what());
      continue;
    }
    if (items[1].revents & ZMQ_POLLIN) impl_->ApplyIngestOutcomes();
    if (items[2].revents & ZMQ_POLLIN) impl_->expander->RunCompletions();
    if ((items[1].revents | items[2].revents) & ZMQ_POLLIN) impl_->RecordEndedSweeps();
    const double now = NowSeconds();
    if (now - last_tick >= 0.05) {
      impl_->Tick(now);
      last_tick = now;
    }
  }
  for (const auto& [id, peer] : impl_->workers) impl_->Send(id, tune::Disconnect{"coordinator stopping"});
  return Status::OK();
}

}  // namespace tune
