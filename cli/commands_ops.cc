// Commands on op folders and keys: op list, op check, keys curve, keys sign.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "command_util.h"
#include "commands.h"
#include "op_check.h"
#include "base/json_text.h"
#include "base/text.h"
#include "opspec/config_space.h"
#include "opspec/op_definition.h"
#include "wire/curve.h"
#include "bundle/signing.h"

namespace tune {

// The key's folder, made where missing (0700: it holds secret keys).
Status MakeKeyFolder(const std::string& out) {
  const auto parent = std::filesystem::path(out).parent_path();
  std::error_code ec;
  if (parent.empty() || std::filesystem::exists(parent, ec)) return Status::OK();
  std::filesystem::create_directories(parent, ec);
  if (ec) return Status::Error(parent.string() + ": " + ec.message());
  std::filesystem::permissions(parent, std::filesystem::perms::owner_all, ec);
  return Status::OK();
}

int RunKeysCurve(const KeysArgs& args) {
  if (Status st = MakeKeyFolder(args.out); !st.ok()) return Fail(st.message());
  auto keys = GenerateCurveKeyPair();
  if (!keys.ok()) return Fail(keys.status().message());
  Status st = WriteCurveKeyPair(*keys, args.out, args.name.empty() ? args.out : args.name, args.force);
  if (!st.ok()) return Fail(st.message());
  std::printf("%s (secret, 0600)\n%s.pub: %s\n", args.out.c_str(), args.out.c_str(),
              keys->public_z85.c_str());
  return 0;
}

int RunKeysSign(const KeysArgs& args) {
  if (Status st = MakeKeyFolder(args.out); !st.ok()) return Fail(st.message());
  auto key = GenerateKeyPairFiles(args.out, args.out + ".pub");
  if (!key.ok()) return Fail(key.status().message());
  std::printf("%s (secret, 0600)\n%s.pub (key id %s)\n", args.out.c_str(), args.out.c_str(),
              key->Id().c_str());
  return 0;
}

struct OpListArgs {
  std::string ops_dir, format = "table";
};

// The ops of a folder, each read as a sweep would read it: its dims, dtypes,
// kind and raw space, or why it cannot be read.
int RunOpList(OpListArgs args) {
  if (args.ops_dir.empty()) args.ops_dir = DefaultOpsDir();
  const std::vector<std::string> names = OpNamesIn(args.ops_dir);
  if (names.empty()) return Fail("no op in " + args.ops_dir + " (an op is a folder with an op.toml; --ops-dir names another)");
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const std::string& name : names) {
    auto spec = LoadOpSpec(args.ops_dir + "/" + name);
    nlohmann::ordered_json row = {{"op", name}};
    if (!spec.ok()) {
      row["error"] = spec.status().message();
    } else {
      row["dims"] = spec->dims;
      row["dtypes"] = spec->dtypes;
      row["kind"] = spec->program ? "program" : "cuda";
      row["params"] = spec->axes.size();
      row["raw_configs"] = RawSpaceSize(*spec);
    }
    rows.push_back(std::move(row));
  }
  if (args.format == "json") {
    std::printf("%s\n", DumpJson(rows, 2).c_str());
    return 0;
  }
  std::printf("%-28s %-8s %-14s %-20s %s\n", "op", "kind", "dims", "dtypes", "raw configs");
  for (const auto& r : rows) {
    if (r.contains("error")) {
      std::printf("%-28s unreadable: %s\n", r["op"].get<std::string>().c_str(), r["error"].get<std::string>().c_str());
      continue;
    }
    std::printf("%-28s %-8s %-14s %-20s %llu\n", r["op"].get<std::string>().c_str(),
                r["kind"].get<std::string>().c_str(), Join(r["dims"].get<std::vector<std::string>>(), ",").c_str(),
                Join(r["dtypes"].get<std::vector<std::string>>(), ",").c_str(),
                (unsigned long long)r["raw_configs"].get<uint64_t>());
  }
  std::printf("(%s; `tunefarm op check %s/OP` checks one)\n", args.ops_dir.c_str(), args.ops_dir.c_str());
  return 0;
}

void AddOpsCommands(CLI::App& app, std::vector<CliCommand>* out) {
  // The parsed values outlive this call: the commands in `out` own them.
  struct Parsed {
    OpCheckArgs opcheck;
    KeysArgs kcurve, ksign;
  };
  const auto parsed = std::make_shared<Parsed>();

  // op check
  auto* opc = app.add_subcommand("op", "Work on op folders");
  opc->require_subcommand(1);
  auto list_args = std::make_shared<OpListArgs>();
  auto* ol = opc->add_subcommand("list", "The ops of an ops folder: kind, dims, dtypes, raw configs");
  ol->add_option("--ops-dir", list_args->ops_dir, "Ops folder (default: the installed ops, else ./ops)");
  ol->add_option("--format", list_args->format, "table or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "json"}));
  out->push_back({.app = ol, .run = [list_args](const std::atomic<bool>*) { return RunOpList(*list_args); }});
  OpCheckArgs& opcheck = parsed->opcheck;
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
  oc->add_option("--format", opcheck.format, "table, or json: one document with params, rules, legal configs per "
                                             "GPU model and each compile's status")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "json"}));
  oc->add_option("--sample", opcheck.sample, "Configs compiled per dtype and architecture")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  out->push_back({.app = oc, .run = [parsed](const std::atomic<bool>*) { return RunOpCheck(parsed->opcheck); }});

  // keys
  auto* keys = app.add_subcommand("keys", "Generate key pairs");
  keys->require_subcommand(1);
  KeysArgs &kcurve = parsed->kcurve, &ksign = parsed->ksign;
  auto* kc = keys->add_subcommand("curve", "CURVE key pair for coordinator, worker or client links");
  kc->add_option("--out", kcurve.out, "Secret key file; the public key goes to <out>.pub")->required();
  kc->add_option("--name", kcurve.name, "Name written beside the public key (allow-list comment)");
  kc->add_flag("--force", kcurve.force, "Replace existing files");
  auto* ks = keys->add_subcommand("sign", "Ed25519 key pair for signing bundles");
  ks->add_option("--out", ksign.out, "Secret key file; the public key goes to <out>.pub")->required();
  out->push_back({.app = kc, .run = [parsed](const std::atomic<bool>*) { return RunKeysCurve(parsed->kcurve); }});
  out->push_back({.app = ks, .run = [parsed](const std::atomic<bool>*) { return RunKeysSign(parsed->ksign); }});
}

}  // namespace tune
