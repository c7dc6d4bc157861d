// tunefarm: the command-line front end of the farm.
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "op_check.h"
#include "tune/log.h"

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

}  // namespace

int main(int argc, char** argv) {
  using namespace tune;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);

  CLI::App app{"tunefarm: a distributed tuning farm for GPU kernels.\n"
               "A coordinator splits each op's config space across workers; workers compile\n"
               "(NVRTC), check and time every config on their GPUs; results land in a RocksDB\n"
               "store and the winners are published as bundles for deployments."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("tunefarm ") + TUNEFARM_VERSION);

  // coordinator
  CoordinatorArgs coord;
  auto* c = app.add_subcommand("coordinator", "Run the coordinator (ROUTER socket, store owner)");
  c->add_option("--bind", coord.opts.endpoint, "ZeroMQ endpoint to bind")->capture_default_str();
  c->add_option("--store", coord.opts.store_path, "RocksDB store directory")->capture_default_str();
  c->add_option("--heartbeat-ms", coord.opts.heartbeat_ms, "Heartbeat interval")->capture_default_str();
  c->add_option("--liveness", coord.opts.liveness, "Missed heartbeats before a worker is dead")->capture_default_str();
  c->add_option("--configs-per-unit", coord.opts.scheduler.configs_per_unit, "Default work unit size")->capture_default_str();
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
  c->add_option("--curve-key", coord.opts.curve_secret_key, "CURVE secret key file (see `keys curve`)");
  c->add_option("--allow-list", coord.opts.curve_allow_list, "File of worker CURVE public keys to admit");
  c->add_option("--client-allow-list", coord.opts.curve_client_allow_list,
                "File of client CURVE public keys to admit (submit, status); a key has one role");
  c->add_flag("--insecure-plaintext", coord.opts.insecure_plaintext, "Allow a non-loopback bind without CURVE");
  c->add_option("--http-port", coord.opts.http_port,
                "Serve the dashboard, JSON API and /metrics on this port (0 = any free port; off by default)");
  c->add_option("--http-address", coord.opts.http_address, "Address for --http-port")->capture_default_str();
  c->add_flag("-v,--verbose", coord.opts.verbose, "Log leases, workers and sweeps to stderr");

  // worker
  WorkerArgs work;
  auto* w = app.add_subcommand("worker", "Run a worker: measure units on this host's GPUs (or a simulated one)");
  AddWorkerOptions(w, &work);

  // runner (spawned by workers, one per GPU)
  int runner_device = 0;
  auto* r = app.add_subcommand("runner", "Per-GPU runner process (started by workers; speaks on stdin/stdout)");
  r->add_option("--device", runner_device, "CUDA device ordinal")->required();
  r->group("");  // internal: hidden from the command list

  // submit
  SubmitArgs submit;
  auto* s = app.add_subcommand("submit", "Submit a sweep file to a running coordinator");
  s->add_option("sweep", submit.sweep_file, "Sweep TOML file")->required()->check(CLI::ExistingFile);
  AddClientOptions(s, &submit.client);
  s->add_option("--ops-dir", submit.ops_dir, "Folder holding the op folders")->capture_default_str();
  s->add_flag("--wait", submit.wait, "Wait for the sweep to finish, with a progress bar");

  // status
  StatusArgs status;
  auto* st = app.add_subcommand("status", "Show sweep progress from a running coordinator");
  st->add_option("sweep_id", status.sweep_id, "Sweep id (default: every sweep)");
  AddClientOptions(st, &status.client);
  AddFormatOption(st, &status.format);

  // cancel
  StatusArgs cancel;
  auto* cn = app.add_subcommand("cancel", "Stop a running sweep: nothing more of it is leased; what is stored stays");
  cn->add_option("sweep_id", cancel.sweep_id, "Sweep id")->required();
  AddClientOptions(cn, &cancel.client);

  // results / best
  QueryArgs results, best;
  auto* res = app.add_subcommand("results", "List stored measurements (table, CSV, JSON)");
  AddQueryOptions(res, &results);
  auto* b = app.add_subcommand("best", "Show the best valid config per (GPU model, op, dtype, shape)");
  AddQueryOptions(b, &best);

  // compare
  CompareArgs compare;
  auto* cmp = app.add_subcommand("compare", "Compare GPU models side by side: best config, throughput, "
                                            "roofline share, ratios, portability matrix");
  cmp->add_option("--store", compare.store, "RocksDB store directory (opened read-only)")->capture_default_str();
  cmp->add_option("--op", compare.op, "Only this op");
  cmp->add_option("--dtype", compare.dtype, "Only this dtype");
  cmp->add_option("--shape", compare.shape, "Only this shape, like M=4096,N=4096,K=4096");
  cmp->add_option("--gpu", compare.gpus, "GPU models to compare, the first is the reference (default: all)");
  cmp->add_option("--format", compare.format, "table, csv, json or html (self-contained, with plots)")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "csv", "json", "html"}));
  cmp->add_option("--out", compare.out, "Write to this file instead of stdout");

  // publish
  PublishArgs publish;
  auto* p = app.add_subcommand("publish", "Publish a best-config bundle (.tfb binary + .json) from the store");
  p->add_option("--store", publish.store, "RocksDB store directory")->capture_default_str();
  p->add_option("--out", publish.out, "Output path without extension")->required();
  p->add_option("--name", publish.name, "Bundle name (default: the file name)");
  p->add_option("--sign-key", publish.sign_key,
                "Ed25519 secret key file to sign with (default: $TUNEFARM_SIGN_KEY, else "
                "~/.config/tunefarm/bundle.key, made on first use)");
  p->add_flag("--unsigned", publish.unsigned_bundle, "Write the bundle unsigned (deployments refuse it)");
  p->add_option("--op", publish.filter.op, "Only this op");
  p->add_option("--gpu", publish.filter.gpu_model, "Only this GPU model");
  p->add_option("--dtype", publish.filter.dtype, "Only this dtype");
  p->add_flag("--no-kernels", publish.no_kernels,
              "Config-only: leave the measured cubins out (launch plans and defaults stay)");

  // bundle show / lookup
  auto* bundle = app.add_subcommand("bundle", "Inspect bundles");
  bundle->require_subcommand(1);
  BundleArgs bshow, blookup, bverify;
  auto* bs = bundle->add_subcommand("show", "Print a bundle's entries");
  bs->add_option("file", bshow.file, "Bundle file (.tfb)")->required();
  AddFormatOption(bs, &bshow.format);
  auto* bl = bundle->add_subcommand("lookup", "Look up (op, dtype, GPU model, shape) with the fallback chain");
  bl->add_option("file", blookup.file, "Bundle file (.tfb)")->required();
  bl->add_option("--op", blookup.op, "Op name")->required();
  bl->add_option("--dtype", blookup.dtype, "Dtype")->required();
  bl->add_option("--gpu", blookup.gpu, "GPU model")->required();
  bl->add_option("--shape", blookup.shape, "Shape, like M=4096,N=4096,K=4096")->required();
  bl->add_option("--key", blookup.keys, "Trusted public key file: check the signature as a deployment does (repeatable)");
  AddFormatOption(bl, &blookup.format);

  auto* bv = bundle->add_subcommand("verify", "Check a bundle's Ed25519 signature against trusted keys");
  bv->add_option("file", bverify.file, "Bundle file (.tfb)")->required();
  bv->add_option("--key", bverify.keys, "Trusted public key file (repeatable)")->required();

  std::string diff_before, diff_after;
  double diff_noise = 0.02;
  auto* bd = bundle->add_subcommand(
      "diff", "Compare two bundles' winners: latency changes beyond the measured noise "
              "(exit 3 when a winner got slower)");
  bd->add_option("before", diff_before, "Earlier bundle (.tfb)")->required();
  bd->add_option("after", diff_after, "Later bundle (.tfb)")->required();
  bd->add_option("--noise-floor", diff_noise, "Smallest relative change that counts")->capture_default_str();
  std::string diff_format = "table";
  AddFormatOption(bd, &diff_format);

  // op check
  auto* opc = app.add_subcommand("op", "Work on op folders");
  opc->require_subcommand(1);
  OpCheckArgs opcheck;
  auto* oc = opc->add_subcommand("check", "Check an op without a GPU: spec, legal configs per GPU model, compiles");
  oc->add_option("dir", opcheck.dir, "Op folder (op.toml and its sources)")->required();
  oc->add_option("--arch", opcheck.archs, "Architectures to compile for")->delimiter(',')->capture_default_str();
  oc->add_option("--gpu", opcheck.gpus, "Count legal configs on these known models only");
  oc->add_option("--coordinator", opcheck.coordinator,
                 "Also count legal configs on the GPU models of this running coordinator's live workers");
  oc->add_option("--curve-key", opcheck.curve_key, "CURVE secret key file of this client (with --coordinator)");
  oc->add_option("--coordinator-key", opcheck.coordinator_key, "CURVE public key file of the coordinator");
  oc->add_option("--include-root", opcheck.include_roots,
                 "NAME=PATH: where the op's include root NAME is, as a worker's --include-root");
  oc->add_option("--shape", opcheck.shapes,
                 "Count the configs legal at this shape too (rules that read dims), like M=128,N=4096,K=4096");
  oc->add_flag("--all", opcheck.all, "Compile every legal config, not a sample");
  oc->add_option("--sample", opcheck.sample, "Configs compiled per dtype and architecture")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();

  // keys
  auto* keys = app.add_subcommand("keys", "Generate key pairs");
  keys->require_subcommand(1);
  KeysArgs kcurve, ksign;
  auto* kc = keys->add_subcommand("curve", "CURVE key pair for coordinator, worker or client links");
  kc->add_option("--out", kcurve.out, "Secret key file; the public key goes to <out>.pub")->required();
  kc->add_option("--name", kcurve.name, "Name written beside the public key (allow-list comment)");
  kc->add_flag("--force", kcurve.force, "Replace existing files");
  auto* ks = keys->add_subcommand("sign", "Ed25519 key pair for signing bundles");
  ks->add_option("--out", ksign.out, "Secret key file; the public key goes to <out>.pub")->required();

  // tune
  TuneArgs tune_args;
  auto* t = app.add_subcommand("tune", "Run one sweep end to end on this host: coordinator, workers, store, bundle");
  t->add_option("--sweep", tune_args.sweep_file, "Sweep TOML file (instead of --op/--dtype/--shape)");
  t->add_option("--op", tune_args.ops, "Op to tune")->capture_default_str();
  t->add_option("--dtype", tune_args.dtypes, "Dtype(s)")->capture_default_str();
  t->add_option("--shape", tune_args.shapes, "Shape(s), like M=4096,N=4096,K=4096")->capture_default_str();
  t->add_option("--ops-dir", tune_args.ops_dir, "Folder holding the op folders")->capture_default_str();
  t->add_option("--store", tune_args.store, "RocksDB store directory")->capture_default_str();
  t->add_option("--bundle", tune_args.bundle, "Bundle output path without extension (default bundles/<sweep>)");
  t->add_option("--workers", tune_args.sim_workers, "sim: number of local worker processes' worth of threads")->capture_default_str();
  t->add_option("--configs-per-unit", tune_args.configs_per_unit, "Work unit size (0 = the coordinator's default)");
  t->add_option("--confirm-top", tune_args.confirm_top,
                "Confirm phase: time the N fastest configs of each shape again together at the end")
      ->capture_default_str();
  t->add_option("--profile-top", tune_args.profile_top,
                "Profile the N fastest configs of each shape with Nsight Compute (ncu) after the confirm phase; "
                "`results` then shows their bottleneck")
      ->check(CLI::Range(0u, kMaxConfirmTop));
  t->add_option("--confirm-seconds", tune_args.confirm_seconds,
                "Confirm phase: seconds of interleaved timing per shape (default: the sweep file's, else 2)")
      ->check(CLI::Range(0.01, 3600.0));
  t->add_option("--confirm-timing", tune_args.confirm_timing,
                "Confirm phase: burst (short timings from an idle GPU: figures that repeat run to run), "
                "sustained (back-to-back windows: speed under load, which moves with clocks and heat) or "
                "auto (bursts where sustained load slows the configs, else sustained); "
                "default: the sweep file's, else auto");
  t->add_flag("--one-pass", tune_args.one_pass,
              "No refine pass: judge contenders against the best so far while screening, so that which configs "
              "get timed to the CI target depends on the order they ran in and on the device count "
              "(default: the sweep file's refine_pass, else a refine pass)");
  t->add_option("--format", tune_args.format, "Result output: table, csv, json")->capture_default_str();
  t->add_flag("--quiet", tune_args.quiet, "No progress bar");
  t->add_option("--sign-key", tune_args.sign_key,
                "Ed25519 secret key file to sign the bundle with (default: as for publish)");
  t->add_flag("--unsigned", tune_args.unsigned_bundle, "Write the bundle unsigned (deployments refuse it)");
  AddWorkerOptions(t, &tune_args.worker, /*for_tune=*/true);

  // nightly
  NightlyArgs nightly;
  auto* n = app.add_subcommand(
      "nightly", "Run a sweep into a dated store, publish its bundle and flag regressions against the "
                 "last night (exit 3 when a winner got slower than the measured noise)");
  n->add_option("--sweep", nightly.tune.sweep_file, "Sweep TOML file")->required()->check(CLI::ExistingFile);
  n->add_option("--history", nightly.history, "Folder of past nights")->required();
  n->add_option("--ops-dir", nightly.tune.ops_dir, "Folder holding the op folders")->capture_default_str();
  n->add_option("--noise-floor", nightly.noise_floor, "Smallest relative change that counts")->capture_default_str();
  n->add_option("--sign-key", nightly.tune.sign_key,
                "Ed25519 secret key file to sign the bundle with (default: as for publish)");
  n->add_flag("--unsigned", nightly.tune.unsigned_bundle, "Write the bundle unsigned");
  n->add_option("--workers", nightly.tune.sim_workers, "sim: local workers")->capture_default_str();
  AddWorkerOptions(n, &nightly.tune.worker, /*for_tune=*/true);

  // The log of the long-running processes (tune/log.h).
  std::string log_level, log_format;
  for (CLI::App* sub : {c, w, t, n}) {
    sub->add_option("--log-level", log_level, "debug, info, warn or error (default: $TUNEFARM_LOG_LEVEL, else info)")
        ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
    sub->add_option("--log-format", log_format,
                    "text, or json: one JSON object per line (default: $TUNEFARM_LOG_FORMAT, else text)")
        ->check(CLI::IsMember({"text", "json"}));
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version end the parse too, with status 0.
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  // --verbose is the debug level (the lease and unit lines), unless a level is named.
  if (log_level.empty() && ((c->parsed() && coord.opts.verbose) || (w->parsed() && work.opts.verbose))) log_level = "debug";
  if (Status st = log::Configure(log_level, log_format); !st.ok()) {
    std::fprintf(stderr, "tunefarm: %s\n", st.message().c_str());
    return kExitUsage;
  }

  if (c->parsed()) return RunCoordinator(coord, &g_stop);
  if (w->parsed()) return RunWorker(work, &g_stop);
  if (r->parsed()) return RunRunner(runner_device);
  if (s->parsed()) return RunSubmit(submit, &g_stop);
  if (st->parsed()) return RunStatus(status);
  if (cn->parsed()) return RunCancel(cancel);
  if (res->parsed()) return RunResults(results, /*best_only=*/false);
  if (b->parsed()) return RunResults(best, /*best_only=*/true);
  if (p->parsed()) return RunPublish(publish);
  if (cmp->parsed()) return RunCompare(compare);
  if (bs->parsed()) return RunBundleShow(bshow);
  if (bl->parsed()) return RunBundleLookup(blookup);
  if (bv->parsed()) return RunBundleVerify(bverify);
  if (bd->parsed()) return RunBundleDiff(diff_before, diff_after, diff_noise, diff_format);
  if (oc->parsed()) return RunOpCheck(opcheck);
  if (kc->parsed()) return RunKeysCurve(kcurve);
  if (ks->parsed()) return RunKeysSign(ksign);
  if (t->parsed()) return RunTune(tune_args, &g_stop);
  if (n->parsed()) return RunNightly(nightly, &g_stop);
  return 2;
}
