// `tunefarm retime`, and the re-timing half of a night on a farm: keys'
// winners and their runners-up measured again on the farm (retime sweeps,
// SweepSubmit::retime), so that the store's figures, its winners and the
// next bundle are today's: a slower driver, clock or host shows, and a
// bundle can be checked before a release.
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "base/text.h"
#include "command_util.h"
#include "commands.h"
#include "farm_access.h"
#include "opspec/sweep_file.h"
#include "publish/publish.h"
#include "report.h"

namespace tune {

namespace {

std::string KeyText(const Measurement& m) { return m.gpu_model + " " + m.op + "/" + m.dtype + " " + m.shape; }

// A key's rows of the winner's kernel, ranked (RankRows), from `store`.
std::vector<Measurement> RankedRowsOf(ResultStore& store, const Measurement& winner) {
  std::vector<Measurement> rows;
  (void)store.Scan(ResultFilter{winner.gpu_model, winner.op, winner.dtype, winner.shape, winner.kernel_hash},
                   [&](const Measurement& m) {
                     if (m.baseline.empty()) rows.push_back(m);
                     return true;
                   });
  RankRows(&rows, [&](const Measurement& m) { return m.config_id == winner.config_id; });
  return rows;
}

struct RetimeArgs {
  ClientArgs client;
  std::string bundle;  // the keys: this bundle's entries (else the store's winners matching filter)
  ResultFilter filter;
  uint32_t top = kDefaultRetimeTop;
  std::string ops_dir;  // "" = DefaultOpsDir()
  std::optional<int64_t> priority;
  double timeout = 0;
  std::string format = "table";
};

int RunRetime(const RetimeArgs& args, const std::atomic<bool>* stop) {
  if (args.priority)
    if (Status st = CheckSweepPriority(*args.priority, "--priority"); !st.ok()) return Usage(st.message());
  std::vector<Measurement> keys;
  if (!args.bundle.empty()) {
    auto bundle = ReadBundleFile(args.bundle);
    if (!bundle.ok()) return Fail(bundle.status().message());
    keys = RetimeKeysOf(*bundle);
  } else {
    auto store = OpenStoreOf("", args.client, {args.filter});
    if (!store.ok()) return Fail(store.status().message());
    auto winners = Winners(**store, args.filter);
    if (!winners.ok()) return Fail(winners.status().message());
    keys = std::move(winners).value();
  }
  if (keys.empty()) return Fail("retime: no key to measure again (the bundle has no entry, or no winner matches)");
  auto after = RetimeOnFarm(args.client, keys, args.top, args.ops_dir.empty() ? DefaultOpsDir() : args.ops_dir,
                            "retime", args.priority ? uint32_t(*args.priority) : kDefaultSweepPriority,
                            args.timeout, stop);
  if (!after.ok()) return Fail(after.status().message());
  nlohmann::json doc = nlohmann::json::array();
  auto figure = [](const Measurement* m) {
    return m ? nlohmann::json{{"config", m->config.Canonical()}, {"median_us", m->median_us}}
             : nlohmann::json(nullptr);
  };
  for (const Measurement& before : keys) {
    // The winner's config again (what changed tonight), and the fastest of
    // what the retime measured (which config would win tonight).
    const Measurement* again = RetimedRowOf(*after, before);
    const auto rows = after->find(ModelKeyOf(before));
    const Measurement* fastest = rows == after->end() || rows->second.empty() ? nullptr : &rows->second.front();
    const double change = again && again->Valid() && before.median_us > 0 ? again->median_us / before.median_us - 1
                                                                          : NAN;
    if (args.format == "json") {  // NaN: null
      doc.push_back({{"gpu_model", before.gpu_model}, {"op", before.op}, {"dtype", before.dtype},
                     {"shape", before.shape}, {"before", figure(&before)},
                     {"now", again && again->Valid() ? figure(again) : nlohmann::json(nullptr)},
                     {"now_status", again ? again->StatusName() : "not measured"}, {"change", change},
                     {"fastest_now", fastest && fastest->Valid() ? figure(fastest) : nlohmann::json(nullptr)}});
      continue;
    }
    // A key per paragraph: configs run to 140 characters.
    std::printf("%s\n  before:  %10.3f us  %s\n", ToValidUtf8(KeyText(before)).c_str(), before.median_us,
                before.config.Canonical().c_str());
    if (again && again->Valid())
      std::printf("  now:     %10.3f us  (%+.1f%%)\n", again->median_us, 100 * change);
    else
      std::printf("  now:     %s\n", again ? again->StatusName() : "not measured");
    if (fastest && fastest->Valid() && fastest->config_id != before.config_id)
      std::printf("  fastest: %10.3f us  %s\n", fastest->median_us, fastest->config.Canonical().c_str());
  }
  if (args.format == "json") std::printf("%s\n", DumpJson(doc, 2).c_str());
  return 0;
}

}  // namespace

std::string ModelKeyOf(const Measurement& m) { return m.gpu_model + '\0' + m.op + '\0' + m.dtype + '\0' + m.shape; }

std::vector<Measurement> RetimeKeysOf(const Bundle& bundle) {
  std::vector<Measurement> keys;
  for (const BundleEntry& e : bundle.entries) {
    Measurement m;
    m.gpu_model = e.gpu_model;
    m.op = e.op;
    m.dtype = e.dtype;
    m.shape = e.shape.Canonical();
    m.kernel_hash = e.kernel_hash;
    m.config_id = e.config_id;
    m.config = e.config;
    m.median_us = e.median_us;
    m.device_name = e.device_name;
    m.backend = e.backend;
    keys.push_back(std::move(m));
  }
  return keys;
}

Result<std::map<std::string, std::vector<Measurement>>> RetimeOnFarm(
    const ClientArgs& c, const std::vector<Measurement>& keys, uint32_t top, const std::string& ops_dir,
    const std::string& name, uint32_t priority, double timeout, const std::atomic<bool>* stop) {
  std::set<std::string> ops;
  for (const Measurement& k : keys) ops.insert(k.op);
  std::vector<ResultFilter> filters;
  for (const std::string& op : ops) filters.push_back(ResultFilter{"", op, "", "", ""});
  std::vector<SweepSubmit> sweeps;
  {
    auto store = OpenStoreOf("", c, filters);
    if (!store.ok()) return store.status();
    for (const Measurement& key : keys) {
      // The winner (a bundle's, whose row the store may have lost, too)
      // and the next valid configs of its kernel, up to `top`.
      std::vector<Config> configs = {key.config};
      for (const Measurement& m : RankedRowsOf(**store, key)) {
        if (configs.size() >= top) break;
        if (m.Valid() && m.config_id != key.config_id) configs.push_back(m.config);
      }
      const std::string where = "retime of " + KeyText(key);
      auto s = MakeSweep(name, {key.op}, {key.dtype}, {key.shape}, {key.gpu_model}, ops_dir);
      if (!s.ok()) return s.status().WithPrefix(where + ": ");
      s->configs = std::move(configs);
      s->retime = true;
      s->priority = priority;
      TUNE_RETURN_IF_ERROR(CheckListedSweep(&*s, where + ": configs"));
      sweeps.push_back(std::move(s).value());
    }
  }
  CoordinatorClient client(c, 10);
  std::vector<std::string> ids;
  for (const SweepSubmit& s : sweeps) {
    auto reply = client.Call(s);
    if (!reply.ok()) return reply.status();
    const auto* accepted = std::get_if<SweepAccepted>(&*reply);
    if (!accepted) return Status::Error("coordinator sent an unexpected reply to a retime sweep");
    ids.push_back(accepted->sweep_id);
  }
  std::fprintf(stderr, "retime: %zu key(s), up to %u config(s) each, in %zu sweep(s) on %s\n", keys.size(), top,
               ids.size(), c.endpoint.c_str());
  for (const std::string& id : ids) {
    auto done = WaitForSweep(c, id, /*quiet=*/true, stop, 0.5, timeout);
    if (!done.ok()) return done.status();
    if (done->state != "done")
      return Status::Error("retime sweep " + id + " " + done->state + (done->error.empty() ? "" : ": " + done->error));
  }
  auto store = OpenStoreOf("", c, filters);
  if (!store.ok()) return store.status();
  std::map<std::string, std::vector<Measurement>> now;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<Measurement>& rows = now[ModelKeyOf(keys[i])];
    (void)(*store)->Scan(ResultFilter{keys[i].gpu_model, keys[i].op, keys[i].dtype, keys[i].shape, ""},
                         [&](const Measurement& m) {
                           if (m.sweep_id == ids[i] && m.baseline.empty()) rows.push_back(m);
                           return true;
                         });
    RankRows(&rows, [](const Measurement&) { return false; });
  }
  return now;
}

