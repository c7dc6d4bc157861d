// Commands that run a farm on this host: tune, nightly.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <set>
#include <string>

#include "base/log.h"
#include "command_util.h"
#include "coordinator_client.h"
#include "commands.h"
#include "local_farm.h"
#include "progress.h"
#include "report.h"
#include "base/clock.h"
#include "base/json_text.h"
#include "base/text.h"
#include "opspec/config_space.h"
#include "opspec/op_definition.h"
#include "report/nightly.h"
#include "report/pipeline.h"
#include "search/registry.h"
#include "publish/publish.h"
#include "opspec/sweep_file.h"
#ifdef TUNEFARM_WITH_CUDA
#include "measure/cuda/cuda_backend.h"
#endif

namespace tune {
namespace {

// Whether any op of `sweep` is a program op; an op whose spec does not
// parse counts as one (the sweep then fails on it, not on a refused program).
bool HasProgramOp(const SweepSubmit& sweep) {
  for (size_t i = 0; i < sweep.op_packages.size(); ++i) {
    auto spec = SharedOpSpec(sweep.op_packages[i], i < sweep.ops.size() ? sweep.ops[i] : "op");
    if (!spec.ok() || (*spec)->program) return true;
  }
  return false;
}

// What the ops' shape rules (rules that read dims) left out of each shape:
// configs never timed there, not failures.
void PrintShapeRules(FILE* out, const SweepSubmit& sweep, const std::vector<DeviceInfo>& devices) {
  std::set<std::string> models;
  for (size_t i = 0; i < sweep.op_packages.size(); ++i) {
    auto shared = SharedOpSpec(sweep.op_packages[i], sweep.ops[i]);
    if (!shared.ok() || (*shared)->shape_constraints.empty()) continue;
    const OpSpec* spec = shared->get();
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
        std::fprintf(out, "shape rules: %s at %s on %s: %zu of %zu configs legal (%zu never timed there: %s)\n",
                    spec->name.c_str(), shape.Canonical().c_str(), d.model.c_str(), legal->size(), all->size(),
                    all->size() - legal->size(), why.c_str());
      }
    }
  }
}

// The GEMM a tune without --op measures (the README's first command): the
// sm_90a family where every GPU the run uses is a Hopper, the portable GEMM
// elsewhere and on the sim backend.
std::string DefaultGemm(const WorkerArgs& w) {
#ifdef TUNEFARM_WITH_CUDA
  if (w.opts.backend == "sim") return "gemm";
  auto found = DiscoverCudaDevices();
  if (!found.ok()) return "gemm";
  bool any = false, hopper = true;
  for (const DeviceInfo& d : *found) {
    const auto& wanted = w.opts.cuda_devices;
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), d.index) == wanted.end()) continue;
    any = true;
    hopper = hopper && d.cc_major == 9 && d.cc_minor == 0;
  }
  return any && hopper ? "gemm_hopper" : "gemm";
#else
  (void)w;
  return "gemm";
#endif
}

// Where a sweep's time went, from its workers' counters over its wall time.
struct Pipeline {
  double wall_seconds = 0;
  size_t devices = 0;
  // Fractions in [0, 1]: device threads inside check and timing over the
  // devices' wall time; compiler time over the compile pools' threads' wall
  // time.
  double devices_busy = 0, compile_busy = 0;
};
Pipeline PipelineOf(const WorkerStats& total, size_t devices, double wall_seconds) {
  Pipeline p;
  p.wall_seconds = wall_seconds;
  p.devices = devices;
  p.devices_busy = BusyFraction(total.measure_seconds, wall_seconds, double(devices));
  p.compile_busy = BusyFraction(total.compile_seconds, wall_seconds, double(total.compile_threads));
  return p;
}

// The sweep's figures as `tune --format json` writes them ("sweep").
nlohmann::ordered_json SweepJson(const WorkerStats& total, const Pipeline& p, bool simulated) {
  nlohmann::ordered_json pipeline = {{"devices_busy", p.devices_busy},
                                     {"compile_busy", p.compile_busy},
                                     {"compiled", total.compiled},
                                     {"fetched", total.fetched},
                                     {"cached", total.compile_cache_hits},
                                     {"compile_seconds", total.compile_seconds},
                                     {"compile_threads", total.compile_threads},
                                     {"device_wait_seconds", total.compile_wait_seconds},
                                     {"units", total.units},
                                     {"units_compiled_ahead", total.units_ahead},
                                     {"measure_seconds", total.measure_seconds},
                                     {"wall_seconds", p.wall_seconds}};
  return {{"configs", total.screened.size()},
          {"results", total.measured},
          {"results_again", total.measured_again},
          {"wall_seconds", p.wall_seconds},
          {"configs_per_second", p.wall_seconds > 0 ? double(total.screened.size()) / p.wall_seconds : 0.0},
          {"devices", p.devices},
          {"pipeline", std::move(pipeline)},
          {"simulated", simulated}};
}

