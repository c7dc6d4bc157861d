#include "coordinator.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <zmq.hpp>

#include "coordinator_impl.h"
#include "base/text.h"
#include "wire/liveness.h"

namespace tune {
namespace {

// How often a store that refused writes is tried again.
constexpr double kStoreRetrySeconds = 2;

}  // namespace

std::string Printable(const std::string& identity) { return HexOf(identity.data(), identity.size()); }

void CoordinatorLog(log::Level level, const std::string& message, std::initializer_list<log::Field> fields) {
  log::Write(level, "coordinator", message, fields);
}

void StoreHealth::Failed(const std::string& what, double now) {
  if (fault_.empty()) {
    CoordinatorLog(log::Level::kError, "store writes fail; leasing stops until they succeed", {{"error", what}});
  }
  fault_ = what;
  retry_at_ = now + kStoreRetrySeconds;
}

void StoreHealth::MaybeRecover(ResultStore& store, double now) {
  if (fault_.empty() || now < retry_at_) return;
  Status st = store.Recover();
  if (!st.ok()) {
    retry_at_ = now + kStoreRetrySeconds;
    return;
  }
  CoordinatorLog(log::Level::kWarn, "store writes succeed again; leasing resumes");
  fault_.clear();
}

// What a peer of `role` may send: workers what keeps a worker going,
// clients sweeps, builders what keeps a builder going (hello, heartbeats,
// build requests and their images) and nothing else; workers and clients
// may ask for status, and any may say goodbye.
Status MayUse(PeerRole role, const Command& cmd) {
  const bool session = std::holds_alternative<Hello>(cmd) || std::holds_alternative<Heartbeat>(cmd);
  const bool worker_only = std::holds_alternative<RequestWork>(cmd) || std::holds_alternative<Results>(cmd) ||
                           std::holds_alternative<ImageRequest>(cmd);
  const bool builder_only = std::holds_alternative<BuildRequest>(cmd) || std::holds_alternative<BuiltImages>(cmd);
  const bool client_only = std::holds_alternative<SweepSubmit>(cmd) || std::holds_alternative<SweepCancel>(cmd) ||
                           std::holds_alternative<StoreRead>(cmd);
  bool may = true;
  switch (role) {
    case PeerRole::kWorker: may = !client_only && !builder_only; break;
    case PeerRole::kClient: may = !session && !worker_only && !builder_only; break;
    case PeerRole::kBuilder:
      may = session || builder_only || std::holds_alternative<tune::Disconnect>(cmd);
      break;
  }
  if (!may) return Status::Error(std::string("a ") + PeerRoleName(role) + " key may not send " + CommandName(cmd));
  return Status::OK();
}

// Why a hello does not fit the role of its key (`role`, nullopt without
// CURVE), or "": a builder key says hello as a builder and a worker key as
// a worker; a builder needs CURVE, since its images are served on its
// key's word.
static std::string HelloFault(const std::optional<PeerRole>& role, const Hello& hello) {
  if (!role && hello.builder())
    return "builders need CURVE: their images are served on the word of a key on the builder allow-list";
  if (role == PeerRole::kBuilder && !hello.builder())
    return "a builder key says hello as a builder (worker --compile-only --arch ...)";
  if (role == PeerRole::kWorker && hello.builder())
    return "a worker key may not say hello as a builder: put it on the builder allow-list";
  if (hello.builder()) return CheckBuilderHello(hello);
  return "";
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

// Whether the store has room for `submit`'s op packages (limits.h
// kDefaultMaxStoredPackageBytes, kMaxSubmitNewPackageBytes), pruning those
// no running sweep and no stored row needs when it has not: the line a
// refused submit is answered with otherwise. Before the sweep is accepted,
// so that a refused one leaves nothing behind.
static Status AdmitOpPackages(ResultStore& store, const Scheduler& scheduler, const SweepSubmit& submit,
                              uint64_t bound, uint64_t budget, uint64_t* new_bytes) {
  std::vector<std::pair<std::string, OpPackage>> incoming;
  uint64_t bytes = 0;
  for (size_t i = 0; i < submit.ops.size() && i < submit.op_packages.size(); ++i) {
    incoming.emplace_back(submit.ops[i], submit.op_packages[i]);
    for (const auto& [name, text] : submit.op_packages[i]) bytes += name.size() + text.size();
  }
  // A package stored already is no new bytes: only the per-submit bound
  // counts them all, which is what a client can send anyway.
  if (bytes > kMaxSubmitNewPackageBytes)
    return Status::InvalidArgument("op packages: the sweep brings " + std::to_string(bytes >> 20) +
                                   " MiB of op packages, over the " + std::to_string(kMaxSubmitNewPackageBytes >> 20) +
                                   " MiB one submit may bring");
  std::set<std::string> needed;
  for (const auto& [id, sweep] : scheduler.sweeps()) {
    if (sweep.state != RunState::kRunning) continue;
    for (const OpPackage& p : sweep.submit.op_packages) needed.insert(PackageDigest(p));
  }
  auto removed = store.MakeRoomForOps(incoming, bound, needed, budget, new_bytes);
  if (!removed.ok()) return removed.status();
  if (*removed > 0)
    CoordinatorLog(log::Level::kInfo, "op packages pruned to make room", {{"packages", *removed},
                                                                          {"bound_mib", bound >> 20}});
  return Status::OK();
}

uint32_t NoWorkRetryMs(size_t workers) {
  // About 5,000 idle requests/s over the farm at most (coordinator.h).
  constexpr double kIdleRequestsPerSecond = 5000;
  return static_cast<uint32_t>(std::clamp(1000.0 * double(workers) / kIdleRequestsPerSecond, 20.0, 1000.0));
}

void Coordinator::Impl::Send(const std::string& identity, Command cmd) {
  if (Status st = router->SendFrame(framer.Frame(std::move(cmd)), identity); !st.ok())
    CoordinatorLog(log::Level::kWarn, "send failed", {{"peer", Printable(identity)}, {"error", st.message()}});
  sessions.NoteSent(identity, opts.env->NowSeconds());
}

void Coordinator::Impl::Disconnect(const std::string& identity, const std::string& reason) {
  CoordinatorLog(log::Level::kInfo, "disconnect", {{"peer", Printable(identity)}, {"reason", reason}});
  counters.dropped_messages++;
  Send(identity, tune::Disconnect{reason});
  sessions.Drop(identity);
}

void Coordinator::Impl::ProtocolError(const std::string& identity, const std::string& reason) {
  counters.protocol_errors++;
  Disconnect(identity, reason);
}

void Coordinator::Impl::Handle(const std::string& identity, const std::string& key, const std::string& client,
                               Envelope env) {
  const double now = opts.env->NowSeconds();
  WorkerSession* session = sessions.Heard(identity, now);

  std::visit(
      [&](auto& cmd) {
        using T = std::decay_t<decltype(cmd)>;
        if constexpr (std::is_same_v<T, Hello>) {
          if (Status st = CheckDevices(cmd.devices); !st.ok()) return ProtocolError(identity, "hello: " + st.message());
          // Names are the workers' labels in rows, logs and metrics: one
          // live worker per name. A session of the name gone silent is a
          // worker that restarted: it gives way (its leases go back).
          std::vector<std::string> stale;
          for (const auto& [other, s] : sessions.all()) {
            if (other == identity || s.name != cmd.worker_name) continue;
            if (!Liveness::Gone(s.last_seen, now, opts.heartbeat_ms * 1e-3, opts.liveness))
              return Disconnect(identity, "a live worker is already named '" + cmd.worker_name +
                                              "': give each worker a --name of its own");
            stale.push_back(other);
          }
          for (const std::string& other : stale) sessions.Drop(other);
          sessions.Start(identity, cmd, key, now);
          if (cmd.builder())
            CoordinatorLog(log::Level::kInfo, "hello",
                           {{"builder", cmd.worker_name}, {"archs", Join(cmd.builder_archs, ",")},
                            {"toolchain", cmd.builder_toolchain}});
          else
            CoordinatorLog(log::Level::kInfo, "hello",
                           {{"worker", cmd.worker_name}, {"devices", cmd.devices.size()}});
          Send(identity, HelloAck{opts.heartbeat_ms, opts.liveness});
        } else if constexpr (std::is_same_v<T, SweepSubmit>) {
          // A client's share of new package bytes over the last hour.
          auto& brought = package_bytes_by_client[client];
          while (!brought.empty() && now - brought.front().first > 3600) brought.pop_front();
          uint64_t used = 0;
          for (const auto& [when, bytes] : brought) used += bytes;
          const uint64_t limit = opts.max_package_bytes_per_client_hour;
          uint64_t added = 0;
          if (Status st = AdmitOpPackages(*store, scheduler, cmd, opts.max_stored_package_bytes,
                                          limit - std::min(used, limit), &added);
              !st.ok()) {
            const std::string why = st.message() + (added > limit - std::min(used, limit)
                                                        ? " (--max-package-bytes-per-client-hour)" : "");
            CoordinatorLog(log::Level::kInfo, "sweep refused", {{"name", cmd.name}, {"error", why}});
            return Send(identity, ErrorReply{why});
          }
          if (added) brought.emplace_back(now, added);
          if (brought.empty()) package_bytes_by_client.erase(client);
          Send(identity, sweeps->Submit(cmd, client, now));
        } else if constexpr (std::is_same_v<T, SweepCancel>) {
          Send(identity, sweeps->Cancel(cmd.sweep_id));
        } else if constexpr (std::is_same_v<T, SweepStatusRequest>) {
          Send(identity, sweeps->StatusReply(cmd.sweep_id));
        } else if constexpr (std::is_same_v<T, StoreRead>) {
          reads->Handle(identity, client, cmd, now);
        } else if constexpr (std::is_same_v<T, Heartbeat>) {
          if (!session) Disconnect(identity, "unknown worker: say hello first");
        } else if constexpr (std::is_same_v<T, RequestWork>) {
          if (!session) return Disconnect(identity, "unknown worker: say hello first");
          HandleRequestWork(identity, *session, cmd.device_index, now);
        } else if constexpr (std::is_same_v<T, ImageRequest>) {
          if (!session) return Disconnect(identity, "unknown worker: say hello first");
          images->Handle(identity, *session, cmd, now);
        } else if constexpr (std::is_same_v<T, BuildRequest>) {
          if (!session || !session->builder()) return Disconnect(identity, "not a builder: say hello as one first");
          builds->Request(identity, *session, cmd, now, opts.env->NowUnixSeconds());
        } else if constexpr (std::is_same_v<T, BuiltImages>) {
          if (!session || !session->builder()) return Disconnect(identity, "not a builder: say hello as one first");
          builds->Built(identity, *session, std::move(cmd), now);
        } else if constexpr (std::is_same_v<T, tune::Disconnect>) {
          CoordinatorLog(log::Level::kInfo, "worker left",
                         {{"worker", session ? session->name : Printable(identity)}, {"reason", cmd.reason}});
          sessions.Drop(identity);
        } else {
          Disconnect(identity, std::string("unexpected command ") + CommandName(env.command));
        }
      },
      env.command);
}

void Coordinator::Impl::HandleRequestWork(const std::string& identity, WorkerSession& session, int device_index,
                                          double now) {
  const DeviceInfo* dev = session.Device(device_index);
  if (!dev) return Disconnect(identity, "request for unknown device " + std::to_string(device_index));
  sessions.Serve(session, *dev);
  auto unit = ingestion->Lease(identity, session, *dev, now);
  if (!unit) return Send(identity, NoWork{NoWorkRetryMs(sessions.size())});
  Send(identity, std::move(*unit));
}

void Coordinator::Impl::Tick(double now) {
  // Silent peers' keys are looked at once a second (a key's messages are
  // checked as they arrive): the allow-lists are re-read every 2 s anyway.
  std::function<bool(const std::string&)> still_worker;
  if (zap && now - last_key_check >= 1.0) {
    last_key_check = now;
    // A builder's session is a builder key's (its hello said so, and its
    // commands are checked against its key's role as they come).
    still_worker = [this](const std::string& key) {
      const auto role = zap->RoleOf(key);
      return role == PeerRole::kWorker || role == PeerRole::kBuilder;
    };
  }
  const WorkerSessions::Due due = sessions.Check(now, opts.heartbeat_ms / 1000.0, opts.liveness, still_worker);
  for (const auto& id : due.quiet) Send(id, Heartbeat{});
  for (const auto& id : due.revoked) {
    const WorkerSession* s = sessions.Find(id);
    Disconnect(id, "key " + (s ? s->key : std::string()) + " is no longer on the " +
                       (s && s->builder() ? "builder" : "worker") + " allow-list");
  }
  for (const auto& id : due.dead) {
    const WorkerSession* s = sessions.Find(id);
    CoordinatorLog(log::Level::kWarn, "worker missed its heartbeats; its leases go back to the queue",
                   {{"worker", s ? s->name : std::string()}, {"heartbeats", opts.liveness}});
    sessions.Drop(id);
  }
  const size_t expired = scheduler.ExpireLeases(now, opts.env->NowUnixSeconds());
  counters.leases_expired += expired;
  if (expired) CoordinatorLog(log::Level::kInfo, "leases expired", {{"leases", expired}});
  for (const auto& s : scheduler.SkipQuietModels(now, opts.env->NowUnixSeconds())) {
    CoordinatorLog(log::Level::kWarn, "sweep stops waiting for a GPU model whose devices take no work",
                   {{"sweep", s.sweep_id}, {"model", s.model}, {"why", s.why}});
  }
  sweeps->RecordEnded();
  if (store) health.MaybeRecover(*store, now);
  status->Tick(now);
  reads->Tick(now);
  images->Tick();
  builds->Tick(now);
}

Coordinator::Coordinator(CoordinatorOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {}
Coordinator::~Coordinator() = default;

Status Coordinator::Start() {
  auto store = ResultStore::Open(impl_->opts.store_path, StoreOpenOptions{.recover = impl_->opts.store_recover});
  if (!store.ok()) return store.status();
  impl_->store = std::move(store).value();
  if (!impl_->store->recovery_report().empty()) CoordinatorLog(log::Level::kWarn, impl_->store->recovery_report());
  impl_->store->set_min_free_bytes(impl_->opts.store_reserve_bytes);
  if (impl_->opts.store_reserve_bytes < kMinStoreReserveBytes) {
    CoordinatorLog(log::Level::kWarn, "store reserve raised to its floor: a full disk would abort RocksDB",
                   {{"asked_mib", impl_->opts.store_reserve_bytes >> 20},
                    {"reserve_mib", impl_->store->min_free_bytes() >> 20}});
  }
  // Each run over this store numbers its units in a range of its own
  // (2^32 ids per run): a worker may still send results of a unit that the
  // run before a restart leased, and they must not complete another unit.
  auto run = impl_->store->IncrementCounter("coordinator_runs");
  if (!run.ok()) return run.status();
  impl_->scheduler.NumberUnitsFrom((*run << 32) | 1);
  Impl& c = *impl_;
  c.ingestion = std::make_unique<Ingestion>(&c.opts, c.store.get(), &c.scheduler, &c.sessions, &c.health, &c);
  c.sweeps = std::make_unique<Sweeps>(&c.opts, c.store.get(), &c.scheduler, &c.sessions, c.ingestion.get(), &c.health);
  c.status = std::make_unique<StatusPages>(c.store.get(), &c.scheduler, c.sweeps.get(), &c.sessions,
                                           c.ingestion.get(), &c.health, &c.counters);
  StoreReadsOptions read_options;
  read_options.folder = StoreReadsFolder(c.opts.store_path);
  read_options.max_read_bytes = c.opts.max_read_bytes;
  c.reads = std::make_unique<StoreReads>(c.store.get(), &c, read_options);
  TUNE_RETURN_IF_ERROR(c.sweeps->Start());
  TUNE_RETURN_IF_ERROR(c.ingestion->Start());
  TUNE_RETURN_IF_ERROR(c.reads->Start());
  // The builder allow-list as it is now: read on the image reader's thread
  // (ZapAuthenticator is thread-safe; `zap` is set below, before Run).
  c.images = std::make_unique<ImageService>(c.store.get(), c.ingestion.get(), &c.sessions, &c, &c.counters,
                                            [&c](const std::string& key) {
                                              return c.zap && c.zap->RoleOf(key) == PeerRole::kBuilder;
                                            });
  TUNE_RETURN_IF_ERROR(c.images->Start());
  c.builds = std::make_unique<BuildService>(c.store.get(), &c.scheduler, &c.sessions, &c, &c.counters, c.images.get());
  TUNE_RETURN_IF_ERROR(c.builds->Start());
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
    zo.builder_allow_list_path = o.curve_builder_allow_list;
    zo.log_accepted = o.verbose;
    auto zap = ZapAuthenticator::FromFile(impl_->ctx, o.curve_allow_list, zo);
    if (!zap.ok()) return zap.status();
    impl_->zap = std::move(zap).value();
    TUNE_RETURN_IF_ERROR(impl_->zap->Start());
  } else if (!o.curve_builder_allow_list.empty()) {
    return Status::Error("coordinator: --builder-allow-list needs --curve-key and --allow-list (builders are keys)");
  } else if (!IsLoopbackEndpoint(o.endpoint) && !o.insecure_plaintext) {
    return Status::Error("coordinator: " + o.endpoint +
                         " is not loopback: give --curve-key and --allow-list "
                         "(or --insecure-plaintext on a trusted network)");
  }
  auto router = Link::Router(impl_->ctx, keys ? &*keys : nullptr);
  if (!router.ok()) return router.status();
  impl_->router = std::move(router).value();
  if (Status st = impl_->router->Bind(impl_->opts.endpoint); !st.ok()) return Status::Error("coordinator: " + st.message());
  return impl_->status->Start(o);
}

std::string Coordinator::http_url() const { return impl_->status ? impl_->status->url() : ""; }

std::string Coordinator::bound_endpoint() const {
  return impl_->router ? impl_->router->bound_endpoint() : "";
}

ResultStore* Coordinator::store() { return impl_->store.get(); }

Status Coordinator::Run(const std::atomic<bool>* stop) {
  Link& router = *impl_->router;
  double last_tick = 0;
  while (!stop->load()) {
    if (impl_->opts.alive) impl_->opts.alive();
    zmq::pollitem_t items[] = {{router.socket().handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, impl_->ingestion->wake_fd(), ZMQ_POLLIN, 0},
                               {nullptr, impl_->sweeps->wake_fd(), ZMQ_POLLIN, 0},
                               {nullptr, impl_->reads->wake_fd(), ZMQ_POLLIN, 0},
                               {nullptr, impl_->sweeps->proposals_fd(), ZMQ_POLLIN, 0},
                               {nullptr, impl_->images->wake_fd(), ZMQ_POLLIN, 0},
                               {nullptr, impl_->builds->wake_fd(), ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 7, std::chrono::milliseconds(50));
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
          auto message = router.Receive();
          if (!message) break;
          std::vector<zmq::message_t>& parts = message->frames;
          const std::string& id = message->peer;
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
            if (role == PeerRole::kClient || role == PeerRole::kBuilder) {
              impl_->Disconnect(id, std::string("a ") + PeerRoleName(*role) + " key may not send results (key " +
                                        key + ")");
              continue;
            }
            impl_->ingestion->SubmitResults(id, std::move(parts[0]), **head);
            continue;
          }
          auto env = DecodeEnvelope(parts[0].data(), parts[0].size());
          if (!env.ok()) {
            impl_->ProtocolError(id, "malformed message: " + env.status().message());
            continue;
          }
          if (role) {
            if (Status may = MayUse(*role, env->command); !may.ok()) {
              impl_->Disconnect(id, may.message() + " (key " + key + ")");
              continue;
            }
          }
          if (const auto* hello = std::get_if<Hello>(&env->command)) {
            if (std::string why = HelloFault(role, *hello); !why.empty()) {
              impl_->Disconnect(id, "hello of '" + hello->worker_name + "' refused: " + why +
                                        (key.empty() ? "" : " (key " + key + ")"));
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
    if (items[1].revents & ZMQ_POLLIN) impl_->ingestion->ApplyOutcomes();
    if (items[2].revents & ZMQ_POLLIN) impl_->sweeps->RunCompletions();
    if ((items[1].revents | items[2].revents) & ZMQ_POLLIN) impl_->sweeps->RecordEnded();
    if (items[3].revents & ZMQ_POLLIN) impl_->reads->RunCompletions();
    if (items[4].revents & ZMQ_POLLIN) impl_->sweeps->RunProposals();
    if (items[5].revents & ZMQ_POLLIN) impl_->images->RunCompletions();
    if (items[6].revents & ZMQ_POLLIN) impl_->builds->RunCompletions();
    const double now = impl_->opts.env->NowSeconds();
    if (now - last_tick >= 0.05) {
      impl_->Tick(now);
      last_tick = now;
    }
  }
  for (const auto& [id, session] : impl_->sessions.all()) impl_->Send(id, tune::Disconnect{"coordinator stopping"});
  size_t running = 0;
  for (const auto& p : impl_->scheduler.Progress("", impl_->opts.env->NowSeconds())) running += p.state == "running";
  CoordinatorLog(log::Level::kInfo, "stopping",
                 {{"workers", impl_->sessions.all().size()}, {"sweeps_running", running}});
  return Status::OK();
}

}  // namespace tune
