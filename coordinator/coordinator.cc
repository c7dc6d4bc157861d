#include "coordinator.h"
#include "dashboard.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <optional>
#include <random>
#include <set>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "coordinator_impl.h"
#include "tune/json_text.h"
#include "tune/sweep_file.h"
#include "tune/text.h"

namespace tune {
namespace {

// "<unix time, hex>-<random hex>": SweepSubmittedUnix reads the time back.
std::string NewSweepId() {
  std::random_device rd;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%08lx-%04x", static_cast<long>(std::time(nullptr)),
                static_cast<unsigned>(rd() & 0xffff));
  return buf;
}

// How often a store that refused writes is tried again.
constexpr double kStoreRetrySeconds = 2;

// Devices a hello may name: a host with more GPUs than this is no farm host.
constexpr size_t kMaxDevicesPerWorker = 64;

}  // namespace

std::string Printable(const std::string& identity) { return HexOf(identity.data(), identity.size()); }

// What a peer of `role` may send: workers what keeps a worker going,
// clients sweeps; both may ask for status and say goodbye.
Status MayUse(PeerRole role, const Command& cmd) {
  const bool worker_only = std::holds_alternative<Hello>(cmd) || std::holds_alternative<Heartbeat>(cmd) ||
                           std::holds_alternative<RequestWork>(cmd) || std::holds_alternative<Results>(cmd);
  const bool client_only = std::holds_alternative<SweepSubmit>(cmd) || std::holds_alternative<SweepCancel>(cmd);
  if ((role == PeerRole::kClient && worker_only) || (role == PeerRole::kWorker && client_only)) {
    return Status::Error(std::string("a ") + PeerRoleName(role) + " key may not send " + CommandName(cmd));
  }
  return Status::OK();
}

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

// Who sent `frame` when no CURVE key says so: its TCP peer's address (all
// of a host's clients share it), or "local" for transports without one.
static std::string PeerAddress(zmq::message_t& frame) {
  try {
    const char* address = frame.gets("Peer-Address");
    if (address && *address) return address;
  } catch (const zmq::error_t&) {
    // No such property on this transport.
  }
  return "local";
}

uint32_t NoWorkRetryMs(size_t workers) {
  // About 5,000 idle requests/s over the farm at most (coordinator.h).
  constexpr double kIdleRequestsPerSecond = 5000;
  return static_cast<uint32_t>(std::clamp(1000.0 * double(workers) / kIdleRequestsPerSecond, 20.0, 1000.0));
}

void Coordinator::Impl::StoreFailed(const std::string& what, double now) {
  if (store_fault.empty()) {
    Log(log::Level::kError, "store writes fail; leasing stops until they succeed", {{"error", what}});
  }
  store_fault = what;
  store_retry_at = now + kStoreRetrySeconds;
}

void Coordinator::Impl::MaybeRecoverStore(double now) {
  if (store_fault.empty() || now < store_retry_at) return;
  Status st = store->Recover();
  if (!st.ok()) {
    store_retry_at = now + kStoreRetrySeconds;
    return;
  }
  Log(log::Level::kWarn, "store writes succeed again; leasing resumes");
  store_fault.clear();
}

void Coordinator::Impl::Log(log::Level level, const std::string& message, std::initializer_list<log::Field> fields) {
  log::Write(level, "coordinator", message, fields);
}

