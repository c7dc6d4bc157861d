// `tunefarm export` and `tunefarm import-configs`: a store's winners as the
// per-device config files serving engines read (publish/engine_configs.h),
// and such files back as a sweep that times their configs on this farm.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "base/dim_names.h"
#include "base/env.h"
#include "base/json_text.h"
#include "base/text.h"
#include "command_util.h"
#include "commands.h"
#include "farm_access.h"
#include "opspec/op_definition.h"
#include "publish/engine_configs.h"
#include "opspec/sweep_file.h"
#include "publish/publish.h"

namespace tune {

namespace {

constexpr uintmax_t kMaxEngineFileBytes = uintmax_t(64) << 20;

struct ExportArgs {
  std::string store = "tunefarm.db";
  ClientArgs remote{.endpoint = "", .curve_secret_key = "", .coordinator_key = ""};  // --coordinator: read through it
  ResultFilter filter;
  std::string bundle;  // --bundle: its entries instead of a store's winners
  std::string key, out, name = kEngineFileName, format = "table";
};

// A bundle's entries that `filter` selects, as the winners they shipped.
std::vector<Measurement> WinnersOfBundle(const Bundle& bundle, const ResultFilter& filter) {
  std::vector<Measurement> winners;
  for (Measurement& m : RetimeKeysOf(bundle)) {
    if (m.op != filter.op || (!filter.dtype.empty() && m.dtype != filter.dtype) ||
        (!filter.gpu_model.empty() && m.gpu_model != filter.gpu_model))
      continue;
    m.check_passed = true;  // a bundle ships checked winners only
    m.samples = 1;
    winners.push_back(std::move(m));
  }
  return winners;
}

int RunExport(const ExportArgs& args) {
  if (!IsDimName(args.key)) return Usage("--key: '" + args.key + "' is not a dim name");
  Result<std::vector<Measurement>> winners = std::vector<Measurement>{};
  if (!args.bundle.empty()) {
    auto bundle = ReadBundleFile(args.bundle);
    if (!bundle.ok()) return Fail(bundle.status().message());
    winners = WinnersOfBundle(*bundle, args.filter);
  } else {
    auto store = OpenStoreOf(args.store, args.remote, {args.filter});
    if (!store.ok()) return Fail(store.status().message());
    winners = Winners(**store, args.filter);
    if (!winners.ok()) return Fail(winners.status().message());
  }
  size_t skipped = 0;
  auto files = EngineFiles(*winners, args.key, args.name, &skipped);
  if (!files.ok()) return Fail(files.status().message());
  if (files->empty())
    return Fail("no winner of op '" + args.filter.op + "' has a dim " + args.key + " (" +
                std::to_string(winners->size()) + " winners match the filter)");
  std::error_code ec;
  std::filesystem::create_directories(args.out, ec);
  if (ec) return Fail(args.out + ": " + ec.message());
  nlohmann::ordered_json written = nlohmann::ordered_json::array();
  for (const EngineFile& f : *files) {
    const std::string path = (std::filesystem::path(args.out) / f.name).string();
    if (Status st = Env::Default()->WriteFileAtomically(path, EngineFileJson(f)); !st.ok()) return Fail(st.message());
    written.push_back({{"file", path}, {"op", f.op}, {"dtype", f.dtype}, {"gpu_model", f.gpu_model},
                       {"device_name", f.device_name}, {"fixed", JoinNamedValues(f.fixed)},
                       {"keys", f.configs.size()}});
  }
  if (args.format == "json") {
    std::printf("%s\n", DumpJson(written, 2).c_str());
    return 0;
  }
  for (const auto& w : written)
    std::printf("%s: %zu %s value(s) of %s/%s on %s\n", w["file"].get<std::string>().c_str(),
                w["keys"].get<size_t>(), args.key.c_str(), w["op"].get<std::string>().c_str(),
                w["dtype"].get<std::string>().c_str(), w["device_name"].get<std::string>().c_str());
  if (skipped)
    std::fprintf(stderr, "export: %zu winner(s) without a dim %s left out\n", skipped, args.key.c_str());
  return 0;
}

struct ImportConfigsArgs {
  std::vector<std::string> files;
  std::string op, key, out, ops_dir, name = "import-configs", dtypes = "f16", gpus = "*";
  bool retime = false;  // the sweep measures them again where a farm has them (SweepSubmit::retime)
};

std::string TomlList(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "\"" : ", \"") + n + "\"";
  return out;
}

std::string TomlInline(const NamedValues& dims) {
  std::string out = "{";
  for (size_t i = 0; i < dims.size(); ++i)
    out += std::string(i ? ", " : " ") + dims[i].first + " = " + std::to_string(dims[i].second);
  return out + " }";
}

int RunImportConfigs(const ImportConfigsArgs& args) {
  if (!IsDimName(args.key)) return Usage("--key: '" + args.key + "' is not a dim name");
  const std::string ops_dir = args.ops_dir.empty() ? DefaultOpsDir() : args.ops_dir;
  auto spec = LoadOpSpec(ops_dir + "/" + args.op);
  if (!spec.ok()) return Fail(spec.status().message());
  std::vector<std::string> params;
  for (const Axis& a : spec->axes) params.push_back(a.name);
  if (std::find(spec->dims.begin(), spec->dims.end(), args.key) == spec->dims.end())
    return Fail("--key " + args.key + ": op '" + args.op + "' has no such dim (it has " + Join(spec->dims, ", ") + ")");
  std::vector<std::string> shapes;
  std::set<std::string> seen_shapes, seen_configs;
  std::vector<Config> configs;
  for (const std::string& path : args.files) {
    std::error_code size_error;
    if (std::filesystem::file_size(path, size_error) > kMaxEngineFileBytes)
      return Fail(path + ": over " + std::to_string(kMaxEngineFileBytes >> 20) + " MiB: no per-device config file");
    std::string text;
    if (Status st = Env::Default()->ReadFile(path, &text); !st.ok()) return Fail(path + ": " + st.message());
    auto entries = ReadEngineFile(text, path, params);
    if (!entries.ok()) return Fail(entries.status().message());
    const NamedValues fixed = DimsOfEngineFileName(path);
    for (const EngineEntry& e : *entries) {
      for (const Axis& a : spec->axes) {
        const bool named = std::any_of(e.config.params.begin(), e.config.params.end(),
                                       [&](const auto& p) { return p.first == a.name; });
        if (!named)
          return Fail(path + ": \"" + std::to_string(e.key) + "\": no value for the op's param " + a.name);
      }
      // The shape in the op's dim order: the key's value, the rest from the name.
      NamedValues dims;
      for (const std::string& d : spec->dims) {
        if (d == args.key) {
          dims.emplace_back(d, e.key);
          continue;
        }
        auto it = std::find_if(fixed.begin(), fixed.end(), [&](const auto& f) { return f.first == d; });
        if (it == fixed.end())
          return Fail(path + ": the file name gives no " + d + " (op '" + args.op + "' has dims " +
                      Join(spec->dims, ", ") + "; name the file like " + d + "=4096,...,device_name=....json)");
        dims.push_back(*it);
      }
      if (seen_shapes.insert(JoinNamedValues(dims)).second) shapes.push_back(TomlInline(dims));
      // In the op's axis order, as sweep files list a config.
      Config c;
      for (const Axis& a : spec->axes)
        for (const auto& p : e.config.params)
          if (p.first == a.name) c.params.push_back(p);
      if (seen_configs.insert(c.Canonical()).second) configs.push_back(c);
    }
  }
  if (configs.size() > kMaxListedConfigs)
    return Fail(std::to_string(configs.size()) + " distinct configs in the files, more than a sweep lists (" +
                std::to_string(kMaxListedConfigs) + ")");
  std::string text = "# The configs of " + std::to_string(args.files.size()) +
                     " per-device file(s), timed on their shapes: `tunefarm import-configs`.\n"
                     "# A searched sweep of these keys later starts from the rows this one stores.\n"
                     "[sweep]\nname   = \"" + args.name + "\"\nops    = [\"" + args.op + "\"]\ndtypes = [" +
                     TomlList(SplitList(args.dtypes)) + "]\ngpus   = [" + TomlList(SplitList(args.gpus)) +
                     "]\nshapes = [\n";
  for (const std::string& s : shapes) text += "  " + s + ",\n";
  text += "]\nconfigs = [\n";
  for (const Config& c : configs) {
    std::string row = "  {";
    for (size_t i = 0; i < c.params.size(); ++i) {
      const ParamValue& v = c.params[i].second;
      const std::string value = v.kind() == ParamValue::Kind::kString ? "\"" + v.text() + "\""
                                : v.kind() == ParamValue::Kind::kBool ? (v.Number() ? "true" : "false")
                                                                      : std::to_string(v.Number());
      row += std::string(i ? ", " : " ") + c.params[i].first + " = " + value;
    }
    text += row + " },\n";
  }
  text += "]\n";
  if (args.retime) text += "retime = true  # measured again where the farm's store has them\n";
  if (args.out.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  if (Status st = Env::Default()->WriteFileAtomically(args.out, text); !st.ok()) return Fail(st.message());
  std::printf("%s: %zu configs on %zu shapes of op '%s'; time them: tunefarm tune --sweep %s (or submit it)\n",
              args.out.c_str(), configs.size(), shapes.size(), args.op.c_str(), args.out.c_str());
  return 0;
}

}  // namespace

void AddEngineCommands(CLI::App& app, std::vector<CliCommand>* out) {
  const auto ex = std::make_shared<ExportArgs>();
  auto* e = app.add_subcommand("export",
                               "Write a store's (or a bundle's) winners as the per-device JSON config files serving "
                               "engines read (vLLM's and SGLang's layout: one file per device and fixed dims, key "
                               "value -> config)");
  CLI::Option* store_option = e->add_option("--store", ex->store, "RocksDB store directory")->capture_default_str();
  AddRemoteReadOptions(e, &ex->remote, store_option);
  e->add_option("--bundle", ex->bundle, "Or: a bundle file (.tfb) whose entries to write")
      ->excludes(store_option)
      ->excludes(e->get_option("--coordinator"));
  e->add_option("--op", ex->filter.op, "The op whose winners to write")->required();
  e->add_option("--dtype", ex->filter.dtype, "Only this dtype");
  e->add_option("--gpu", ex->filter.gpu_model, "Only this GPU model");
  e->add_option("--key", ex->key, "The dim each file maps to a config (a batch size: M)")->required();
  e->add_option("--out", ex->out, "Folder to write the files into")->required();
  e->add_option("--name", ex->name,
                "File name format: {dims} (the other dims, \"E=8,N=14336\"), {device} (the device name, spaces as "
                "'_'), {op}, {dtype}, {gpu} and {DIM} for any dim")
      ->capture_default_str();
  e->add_option("--format", ex->format, "What was written: table or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "json"}));
  out->push_back({.app = e, .run = [ex](const std::atomic<bool>*) { return RunExport(*ex); }});

  const auto im = std::make_shared<ImportConfigsArgs>();
  auto* i = app.add_subcommand("import-configs",
                               "A sweep file from per-device JSON config files (as `export` writes them, or a serving "
                               "engine ships): their configs timed on their shapes, rows a later search starts from");
  i->add_option("files", im->files, "Per-device config files (their names give the fixed dims: E=8,N=14336,...)")
      ->required()
      ->check(CLI::ExistingFile);
  i->add_option("--op", im->op, "The op the configs are of (its params name the files' fields)")->required();
  i->add_option("--key", im->key, "The dim the files' keys are values of (M)")->required();
  i->add_option("--ops-dir", im->ops_dir, "Folder of op definitions (default: the installed ops)");
  i->add_option("--out", im->out, "Sweep file to write (default: standard output)");
  i->add_option("--name", im->name, "The sweep's name")->capture_default_str();
  i->add_option("--dtypes", im->dtypes, "The sweep's dtypes, comma-separated")->capture_default_str();
  i->add_option("--gpus", im->gpus, "The sweep's GPU models, comma-separated (\"*\": every model present)")
      ->capture_default_str();
  i->add_flag("--retime", im->retime,
              "A retime: the configs are measured again where the farm's store has them, their rows replacing the "
              "stored ones (a shipped file checked on a new driver); default: what is stored is not measured again");
  out->push_back({.app = i, .run = [im](const std::atomic<bool>*) { return RunImportConfigs(*im); }});
}

}  // namespace tune
