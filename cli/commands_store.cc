// The store's commands: results, best, compare, publish, bundle show,
// lookup, verify and diff.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "store/store_transfer.h"
#include "command_util.h"
#include "commands.h"
#include "report.h"
#include "bundle/bundle.h"
#include "report/compare.h"
#include "base/json_text.h"
#include "base/log.h"
#include "report/nightly.h"
#include "report/t4.h"
#include "publish/publish.h"
#include "tune/runtime.h"
#include "bundle/signing.h"
#include "base/text.h"

namespace tune {

// --coordinator and its keys: read the store through a running coordinator
// (a client key on its allow-list) instead of opening --store on this host.
void AddRemoteReadOptions(CLI::App* app, ClientArgs* remote, CLI::Option* store) {
  auto* c = app->add_option("--coordinator", remote->endpoint,
                            "Read the store of the coordinator at this endpoint (remotely, as a client) instead of --store");
  c->excludes(store);
  app->add_option("--curve-key", remote->curve_secret_key, "With --coordinator: CURVE secret key file of this client")
      ->needs(c);
  app->add_option("--coordinator-key", remote->coordinator_key,
                  "With --coordinator: CURVE public key file of the coordinator")
      ->needs(c);
  AddConnectTimeoutOption(app, remote)->needs(c);
}

void AddQueryOptions(CLI::App* app, QueryArgs* args) {
  AddRemoteReadOptions(app, &args->remote,
                       app->add_option("--store", args->store, "RocksDB store directory")->capture_default_str());
  app->add_option("--gpu", args->filter.gpu_model, "Only this GPU model");
  app->add_option("--op", args->filter.op, "Only this op");
  app->add_option("--dtype", args->filter.dtype, "Only this dtype");
  app->add_option("--shape", args->filter.shape, "Only this shape, like M=4096,N=4096,K=4096");
  app->add_option("--config", args->config, "Only this config: its id or its params, like BM=128,BN=64,...");
  app->add_flag("--log", args->full_log, "After the table, every failure's whole message (compile logs)");
  app->add_option("--top", args->top,
                  "Per (GPU model, op, dtype, shape): only its N best rows, the winner first (default: " +
                      std::to_string(kTableTop) + " in a table, every row in JSON and CSV; 0 = every row)");
  app->add_option("--reports", args->reports,
                  "Write the Nsight Compute reports of the rows' profiles under this folder "
                  "(GPU/op/dtype/shape/kernel hash/config.ncu-rep; open with ncu-ui)");
  AddObjectiveOption(app, &args->objective);
  app->add_option("--format", args->format,
                  "table, csv, json, markdown or t4 (Kernel Tuner's T4 results document: its tools read it, "
                  "`search replay --results` replays it)")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "csv", "json", "markdown", "t4"}));
}