const Measurement* RetimedRowOf(const std::map<std::string, std::vector<Measurement>>& retimed,
                                const Measurement& key) {
  auto it = retimed.find(ModelKeyOf(key));
  if (it == retimed.end()) return nullptr;
  for (const Measurement& m : it->second)
    if (m.config_id == key.config_id) return &m;
  return nullptr;
}

Bundle RetimedBundle(const Bundle& previous, const std::map<std::string, std::vector<Measurement>>& retimed) {
  Bundle tonight = previous;
  tonight.entries.clear();
  const std::vector<Measurement> keys = RetimeKeysOf(previous);
  for (size_t i = 0; i < keys.size(); ++i) {
    const Measurement* m = RetimedRowOf(retimed, keys[i]);
    if (!m || !m->Valid()) continue;
    BundleEntry e = previous.entries[i];
    e.median_us = m->median_us;
    e.stdev_us = m->stdev_us;
    e.ci95_us = m->ci95_us;
    e.samples = m->samples;
    e.backend = m->backend;
    e.driver_version = m->driver_version;
    tonight.entries.push_back(std::move(e));
  }
  return tonight;
}

void AddRetimeCommands(CLI::App& app, std::vector<CliCommand>* out) {
  const auto args = std::make_shared<RetimeArgs>();
  auto* r = app.add_subcommand(
      "retime", "Measure keys' winners and their runners-up again on a farm (a bundle's keys, or the store's "
                "winners): the store's figures and winners become today's; prints each key's winner before and now");
  AddClientOptions(r, &args->client);
  auto* bundle = r->add_option("--bundle", args->bundle,
                               "The keys to measure again: this bundle's entries (default: the store's winners "
                               "matching --gpu/--op/--dtype/--shape)")
                     ->check(CLI::ExistingFile);
  for (auto [flag, field, help] : {std::tuple{"--gpu", &args->filter.gpu_model, "Only this GPU model"},
                                   std::tuple{"--op", &args->filter.op, "Only this op"},
                                   std::tuple{"--dtype", &args->filter.dtype, "Only this dtype"},
                                   std::tuple{"--shape", &args->filter.shape, "Only this shape, like M=4096,N=4096,K=4096"}})
    r->add_option(flag, *field, help)->excludes(bundle);
  r->add_option("--top", args->top, "Configs per key: the winner and the next fastest valid ones")
      ->capture_default_str()
      ->check(CLI::Range(1u, kMaxConfirmTop));
  r->add_option("--ops-dir", args->ops_dir, kOpsDirHelp);
  r->add_option("--priority", args->priority,
                "The retime sweeps' priority, " + std::to_string(kMinSweepPriority) + ".." +
                    std::to_string(kMaxSweepPriority) + " (default " + std::to_string(kDefaultSweepPriority) + ")");
  r->add_option("--timeout", args->timeout, "Give up waiting after this many seconds (the sweeps go on)")
      ->check(CLI::Range(0.0, 1e7));
  r->add_option("--format", args->format, "table or json")->capture_default_str()->check(CLI::IsMember({"table", "json"}));
  out->push_back({.app = r, .run = [args](const std::atomic<bool>* stop) { return RunRetime(*args, stop); }});
}

}  // namespace tune
