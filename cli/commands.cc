#include "commands.h"
#include "progress.h"
#include "service_notify.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "client.h"
#include "local_farm.h"
#include "report.h"
#include "tune/bundle.h"
#include "tune/clock.h"
#include "tune/compare.h"
#include "tune/config_space.h"
#include "tune/curve.h"
#include "tune/json_text.h"
#include "tune/text.h"
#include "tune/nightly.h"
#include "tune/signing.h"
#include "tune/publish.h"
#include "tune/runtime.h"
#include "tune/sweep_file.h"
#ifdef TUNEFARM_WITH_CUDA
#include "tune/cuda_backend.h"
#endif

namespace tune {
namespace {

int Fail(const std::string& line) {
  std::fprintf(stderr, "tunefarm: %s\n", line.c_str());
  return 1;
}

// A bad option value found after parsing: a usage error (kExitUsage).
int Usage(const std::string& line) {
  std::fprintf(stderr, "tunefarm: %s\n", line.c_str());
  return kExitUsage;
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

Status FinishWorkerArgs(WorkerArgs& args) {
  args.opts.sim_models = SplitList(args.sim_models);
  auto roots = ParseIncludeRoots(args.include_roots);
  if (!roots.ok()) return Status::Error("--include-root: " + roots.status().message());
  args.opts.include_roots = *roots;
  args.opts.cuda_devices.clear();
  for (const auto& d : SplitList(args.devices)) {
    try {
      args.opts.cuda_devices.push_back(std::stoi(d));
    } catch (const std::exception&) {
      return Status::Error("--devices: '" + d + "' is not a device ordinal");
    }
  }
  return Status::OK();
}

constexpr double kCoordinatorPatienceSeconds = 120;

// Waits for a sweep, asking for its state every `poll_seconds` and showing
// its progress on stderr (ProgressLine) unless quiet. Returns its final
// progress, or an error when the coordinator stops answering.
Result<SweepProgress> WaitForSweep(const ClientArgs& c, const std::string& sweep_id, bool quiet,
                                   const std::atomic<bool>* stop, double poll_seconds) {
  const double start = NowSeconds();
  double last_answer = start;
  ProgressLine progress(stderr);
  SweepProgress last;
  std::optional<CoordinatorClient> client;
  while (!stop->load()) {
    if (!client) client.emplace(c.endpoint, 5, c.curve_secret_key, c.coordinator_key);
    auto reply = client->Call(SweepStatusRequest{sweep_id});
    if (!reply.ok()) {
      // A fresh socket next: a restarted coordinator must not inherit a
      // request the old one never answered.
      client.reset();
      // The coordinator may be restarting; sweeps survive that.
      if (NowSeconds() - last_answer > kCoordinatorPatienceSeconds) return reply.status();
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    last_answer = NowSeconds();
    auto* status = std::get_if<SweepStatus>(&*reply);
    if (!status || status->sweeps.empty()) return Status::Error("coordinator sent no status");
    last = status->sweeps.front();
    if (last.state != "running") {
      if (!quiet) progress.Finish(last, NowSeconds() - start);
      return last;
    }
    if (!quiet) progress.Update(last, NowSeconds() - start);
    std::this_thread::sleep_for(std::chrono::duration<double>(poll_seconds));
  }
  return Status::Error("interrupted");
}

// Writes `b` to path.tfb/.json, signed when a secret key file is given.
// The key bundles are signed with when no --sign-key is given:
// $TUNEFARM_SIGN_KEY, else $XDG_CONFIG_HOME/tunefarm/bundle.key (default
// ~/.config), made (with its .pub) the first time it is needed.
Result<std::string> DefaultSignKey(bool* created) {
  *created = false;
  std::string path;
  if (const char* env = std::getenv("TUNEFARM_SIGN_KEY"); env && *env) {
    path = env;
  } else {
    const char* xdg = std::getenv("XDG_CONFIG_HOME");
    const char* home = std::getenv("HOME");
    if ((!xdg || !*xdg) && (!home || !*home))
      return Status::InvalidArgument("no HOME to keep a signing key in: give --sign-key KEY or --unsigned");
    path = (xdg && *xdg ? std::string(xdg) : std::string(home) + "/.config") + "/tunefarm/bundle.key";
  }
  if (std::filesystem::exists(path)) return path;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  auto pub = GenerateKeyPairFiles(path, path + ".pub");
  if (!pub.ok()) return pub.status();
  *created = true;
  return path;
}

// Writes the bundle's .tfb and .json: signed with `sign_key`, else the
// default key, unless `unsigned_bundle`; says which key and what to trust.
Status WriteBundle(const Bundle& b, const std::string& path, const std::string& sign_key, bool unsigned_bundle) {
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  if (unsigned_bundle) {
    std::fprintf(stderr, "bundle %s.tfb is unsigned: deployments (the runtime, launcher and Python package) refuse it\n",
                 path.c_str());
    return WriteBundleFiles(b, path);
  }
  std::string key_path = sign_key;
  bool created = false;
  if (key_path.empty()) {
    auto def = DefaultSignKey(&created);
    if (!def.ok()) return def.status();
    key_path = *def;
  }
  auto key = ReadSecretKeyFile(key_path);
  if (!key.ok()) return key.status();
  TUNE_RETURN_IF_ERROR(WriteSignedBundleFiles(b, *key, path));
  if (created) std::fprintf(stderr, "created the signing key %s (keep it secret)\n", key_path.c_str());
  std::fprintf(stderr, "signed with key %s; deployments trust %s.pub (key id %s)\n", key_path.c_str(),
               key_path.c_str(), key->public_key().Id().c_str());
  return Status::OK();
}

// Reports open the store read-only: they take no lock, so they work while a
// coordinator owns it.
Result<std::unique_ptr<ResultStore>> OpenStore(const std::string& path) {
  if (!std::filesystem::exists(path)) return Status::Error("store " + path + " does not exist");
  return ResultStore::OpenReadOnly(path);
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
  app->add_option("--backend", args->opts.backend, "auto (CUDA if a GPU is present), cuda or sim")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cuda", "sim"}));
  app->add_option("--sim-models", args->sim_models,
                  "sim: simulated GPU models, one device each (h100,h200,a100,l40s)")
      ->capture_default_str();
  app->add_option("--sim-faults", args->opts.sim_faults,
                  "sim: injected faults, e.g. compile=0.02,crash=0.01,hang=0.01,wrong=0.01,nan=0.01,busy=0.001");
  app->add_option("--devices", args->devices, "cuda: device ordinals to use, e.g. 0,1 (default all)");
  app->add_option("--compile-threads", args->opts.compile_threads, "NVRTC threads (0 = one per core)")
      ->capture_default_str();
  app->add_option("--cache-dir", args->opts.cache_dir, "On-disk cubin cache (default ~/.cache/tunefarm)");
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
}

void AddClientOptions(CLI::App* app, ClientArgs* args) {
  app->add_option("--coordinator", args->endpoint, "Coordinator endpoint")->capture_default_str();
  app->add_option("--curve-key", args->curve_secret_key, "CURVE secret key file of this client");
  app->add_option("--coordinator-key", args->coordinator_key, "CURVE public key file of the coordinator");
}

void AddFormatOption(CLI::App* app, std::string* format) {
  app->add_option("--format", *format, "table, csv or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "csv", "json"}));
  app->add_flag_callback("--json", [format] { *format = "json"; }, "Same as --format json")->group("");
}

void AddQueryOptions(CLI::App* app, QueryArgs* args) {
  app->add_option("--store", args->store, "RocksDB store directory")->capture_default_str();
  app->add_option("--gpu", args->filter.gpu_model, "Only this GPU model");
  app->add_option("--op", args->filter.op, "Only this op");
  app->add_option("--dtype", args->filter.dtype, "Only this dtype");
  app->add_option("--shape", args->filter.shape, "Only this shape, like M=4096,N=4096,K=4096");
  app->add_option("--config", args->config, "Only this config: its id or its params, like BM=128,BN=64,...");
  app->add_flag("--log", args->full_log, "After the table, every failure's whole message (compile logs)");
  app->add_option("--reports", args->reports,
                  "Write the Nsight Compute reports of the rows' profiles under this folder "
                  "(GPU/op/dtype/shape/kernel hash/config.ncu-rep; open with ncu-ui)");
  app->add_option("--format", args->format, "table, csv or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "csv", "json"}));
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
  std::fprintf(stderr, "tunefarm coordinator on %s, store %s\n", coord.bound_endpoint().c_str(),
               args.opts.store_path.c_str());
  if (!coord.http_url().empty()) std::fprintf(stderr, "dashboard: %s\n", coord.http_url().c_str());
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
    std::fprintf(stderr, "tunefarm worker: device %d %s (%s, backend %s%s)\n", d.index,
                 d.name.c_str(), d.model.c_str(), d.backend.c_str(),
                 d.backend == "sim" ? ", SIMULATED" : "");
  }
  if (!worker.http_url().empty()) std::fprintf(stderr, "metrics: %smetrics\n", worker.http_url().c_str());
  NotifyServiceManager("READY=1\nSTATUS=" + std::to_string(worker.devices().size()) + " device(s)");
  st = worker.Run(stop);
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

int RunSubmit(const SubmitArgs& args, const std::atomic<bool>* stop) {
  auto sweep = LoadSweepFile(args.sweep_file, args.ops_dir);
  if (!sweep.ok()) return Fail(sweep.status().message());
  const ClientArgs& c = args.client;
  CoordinatorClient client(c.endpoint, 10, c.curve_secret_key, c.coordinator_key);
  auto reply = client.Call(*sweep);
  if (!reply.ok()) return Fail(reply.status().message());
  auto* accepted = std::get_if<SweepAccepted>(&*reply);
  if (!accepted) return Fail("coordinator sent an unexpected reply");
  std::printf("%s\n", accepted->sweep_id.c_str());
  std::fflush(stdout);
  if (!args.wait) return 0;
  auto done = WaitForSweep(c, accepted->sweep_id, false, stop, 0.1);
  if (!done.ok()) return Fail(done.status().message());
  if (done->state == "done" && done->units_total == 0 && done->pairs_total > 0) {
    std::printf("already measured: %llu (config, shape) pairs stored, nothing to do\n",
                static_cast<unsigned long long>(done->pairs_done));
  } else if (done->state == "done") {
    const int64_t took = done->finished_unix > done->started_unix ? done->finished_unix - done->started_unix : 0;
    std::printf("done: %llu pairs measured (%llu failed) on %s in %s\n"
                "failures: %s\n"
                "next: tunefarm results --store STORE --format table | tunefarm compare --store STORE | "
                "tunefarm publish --store STORE --out bundles/%s\n",
                static_cast<unsigned long long>(done->pairs_done), static_cast<unsigned long long>(done->pairs_failed),
                Join(done->gpu_models, ", ").c_str(), FormatDuration(double(took)).c_str(),
                FormatFailures(done->failed_by_class).c_str(), done->name.c_str());
  }
  if (done->state == "done") return 0;
  return Fail("sweep " + accepted->sweep_id + " " + done->state + (done->error.empty() ? "" : ": " + done->error));
}

// Sends `request` to the coordinator and returns its SweepStatus answer.
Result<SweepStatus> AskForStatus(const ClientArgs& c, Command request) {
  CoordinatorClient client(c.endpoint, 10, c.curve_secret_key, c.coordinator_key);
  auto reply = client.Call(std::move(request));
  if (!reply.ok()) return reply.status();
  auto* status = std::get_if<SweepStatus>(&*reply);
  if (!status) return Status::Error("coordinator sent an unexpected reply");
  return std::move(*status);
}

int RunCancel(const StatusArgs& args) {
  auto status = AskForStatus(args.client, SweepCancel{args.sweep_id});
  if (!status.ok()) return Fail(status.status().message());
  if (status->sweeps.empty()) return Fail("coordinator sent an unexpected reply");
  const SweepProgress& p = status->sweeps.front();
  std::printf("sweep %s %s: %llu of %llu (config, shape) pairs stored, they stay in the store\n", p.sweep_id.c_str(),
              p.state.c_str(), (unsigned long long)p.pairs_done, (unsigned long long)p.pairs_total);
  return 0;
}

int RunStatus(const StatusArgs& args) {
  auto status = AskForStatus(args.client, SweepStatusRequest{args.sweep_id});
  if (!status.ok()) return Fail(status.status().message());
  if (args.format == "json") {
    nlohmann::json j = {{"workers", status->workers}, {"store_fault", status->store_fault},
                        {"sweeps", nlohmann::json::array()}};
    for (const auto& p : status->sweeps) {
      j["sweeps"].push_back({{"id", p.sweep_id}, {"name", p.name}, {"state", p.state},
                             {"units_total", p.units_total}, {"units_done", p.units_done},
                             {"pairs_total", p.pairs_total}, {"pairs_done", p.pairs_done},
                             {"pairs_failed", p.pairs_failed}, {"failed_by_class", p.failed_by_class},
                             {"gpu_models", p.gpu_models}, {"error", p.error}, {"waiting_for", p.waiting_for},
                             {"expanding", p.expanding}, {"waits", p.waits}, {"skipped", p.skipped}});
    }
    std::printf("%s\n", DumpJson(j, 2).c_str());
    return 0;
  }
  if (args.format == "csv") {
    std::printf("sweep,name,state,units_done,units_total,pairs_done,pairs_total,pairs_failed,gpu_models,waiting_for,"
                "error\n");
    for (const auto& p : status->sweeps) {
      std::printf("%s,%s,%s,%llu,%llu,%llu,%llu,%llu,%s,%s,%s\n", CsvField(p.sweep_id).c_str(),
                  CsvField(p.name).c_str(), p.state.c_str(), (unsigned long long)p.units_done,
                  (unsigned long long)p.units_total, (unsigned long long)p.pairs_done,
                  (unsigned long long)p.pairs_total, (unsigned long long)p.pairs_failed,
                  CsvField(Join(p.gpu_models, " ")).c_str(), CsvField(Join(p.waiting_for, " ")).c_str(),
                  CsvField(ToValidUtf8(p.error)).c_str());
    }
    return 0;
  }
  std::printf("%u worker(s)\n", status->workers);
  if (!status->store_fault.empty()) {
    std::printf("store writes fail, no leasing until they succeed: %s\n", ToValidUtf8(status->store_fault).c_str());
  }
  std::printf("%-16s %-20s %-8s %12s %18s %8s  %s\n", "sweep", "name", "state", "units",
              "pairs", "failed", "gpu models");
  for (const auto& p : status->sweeps) {
    std::printf("%-16s %-20s %-8s %5llu/%-6llu %8llu/%-9llu %8llu  %s\n", p.sweep_id.c_str(),
                p.name.c_str(), p.state.c_str(), (unsigned long long)p.units_done,
                (unsigned long long)p.units_total, (unsigned long long)p.pairs_done,
                (unsigned long long)p.pairs_total, (unsigned long long)p.pairs_failed,
                Join(p.gpu_models).c_str());
    if (!p.error.empty()) std::printf("  failed: %s\n", ToValidUtf8(p.error).c_str());
    if (!p.failed_by_class.empty()) std::printf("  failures: %s\n", FormatFailures(p.failed_by_class).c_str());
    // A coordinator that says what it waits for in words; an older one names the models.
    for (const auto& why : p.waits) std::printf("  waiting for %s\n", ToValidUtf8(why).c_str());
    if (p.waits.empty() && !p.waiting_for.empty()) {
      std::printf("  waiting for %s: no live worker has it\n", Join(p.waiting_for).c_str());
    }
    for (const auto& why : p.skipped) std::printf("  skipped %s\n", ToValidUtf8(why).c_str());
    if (!p.expanding.empty()) std::printf("  expanding the config spaces for %s\n", Join(p.expanding).c_str());
  }
  return 0;
}

int RunResults(const QueryArgs& args, bool best_only) {
  OutputFormat format;
  if (!ParseOutputFormat(args.format, &format)) return Usage("--format: unknown '" + args.format + "'");
  auto store = OpenStore(args.store);
  if (!store.ok()) return Fail(store.status().message());
  std::vector<Measurement> rows;
  if (best_only) {
    auto best = (*store)->Best(args.filter);
    if (!best.ok()) return Fail(best.status().message());
    rows = NewestKernelOnly(std::move(best).value());
  } else {
    Status st = (*store)->Scan(args.filter, [&](const Measurement& m) {
      rows.push_back(m);
      return true;
    });
    if (!st.ok()) return Fail(st.message());
  }
  if (!args.config.empty()) {
    Config wanted;
    const bool by_params = ParseNamedValues(args.config, &wanted.params);
    std::erase_if(rows, [&](const Measurement& m) {
      return m.config_id != args.config && !(by_params && m.config.Canonical() == wanted.Canonical());
    });
  }
  const ResultFilter& f = args.filter;
  if (rows.empty() && !(f.gpu_model.empty() && f.op.empty() && f.dtype.empty() && f.shape.empty() &&
                        args.config.empty())) {
    // Nothing matched: say what the store does hold, so that a misspelt
    // model or op is easy to fix.
    std::set<std::string> models, ops;
    if (auto keys = (*store)->Best({}); keys.ok()) {  // one row per key: cheaper than every row
      for (const auto& m : *keys) {
        models.insert(m.gpu_model);
        ops.insert(m.op);
      }
    }
    return Fail("no results match the filter; the store holds GPU models [" +
                Join(std::vector<std::string>(models.begin(), models.end()), ", ") + "] and ops [" +
                Join(std::vector<std::string>(ops.begin(), ops.end()), ", ") + "]");
  }
  std::vector<Measurement> failed;
  if (args.full_log)
    for (const Measurement& m : rows)
      if (!m.Valid() && !m.failure_message.empty()) failed.push_back(m);
  const auto profiles = ProfilesOf(**store, rows);
  PrintMeasurements(stdout, std::move(rows), OpsFromStore(**store), format, profiles);
  if (!args.reports.empty()) {
    size_t written = 0;
    for (const auto& [key, p] : profiles) {
      if (p.report.empty()) continue;
      // Key parts are checked text; '/' would make a folder of its own.
      auto part = [](std::string s) {
        std::replace(s.begin(), s.end(), '/', '_');
        return s;
      };
      const std::filesystem::path file = std::filesystem::path(args.reports) / part(p.gpu_model) / part(p.op) /
                                         part(p.dtype) / part(p.shape) / part(p.kernel_hash) / (part(p.config_id) + ".ncu-rep");
      std::error_code ec;
      std::filesystem::create_directories(file.parent_path(), ec);
      std::ofstream out(file, std::ios::binary);
      out << p.report;
      if (!out) return Fail("--reports: cannot write " + file.string());
      ++written;
    }
    std::fprintf(stderr, "%zu profile report(s) under %s\n", written, args.reports.c_str());
  }
  for (const Measurement& m : failed) {
    std::printf("\n== %s %s %s %s %s: %s\n%s\n", m.gpu_model.c_str(), m.op.c_str(), m.dtype.c_str(), m.shape.c_str(),
                m.config.Canonical().c_str(), FailureClassName(m.failure), m.failure_message.c_str());
  }
  return 0;
}

int RunCompare(const CompareArgs& args) {
  auto store = OpenStore(args.store);
  if (!store.ok()) return Fail(store.status().message());
  CompareOptions o;
  o.op = args.op;
  o.dtype = args.dtype;
  o.shape = args.shape;
  o.gpu_models = args.gpus;
  auto c = CompareArchitectures(**store, o);
  if (!c.ok()) return Fail(c.status().message());
  std::string text;
  if (args.format == "csv") text = ComparisonCsv(*c);
  else if (args.format == "json") text = ComparisonJson(*c);
  else if (args.format == "html") text = ComparisonHtml(*c);
  else text = ComparisonTable(*c);
  if (args.out.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  std::ofstream f(args.out, std::ios::binary);
  f << text;
  if (!f) return Fail("cannot write " + args.out);
  std::printf("%s\n", args.out.c_str());
  return 0;
}

// What `publish` ships: cubins checked against this host's own compile
// where it has NVRTC (one worker's image alone is not trusted).
PublishOptions PublishOptionsHere(bool kernels) {
  PublishOptions o;
  o.kernels = kernels;
#ifdef TUNEFARM_WITH_CUDA
  o.recompile = [](const OpSpec& spec, const std::string& dtype, const Config& config, const std::string& arch,
                   const std::string& kernel_hash) -> Result<std::string> {
    // No cache: a cached image would be checked against itself.
    CompiledKernel ck = CompileConfig(spec, dtype, config, arch, "");
    if (ck.kernel_hash != kernel_hash)
      return Status::Error("this host's NVRTC " + NvrtcVersionString() + " compiles another kernel than the measured one");
    if (ck.failure != FailureClass::kNone) return Status::Error("its recompile here failed: " + ck.failure_message);
    return ck.image;
  };
#endif
  return o;
}

int RunPublish(const PublishArgs& args) {
  auto store = OpenStore(args.store);
  if (!store.ok()) return Fail(store.status().message());
  const std::string name =
      args.name.empty() ? std::filesystem::path(args.out).filename().string() : args.name;
  std::vector<std::string> notes;
  auto bundle = BuildBundle(**store, args.filter, name, PublishOptionsHere(!args.no_kernels), &notes);
  if (!bundle.ok()) return Fail(bundle.status().message());
  for (const std::string& n : notes) std::fprintf(stderr, "publish: %s\n", n.c_str());
  Status st = WriteBundle(*bundle, args.out, args.sign_key, args.unsigned_bundle);
  if (!st.ok()) return Fail(st.message());
  std::printf("%s.tfb\n%s.json\n", args.out.c_str(), args.out.c_str());
  return 0;
}

int RunBundleShow(const BundleArgs& args) {
  auto b = ReadBundleFile(args.file);
  if (!b.ok()) return Fail(b.status().message());
  if (args.format == "json") {
    std::printf("%s\n", BundleToJson(*b).c_str());
  } else if (args.format == "csv") {
    std::printf("gpu_model,op,dtype,shape,config,config_id,kernel_hash,arch,median_us,default_us,samples,backend\n");
    for (const BundleEntry& e : b->entries) {
      std::printf("%s,%s,%s,%s,%s,%s,%s,%s,%.3f,%.3f,%u,%s\n", CsvField(e.gpu_model).c_str(), CsvField(e.op).c_str(),
                  CsvField(e.dtype).c_str(), CsvField(e.shape.Canonical()).c_str(),
                  CsvField(e.config.Canonical()).c_str(), CsvField(e.config_id).c_str(), CsvField(e.kernel_hash).c_str(),
                  CsvField(e.arch).c_str(), e.median_us, e.default_median_us, e.samples, CsvField(e.backend).c_str());
    }
  } else {
    PrintBundle(stdout, *b);
  }
  return 0;
}

// Answers as a deployment would: the runtime's fallback chain, and its
// TUNEFARM_FORCE_DEFAULTS switch; the signature is checked when keys are
// given.
int RunBundleLookup(const BundleArgs& args) {
  Shape shape;
  if (!ParseNamedValues(args.shape, &shape.dims)) return Usage("--shape '" + args.shape + "': expected M=...,N=...");
  auto b = args.keys.empty() ? runtime::Bundle::LoadUnverified(args.file) : runtime::Bundle::Load(args.file, args.keys);
  if (!b.ok()) return Fail(b.status().message());
  std::vector<runtime::Dim> dims;
  for (const auto& [name, value] : shape.dims) dims.push_back({name, value});
  const runtime::Answer a = b->lookup(args.op, args.dtype, args.gpu, dims);
  if (a.level == runtime::Level::kMiss) return Fail("no entry and no default for op '" + args.op + "'");
  Config config;  // printed in the farm's canonical form, as `results` prints configs
  for (size_t i = 0; i < a.config->size(); ++i) config.params.emplace_back(a.config->name(i), a.config->value(i));
  std::string why;  // why the chain fell through to the default, most basic reason first
  if (a.level == runtime::Level::kDefault && b->forcing_defaults()) {
    why = "TUNEFARM_FORCE_DEFAULTS is set";
  } else if (a.level == runtime::Level::kDefault) {
    const std::vector<std::string>* op_dims = b->dims_of(args.op);
    std::vector<std::string> asked;
    for (const auto& [name, value] : shape.dims) asked.push_back(name);
    std::vector<std::string> want = op_dims ? *op_dims : std::vector<std::string>{};
    std::sort(asked.begin(), asked.end());
    std::sort(want.begin(), want.end());
    bool dtype_tuned = false;
    for (const auto& e : b->entries()) dtype_tuned = dtype_tuned || (e.op == args.op && e.dtype == args.dtype);
    if (!op_dims) why = "no tuned entry of op " + args.op;
    else if (asked != want) why = "the op's dims are " + Join(*op_dims);
    else if (!dtype_tuned) why = "no tuned entry of " + args.op + "/" + args.dtype;
    else why = "no tuned entry for " + args.gpu + " or its GPU family";
  }
  const bool borrowed = a.entry && a.level != runtime::Level::kExact;  // another shape's or model's entry
  if (args.format == "json") {
    nlohmann::json j = {{"level", runtime::LevelName(a.level)}, {"config", config.Canonical()}};
    if (borrowed) j["tuned_on"] = {{"gpu_model", a.entry->gpu_model}, {"shape", a.entry->shape.ToString()}};
    if (!why.empty()) j["why"] = why;
    std::printf("%s\n", DumpJson(j, 2).c_str());
    return 0;
  }
  if (args.format == "csv") {
    std::printf("level,config,tuned_gpu_model,tuned_shape,why\n%s,%s,%s,%s,%s\n", runtime::LevelName(a.level),
                CsvField(config.Canonical()).c_str(), a.entry ? CsvField(a.entry->gpu_model).c_str() : "",
                a.entry ? CsvField(a.entry->shape.ToString()).c_str() : "", CsvField(why).c_str());
    return 0;
  }
  std::printf("%s %s", runtime::LevelName(a.level), config.Canonical().c_str());
  if (borrowed) std::printf(" (tuned on %s at %s)", a.entry->gpu_model.c_str(), a.entry->shape.ToString().c_str());
  if (!why.empty()) std::printf(" (%s)", why.c_str());
  std::printf("\n");
  return 0;
}

int RunBundleVerify(const BundleArgs& args) {
  std::vector<PublicKey> trusted;
  for (const auto& path : args.keys) {
    auto k = ReadPublicKeyFile(path);
    if (!k.ok()) return Fail(k.status().message());
    trusted.push_back(*k);
  }
  PublicKey signer;
  auto b = ReadVerifiedBundleFile(args.file, trusted, &signer);
  if (!b.ok()) return Fail(b.status().message());
  std::printf("%s: signature OK (key %s), %zu entries\n", args.file.c_str(), signer.Id().c_str(),
              b->entries.size());
  return 0;
}

int RunBundleDiff(const std::string& before_path, const std::string& after_path, double noise_floor,
                  const std::string& format) {
  auto before = ReadBundleFile(before_path);
  if (!before.ok()) return Fail(before.status().message());
  auto after = ReadBundleFile(after_path);
  if (!after.ok()) return Fail(after.status().message());
  auto report = CompareBundles(*before, *after, noise_floor);
  if (!report.ok()) return Fail(report.status().message());
  const std::string text = format == "json"  ? NightlyReportJson(*report) + "\n"
                           : format == "csv" ? NightlyReportCsv(*report)
                                             : NightlyReportTable(*report);
  std::printf("%s", text.c_str());
  return report->HasRegressions() ? kExitRegressions : 0;
}

int RunKeysCurve(const KeysArgs& args) {
  auto keys = GenerateCurveKeyPair();
  if (!keys.ok()) return Fail(keys.status().message());
  Status st = WriteCurveKeyPair(*keys, args.out, args.name.empty() ? args.out : args.name, args.force);
  if (!st.ok()) return Fail(st.message());
  std::printf("%s (secret, 0600)\n%s.pub: %s\n", args.out.c_str(), args.out.c_str(),
              keys->public_z85.c_str());
  return 0;
}

int RunKeysSign(const KeysArgs& args) {
  auto key = GenerateKeyPairFiles(args.out, args.out + ".pub");
  if (!key.ok()) return Fail(key.status().message());
  std::printf("%s (secret, 0600)\n%s.pub (key id %s)\n", args.out.c_str(), args.out.c_str(),
              key->Id().c_str());
  return 0;
}

// What the ops' shape rules (rules that read dims) left out of each shape:
// configs never timed there, not failures.
void PrintShapeRules(const SweepSubmit& sweep, const std::vector<DeviceInfo>& devices) {
  std::set<std::string> models;
  for (size_t i = 0; i < sweep.op_packages.size(); ++i) {
    auto spec = ParseOpSpec(sweep.op_packages[i], sweep.ops[i]);
    if (!spec.ok() || spec->shape_constraints.empty()) continue;
    for (const DeviceInfo& d : devices) {
      if (!models.insert(spec->name + '\0' + d.model).second) continue;
      auto all = EnumerateConfigs(*spec, d);
      if (!all.ok()) continue;
      for (const Shape& shape : ShapesForOp(sweep, *spec)) {
        std::vector<uint64_t> rejected;
        auto legal = ConfigsForShape(*spec, d, spec->dtypes.front(), *all, shape, &rejected);
        if (!legal.ok() || legal->size() == all->size()) continue;
        std::string why;
        for (size_t r = 0; r < rejected.size(); ++r)
          if (rejected[r]) why += (why.empty() ? "" : "; ") + spec->shape_constraints[r];
        std::printf("shape rules: %s at %s on %s: %zu of %zu configs legal (%zu never timed there: %s)\n",
                    spec->name.c_str(), shape.Canonical().c_str(), d.model.c_str(), legal->size(), all->size(),
                    all->size() - legal->size(), why.c_str());
      }
    }
  }
}

int RunTune(TuneArgs& args, const std::atomic<bool>* stop) {
  OutputFormat format;
  if (!ParseOutputFormat(args.format, &format)) return Usage("--format: unknown '" + args.format + "'");
  Status st = FinishWorkerArgs(args.worker);
  if (!st.ok()) return Fail(st.message());
  auto sweep = args.sweep_file.empty()
                   ? MakeSweep("tune-" + args.ops.front(), args.ops, args.dtypes, args.shapes, {"*"},
                               args.ops_dir)
                   : LoadSweepFile(args.sweep_file, args.ops_dir);
  if (!sweep.ok()) return Fail(sweep.status().message());
  if (args.configs_per_unit) sweep->configs_per_unit = args.configs_per_unit;
  if (args.confirm_top) sweep->confirm_top = args.confirm_top;
  if (args.profile_top) {
    sweep->profile_top = args.profile_top;
    sweep->confirm_top = std::max(sweep->confirm_top, sweep->profile_top);  // profiles come from confirm units
  }
  if (args.confirm_seconds > 0) sweep->confirm_seconds = args.confirm_seconds;
  if (!args.confirm_timing.empty() && !ParseConfirmTiming(args.confirm_timing, &sweep->confirm_timing))
    return Usage("--confirm-timing: expected auto, burst or sustained, got '" + args.confirm_timing + "'");
  if (sweep->confirm_top > 0 && sweep->confirm_seconds == 0) sweep->confirm_seconds = kDefaultConfirmSeconds;
  if (args.one_pass) sweep->refine_pass = false;

  LocalFarmOptions fopts;
  fopts.worker = args.worker.opts;
  fopts.sim_workers = args.sim_workers;
  fopts.store = args.store;
  auto farm = LocalFarm::Start(fopts);
  if (!farm.ok()) return Fail(farm.status().message());
  const double sweep_start = NowSeconds();
  auto done = (*farm)->Run(*sweep, [&](const std::string& endpoint, const std::string& sweep_id) {
    ClientArgs local;
    local.endpoint = endpoint;
    // The coordinator runs in this process, over loopback: frequent polls
    // keep the sweep's wall time from being rounded up to a poll.
    return WaitForSweep(local, sweep_id, args.quiet, stop, 0.005);
  });
  const double sweep_seconds = NowSeconds() - sweep_start;
  (*farm)->Stop();
  if (!done.ok()) return Fail(done.status().message());
  if (done->state != "done") return Fail("sweep " + done->sweep_id + " " + done->state);
  const WorkerStats total = (*farm)->stats();
  const size_t devices = (*farm)->devices().size();

  // Report: every row of this sweep's keys (the store is idempotent, so a
  // rerun's rows may be the earlier run's), newest kernel hash only.
  ResultStore& store = (*farm)->store();
  std::vector<Measurement> rows;
  const auto ops = OpsFromStore(store);
  for (const auto& model : (*farm)->models()) {
    for (const auto& op : sweep->ops) {
      for (const auto& dtype : sweep->dtypes) {
        (void)store.Scan(ResultFilter{model, op, dtype, "", ""}, [&](const Measurement& m) {
          rows.push_back(m);
          return true;
        });
      }
    }
  }
  rows = NewestKernelOnly(std::move(rows));
  std::map<std::string, uint64_t> failures;  // by class
  for (const Measurement& m : rows)
    if (m.failure != FailureClass::kNone) ++failures[FailureClassName(m.failure)];
  const auto profiles = ProfilesOf(store, rows);
  PrintMeasurements(stdout, std::move(rows), ops, format, profiles);
  std::printf("\nsweep: %llu configs, %llu (config, shape) results (%llu of them refined or confirmed) in "
              "%.2f s = %.2f configs/s on %zu device(s)\n"
              "compile: %llu compiled (%.1f s of compiler time), %llu from the cubin cache; "
              "device threads waited %.1f s for compiles\n"
              "busy: devices were checking/timing %.1f s = %.0f%% of wall time\n",
              (unsigned long long)total.screened.size(), (unsigned long long)total.measured,
              (unsigned long long)total.measured_again, sweep_seconds,
              sweep_seconds > 0 ? double(total.screened.size()) / sweep_seconds : 0.0, devices,
              (unsigned long long)total.compiled, total.compile_seconds,
              (unsigned long long)total.compile_cache_hits, total.compile_wait_seconds,
              total.measure_seconds,
              sweep_seconds > 0 && devices ? 100.0 * total.measure_seconds / (sweep_seconds * devices) : 0.0);
  PrintShapeRules(*sweep, (*farm)->devices());
  if ((*farm)->simulated()) {
    std::printf("\nSIMULATED: these figures come from the sim backend's cost model, not a GPU.\n");
  }

  const std::string out = args.bundle.empty() ? "bundles/" + sweep->name : args.bundle;
  ResultFilter filter;
  std::vector<std::string> notes;
  auto bundle = BuildBundle(store, filter, sweep->name, PublishOptionsHere(true), &notes);
  if (!bundle.ok()) return Fail(bundle.status().message());
  for (const std::string& n : notes) std::fprintf(stderr, "publish: %s\n", n.c_str());
  st = WriteBundle(*bundle, out, args.sign_key, args.unsigned_bundle);
  if (!st.ok()) return Fail(st.message());
  std::printf("failures: %s\n", FormatFailures(failures).c_str());
  std::printf("\nstore:  %s\nbundle: %s.tfb (and %s.json)\n", args.store.c_str(), out.c_str(),
              out.c_str());
  std::printf("next:   tunefarm results --store %s --log      (every row; failures with their whole log)\n"
              "        tunefarm bundle show %s.tfb\n"
              "        deploy it: README, \"After the first tune\" (C++ tunefarm::launcher, Python tunefarm)\n",
              args.store.c_str(), out.c_str());
  return 0;
}

int RunNightly(NightlyArgs& args, const std::atomic<bool>* stop) {
  namespace fs = std::filesystem;
  if (args.history.empty()) return Usage("--history is required");
  // Each night gets its own store: re-measuring an unchanged kernel must
  // land beside last night's figures, not be folded into them.
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", std::gmtime(&now));
  const fs::path night = fs::path(args.history) / stamp;
  std::string previous;
  if (fs::exists(args.history)) {
    for (const auto& e : fs::directory_iterator(args.history)) {
      const fs::path b = e.path() / "bundle.tfb";
      if (fs::exists(b) && e.path().filename().string() > previous) previous = e.path().filename().string();
    }
  }
  fs::create_directories(night);
  args.tune.store = (night / "store").string();
  args.tune.bundle = (night / "bundle").string();
  args.tune.quiet = true;
  const int rc = RunTune(args.tune, stop);
  if (rc != 0) return rc;
  if (previous.empty()) {
    std::printf("\nnightly: first run in %s: nothing to compare with\n", args.history.c_str());
    return 0;
  }
  auto before = ReadBundleFile((fs::path(args.history) / previous / "bundle.tfb").string());
  if (!before.ok()) return Fail(before.status().message());
  auto after = ReadBundleFile((night / "bundle.tfb").string());
  if (!after.ok()) return Fail(after.status().message());
  auto report = CompareBundles(*before, *after, args.noise_floor);
  if (!report.ok()) return Fail(report.status().message());
  std::printf("\nnightly: %s against %s\n%s", stamp, previous.c_str(),
              NightlyReportTable(*report).c_str());
  std::ofstream((night / "report.json").string()) << NightlyReportJson(*report);
  std::printf("report: %s\n", (night / "report.json").string().c_str());
  return report->HasRegressions() ? kExitRegressions : 0;
}

}  // namespace tune