int RunResults(const QueryArgs& args, bool best_only) {
  RowFormat format = RowFormat::kJson;
  const bool t4 = args.format == "t4";
  if (!t4 && !ParseRowFormat(args.format, &format)) return Usage("--format: unknown '" + args.format + "'");
  Objective objective = Objective::kTime;
  ParseObjective(args.objective, &objective);  // checked by its option
  auto store = OpenStoreOf(args.store, args.remote, {args.filter});
  if (!store.ok()) return Fail(store.status().message());
  std::vector<Measurement> rows;
  if (best_only) {
    auto winners = Winners(**store, args.filter, {}, objective);
    if (!winners.ok()) return Fail(winners.status().message());
    rows = std::move(winners).value();
  } else {
    Status st = (*store)->Scan(args.filter, [&](const Measurement& m) {
      rows.push_back(m);
      return true;
    });
    if (!st.ok()) return Fail(st.message());
  }
  if (!args.config.empty()) {
    Config wanted;
    const bool by_params = ParseParamValues(args.config, &wanted.params);
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
  RowNotes notes = NotesOf(**store, rows, objective);
  // --log: every failure the filter selects, whether the table keeps its row or not.
  std::vector<Measurement> failed;
  if (args.full_log)
    for (const Measurement& m : rows)
      if (!m.Valid() && !m.failure_message.empty()) failed.push_back(m);
  const uint32_t top = t4 ? args.top.value_or(0) : RowsPerKey(args.top, format);
  if (const size_t left_out = KeepTopRows(&rows, top, notes))
    log::Note(best_only ? "best" : "results",
              Fmt("%zu more row(s) left out (--top %u; --top 0 prints every row)", left_out, top));
  if (t4) {
    const std::string doc = T4ResultsJson(rows);  // stdout holds the one document; --log goes to stderr
    std::fwrite(doc.data(), 1, doc.size(), stdout);
  } else {
    std::fputs(RenderReport(MeasurementReport(std::move(rows), OpsFromStore(**store), notes), format).c_str(), stdout);
  }
  if (!args.reports.empty()) {
    size_t written = 0;
    for (const auto& [key, p] : notes.profiles) {
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
    std::fprintf(t4 ? stderr : stdout, "\n== %s %s %s %s %s: %s\n%s\n", m.gpu_model.c_str(), m.op.c_str(), m.dtype.c_str(), m.shape.c_str(),
                m.config.Canonical().c_str(), FailureClassName(m.failure), m.failure_message.c_str());
  }
  return 0;
}

int RunCompare(const CompareArgs& args) {
  auto store = OpenStoreOf(args.store, args.remote, {ResultFilter{"", args.op, args.dtype, args.shape, ""}});
  if (!store.ok()) return Fail(store.status().message());
  CompareOptions o;
  o.op = args.op;
  o.dtype = args.dtype;
  o.shape = args.shape;
  o.gpu_models = args.gpus;
  auto c = CompareArchitectures(**store, o);
  if (!c.ok()) return Fail(c.status().message());
  std::string text;
  RowFormat format = RowFormat::kTable;
  if (args.format == "json") text = ComparisonJson(*c);
  else if (args.format == "html") text = ComparisonHtml(*c);
  else if (ParseRowFormat(args.format, &format)) text = RenderReport(ComparisonReport(*c), format);
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

int RunPublish(const PublishArgs& args) {
  auto store = OpenStoreOf(args.store, args.remote, {args.filter});
  if (!store.ok()) return Fail(store.status().message());
  const std::string name =
      args.name.empty() ? std::filesystem::path(args.out).filename().string() : args.name;
  std::vector<std::string> notes;
  PublishOptions options = PublishOptionsHere(!args.no_kernels);
  options.min_vs_baseline = args.min_vs_baseline;
  ParseObjective(args.objective, &options.objective);  // checked by its option
  std::set<std::string> ids, keys;
  if (!args.sweep.empty()) {
    // The keys the sweep measured (its rows'), each with its winner over
    // every row of the key, as without --sweep.
    Status scan = (*store)->Scan(args.filter, [&](const Measurement& m) {
      if (m.sweep_id.rfind(args.sweep, 0) == 0) {
        ids.insert(m.sweep_id);
        keys.insert(ModelKeyOf(m));
      }
      return true;
    });
    if (!scan.ok()) return Fail(scan.message());
    if (ids.empty()) return Fail("--sweep " + ToValidUtf8(args.sweep) + ": no row of the store is of such a sweep");
    if (ids.size() > 1)
      return Fail("--sweep " + ToValidUtf8(args.sweep) + ": a prefix of " + std::to_string(ids.size()) +
                  " sweeps' ids (" + Join(std::vector<std::string>(ids.begin(), ids.end()), ", ") +
                  "): give more of it");
    options.keep = [&keys](const Measurement& winner) { return keys.count(ModelKeyOf(winner)) > 0; };
  }
  auto bundle = BuildBundle(**store, args.filter, name, options, &notes);
  if (!bundle.ok()) return Fail(bundle.status().message());
  if (!args.sweep.empty())
    std::fprintf(stderr, "publish: %zu key(s) of sweep %s\n", bundle->entries.size(), ids.begin()->c_str());
  for (const std::string& n : notes) std::fprintf(stderr, "publish: %s\n", n.c_str());
  // Keys a sweep left part-measured ship the best of what was measured: said, not silent.
  std::vector<std::string> partial;
  for (const BundleEntry& e : bundle->entries)
    if (e.coverage.state == "partial")
      partial.push_back(e.gpu_model + " " + e.op + "/" + e.dtype + " " + e.shape.Canonical() + " (" +
                        std::to_string(e.coverage.evaluated) + " of " + std::to_string(e.coverage.legal) + ")");
  if (!partial.empty()) {
    const size_t shown = std::min<size_t>(partial.size(), 5);
    std::fprintf(stderr,
                 "publish: %zu of %zu key(s) partly measured (a sweep cancelled or cut short): each ships the best "
                 "of what was measured: %s%s; tune them again to finish them\n",
                 partial.size(), bundle->entries.size(),
                 Join(std::vector<std::string>(partial.begin(), partial.begin() + shown), "; ").c_str(),
                 partial.size() > shown ? "; ..." : "");
  }
  Status st = WriteBundle(*bundle, args.out, args.sign_key, args.unsigned_bundle);
  if (!st.ok()) return Fail(st.message());
  std::printf("%s.tfb\n%s.json\n", args.out.c_str(), args.out.c_str());
  return 0;
}

std::string CountsText(const TransferCounts& n) {
  return std::to_string(n.rows) + " rows, " + std::to_string(n.ops) + " op packages, " + std::to_string(n.kernels) +
         " cubins, " + std::to_string(n.coverage) + " coverage records, " + std::to_string(n.profiles) + " profiles, " +
         std::to_string(n.baselines) + " baselines";
}

int RunStoreExport(const std::string& store_path, const ResultFilter& filter, const std::string& out) {
  auto store = OpenStore(store_path);
  if (!store.ok()) return Fail(store.status().message());
  TransferCounts n;
  if (Status st = ExportStore(**store, filter, out, &n); !st.ok()) return Fail(st.message());
  std::printf("%s: %s\n", out.c_str(), CountsText(n).c_str());
  return 0;
}

int RunStoreImport(const std::string& store_path, const std::string& file, const std::string& format) {
  // A writer: the store is locked while the import runs (stop its
  // coordinator, or import into a copy).
  auto store = ResultStore::Open(store_path);
  if (!store.ok()) return Fail(store.status().message());
  TransferCounts n;
  if (Status st = ImportStore(**store, file, &n); !st.ok()) return Fail(st.message());
  if (Status st = (*store)->Close(); !st.ok()) return Fail(st.message());
  if (format == "json") {
    const nlohmann::ordered_json doc = {{"file", file},           {"store", store_path},
                                        {"counts", CountsText(n)}, {"rows_new", n.rows_new},
                                        {"rows_present", n.rows_present}, {"rows_refused", n.rows_refused},
                                        {"refusals", n.refusals}};
    std::printf("%s\n", DumpJson(doc, 2).c_str());
    return 0;
  }
  std::printf("%s: %s; rows: %zu new to %s, %zu already there, %zu refused\n", file.c_str(), CountsText(n).c_str(),
              n.rows_new, store_path.c_str(), n.rows_present, n.rows_refused);
  for (const std::string& why : n.refusals) std::printf("  refused: %s\n", why.c_str());
  if (n.rows_refused > n.refusals.size()) std::printf("  refused: %zu more\n", n.rows_refused - n.refusals.size());
  return 0;
}

int RunBundleShow(const BundleArgs& args) {
  auto b = ReadBundleFile(args.file);
  if (!b.ok()) return Fail(b.status().message());
  if (args.format == "json") {
    std::printf("%s\n", BundleToJson(*b).c_str());
  } else {
    RowFormat format = RowFormat::kTable;
    (void)ParseRowFormat(args.format, &format);  // checked at parse (AddFormatOption)
    std::fputs(RenderReport(BundleReport(*b), format).c_str(), stdout);
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
  // A shape that does not give the op's dims is the caller's mistake, not
  // a miss to answer with the default (as Python's lookup raises).
  if (const std::vector<std::string>* op_dims = b->dims_of(args.op)) {
    for (const auto& [name, value] : shape.dims)
      if (std::find(op_dims->begin(), op_dims->end(), name) == op_dims->end()) {
        const std::string near = NearestName(name, *op_dims);
        return Fail("--shape: '" + name + "' is no dim of op " + args.op + " (" + Join(*op_dims) + ")" +
                    (near.empty() ? "" : "; did you mean '" + near + "'?"));
      }
    for (const std::string& d : *op_dims)
      if (std::none_of(shape.dims.begin(), shape.dims.end(), [&](const auto& kv) { return kv.first == d; }))
        return Fail("--shape: lacks " + d + " (op " + args.op + " takes " + Join(*op_dims) + ")");
  }
  const runtime::Answer a = b->lookup(args.op, args.dtype, args.gpu, dims);
  if (a.level == runtime::Level::kMiss) return Fail("no entry and no default for op '" + args.op + "'");
  Config config;  // printed in the farm's canonical form, as `results` prints configs
  for (size_t i = 0; i < a.config->size(); ++i) config.params.emplace_back(a.config->name(i), ParamValue::Of(a.config->value(i), a.config->text(i)));
  std::string why;  // why the chain fell through to the default, most basic reason first
  if (a.level == runtime::Level::kDefault && b->forcing_defaults()) {
    why = "TUNEFARM_FORCE_DEFAULTS is set";
  } else if (a.level == runtime::Level::kDefault) {
    const std::vector<std::string>* op_dims = b->dims_of(args.op);
    bool dtype_tuned = false;
    for (const auto& e : b->entries()) dtype_tuned = dtype_tuned || (e.op == args.op && e.dtype == args.dtype);
    if (!op_dims) why = "no tuned entry of op " + args.op;
    else if (!dtype_tuned) why = "no tuned entry of " + args.op + "/" + args.dtype;
    else why = "no tuned entry for " + args.gpu + " or its GPU family";
  }
  const bool borrowed = a.entry && a.level != runtime::Level::kExact;  // another shape's or model's entry
  if (args.format == "json") {
    nlohmann::json j = {{"level", runtime::LevelName(a.level)}, {"config", config.Canonical()}};
    if (borrowed) j["tuned_on"] = {{"gpu_model", a.entry->gpu_model}, {"shape", a.entry->shape.ToString()}};
    for (const runtime::Entry* c : a.candidates)
      j["candidates"].push_back({{"config", c->config.ToString()}, {"tuned_on", c->shape.ToString()}});
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
  if (!a.candidates.empty()) std::printf(" (chosen among %zu configs)", a.candidates.size());
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
  if (args.format == "json") {
    const nlohmann::ordered_json doc = {
        {"file", args.file}, {"signature", "ok"}, {"key", signer.Id()}, {"entries", b->entries.size()}};
    std::printf("%s\n", DumpJson(doc, 2).c_str());
    return 0;
  }
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
  const std::string text = format == "json"       ? NightlyReportJson(*report) + "\n"
                           : format == "csv"      ? NightlyReportCsv(*report)
                           : format == "markdown" ? NightlyReportMarkdown(*report)
                                                  : NightlyReportTable(*report);
  std::printf("%s", text.c_str());
  return report->HasRegressions() ? kExitRegressions : 0;
}

void AddStoreCommands(CLI::App& app, std::vector<CliCommand>* out) {
  // The parsed values outlive this call: the commands in `out` own them.
  struct Parsed {
    QueryArgs results, best;
    CompareArgs compare;
    PublishArgs publish;
    BundleArgs bshow, blookup, bverify;
    std::string diff_before, diff_after, diff_format = "table";
    double diff_noise = 0.02;
    std::string export_store = "tunefarm.db", export_out, import_store = "tunefarm.db", import_file,
        import_format = "table";
    ResultFilter export_filter;
  };
  const auto parsed = std::make_shared<Parsed>();

  // results / best
  QueryArgs &results = parsed->results, &best = parsed->best;
  auto* res = app.add_subcommand("results", "List stored measurements (table, CSV, JSON)");
  AddQueryOptions(res, &results);
  auto* b = app.add_subcommand("best", "Show the best valid config per (GPU model, op, dtype, shape)");
  AddQueryOptions(b, &best);
  out->push_back({.app = res, .run = [parsed](const std::atomic<bool>*) {
                    return RunResults(parsed->results, /*best_only=*/false);
                  }});
  out->push_back({.app = b, .run = [parsed](const std::atomic<bool>*) {
                    return RunResults(parsed->best, /*best_only=*/true);
                  }});

  // compare
  CompareArgs& compare = parsed->compare;
  auto* cmp = app.add_subcommand("compare", "Compare GPU models side by side: best config, throughput, "
                                            "roofline share, ratios, portability matrix");
  AddRemoteReadOptions(
      cmp, &compare.remote,
      cmp->add_option("--store", compare.store, "RocksDB store directory (opened read-only)")->capture_default_str());
  cmp->add_option("--op", compare.op, "Only this op");
  cmp->add_option("--dtype", compare.dtype, "Only this dtype");
  cmp->add_option("--shape", compare.shape, "Only this shape, like M=4096,N=4096,K=4096");
  cmp->add_option("--gpu", compare.gpus, "GPU models to compare, the first is the reference (default: all)");
  cmp->add_option("--format", compare.format, "table, csv, json, markdown or html (self-contained, with plots)")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "csv", "json", "markdown", "html"}));
  cmp->add_option("--out", compare.out, "Write to this file instead of stdout");
  out->push_back({.app = cmp, .run = [parsed](const std::atomic<bool>*) { return RunCompare(parsed->compare); }});

  // publish
  PublishArgs& publish = parsed->publish;
  auto* p = app.add_subcommand("publish", "Publish a best-config bundle (.tfb binary + .json) from the store");
  AddRemoteReadOptions(p, &publish.remote,
                       p->add_option("--store", publish.store, "RocksDB store directory")->capture_default_str());
  p->add_option("--out", publish.out, "Output path without extension")->required();
  p->add_option("--name", publish.name, "Bundle name (default: the file name)");
  p->add_option("--sign-key", publish.sign_key,
                "Ed25519 secret key file to sign with (default: $TUNEFARM_SIGN_KEY, else "
                "~/.config/tunefarm/bundle.key, made on first use)");
  p->add_flag("--unsigned", publish.unsigned_bundle, "Write the bundle unsigned (deployments refuse it)");
  p->add_option("--op", publish.filter.op, "Only this op");
  p->add_option("--gpu", publish.filter.gpu_model, "Only this GPU model");
  p->add_option("--dtype", publish.filter.dtype, "Only this dtype");
  p->add_option("--sweep", publish.sweep,
                "Only the keys this sweep measured (its id, or a prefix of it no other sweep's id shares), each "
                "with its winner over all its rows");
  AddObjectiveOption(p, &publish.objective);
  p->add_flag("--no-kernels", publish.no_kernels,
              "Config-only: leave the measured cubins out (launch plans and defaults stay)");
  p->add_option("--min-vs-baseline", publish.min_vs_baseline,
                "Leave out entries slower than the op's [baseline] (cuBLASLt) by more than this: 1.0 ships only "
                "winners at least as fast as the vendor library (default 0: keep all)")
      ->check(CLI::NonNegativeNumber);
  out->push_back({.app = p, .run = [parsed](const std::atomic<bool>*) { return RunPublish(parsed->publish); }});

  // store export / import
  auto* st = app.add_subcommand("store", "Move measurements between farms' stores");
  st->require_subcommand(1);
  auto* se = st->add_subcommand("export", "Write the store's rows (with their op packages, cubins, coverage, "
                                          "profiles and baselines) to a file another farm can import");
  se->add_option("--store", parsed->export_store, "RocksDB store directory (opened read-only)")->capture_default_str();
  se->add_option("--out", parsed->export_out, "Export file to write")->required();
  se->add_option("--gpu", parsed->export_filter.gpu_model, "Only this GPU model");
  se->add_option("--op", parsed->export_filter.op, "Only this op");
  out->push_back({.app = se, .run = [parsed](const std::atomic<bool>*) {
                    return RunStoreExport(parsed->export_store, parsed->export_filter, parsed->export_out);
                  }});
  auto* si = st->add_subcommand("import", "Merge an export file into a store: idempotent, a stored row of a key is "
                                          "kept, other kernel hashes' rows sit beside it");
  si->add_option("file", parsed->import_file, "Export file (store export --out)")->required();
  si->add_option("--store", parsed->import_store, "RocksDB store directory (written; not one a running coordinator "
                                                  "holds)")->capture_default_str();
  si->add_option("--format", parsed->import_format, "table or json (the counts, every refusal)")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "json"}));
  out->push_back({.app = si, .run = [parsed](const std::atomic<bool>*) {
                    return RunStoreImport(parsed->import_store, parsed->import_file, parsed->import_format);
                  }});

  // bundle show / lookup
  auto* bundle = app.add_subcommand("bundle", "Inspect bundles");
  bundle->require_subcommand(1);
  BundleArgs &bshow = parsed->bshow, &blookup = parsed->blookup, &bverify = parsed->bverify;
  auto* bs = bundle->add_subcommand("show", "Print a bundle's entries");
  bs->add_option("file", bshow.file, "Bundle file (.tfb)")->required();
  AddFormatOption(bs, &bshow.format, /*markdown=*/true);
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
  bv->add_option("--format", bverify.format, "table or json (the file, the signing key, the entries)")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "json"}));

  std::string &diff_before = parsed->diff_before, &diff_after = parsed->diff_after;
  double& diff_noise = parsed->diff_noise;
  auto* bd = bundle->add_subcommand(
      "diff", "Compare two bundles' winners: latency changes beyond the measured noise "
              "(exit 3 when a winner got slower)");
  bd->add_option("before", diff_before, "Earlier bundle (.tfb)")->required();
  bd->add_option("after", diff_after, "Later bundle (.tfb)")->required();
  bd->add_option("--noise-floor", diff_noise, "Smallest relative change that counts")->capture_default_str();
  std::string& diff_format = parsed->diff_format;
  AddFormatOption(bd, &diff_format, /*markdown=*/true);
  out->push_back({.app = bs, .run = [parsed](const std::atomic<bool>*) { return RunBundleShow(parsed->bshow); }});
  out->push_back({.app = bl, .run = [parsed](const std::atomic<bool>*) { return RunBundleLookup(parsed->blookup); }});
  out->push_back({.app = bv, .run = [parsed](const std::atomic<bool>*) { return RunBundleVerify(parsed->bverify); }});
  out->push_back({.app = bd, .run = [parsed](const std::atomic<bool>*) {
                    return RunBundleDiff(parsed->diff_before, parsed->diff_after, parsed->diff_noise,
                                         parsed->diff_format);
                  }});
}

}  // namespace tune