void Coordinator::Impl::Send(const std::string& identity, Command cmd) {
  Envelope env;
  env.seq = ++seq;
  env.sender = "coordinator";
  env.command = std::move(cmd);
  const std::string frame = EncodeEnvelope(env);
  try {
    router->send(zmq::buffer(identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    router->send(zmq::buffer(frame), zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    Log(log::Level::kWarn, "send failed", {{"peer", Printable(identity)}, {"error", e.what()}});
  }
  auto it = workers.find(identity);
  if (it != workers.end()) it->second.last_sent = NowSeconds();
}

void Coordinator::Impl::PersistSweep(const std::string& id) {
  const SweepState* s = scheduler.FindSweep(id);
  if (!s) return;
  SweepRecord record{RunStateName(s->state), s->submit};
  // Only a running sweep is read back (to resume); an ended one's packages
  // are in the op records, whose versions are bounded.
  if (s->state != RunState::kRunning) record.submit.op_packages.clear();
  Status st = store->PutSweep(id, EncodeSweepRecord(record));
  if (!st.ok()) StoreFailed("cannot persist sweep " + id + ": " + st.message(), NowSeconds());
}

MeasuredFn Coordinator::Impl::Measured() {
  ResultStore* db = store.get();
  // Each copy (one per expansion) hashes each (op, toolchain) once, not once
  // per config.
  return [db, hashes = std::map<std::string, std::string>()](
             const DeviceInfo& dev, const OpSpec& spec, const std::string& dtype, const Config& config,
             const Shape& shape) mutable -> std::optional<StoredPair> {
    // Rows of an op whose hosts add to its kernel hash (include roots, a
    // program's version) are kept under hashes the coordinator cannot know:
    // such an op is measured again.
    if (spec.HostDigested()) return std::nullopt;
    std::string& hash = hashes[spec.name + '\0' + dev.nvrtc_version];
    if (hash.empty()) hash = KernelHash(spec, dev.nvrtc_version);
    const auto row = db->Get(dev.model, spec.name, dtype, shape.Canonical(), hash, config.Id());
    if (!row) return std::nullopt;
    return StoredPair{!row->Valid(), row->failure};
  };
}

SweepStatus Coordinator::Impl::StatusOf(const std::string& sweep_id) const {
  SweepStatus st;
  st.sweeps = scheduler.Progress(sweep_id, NowSeconds());
  st.workers = static_cast<uint32_t>(workers.size());
  st.store_fault = store_fault;
  std::set<std::string> models;
  for (const auto& [id, peer] : workers)
    for (const auto& d : peer.devices)
      if (models.insert(d.model).second) st.devices.push_back(d);
  return st;
}

void Coordinator::Impl::RecordOps(const std::string& sweep_id, const SweepSubmit& submit) {
  std::vector<std::string>& digests = sweep_package_digests[sweep_id];
  digests.clear();
  for (size_t i = 0; i < submit.ops.size() && i < submit.op_packages.size(); ++i) {
    digests.push_back(PackageDigest(submit.op_packages[i]));
    Status st = store->PutOp(submit.ops[i], SweepSubmittedUnix(sweep_id), submit.op_packages[i]);
    if (!st.ok()) StoreFailed("cannot record op " + submit.ops[i] + ": " + st.message(), NowSeconds());
  }
  PruneOpVersions(submit);
}

void Coordinator::Impl::PruneOpVersions(const SweepSubmit& submit) {
  // The versions running sweeps need, by op name; sweeps that ended need none.
  std::map<std::string, std::set<std::string>> needed;
  for (auto it = sweep_package_digests.begin(); it != sweep_package_digests.end();) {
    const SweepState* s = scheduler.FindSweep(it->first);
    if (!s || s->state != RunState::kRunning) {
      it = sweep_package_digests.erase(it);
      continue;
    }
    for (size_t i = 0; i < s->submit.ops.size() && i < it->second.size(); ++i)
      needed[s->submit.ops[i]].insert(it->second[i]);
    ++it;
  }
  std::vector<std::pair<std::string, std::set<std::string>>> jobs;
  for (const std::string& op : std::set<std::string>(submit.ops.begin(), submit.ops.end()))
    jobs.emplace_back(op, needed[op]);
  expander->Post([this, jobs = std::move(jobs)]() -> OffLoop::Completion {
    std::vector<std::pair<std::string, std::string>> lines;  // op, outcome
    for (const auto& [op, keep] : jobs) {
      auto removed = store->PruneOps(op, kMaxRetainedOpVersions, keep);
      if (!removed.ok()) lines.emplace_back(op, removed.status().message());
      else if (*removed > 0) lines.emplace_back(op, std::to_string(*removed) + " old versions removed");
    }
    return [this, lines = std::move(lines)] {
      for (const auto& [op, what] : lines) Log(log::Level::kInfo, "op versions pruned", {{"op", op}, {"outcome", what}});
    };
  });
}

void Coordinator::Impl::Disconnect(const std::string& identity, const std::string& reason) {
  Log(log::Level::kInfo, "disconnect", {{"peer", Printable(identity)}, {"reason", reason}});
  dropped_messages++;
  Send(identity, tune::Disconnect{reason});
  DropWorker(identity);
}

void Coordinator::Impl::DropWorker(const std::string& identity) {
  auto it = workers.find(identity);
  if (it == workers.end()) return;
  for (const auto& d : it->second.devices) {
    if (it->second.serving.count(d.index)) scheduler.RemoveDevice(d.model);
  }
  workers.erase(it);
  scheduler.DropWorker(identity, std::time(nullptr));
}

// Any command is a heartbeat. Returns the sender's entry, if it said hello.
std::map<std::string, Coordinator::Impl::Peer>::iterator Coordinator::Impl::Heard(const std::string& identity, double now) {
  auto wit = workers.find(identity);
  if (wit != workers.end()) wit->second.last_seen = now;
  return wit;
}

void Coordinator::Impl::Handle(const std::string& identity, const std::string& key, const std::string& client,
                               Envelope env) {
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
          Log(log::Level::kInfo, "hello", {{"worker", cmd.worker_name}, {"devices", std::to_string(cmd.devices.size())}});
          Send(identity, HelloAck{opts.heartbeat_ms, opts.liveness});
        } else if constexpr (std::is_same_v<T, SweepSubmit>) {
          if (Status st = submit_rate.Admit(client, now); !st.ok()) {
            Log(log::Level::kInfo, "sweep refused", {{"name", cmd.name}, {"error", st.message()}});
            Send(identity, ErrorReply{st.message()});
            return;
          }
          const std::string id = NewSweepId();
          auto r = scheduler.AddSweep(cmd, id, std::time(nullptr), Measured());
          if (!r.ok()) {
            Log(log::Level::kInfo, "sweep refused", {{"name", cmd.name}, {"error", r.status().message()}});
            Send(identity, ErrorReply{r.status().message()});
            return;
          }
          PersistSweep(id);
          RecordOps(id, cmd);
          Log(log::Level::kInfo, "sweep accepted", {{"sweep", id}, {"name", cmd.name}});
          Send(identity, SweepAccepted{id});
        } else if constexpr (std::is_same_v<T, SweepCancel>) {
          if (Status st = scheduler.CancelSweep(cmd.sweep_id, std::time(nullptr)); !st.ok()) {
            Send(identity, ErrorReply{st.message()});
            return;
          }
          RecordEndedSweeps();  // durable at once: a restart must not resume it
          Send(identity, StatusOf(cmd.sweep_id));
        } else if constexpr (std::is_same_v<T, SweepStatusRequest>) {
          SweepStatus st = StatusOf(cmd.sweep_id);
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
          if (wit->second.serving.insert(dev->index).second) scheduler.AddDevice(*dev, std::time(nullptr));
          const bool store_behind =
              !store_fault.empty() || ingester->queued_bytes() > opts.max_ingest_backlog_bytes;
          if (store_behind) scheduler.NoteAsked(dev->model, now);  // served once the store is back
          auto unit = store_behind ? std::nullopt : scheduler.Lease(identity, dev->model, now);
          if (!unit) {
            Send(identity, NoWork{NoWorkRetryMs(workers.size())});
            return;
          }
          unit->device_index = cmd.device_index;
          leases++;
          leases_retried += unit->attempt > 1 ? 1 : 0;
          BookLease(*unit, dev->model, peer);
          Log(log::Level::kDebug, "lease",
              {{"sweep", unit->sweep_id}, {"unit", std::to_string(unit->unit_id)}, {"op", unit->op},
               {"dtype", unit->dtype}, {"shape", unit->shapes.empty() ? "" : unit->shapes[0].Canonical()},
               {"configs", std::to_string(unit->configs.size())}, {"worker", peer.name}});
          Send(identity, std::move(*unit));
        } else if constexpr (std::is_same_v<T, tune::Disconnect>) {
          Log(log::Level::kInfo, "worker left",
              {{"worker", wit != workers.end() ? wit->second.name : Printable(identity)}, {"reason", cmd.reason}});
          DropWorker(identity);
        } else {
          Disconnect(identity, std::string("unexpected command ") + CommandName(env.command));
        }
      },
      env.command);
}