// Removes the night folders of `history` (named by their UTC start,
// YYYYMMDDTHHMMSSZ) beyond the newest `keep`; 0 keeps every one. Other
// entries are not nights and stay. Runs once tonight's night is stored, so
// the newest kept is tonight's; a folder that cannot be removed is named on
// stderr and the night still counts.
void PruneNights(const std::string& history, uint32_t keep) {
  namespace fs = std::filesystem;
  if (keep == 0) return;
  auto is_night = [](const std::string& n) {
    if (n.size() != 16 || n[8] != 'T' || n[15] != 'Z') return false;
    for (size_t i = 0; i < 15; ++i)
      if (i != 8 && (n[i] < '0' || n[i] > '9')) return false;
    return true;
  };
  std::error_code ec;
  std::vector<std::string> nights;
  for (fs::directory_iterator it(history, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec) && is_night(it->path().filename().string()))
      nights.push_back(it->path().filename().string());
  }
  if (ec) {
    std::fprintf(stderr, "nightly: --keep: cannot list %s: %s\n", history.c_str(), ec.message().c_str());
    return;
  }
  std::sort(nights.begin(), nights.end());
  for (size_t i = 0; i + keep < nights.size(); ++i) {
    const fs::path old = fs::path(history) / nights[i];
    fs::remove_all(old, ec);
    if (ec) std::fprintf(stderr, "nightly: --keep: cannot remove %s: %s\n", old.c_str(), ec.message().c_str());
    else std::fprintf(stderr, "nightly: removed %s (--keep %u)\n", old.c_str(), keep);
  }
}

// What the sweep's budgets did, where a table would not say it: keys that
// `auto` measured whole (a budget applies to searched keys only), and
// searched keys that the seconds bound stopped before their budget.
std::vector<std::string> BudgetNotes(const SweepSubmit& sweep, const std::map<std::string, KeyCoverage>& coverage) {
  std::vector<std::string> out;
  size_t whole = 0, cut = 0;
  uint64_t most_legal = 0;
  for (const auto& [key, c] : coverage) {
    if (c.state == KeyCoverage::State::kExhausted && c.strategy == WholeProposer()) {
      ++whole;
      most_legal = std::max(most_legal, c.legal);
    } else if (c.budget > 0 && c.evaluated < c.budget && c.evaluated < c.legal) {
      ++cut;
    }
  }
  const std::string& strategy = sweep.strategy.empty() ? std::string(kDefaultStrategy) : sweep.strategy;
  const bool automatic = strategy == kAutoStrategy;
  if (sweep.budget > 0 && whole > 0 && (automatic || MeasuresWhole(strategy)))
    out.push_back("budget: " + std::to_string(whole) + " key(s) measured whole (up to " + std::to_string(most_legal) +
                  " legal configs): " +
                  (automatic ? "auto measures every config of a space it covers"
                             : "--strategy " + strategy + " measures every config") +
                  "; the budget of " + std::to_string(sweep.budget) +
                  " applies to searched keys (--strategy random or model samples it)");
  if (sweep.budget_seconds > 0 && cut > 0) {
    char bound[32];
    if (sweep.budget_seconds < 60) std::snprintf(bound, sizeof bound, "%g s", sweep.budget_seconds);
    out.push_back("budget: " + std::to_string(cut) + " searched key(s) stopped at the seconds bound (" +
                  (sweep.budget_seconds < 60 ? std::string(bound) : FormatDuration(sweep.budget_seconds)) +
                  ") before their budget of " + std::to_string(sweep.budget));
  }
  return out;
}

// Ctrl-C (or SIGTERM) in `tune`: its coordinator is this process's and goes
// with it, so the sweep is cancelled (its keys' coverage recorded as
// partial, the rows stored kept) before the farm stops. The count is the
// store's, read once the farm has stopped: a batch still on its way to the
// store when the cancel was answered is counted too.
int Interrupted(const ClientArgs& local, const std::string& sweep_id, const std::string& store, LocalFarm& farm) {
  CoordinatorClient client(local.endpoint, 5);
  auto reply = client.Call(SweepCancel{sweep_id});
  farm.Stop();
  const SweepStatus* status = reply.ok() ? std::get_if<SweepStatus>(&*reply) : nullptr;
  std::optional<uint64_t> stored;
  if (auto db = OpenStore(store); db.ok()) {
    uint64_t n = 0;
    if ((*db)->Scan(ResultFilter{}, [&](const Measurement& m) {
              n += m.sweep_id == sweep_id;
              return true;
            }).ok())
      stored = n;
  }
  if (!status || status->sweeps.empty()) {
    log::Note("tune", "interrupted: sweep " + sweep_id + " stopped with this process (" +
                          (reply.ok() ? std::string("no status") : reply.status().message()) + "); the rows stored stay in " +
                          store);
  } else {
    const SweepProgress& p = status->sweeps.front();
    log::Note("tune", Fmt("interrupted: sweep %s cancelled with %llu of %llu pairs stored in %s (its keys' coverage "
                          "says partial); tune again to measure them",
                          sweep_id.c_str(), (unsigned long long)stored.value_or(p.pairs_done),
                          (unsigned long long)p.pairs_total, store.c_str()));
  }
  return kExitInterrupted;
}

}  // namespace

