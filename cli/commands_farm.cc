// The farm's commands: coordinator, worker, runner, submit, status, cancel.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "coordinator_client.h"
#include "base/backend_kinds.h"
#include "report/row_table.h"
#include "report.h"
#include "command_util.h"
#include "commands.h"
#include "progress.h"
#include "service_notify.h"
#include "base/json_text.h"
#include "base/log.h"
#include "opspec/sweep_file.h"
#include "report/pipeline.h"
#include "base/text.h"
#include "builder.h"
#ifdef TUNEFARM_WITH_CUDA
#include "measure/cuda/cuda_backend.h"
#endif

namespace tune {
namespace {

// --config FILE of the long-running commands (read by cli/main.cc,
// ExpandConfigFile): what a service's unit or an operator keeps in one file
// instead of a long command line.
constexpr char kConfigFileHelp[] =
    "Read options from this TOML file: `option = value` per line, long option names without the dashes "
    "(`bind = \"tcp://*:5555\"`, `allow-programs = true`, lists as [\"a\", \"b\"]); the command line wins";

// Sends `request` to the coordinator and returns its SweepStatus answer.
Result<SweepStatus> AskForStatus(const ClientArgs& c, Command request) {
  CoordinatorClient client(c, 10);
  auto reply = client.Call(std::move(request));
  if (!reply.ok()) return reply.status();
  auto* status = std::get_if<SweepStatus>(&*reply);
  if (!status) return Status::Error("coordinator sent an unexpected reply");
  return std::move(*status);
}

}  // namespace

void AddWorkerOptions(CLI::App* app, WorkerArgs* args, bool for_tune) {
  if (!for_tune) {
    app->add_option("--connect", args->opts.endpoint, "Coordinator endpoint")->capture_default_str();
    app->add_option("--name", args->opts.name, "Worker name (default host:pid)");
    app->add_flag("-v,--verbose", args->opts.verbose, "Log units and reconnects to stderr");
    app->add_option("--curve-key", args->opts.curve_secret_key, "CURVE secret key file of this worker");
    app->add_option("--coordinator-key", args->opts.coordinator_public_key,
                    "CURVE public key file of the coordinator");
    app->add_flag("--insecure-plaintext", args->opts.insecure_plaintext,
                  "Allow a non-loopback coordinator without CURVE");
    app->add_option("--http-port", args->opts.http_port,
                    "Serve /metrics (Prometheus) on this port (0 = any free port; off by default)");
    app->add_option("--http-address", args->opts.http_address, "Address for --http-port")->capture_default_str();
    app->add_flag("--allow-programs", args->opts.allow_programs,
                  "Run program ops: the build/run commands of whoever may submit sweeps, as this user "
                  "(docs/program-ops.md)");
    app->add_option("--protect", args->opts.protected_paths,
                    "A file or folder programs may neither read nor write (the worker's configuration); "
                    "repeatable. The --curve-key file is always protected");
    app->add_flag("--allow-unconfined-programs", args->opts.allow_unconfined_programs,
                  "Run program ops even where the kernel cannot confine them (no Landlock)");
  } else {
    args->opts.allow_programs = true;  // tune runs the user's own ops, confined where the kernel can
    args->opts.allow_unconfined_programs = true;
  }
  app->add_flag("--program-namespace,!--no-program-namespace", args->opts.program_namespace,
                "Run each program op in a user and mount namespace of its own: its own /dev/shm, the host's "
                "/run out of sight (on by default where the kernel allows; docs/program-ops.md)")
      ->capture_default_str();
  app->add_option("--backend", args->opts.backend,
                  "auto (the CUDA devices; an error where there is none), cuda, or sim (simulated GPUs: only "
                  "when asked)")
      ->capture_default_str()
      ->check([](const std::string& v) {
        return v == "auto" || FindBackendKind(v) ? std::string() : "auto, " + BackendNamesText();
      });
  app->add_option("--sim-models", args->sim_models,
                  "sim: simulated GPU models, one device each (h100,h200,a100,l40s)")
      ->capture_default_str();
  app->add_option("--sim-faults", args->opts.sim_faults,
                  "sim: injected faults, e.g. compile=0.02,crash=0.01,hang=0.01,wrong=0.01,nan=0.01,busy=0.001");
  app->add_option("--sim-compile", args->opts.sim_compile,
                  "sim: how configs compile: sim (at once, no image) or nvrtc (for real with this host's NVRTC "
                  "for the simulated model's architecture, cubin cache included; only the timing is simulated)")
      ->capture_default_str()
      ->check(CLI::IsMember({"sim", "nvrtc"}));
  app->add_option("--sim-truth", args->sim_truth,
                  "sim: a `tunefarm results --format csv` file (.csv or .csv.gz): a config it has a figure for "
                  "(same op, dtype, shape; GPU model sim-<model> or the one simulated, h100-80gb-hbm3) times "
                  "at its median, any other at the cost model's; rows stay SIMULATED");
  app->add_option("--devices", args->devices, "cuda: device ordinals to use, e.g. 0,1 (default all)");
  app->add_option("--compile-threads", args->opts.compile_threads, "NVRTC threads (0 = one per core)")
      ->capture_default_str();
  app->add_option("--cache-dir", args->opts.cache_dir, "On-disk cubin cache (default ~/.cache/tunefarm)");
  app->add_option("--max-package-cache-bytes", args->opts.max_package_cache_bytes,
                  "Bytes of op packages kept unpacked under the cache; past it the least recently used go")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app->add_option("--include-root", args->include_roots,
                  "NAME=PATH: where ops that name include root NAME (a CUTLASS checkout) find it; repeatable");
  app->add_option("--timeout", args->opts.timing.timeout_seconds, "Wall-clock limit per config, seconds")
      ->capture_default_str();
  app->add_option("--max-seconds", args->opts.timing.max_seconds, "Timed work cap per (config, shape)")
      ->capture_default_str();
  app->add_option("--rank-ci", args->opts.timing.rank_rel_ci,
                  "CI target (fraction of the mean) of screening; with one pass, of configs more than "
                  "--refine-within behind the best so far")
      ->capture_default_str();
  app->add_option("--early-stop-factor", args->opts.timing.early_stop_factor,
                  "A config whose median after the minimum samples is this many times the best so far "
                  "stops there (0 = never)")
      ->capture_default_str();
  app->add_option("--refine-within", args->opts.timing.refine_within,
                  "Configs within this fraction of the best are contenders: timed to a 1% CI and in the "
                  "--refine-seconds window (the refine pass; with one pass, against the best so far)")
      ->capture_default_str();
  app->add_option("--refine-seconds", args->opts.timing.refine_seconds,
                  "cuda: time each contender again for this long, back to back, and keep that "
                  "window's median (steady clocks; 0 = off)")
      ->capture_default_str();
  app->add_option("--energy-seconds", args->opts.timing.energy_seconds,
                  "Measure energy per call and mean power after each timing: this many seconds of "
                  "back-to-back calls with the board's energy counter (NVML) read around them; sim: its "
                  "power model (0 = off; read only, clocks and limits are never set)")
      ->check(CLI::Range(0.0, kMaxEnergySeconds))
      ->capture_default_str();
}

CLI::Option* AddConnectTimeoutOption(CLI::App* app, ClientArgs* args) {
  return app
      ->add_option("--connect-timeout", args->connect_seconds,
                   "Seconds to wait for the coordinator's connection and handshake before saying it is not "
                   "there or does not answer (a paused or overloaded coordinator)")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
}

void AddClientOptions(CLI::App* app, ClientArgs* args) {
  app->add_option("--coordinator", args->endpoint, "Coordinator endpoint")->capture_default_str();
  app->add_option("--curve-key", args->curve_secret_key, "CURVE secret key file of this client");
  app->add_option("--coordinator-key", args->coordinator_key, "CURVE public key file of the coordinator");
  AddConnectTimeoutOption(app, args);
}

int RunCoordinator(CoordinatorArgs& args, const std::atomic<bool>* stop) {
  args.opts.max_ingest_backlog_bytes = args.max_ingest_backlog_mib << 20;
  args.opts.max_ingest_queue_bytes = args.max_ingest_queue_mib << 20;
  args.opts.store_reserve_bytes = args.store_reserve_mib << 20;
  ServiceWatchdog watchdog;
  args.opts.alive = [&watchdog] { watchdog.Alive(); };
  Coordinator coord(args.opts);
  Status st = coord.Start();
  if (!st.ok()) return Fail(st.message());
  // Through the log, so that --log-format json writes nothing but JSON lines.
  log::Info("coordinator", "serving",
            {{"endpoint", coord.bound_endpoint()}, {"store", args.opts.store_path}, {"dashboard", coord.http_url()}});
  // Units ordered after the coordinator (workers, the nightly sweep) start
  // once it serves, not once its process exists (Type=notify).
  NotifyServiceManager("READY=1\nSTATUS=serving on " + coord.bound_endpoint());
  st = coord.Run(stop);
  NotifyServiceManager("STOPPING=1");
  return st.ok() ? 0 : Fail(st.message());
}

int RunWorker(WorkerArgs& args, const std::atomic<bool>* stop) {
  Status st = FinishWorkerArgs(args);
  if (!st.ok()) return Fail(st.message());
  ServiceWatchdog watchdog;
  args.opts.alive = [&watchdog] { watchdog.Alive(); };
  Worker worker(args.opts);
  st = worker.Start();
  if (!st.ok()) return Fail(st.message());
  for (const auto& d : worker.devices()) {
    log::Info("worker", IsSimulatedBackend(d.backend) ? "device (SIMULATED)" : "device",
              {{"device", std::to_string(d.index)}, {"name", d.name}, {"model", d.model}, {"backend", d.backend}});
  }
  if (!worker.http_url().empty()) log::Info("worker", "metrics", {{"url", worker.http_url() + "metrics"}});
  NotifyServiceManager("READY=1\nSTATUS=" + std::to_string(worker.devices().size()) + " device(s)");
  st = worker.Run(stop);
  NotifyServiceManager("STOPPING=1");
  return st.ok() ? 0 : Fail(st.message());
}

// `worker --compile-only --arch ...`: a builder (worker/builder.h). Only
// the options a builder uses may be given; the rest are a GPU worker's.
int RunBuilder(WorkerArgs& args, const std::vector<std::string>& archs, CLI::App* app,
               const std::atomic<bool>* stop) {
  for (const char* gpu_only : {"--backend", "--sim-models", "--sim-faults", "--sim-compile", "--sim-truth", "--devices",
                               "--include-root", "--allow-programs", "--timeout", "--max-seconds"}) {
    if (app->get_option(gpu_only)->count() > 0)
      return Usage(std::string("worker --compile-only: ") + gpu_only + " is for a worker with devices");
  }
  auto parsed = ParseBuilderArchs(SplitList(Join(archs, ",")));
  if (!parsed.ok()) return Usage("worker --compile-only: " + parsed.status().message());
  BuilderOptions o;
  o.endpoint = args.opts.endpoint;
  o.name = args.opts.name;
  o.archs = *parsed;
  o.compile_threads = args.opts.compile_threads;
  o.cache_dir = args.opts.cache_dir;
  o.curve_secret_key = args.opts.curve_secret_key;
  o.coordinator_public_key = args.opts.coordinator_public_key;
  o.insecure_plaintext = args.opts.insecure_plaintext;
  o.http_address = args.opts.http_address;
  o.http_port = args.opts.http_port;
  ServiceWatchdog watchdog;
  o.alive = [&watchdog] { watchdog.Alive(); };
  Builder builder(o);
  Status st = builder.Start();
  if (!st.ok()) return Fail(st.message());
  std::fprintf(stderr, "tunefarm builder: compiles for %s (no devices)\n", Join(o.archs, ", ").c_str());
  if (!builder.http_url().empty()) std::fprintf(stderr, "metrics: %smetrics\n", builder.http_url().c_str());
  NotifyServiceManager("READY=1\nSTATUS=builder for " + Join(o.archs, ","));
  st = builder.Run(stop);
  NotifyServiceManager("STOPPING=1");
  return st.ok() ? 0 : Fail(st.message());
}

int RunRunner(int device) {
#ifdef TUNEFARM_WITH_CUDA
  return RunnerMain(device, 0, 1);
#else
  (void)device;
  return Fail("runner: built without the CUDA toolkit");
#endif
}

// Waits for a sweep (submit --wait, status --wait) and says how it ended.
int WaitAndReport(const ClientArgs& c, const std::string& sweep_id, double timeout, const std::atomic<bool>* stop,
                  bool json = false) {
  auto done = WaitForSweep(c, sweep_id, false, stop, 0.1, timeout);
  if (!done.ok()) return Fail(done.status().message());
  if (json) {  // stdout holds the one document: the sweep as `status --format json` gives it
    SweepStatus one;
    one.sweeps.push_back(*done);
    std::printf("%s\n", DumpJson(StatusJson(one)["sweeps"][0], 2).c_str());
  } else if (done->state == "done" && done->units_total == 0 && done->pairs_total > 0) {
    std::printf("already measured: %llu (config, shape) pairs stored, nothing to do\n",
                static_cast<unsigned long long>(done->pairs_done));
  } else if (done->state == "done") {
    const int64_t took = done->finished_unix > done->started_unix ? done->finished_unix - done->started_unix : 0;
    // The coordinator's store is read through it (remote reads): the hint
    // works from this host, whatever the store's path over there.
    const std::string from = FarmFlags(c);
    std::printf("done: %llu pairs measured (%llu failed) on %s in %s\n"
                "failures: %s\n"
                "next: tunefarm results %s\n"
                "      tunefarm compare %s\n"
                "      tunefarm publish %s --out bundles/%s\n",
                static_cast<unsigned long long>(done->pairs_done), static_cast<unsigned long long>(done->pairs_failed),
                Join(done->gpu_models, ", ").c_str(), FormatDuration(double(took)).c_str(),
                FormatFailures(done->failed_by_class).c_str(), from.c_str(), from.c_str(), from.c_str(),
                done->name.c_str());
  }
  if (done->state == "done") return 0;
  return Fail("sweep " + sweep_id + " " + done->state + (done->error.empty() ? "" : ": " + done->error));
}

int RunSubmit(const SubmitArgs& args, const std::atomic<bool>* stop) {
  auto sweep = LoadSweepFile(args.sweep_file, args.ops_dir.empty() ? DefaultOpsDir() : args.ops_dir);
  if (!sweep.ok()) return Fail(sweep.status().message());
  if (Status st = ApplyRetry(args.retry, &*sweep); !st.ok()) return Usage(st.message());
  if (args.priority) {
    if (Status st = CheckSweepPriority(*args.priority, "--priority"); !st.ok()) return Usage(st.message());
    sweep->priority = static_cast<uint32_t>(*args.priority);
  }
  const ClientArgs& c = args.client;
  CoordinatorClient client(c, 10);
  auto reply = client.Call(*sweep);
  if (!reply.ok()) return Fail(reply.status().message());
  auto* accepted = std::get_if<SweepAccepted>(&*reply);
  if (!accepted) return Fail("coordinator sent an unexpected reply");
  const bool json = args.format == "json";
  if (!json) std::printf("%s\n", accepted->sweep_id.c_str());
  if (!args.wait) {
    if (json) std::printf("%s\n", DumpJson(nlohmann::json{{"sweep_id", accepted->sweep_id}}, 2).c_str());
    return 0;
  }
  std::fflush(stdout);
  return WaitAndReport(c, accepted->sweep_id, args.timeout, stop, json);
}

int RunCancel(const StatusArgs& args) {
  auto status = AskForStatus(args.client, SweepCancel{args.sweep_id});
  if (!status.ok()) return Fail(status.status().message());
  if (status->sweeps.empty()) return Fail("coordinator sent an unexpected reply");
  const SweepProgress& p = status->sweeps.front();
  // A sweep that ended before (done or failed) is left as it was: nothing
  // is stopped, which is what the command asked for, so it answers 0.
  if (p.state != "cancelled") {
    std::printf("sweep %s is %s already, nothing to cancel: %llu of %llu (config, shape) pairs stored\n",
                p.sweep_id.c_str(), p.state.c_str(), (unsigned long long)p.pairs_done,
                (unsigned long long)p.pairs_total);
    return 0;
  }
  std::printf("sweep %s %s: %llu of %llu (config, shape) pairs stored, they stay in the store\n", p.sweep_id.c_str(),
              p.state.c_str(), (unsigned long long)p.pairs_done, (unsigned long long)p.pairs_total);
  return 0;
}

namespace {

// The coordinator's answer for people (a line per sweep, what it waits for
// and how its pipeline runs under it) and for CSV (a row per sweep); JSON
// is StatusJson's document.
RowReport StatusReport(const SweepStatus& status) {
  RowReport report;
  report.head.push_back(std::to_string(status.workers) + " worker(s)");
  if (!status.store_fault.empty())
    report.head.push_back("store writes fail, no leasing until they succeed: " + ToValidUtf8(status.store_fault));
  RowTable& table = report.sections.emplace_back().table;
  table.columns = {{"sweep"}, {"name"}, {"state"}, {"priority", true}, {"units", true}, {"pairs", true},
                   {"failed", true}, {"gpu models"}};
  report.rows.columns = {{"sweep"}, {"name"}, {"state"}, {"units_done"}, {"units_total"}, {"pairs_done"},
                         {"pairs_total"}, {"pairs_failed"}, {"gpu_models"}, {"waiting_for"}, {"error"}, {"priority"}};
  for (const auto& p : status.sweeps) {
    auto count = [](uint64_t n) { return IntegerCell(static_cast<int64_t>(n)); };
    table.rows.push_back({TextCell(p.sweep_id), TextCell(ToValidUtf8(p.name)), TextCell(p.state),
                          IntegerCell(p.priority), TextCell(Fmt("%llu/%llu", (unsigned long long)p.units_done,
                                                                (unsigned long long)p.units_total)),
                          TextCell(Fmt("%llu/%llu", (unsigned long long)p.pairs_done,
                                       (unsigned long long)p.pairs_total)),
                          count(p.pairs_failed), TextCell(Join(p.gpu_models))});
    auto& under = table.under[table.rows.size() - 1];
    if (!p.error.empty()) under.push_back("failed: " + ToValidUtf8(p.error));
    if (!p.failed_by_class.empty()) under.push_back("failures: " + FormatFailures(p.failed_by_class));
    // A coordinator that says what it waits for in words; an older one names the models.
    for (const auto& why : p.waits) under.push_back("waiting for " + ToValidUtf8(why));
    if (p.waits.empty() && !p.waiting_for.empty())
      under.push_back("waiting for " + Join(p.waiting_for) + ": no live worker has it");
    for (const auto& why : p.skipped) under.push_back("skipped " + ToValidUtf8(why));
    if (!p.expanding.empty()) under.push_back("expanding the config spaces for " + Join(p.expanding));
    if (const std::string line = PipelineLine(p.pipeline, p.in_flight, p.in_flight_depth); !line.empty())
      under.push_back("pipeline: " + line);
    if (under.empty()) table.under.erase(table.rows.size() - 1);
    report.rows.rows.push_back({TextCell(p.sweep_id), TextCell(ToValidUtf8(p.name)), TextCell(p.state),
                                count(p.units_done), count(p.units_total), count(p.pairs_done), count(p.pairs_total),
                                count(p.pairs_failed), TextCell(Join(p.gpu_models, " ")),
                                TextCell(Join(p.waiting_for, " ")), TextCell(ToValidUtf8(p.error)),
                                IntegerCell(p.priority)});
  }
  return report;
}

}  // namespace

int RunStatus(const StatusArgs& args, const std::atomic<bool>* stop) {
  if (args.wait) {
    if (args.sweep_id.empty()) return Usage("status --wait: name the sweep to wait for");
    return WaitAndReport(args.client, args.sweep_id, args.timeout, stop, args.format == "json");
  }
  auto status = AskForStatus(args.client, SweepStatusRequest{args.sweep_id});
  if (!status.ok()) return Fail(status.status().message());
  if (args.format == "json") {
    std::printf("%s\n", DumpJson(StatusJson(*status), 2).c_str());
    return 0;
  }
  RowFormat format = RowFormat::kTable;
  (void)ParseRowFormat(args.format, &format);  // checked at parse (AddFormatOption)
  std::fputs(RenderReport(StatusReport(*status), format).c_str(), stdout);
  return 0;
}

void AddFarmCommands(CLI::App& app, std::vector<CliCommand>* out) {
  // The parsed values outlive this call: the commands in `out` own them.
  struct Parsed {
    CoordinatorArgs coord;
    WorkerArgs work;
    std::string config_file;          // --config of coordinator and worker (cli/main.cc expands it)
    bool compile_only = false;        // worker --compile-only: a builder
    std::vector<std::string> archs;   // its --arch
    int runner_device = 0;
    SubmitArgs submit;
    StatusArgs status, cancel;
  };
  const auto parsed = std::make_shared<Parsed>();

  // coordinator
  CoordinatorArgs& coord = parsed->coord;
  auto* c = app.add_subcommand("coordinator", "Run the coordinator (ROUTER socket, store owner)");
  c->add_option("--config", parsed->config_file, kConfigFileHelp)->check(CLI::ExistingFile);
  c->add_option("--bind", coord.opts.endpoint, "ZeroMQ endpoint to bind")->capture_default_str();
  c->add_option("--store", coord.opts.store_path, "RocksDB store directory")->capture_default_str();
  c->add_option("--heartbeat-ms", coord.opts.heartbeat_ms, "Heartbeat interval")->capture_default_str();
  c->add_option("--liveness", coord.opts.liveness, "Missed heartbeats before a worker is dead")->capture_default_str();
  c->add_option("--configs-per-unit", coord.opts.scheduler.configs_per_unit, "Default work unit size")->capture_default_str();
  c->add_option("--search-in-flight", coord.opts.scheduler.search_in_flight,
                "Configs a searched key keeps in flight, proposed and not yet measured (0: sized from the "
                "model's devices and their pace; one batch of 16-64 is lock-step)")
      ->capture_default_str()
      ->check(CLI::Range(0u, 65536u));
  c->add_option("--lease-base", coord.opts.scheduler.lease_base_seconds, "Lease seconds per unit, fixed part")->capture_default_str();
  c->add_option("--lease-per-pair", coord.opts.scheduler.lease_per_pair_seconds, "Lease seconds per (config, shape)")->capture_default_str();
  c->add_option("--max-attempts", coord.opts.scheduler.max_attempts,
                "Leases of one unit before its configs are recorded as failed")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--tail-duplicates", coord.opts.scheduler.tail_duplicates,
                "Let idle workers duplicate straggling units at the end of a sweep (true/false)")
      ->capture_default_str();
  c->add_option("--straggler-age", coord.opts.scheduler.tail_min_age_seconds,
                "Seconds without progress before a unit may count as a straggler")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_option("--straggler-factor", coord.opts.scheduler.tail_slow_factor,
                "A straggler has taken this many times what its peers' pace says it should")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--shrink-tail-units", coord.opts.scheduler.shrink_tail_units,
                "Cut smaller units at the end of a model's configs so that devices finish together (true/false)")
      ->capture_default_str();
  c->add_option("--refine-within", coord.opts.scheduler.refine_within,
                "Refine pass: time again the configs within this fraction of each shape's best screening figure "
                "(the workers' --refine-within)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 10.0));
  c->add_option("--store-reserve-mib", coord.store_reserve_mib,
                "Stop writing (and leasing) while the store's disk has less free space (at least 64)")
      ->capture_default_str();
  c->add_flag("--store-recover", coord.opts.store_recover,
              "Open a store refused for a corrupt write-ahead log or a lost one, keeping what is readable");
  c->add_option("--max-ingest-queue-mib", coord.max_ingest_queue_mib,
                "Results queued for the store at most; a peer past it resends later")
      ->capture_default_str();
  c->add_option("--max-ingest-backlog-mib", coord.max_ingest_backlog_mib,
                "Pause new leases while more than this many MiB of results wait to be stored")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--max-raw-configs", coord.opts.scheduler.max_raw_configs,
                "Refuse sweeps over an op with more raw config points (product of its axes)")
      ->capture_default_str();
  c->add_option("--max-legal-configs", coord.opts.scheduler.max_legal_configs,
                "Fail sweeps over an op with more legal configs on a GPU model")
      ->capture_default_str();
  c->add_option("--model-idle-seconds", coord.opts.scheduler.model_idle_seconds,
                "A GPU model whose devices take no queued work for this long stops holding gpus = [\"*\"] sweeps")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--max-sweep-pairs", coord.opts.scheduler.max_sweep_pairs,
                "Fail sweeps with more (config, shape) pairs on a GPU model: legal configs x shapes x dtypes")
      ->capture_default_str();
  c->add_option("--max-farm-pairs", coord.opts.scheduler.max_farm_pairs,
                "Refuse (or fail) sweeps past this many (config, shape) pairs queued over every running sweep")
      ->capture_default_str();
  c->add_option("--max-sweeps-per-minute", coord.opts.max_sweeps_per_minute,
                "Sweeps a client (CURVE key, or address without CURVE) may submit in any 60 s; 0: no limit")
      ->capture_default_str();
  c->add_option("--max-package-store-bytes", coord.opts.max_stored_package_bytes,
                "Op package bytes the store keeps in all; past it, unneeded ones are pruned, then submits refused")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--max-package-bytes-per-client-hour", coord.opts.max_package_bytes_per_client_hour,
                "New op package bytes a client (CURVE key, or address) may bring to the store per hour")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--max-read-bytes", coord.opts.max_read_bytes,
                "Bytes one remote read (results/publish --coordinator) may export; a larger one is refused")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->add_option("--curve-key", coord.opts.curve_secret_key, "CURVE secret key file (see `keys curve`)");
  c->add_option("--allow-list", coord.opts.curve_allow_list, "File of worker CURVE public keys to admit");
  c->add_option("--client-allow-list", coord.opts.curve_client_allow_list,
                "File of client CURVE public keys to admit (submit, status); a key has one role");
  c->add_option("--builder-allow-list", coord.opts.curve_builder_allow_list,
                "File of builder CURVE public keys to admit (worker --compile-only): they compile what the "
                "GPU workers time next, and their images are served on their key's word; a key has one role");
  c->add_flag("--insecure-plaintext", coord.opts.insecure_plaintext, "Allow a non-loopback bind without CURVE");
  c->add_option("--http-port", coord.opts.http_port,
                "Serve the dashboard, JSON API and /metrics on this port (0 = any free port; off by default)");
  c->add_option("--http-address", coord.opts.http_address, "Address for --http-port")->capture_default_str();
  c->add_flag("-v,--verbose", coord.opts.verbose, "Log leases, workers and sweeps to stderr");
  out->push_back({.app = c,
                  .run = [parsed](const std::atomic<bool>* stop) { return RunCoordinator(parsed->coord, stop); },
                  .logs = true,
                  .verbose = [parsed] { return parsed->coord.opts.verbose; }});

  // worker
  WorkerArgs& work = parsed->work;
  auto* w = app.add_subcommand("worker", "Run a worker: measure units on this host's GPUs (or a simulated one)");
  w->add_option("--config", parsed->config_file, kConfigFileHelp)->check(CLI::ExistingFile);
  AddWorkerOptions(w, &work);
  w->add_flag("--compile-only", parsed->compile_only,
              "Run as a builder: no devices; compile what the GPU workers will time next for the --arch "
              "architectures with this host's NVRTC, on --compile-threads, and send the cubins to the "
              "coordinator (this key on its --builder-allow-list; needs the CUDA toolkit)");
  w->add_option("--arch", parsed->archs,
                "--compile-only: the architectures to compile for, e.g. sm_90a,sm_100a (sm_90 and sm_90a "
                "both build either target of compute capability 9.0, as each op needs)")
      ->delimiter(',');
  out->push_back({.app = w,
                  .run = [parsed, w](const std::atomic<bool>* stop) {
                    if (parsed->compile_only) return RunBuilder(parsed->work, parsed->archs, w, stop);
                    if (!parsed->archs.empty()) return Usage("worker: --arch is for --compile-only (a builder)");
                    return RunWorker(parsed->work, stop);
                  },
                  .logs = true,
                  .verbose = [parsed] { return parsed->work.opts.verbose; }});

  // runner (spawned by workers, one per GPU)
  int& runner_device = parsed->runner_device;
  auto* r = app.add_subcommand("runner", "Per-GPU runner process (started by workers; speaks on stdin/stdout)");
  r->add_option("--device", runner_device, "CUDA device ordinal")->required();
  r->group("");  // internal: hidden from the command list
  out->push_back({.app = r, .run = [parsed](const std::atomic<bool>*) { return RunRunner(parsed->runner_device); }});

  // submit
  SubmitArgs& submit = parsed->submit;
  auto* s = app.add_subcommand("submit", "Submit a sweep file to a running coordinator");
  s->add_option("sweep", submit.sweep_file, "Sweep TOML file")->required()->check(CLI::ExistingFile);
  AddClientOptions(s, &submit.client);
  s->add_option("--ops-dir", submit.ops_dir, kOpsDirHelp);
  s->add_flag("--wait", submit.wait,
              "Wait for the sweep to finish, with a progress bar (Ctrl-C stops the waiting, not the sweep)");
  s->add_option("--timeout", submit.timeout, "--wait: give up waiting after this many seconds (the sweep goes on)")
      ->check(CLI::Range(0.0, 1e7));
  s->add_option("--retry", submit.retry, kRetryHelp);
  s->add_option("--format", submit.format,
                "table or json: {\"sweep_id\"}, with --wait the sweep's progress as `status --format json` gives it")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "json"}));
  s->add_option("--priority", submit.priority,
                "The sweep's priority, " + std::to_string(kMinSweepPriority) + ".." +
                    std::to_string(kMaxSweepPriority) + ": the coordinator leases the work of higher ones first "
                    "(default: the sweep file's, else " + std::to_string(kDefaultSweepPriority) + ")");
  out->push_back({.app = s, .run = [parsed](const std::atomic<bool>* stop) { return RunSubmit(parsed->submit, stop); }});

  // status
  StatusArgs& status = parsed->status;
  auto* st = app.add_subcommand("status", "Show sweep progress from a running coordinator");
  st->add_option("sweep_id", status.sweep_id,
                 "Sweep id, or a prefix of it no other sweep's id shares (default: every sweep)");
  AddClientOptions(st, &status.client);
  AddFormatOption(st, &status.format, /*markdown=*/true);
  st->add_flag("--wait", status.wait, "Wait for the sweep (by id) to finish, as submit --wait does");
  st->add_option("--timeout", status.timeout, "--wait: give up waiting after this many seconds")
      ->check(CLI::Range(0.0, 1e7));
  out->push_back({.app = st, .run = [parsed](const std::atomic<bool>* stop) { return RunStatus(parsed->status, stop); }});

  // cancel
  StatusArgs& cancel = parsed->cancel;
  auto* cn = app.add_subcommand("cancel", "Stop a running sweep: nothing more of it is leased; what is stored stays");
  cn->add_option("sweep_id", cancel.sweep_id,
                 "Sweep id, or a prefix of it no other sweep's id shares; a sweep that ended already is left "
                 "as it is (exit 0)")->required();
  AddClientOptions(cn, &cancel.client);
  out->push_back({.app = cn, .run = [parsed](const std::atomic<bool>*) { return RunCancel(parsed->cancel); }});
}

}  // namespace tune