// Hands a sweep's space expansion to the expander thread: enumerating a
// space of millions of raw points takes seconds, which the loop's leases
// and heartbeats cannot wait for.
void Coordinator::Impl::Expand(SpaceExpansion job) {
  Log(log::Level::kDebug, "expanding config spaces", {{"sweep", job.sweep_id}, {"model", job.device.model}});
  expander->Post([this, job = std::move(job)]() -> OffLoop::Completion {
    const auto start = std::chrono::steady_clock::now();
    auto space = std::make_shared<Result<ExpandedSpace>>(ExpandSpace(job));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return [this, id = job.sweep_id, model = job.device.model, space, seconds] {
      if (space->ok()) {
        Log(log::Level::kInfo, "config spaces expanded",
            {{"sweep", id}, {"model", model}, {"pairs", std::to_string((*space)->pairs_total)},
             {"stored_before", std::to_string((*space)->pairs_done)}, {"seconds", std::to_string(seconds)}});
      }
      scheduler.ApplyExpansion(id, model, std::move(*space), std::time(nullptr));
    };
  });
}

void Coordinator::Impl::RecordEndedSweeps() {
  for (const auto& [id, s] : scheduler.sweeps()) {
    if (s.state == RunState::kRunning || !ended_sweeps.insert(id).second) continue;
    PersistSweep(id);
    ForgetLeases(id);
    if (s.error.empty()) Log(log::Level::kInfo, std::string("sweep ") + RunStateName(s.state), {{"sweep", id}});
    else Log(log::Level::kWarn, std::string("sweep ") + RunStateName(s.state), {{"sweep", id}, {"error", s.error}});
  }
}