int RunTune(TuneArgs& args, const std::atomic<bool>* stop) {
  RowFormat format;
  if (!ParseRowFormat(args.format, &format)) return Usage("--format: unknown '" + args.format + "'");
  Status st = FinishWorkerArgs(args.worker);
  if (!st.ok()) return Fail(st.message());
  if (args.ops_dir.empty()) args.ops_dir = DefaultOpsDir();
  if (args.sweep_file.empty() && args.ops.empty()) {
    args.ops = {DefaultGemm(args.worker)};
    log::Note("tune", "no --op: " + args.ops[0] + " (" +
                     (args.ops[0] == "gemm" ? "the portable GEMM" : "the sm_90a GEMM family, for the Hopper GPUs here") +
                     ")");
  }
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
  if (Status st = ApplySweepTiming(&*sweep, args.timing, "--timing"); !st.ok()) return Usage(st.message());
  if (!args.strategy.empty()) sweep->strategy = args.strategy;
  if (!args.objective.empty()) sweep->objective = args.objective;
  if (args.seed) sweep->seed = *args.seed;
  if (args.budget) sweep->budget = args.budget;
  if (args.budget_seconds > 0) sweep->budget_seconds = args.budget_seconds;
  if (Status st = ApplyRetry(args.retry, &*sweep); !st.ok()) return Usage(st.message());
  if (Status st = CheckSearchFields(*sweep, "--"); !st.ok()) return Usage(st.message());
  if (!args.configs.empty()) {
    sweep->configs.clear();
    for (size_t i = 0; i < args.configs.size(); ++i) {
      Config c;
      if (!ParseParamValues(args.configs[i], &c.params) || c.params.empty())
        return Usage("--config[" + std::to_string(i) + "] '" + args.configs[i] +
                     "': expected NAME=VALUE,... like BM=128,BN=256");
      sweep->configs.push_back(std::move(c));
    }
  }
  if (Status st = CheckListedSweep(&*sweep, args.configs.empty() ? args.sweep_file + ": [sweep] configs" : "--config");
      !st.ok())
    return Usage(st.message());

  LocalFarmOptions fopts;
  fopts.worker = args.worker.opts;
  // Only a program op runs programs: a sweep of none gets a worker that
  // runs none (and so no warning about running them as root).
  fopts.worker.allow_programs = HasProgramOp(*sweep);
  fopts.sim_workers = args.sim_workers;
  fopts.store = args.store;
  fopts.max_raw_configs = args.max_raw_configs;
  fopts.search_in_flight = args.search_in_flight;
  auto farm = LocalFarm::Start(fopts);
  if (!farm.ok()) return Fail(farm.status().message());
  auto kept = (*farm)->KeepModelsHere(&*sweep);
  if (!kept.ok()) return Fail(kept.status().message());
  if (!kept->empty()) log::Note("tune", *kept);
  const double sweep_start = NowSeconds();
  ClientArgs local;
  std::string sweep_id;
  auto done = (*farm)->Run(*sweep, [&](const std::string& endpoint, const std::string& id) {
    local.endpoint = endpoint;
    sweep_id = id;
    // The coordinator runs in this process, over loopback: frequent polls
    // keep the sweep's wall time from being rounded up to a poll.
    return WaitForSweep(local, id, args.quiet, stop, 0.005, 0, "Ctrl-C stops it");
  });
  const double sweep_seconds = NowSeconds() - sweep_start;
  if (stop->load() && !sweep_id.empty()) return Interrupted(local, sweep_id, args.store, **farm);
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
  const bool nothing_measured = rows.empty();
  std::map<std::string, uint64_t> failures;       // by class
  std::map<std::string, uint64_t> failed_causes;  // by "class: WhyFailed(message)"
  uint64_t valid_rows = 0, failed_rows = 0;
  for (const Measurement& m : rows) {
    if (m.failure == FailureClass::kNone) {
      valid_rows += m.Valid() ? 1 : 0;
      continue;
    }
    ++failed_rows;
    ++failures[FailureClassName(m.failure)];
    ++failed_causes[std::string(FailureClassName(m.failure)) + ": " + WhyFailed(m.failure_message)];
  }
  Objective objective = Objective::kTime;
  ParseObjective(sweep->objective, &objective);  // checked with the sweep (CheckSearchFields)
  const RowNotes row_notes = NotesOf(store, rows, objective);
  const uint32_t top = RowsPerKey(args.top, format);
  if (const size_t left_out = KeepTopRows(&rows, top, row_notes))
    log::Note("tune", Fmt("%zu more row(s) left out (--top %u; --top 0 prints every row, as `tunefarm results --store %s` "
                     "does)", left_out, top, args.store.c_str()));
  const Pipeline pipeline = PipelineOf(total, devices, sweep_seconds);
  // --format json: stdout holds one document (rows, the sweep's figures,
  // failures, paths), written once the bundle is; the lines for people go
  // to stderr, or nowhere when the log writes JSON (the document holds
  // what they say).
  const bool json = format == RowFormat::kJson;
  std::unique_ptr<FILE, int (*)(FILE*)> no_text(json && log::WritesJson() ? std::fopen("/dev/null", "w") : nullptr,
                                                [](FILE* f) { return f ? std::fclose(f) : 0; });
  FILE* text = no_text ? no_text.get() : json ? stderr : stdout;
  nlohmann::ordered_json doc;
  if (json) {
    // The rows exactly as `results --format json` writes them.
    doc["results"] = nlohmann::ordered_json::parse(
        RenderReport(MeasurementReport(std::move(rows), ops, row_notes), format), nullptr, /*allow_exceptions=*/false);
    if (doc["results"].is_discarded()) return Fail("tune: the rows did not make a JSON document");
    doc["sweep"] = SweepJson(total, pipeline, (*farm)->simulated());
  } else {
    std::fputs(RenderReport(MeasurementReport(std::move(rows), ops, row_notes), format).c_str(), stdout);
  }
  // The sim's own compile makes no image and runs no compiler (--sim-compile
  // nvrtc runs NVRTC): its counts are the pipeline's, its waits the queue's.
  const bool no_compiler = (*farm)->simulated() && args.worker.opts.sim_compile == "sim" && total.compile_seconds == 0;
  std::fprintf(text, "\nsweep: %llu configs, %llu (config, shape) results (%llu of them refined or confirmed) in "
              "%.2f s = %.2f configs/s on %zu device(s)\n"
              "compile: %llu compiled (%.1f s of compiler time%s), %llu from the cubin cache, %llu fetched; "
              "device threads waited %.1f s for %s\n"
              "busy: devices were checking/timing %.1f s = %.0f%% of wall time\n",
              (unsigned long long)total.screened.size(), (unsigned long long)total.measured,
              (unsigned long long)total.measured_again, sweep_seconds,
              sweep_seconds > 0 ? double(total.screened.size()) / sweep_seconds : 0.0, devices,
              (unsigned long long)total.compiled, total.compile_seconds,
              no_compiler ? ": simulated compiles, no compiler ran; --sim-compile nvrtc runs NVRTC" : "",
              (unsigned long long)total.compile_cache_hits, (unsigned long long)total.fetched,
              total.compile_wait_seconds, no_compiler ? "the compile pipeline's queue" : "compiles",
              total.measure_seconds, 100.0 * pipeline.devices_busy);
  PrintShapeRules(text, *sweep, (*farm)->devices());
  if ((*farm)->simulated()) {
    std::fprintf(text, "\nSIMULATED: these figures come from the sim backend's %s, not a GPU.\n",
                args.worker.opts.sim_truth ? "ground-truth file (--sim-truth) and cost model" : "cost model");
  }

  if (nothing_measured) {
    // An empty space (every config breaks a rule at these shapes): said
    // as such, not as a publish error.
    const std::set<std::string> models = (*farm)->models();
    const std::string why = "tune: nothing to measure, no bundle: no config of " + Join(sweep->ops, ", ") +
                            " is legal at the shapes asked on " +
                            Join(std::vector<std::string>(models.begin(), models.end()), ", ") +
                            " (`tunefarm op check " + sweep->ops.front() +
                            " --shape ...` names the rules that leave the space empty)";
    if (json) {
      doc["failures"] = failures;
      doc["error"] = why;
      doc["store"] = args.store;
      std::printf("%s\n", DumpJson(doc, 2).c_str());
    }
    return Fail(why);
  }
  if (!valid_rows && !failed_causes.empty()) {
    // Nothing to publish: the cause once, not a publish error.
    const auto most = std::max_element(failed_causes.begin(), failed_causes.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
    const std::string why = "tune: every config failed, no bundle; " + std::to_string(most->second) + " of " +
                            std::to_string(failed_rows) + " say: " + most->first;
    if (json) {
      doc["failures"] = failures;
      doc["error"] = why;
      doc["store"] = args.store;
      std::printf("%s\n", DumpJson(doc, 2).c_str());
    } else {
      std::printf("failures: %s\n", FormatFailures(failures).c_str());
    }
    return Fail(why);
  }
  const std::string out = args.bundle.empty() ? "bundles/" + sweep->name : args.bundle;
  ResultFilter filter;
  std::vector<std::string> notes;
  PublishOptions publish = PublishOptionsHere(true);
  publish.objective = objective;
  auto bundle = BuildBundle(store, filter, sweep->name, publish, &notes);
  if (!bundle.ok()) return Fail(bundle.status().message());
  for (const std::string& n : notes) log::Note("publish", n);
  st = WriteBundle(*bundle, out, args.sign_key, args.unsigned_bundle);
  if (!st.ok()) return Fail(st.message());
  if (json) {
    doc["failures"] = failures;
    doc["store"] = args.store;
    doc["bundle"] = out + ".tfb";
    std::printf("%s\n", DumpJson(doc, 2).c_str());
  } else {
    std::printf("failures: %s\n", FormatFailures(failures).c_str());
  }
  for (const std::string& line : BudgetNotes(*sweep, row_notes.coverage)) std::fprintf(text, "%s\n", line.c_str());
  std::fprintf(text, "\nstore:  %s\nbundle: %s.tfb (and %s.json)\n", args.store.c_str(), out.c_str(),
              out.c_str());
  std::fprintf(text, "next:   tunefarm results --store %s --log      (every row; failures with their whole log)\n"
              "        tunefarm bundle show %s.tfb\n"
              "        deploy it: README, \"After the first tune\" (C++ tunefarm::launcher, Python tunefarm)\n",
              args.store.c_str(), out.c_str());
  return 0;
}

// A night on a farm: the sweep file submitted to its coordinator, waited
// for, and the night's bundle published from the coordinator's store (read
// remotely: the rows stay there). The farm's store keeps one row per kernel
// and config, so the sweep measures what it lacks (a new version of an op,
// a new GPU model, a new shape); last night's winners and their runners-up
// (`previous`, a bundle; "" on the first night) are then measured again
// (RetimeOnFarm): `*retimed` gets last night's bundle, those of its entries
// retimed, as last night and as tonight (RetimedBundle), the same configs.
int RunNightOnFarm(NightlyArgs& args, const std::string& previous, std::optional<std::pair<Bundle, Bundle>>* retimed,
                   const std::atomic<bool>* stop) {
  if (args.tune.ops_dir.empty()) args.tune.ops_dir = DefaultOpsDir();
  auto sweep = LoadSweepFile(args.tune.sweep_file, args.tune.ops_dir);
  if (!sweep.ok()) return Fail(sweep.status().message());
  CoordinatorClient client(args.remote, 10);
  auto reply = client.Call(*sweep);
  if (!reply.ok()) return Fail(reply.status().message());
  const auto* accepted = std::get_if<SweepAccepted>(&*reply);
  if (!accepted) return Fail("coordinator sent an unexpected reply");
  std::printf("nightly: sweep %s on %s\n", accepted->sweep_id.c_str(), args.remote.endpoint.c_str());
  std::fflush(stdout);
  auto done = WaitForSweep(args.remote, accepted->sweep_id, /*quiet=*/true, stop, 2.0, args.timeout);
  if (!done.ok()) return Fail(done.status().message());
  if (done->state != "done") return Fail("sweep " + done->sweep_id + " " + done->state + ": no bundle tonight");
  // The keys measured again tonight rank tonight's rows only (the
  // coordinator's clock: the sweep's start), so that a config not timed
  // again does not win on last night's figure.
  std::set<std::string> retimed_keys;
  const int64_t tonight = done->started_unix;
  auto key_of = [](const std::string& model, const std::string& op, const std::string& dtype,
                   const std::string& shape) { return model + '\0' + op + '\0' + dtype + '\0' + shape; };
  if (!previous.empty() && args.retime_top > 0) {
    auto last = ReadBundleFile(previous);
    if (!last.ok()) return Fail(last.status().message());
    std::erase_if(last->entries, [&](const BundleEntry& e) {  // an op the sweep no longer names is not tonight's
      return std::find(sweep->ops.begin(), sweep->ops.end(), e.op) == sweep->ops.end();
    });
    if (!last->entries.empty()) {
      auto rows = RetimeOnFarm(args.remote, RetimeKeysOf(*last), args.retime_top, args.tune.ops_dir,
                               sweep->name + "-retime", sweep->priority, args.timeout, stop);
      if (!rows.ok()) return Fail("retime of last night's winners: " + rows.status().message());
      std::printf("nightly: %zu of last night's key(s) measured again (up to %u config(s) each)\n",
                  last->entries.size(), args.retime_top);
      Bundle tonight = RetimedBundle(*last, *rows);
      for (const BundleEntry& e : last->entries)
        retimed_keys.insert(key_of(e.gpu_model, e.op, e.dtype, e.shape.Canonical()));
      retimed->emplace(std::move(last).value(), std::move(tonight));
    }
  }
  // The sweep's ops' rows travel, and the bundle ships those.
  std::vector<ResultFilter> filters;
  for (const std::string& op : sweep->ops) filters.push_back(ResultFilter{"", op, "", "", ""});
  auto store = OpenStoreOf("", args.remote, filters);
  if (!store.ok()) return Fail(store.status().message());
  std::vector<std::string> notes;
  PublishOptions options = PublishOptionsHere(true);
  if (!retimed_keys.empty())
    options.rank = [&](const Measurement& m) {
      return m.unix_time >= tonight || !retimed_keys.count(key_of(m.gpu_model, m.op, m.dtype, m.shape));
    };
  auto bundle = BuildBundle(**store, ResultFilter{}, sweep->name, options, &notes);
  if (!bundle.ok()) return Fail(bundle.status().message());
  for (const std::string& n : notes) log::Note("publish", n);
  Status st = WriteBundle(*bundle, args.tune.bundle, args.tune.sign_key, args.tune.unsigned_bundle);
  if (!st.ok()) return Fail(st.message());
  std::printf("nightly: %zu entries from the farm's store; bundle %s.tfb\n", bundle->entries.size(),
              args.tune.bundle.c_str());
  return 0;
}

// While alive (and `on`), what this process writes to stdout goes to stderr.
class StdoutToStderr {
 public:
  explicit StdoutToStderr(bool on) : saved_(on ? ::dup(STDOUT_FILENO) : -1) {
    if (saved_ < 0) return;
    std::fflush(stdout);
    ::dup2(STDERR_FILENO, STDOUT_FILENO);
  }
  ~StdoutToStderr() {
    if (saved_ < 0) return;
    std::fflush(stdout);
    ::dup2(saved_, STDOUT_FILENO);
    ::close(saved_);
  }
  StdoutToStderr(const StdoutToStderr&) = delete;
  StdoutToStderr& operator=(const StdoutToStderr&) = delete;

 private:
  int saved_;
};

int RunNightly(NightlyArgs& args, const std::atomic<bool>* stop) {
  namespace fs = std::filesystem;
  if (args.history.empty()) return Usage("--history is required");
  if (args.format != "table" && args.format != "json" && args.format != "markdown")
    return Usage("--format: unknown '" + args.format + "' (table | json | markdown)");
  const bool json = args.format == "json", markdown = args.format == "markdown";
  FILE* say = json || markdown ? stderr : stdout;  // the document alone on stdout
  // Each night on this host gets its own store: re-measuring an unchanged
  // kernel must land beside last night's figures, not be folded into them
  // (a night on a farm uses the farm's: RunNightOnFarm).
  char stamp[32];
  const std::time_t now = static_cast<std::time_t>(NowUnixSeconds());
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
  const std::string last = previous.empty() ? "" : (fs::path(args.history) / previous / "bundle.tfb").string();
  std::optional<std::pair<Bundle, Bundle>> retimed;  // a farm's night: last night's winners, then and now
  int rc;
  {
    // With --format json the night's own lines (the sweep's, publish's) go
    // to stderr too: stdout holds the document alone.
    StdoutToStderr quiet_stdout(json || markdown);
    rc = args.remote.endpoint.empty() ? RunTune(args.tune, stop) : RunNightOnFarm(args, last, &retimed, stop);
  }
  if (rc != 0) {
    std::error_code ec;
    fs::remove(night, ec);  // a night that made nothing leaves no folder (one with files stays)
    return rc;
  }
  nlohmann::ordered_json doc = {{"night", night.string()},
                                 {"bundle", (night / "bundle.tfb").string()},
                                 {"previous", previous.empty() ? nullptr : nlohmann::ordered_json(previous)},
                                 {"report", nullptr},
                                 {"retime_report", nullptr},
                                 {"regressions", false}};
  auto finish = [&](int code) {
    PruneNights(args.history, args.keep);
    if (json) std::printf("%s\n", doc.dump(2).c_str());
    return code;
  };
  if (previous.empty()) {
    std::fprintf(say, "\nnightly: first run in %s: nothing to compare with\n", args.history.c_str());
    return finish(0);
  }
  auto before = ReadBundleFile((fs::path(args.history) / previous / "bundle.tfb").string());
  if (!before.ok()) return Fail(before.status().message());
  auto after = ReadBundleFile((night / "bundle.tfb").string());
  if (!after.ok()) return Fail(after.status().message());
  auto report = CompareBundles(*before, *after, args.noise_floor);
  if (!report.ok()) return Fail(report.status().message());
  std::fprintf(say, "\nnightly: %s against %s\n%s", stamp, previous.c_str(), NightlyReportTable(*report).c_str());
  std::ofstream((night / "report.json").string()) << NightlyReportJson(*report);
  std::fprintf(say, "report: %s\n", (night / "report.json").string().c_str());
  doc["report"] = nlohmann::ordered_json::parse(NightlyReportJson(*report));
  if (markdown) std::printf("%s", NightlyReportMarkdown(*report).c_str());
  bool regressions = report->HasRegressions();
  if (retimed) {
    // The bundle's winners may be other configs' stored rows, timed on an
    // earlier night: the same configs timed tonight are what shows a slower
    // driver, clock or host.
    auto again = CompareBundles(retimed->first, retimed->second, args.noise_floor);
    if (!again.ok()) return Fail(again.status().message());
    std::fprintf(say, "\nnightly: last night's winners measured again tonight (the same configs)\n%s",
                 NightlyReportTable(*again).c_str());
    std::ofstream((night / "retime_report.json").string()) << NightlyReportJson(*again);
    std::fprintf(say, "report: %s\n", (night / "retime_report.json").string().c_str());
    doc["retime_report"] = nlohmann::ordered_json::parse(NightlyReportJson(*again));
    if (markdown)
      std::printf("\n## Last night's winners measured again tonight\n\n%s", NightlyReportMarkdown(*again).c_str());
    regressions |= again->HasRegressions();
  }
  doc["regressions"] = regressions;
  return finish(regressions ? kExitRegressions : 0);
}

void AddTuneCommands(CLI::App& app, std::vector<CliCommand>* out) {
  // The parsed values outlive this call: the commands in `out` own them.
  struct Parsed {
    TuneArgs tune_args;
    NightlyArgs nightly;
  };
  const auto parsed = std::make_shared<Parsed>();

  // tune
  TuneArgs& tune_args = parsed->tune_args;
  auto* t = app.add_subcommand("tune", "Run one sweep end to end on this host: coordinator, workers, store, bundle");
  t->add_option("--sweep", tune_args.sweep_file, "Sweep TOML file (instead of --op/--dtype/--shape)");
  t->add_option("--op", tune_args.ops,
                "Op to tune (default: gemm_hopper where every GPU used is a Hopper, else gemm)");
  t->add_option("--dtype", tune_args.dtypes, "Dtype(s)")->capture_default_str();
  t->add_option("--shape", tune_args.shapes, "Shape(s), like M=4096,N=4096,K=4096")->capture_default_str();
  t->add_option("--ops-dir", tune_args.ops_dir, kOpsDirHelp);
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
  t->add_option("--timing", tune_args.timing,
                "How each sample meets the L2 cache: cold (flushed before every sample: inputs come from DRAM) "
                "or hot (left warm: a small kernel inside a model); rows of the two never mix. Default: the "
                "sweep file's, else each op's [op] timing, else cold")
      ->check(CLI::IsMember({"cold", "hot"}));
  t->add_option("--objective", tune_args.objective,
                "What the searches and the printed and published winners minimise: time (the median), energy "
                "(per call) or edp (energy x time); energy and edp measure every config's energy (a " +
                    Fmt("%.1f", kSweepEnergySeconds) +
                    " s window, or --energy-seconds where longer). Default: the sweep file's, else time")
      ->check(CLI::IsMember({"time", "energy", "edp"}));
  t->add_option("--strategy", tune_args.strategy,
                "Which configs to measure per (GPU model, op, dtype, shape): " + StrategyHelp() +
                    "; default: the sweep file's, else " + kDefaultStrategy)
      ->check(CLI::IsMember(StrategyNames()));
  t->add_option("--seed", tune_args.seed, "The search's seed: the same seed and results give the same proposals (default: the sweep file's, else 0)");
  t->add_option("--budget", tune_args.budget,
                "Evaluations per (GPU model, op, dtype, shape) of a searching strategy (default: the sweep file's, else " +
                    std::to_string(kDefaultSearchBudget) + ")")
      ->check(CLI::Range(uint64_t{1}, kMaxSearchBudget));
  t->add_option("--budget-seconds", tune_args.budget_seconds,
                "Seconds per (GPU model, op, dtype, shape) a search keeps proposing configs (default: the sweep file's, else no bound)")
      ->check(CLI::Range(0.001, kMaxBudgetSeconds));
  t->add_option("--retry", tune_args.retry, kRetryHelp);
  t->add_option("--config", tune_args.configs,
                "Measure just this config, like BM=128,BN=256,... (repeatable; every param of the op, values from "
                "its [params] lists): the op's space is not searched (default: the sweep file's configs, else the space)");
  t->add_option("--in-flight", tune_args.search_in_flight,
                "Configs a searched key keeps in flight, proposed and not yet measured (0: sized from the devices "
                "and their pace; 16 is lock-step: each batch waits for the one before)")
      ->capture_default_str()
      ->check(CLI::Range(0u, 65536u));
  t->add_option("--max-raw-configs,--max-raw-points", tune_args.max_raw_configs,
                "Refuse ops with more raw config points (product of their axes' sizes) than this; a large space "
                "with a searching --strategy and --budget needs it raised")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, kMaxRawConfigPoints));
  t->add_flag("--one-pass", tune_args.one_pass,
              "No refine pass: judge contenders against the best so far while screening, so that which configs "
              "get timed to the CI target depends on the order they ran in and on the device count "
              "(default: the sweep file's refine_pass, else a refine pass)");
  t->add_option("--format", tune_args.format, "Result output: table, csv, json")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "csv", "json"}));
  t->add_flag("--quiet", tune_args.quiet, "No progress bar");
  t->add_option("--top", tune_args.top,
                "Rows per (GPU model, op, dtype, shape): the winner, then the fastest (default: " +
                    std::to_string(kTableTop) + " in a table, every row in JSON and CSV; 0 = every row)")
      ->check(CLI::Range(0u, 1000000u));
  t->add_option("--sign-key", tune_args.sign_key,
                "Ed25519 secret key file to sign the bundle with (default: as for publish)");
  t->add_flag("--unsigned", tune_args.unsigned_bundle, "Write the bundle unsigned (deployments refuse it)");
  AddWorkerOptions(t, &tune_args.worker, /*for_tune=*/true);
  out->push_back({.app = t,
                  .run = [parsed](const std::atomic<bool>* stop) { return RunTune(parsed->tune_args, stop); },
                  .logs = true});

  // nightly
  NightlyArgs& nightly = parsed->nightly;
  auto* n = app.add_subcommand(
      "nightly", "Run a sweep into a dated store, publish its bundle and flag regressions against the "
                 "last night (exit 3 when a winner got slower than the measured noise)");
  n->add_option("--sweep", nightly.tune.sweep_file, "Sweep TOML file")->required()->check(CLI::ExistingFile);
  n->add_option("--history", nightly.history, "Folder of past nights")->required();
  n->add_option("--keep", nightly.keep,
                "Keep the newest N nights of --history (tonight's among them), removing older night folders "
                "once tonight's is stored (default 0: keep every night)")
      ->check(CLI::NonNegativeNumber);
  n->add_option("--ops-dir", nightly.tune.ops_dir, kOpsDirHelp);
  n->add_option("--noise-floor", nightly.noise_floor, "Smallest relative change that counts")->capture_default_str();
  n->add_option("--sign-key", nightly.tune.sign_key,
                "Ed25519 secret key file to sign the bundle with (default: as for publish)");
  n->add_flag("--unsigned", nightly.tune.unsigned_bundle, "Write the bundle unsigned");
  n->add_flag("--quiet", nightly.tune.quiet, "No progress bar");
  n->add_option("--workers", nightly.tune.sim_workers, "sim: local workers")->capture_default_str();
  auto* on = n->add_option("--coordinator", nightly.remote.endpoint,
                           "Run the sweep on the farm of this coordinator (its workers measure, its store keeps "
                           "the rows; the night's bundle is published from it) instead of a farm on this host");
  n->add_option("--curve-key", nightly.remote.curve_secret_key, "With --coordinator: CURVE secret key file of this client")
      ->needs(on);
  n->add_option("--coordinator-key", nightly.remote.coordinator_key,
                "With --coordinator: CURVE public key file of the coordinator")
      ->needs(on);
  n->add_option("--sweep-timeout", nightly.timeout,
                "With --coordinator: give up waiting for the sweep after this many seconds (0 = never)")
      ->needs(on)
      ->check(CLI::NonNegativeNumber);
  n->add_option("--format", nightly.format,
                "table: the comparison on stdout; json: one document on stdout (night, bundle, previous, report, "
                "retime_report, regressions); markdown: the comparison as markdown on stdout (for a pull request "
                "or an issue); with json and markdown everything else goes to stderr")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "json", "markdown"}));
  n->add_option("--retime-top", nightly.retime_top,
                "With --coordinator: configs per key of last night's bundle measured again tonight (the winner and "
                "its runners-up; the farm's store keeps one row per config, so without it an unchanged key shows "
                "last night's figure); 0 = none")
      ->capture_default_str()
      ->needs(on)
      ->check(CLI::Range(0u, kMaxConfirmTop));
  AddWorkerOptions(n, &nightly.tune.worker, /*for_tune=*/true);
  // This host's workers run no night on a farm: their flags and --coordinator exclude each other.
  for (const char* local : {"--backend", "--sim-models", "--sim-faults", "--sim-compile", "--sim-truth", "--devices",
                            "--workers"})
    if (CLI::Option* o = n->get_option_no_throw(local)) o->excludes(on);
  out->push_back({.app = n,
                  .run = [parsed](const std::atomic<bool>* stop) { return RunNightly(parsed->nightly, stop); },
                  .logs = true});
}

}  // namespace tune