// Sweeps that were running when the last coordinator stopped (or was
// killed) run on; configs whose every shape is stored are not leased again.
Status Coordinator::Impl::ResumeSweeps() {
  std::vector<std::pair<std::string, SweepRecord>> running;
  Status st = store->ForEachSweep([&](const std::string& id, const std::string& bytes) {
    auto rec = DecodeSweepRecord(bytes);
    if (!rec.ok()) {
      Log(log::Level::kWarn, "skipping an unreadable sweep", {{"sweep", id}, {"error", rec.status().message()}});
      return;
    }
    if (rec->state == "running") running.emplace_back(id, std::move(rec).value());
  });
  TUNE_RETURN_IF_ERROR(st);
  for (auto& [id, rec] : running) {
    auto r = scheduler.AddSweep(rec.submit, id, std::time(nullptr), Measured());
    if (!r.ok()) {
      // Failed for good rather than tried again on every start.
      Log(log::Level::kError, "sweep cannot resume; marked failed", {{"sweep", id}, {"error", r.status().message()}});
      Status st = store->PutSweep(id, EncodeSweepRecord({"failed", rec.submit}));
      if (!st.ok()) Log(log::Level::kError, "cannot mark the sweep failed", {{"sweep", id}, {"error", st.message()}});
    } else {
      RecordOps(id, rec.submit);  // a coordinator stopped between the sweep and its op records
      Log(log::Level::kInfo, "resuming sweep", {{"sweep", id}, {"name", rec.submit.name}});
    }
  }
  return Status::OK();
}

void Coordinator::Impl::Tick(double now) {
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
  worker_deaths += dead.size();
  for (const auto& id : dead) {
    Log(log::Level::kWarn, "worker missed its heartbeats; its leases go back to the queue",
        {{"worker", workers[id].name}, {"heartbeats", std::to_string(opts.liveness)}});
    DropWorker(id);
  }
  const size_t expired = scheduler.ExpireLeases(now, std::time(nullptr));
  leases_expired += expired;
  if (expired) Log(log::Level::kInfo, "leases expired", {{"leases", std::to_string(expired)}});
  for (const auto& s : scheduler.SkipQuietModels(now, std::time(nullptr))) {
    Log(log::Level::kWarn, "sweep stops waiting for a GPU model whose devices take no work",
        {{"sweep", s.sweep_id}, {"model", s.model}, {"why", s.why}});
  }
  RecordEndedSweeps();
  MaybeRecoverStore(now);
  if (http && now - last_publish >= 1.0) {
    PublishSnapshot(now);
    last_publish = now;
  }
}


Coordinator::Coordinator(CoordinatorOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {}
Coordinator::~Coordinator() = default;

Status Coordinator::Start() {
  auto store = ResultStore::Open(impl_->opts.store_path, StoreOpenOptions{.recover = impl_->opts.store_recover});
  if (!store.ok()) return store.status();
  impl_->store = std::move(store).value();
  if (!impl_->store->recovery_report().empty()) impl_->Log(log::Level::kWarn, impl_->store->recovery_report());
  impl_->store->set_min_free_bytes(impl_->opts.store_reserve_bytes);
  if (impl_->opts.store_reserve_bytes < kMinStoreReserveBytes) {
    impl_->Log(log::Level::kWarn, "store reserve raised to its floor: a full disk would abort RocksDB",
               {{"asked_mib", std::to_string(impl_->opts.store_reserve_bytes >> 20)},
                {"reserve_mib", std::to_string(impl_->store->min_free_bytes() >> 20)}});
  }
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
  impl_->snapshotter = std::make_unique<OffLoop>("snapshot");
  TUNE_RETURN_IF_ERROR(impl_->snapshotter->Start());
  impl_->submit_rate = SubmitRate(impl_->opts.max_sweeps_per_minute);
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
    ho.page = DashboardPage();
    ho.documents = DashboardDocuments();
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
    if (impl_->opts.alive) impl_->opts.alive();
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
          std::string client = key;
          if (client.empty() && std::holds_alternative<SweepSubmit>(env->command)) client = PeerAddress(parts[0]);
          impl_->Handle(id, key, client, std::move(env).value());
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
