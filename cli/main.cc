// tunefarm: the command-line front end of the farm.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "base/log.h"
#include "base/text.h"

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

// A command line CLI11 refused, said in the farm's style: one line with the
// program's prefix and the command it reached, the nearest name of a
// misspelt command or option, and where the help is.
int UsageError(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv, const std::string& from) {
  const CLI::App* at = &app;
  std::string path = "tunefarm";
  auto names_of = [](const CLI::App* a) {
    std::vector<std::string> names;
    for (const CLI::App* s : a->get_subcommands([](const CLI::App*) { return true; })) names.push_back(s->get_name());
    return names;
  };
  int i = 1;
  for (; i < argc && argv[i][0] != '-'; ++i) {
    const std::string word = argv[i];
    const CLI::App* next = nullptr;
    for (const CLI::App* s : at->get_subcommands([](const CLI::App*) { return true; }))
      if (s->get_name() == word) next = s;
    if (!next) {
      const std::vector<std::string> names = names_of(at);
      if (names.empty()) break;  // a positional argument of the command
      const std::string near = tune::NearestName(word, names);
      std::fprintf(stderr, "%s: unknown command '%s'%s; it has %s (`%s --help`)\n", path.c_str(), word.c_str(),
                   near.empty() ? "" : (" (did you mean '" + near + "'?)").c_str(), tune::Join(names, ", ").c_str(),
                   path.c_str());
      return tune::kExitUsage;
    }
    at = next;
    path += " " + word;
  }
  std::string hint;
  const std::string what = e.what();
  std::vector<std::string> options;
  for (const CLI::Option* o : at->get_options())
    for (const std::string& n : o->get_lnames()) options.push_back(n);
  for (int j = i; j < argc && hint.empty(); ++j) {
    std::string arg = argv[j];
    if (arg.rfind("--", 0) != 0) continue;
    const size_t eq = arg.find('=');
    std::string value = eq != std::string::npos ? arg.substr(eq + 1) : j + 1 < argc ? argv[j + 1] : "";
    arg = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    if (what.find("--" + arg) == std::string::npos) continue;
    if (std::find(options.begin(), options.end(), arg) == options.end()) {
      // An option the command lacks: the nearest it has.
      if (const std::string near = tune::NearestName(arg, options); !near.empty()) hint = " (did you mean --" + near + "?)";
      continue;
    }
    // A value the option refuses: the nearest of those it takes, where the
    // error lists them ("... not in {a,b,c}").
    const size_t open = what.find('{'), close = what.find('}', open);
    if (open == std::string::npos || close == std::string::npos) break;
    std::vector<std::string> values;
    for (size_t at_value = open + 1; at_value < close;) {
      const size_t end = std::min(what.find(',', at_value), close);
      values.push_back(what.substr(at_value, end - at_value));
      at_value = end + 1;
    }
    if (const std::string near = tune::NearestName(value, values); !near.empty()) hint = " (did you mean '" + near + "'?)";
  }
  std::fprintf(stderr, "%s: %s%s%s; `%s --help` says more\n", path.c_str(), what.c_str(), hint.c_str(), from.c_str(),
               path.c_str());
  return tune::kExitUsage;
}

// `--config FILE` of coordinator and worker: the file's options (TOML,
// `option = value`, long names without dashes; a [coordinator] or [worker]
// table too) put on the command line right after the command, those the
// command line names itself left out, so that it wins. A file that does not
// parse is one line naming it; an option the command lacks is refused by
// the parse as any other.
bool ExpandConfigFile(std::vector<std::string>* args, std::string* from) {
  size_t command = 0, file = 0;
  for (size_t i = 1; i < args->size(); ++i) {
    const std::string& a = (*args)[i];
    if (!command && (a == "coordinator" || a == "worker")) command = i;
    if (command && a == "--config" && i + 1 < args->size()) file = i + 1;
    if (command && a.rfind("--config=", 0) == 0) {
      (*args)[i] = "--config";
      args->insert(args->begin() + i + 1, a.substr(9));
      file = i + 1;
    }
  }
  if (!command || !file) return true;
  const std::string path = (*args)[file];
  std::vector<CLI::ConfigItem> items;
  try {
    items = CLI::ConfigTOML().from_file(path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tunefarm %s: --config %s: %s\n", (*args)[command].c_str(), path.c_str(), e.what());
    return false;
  }
  auto given = [&](const std::string& name) {
    for (const std::string& a : *args)
      if (a == "--" + name || a.rfind("--" + name + "=", 0) == 0) return true;
    return false;
  };
  std::vector<std::string> add;
  for (const CLI::ConfigItem& item : items) {
    const bool ours = item.parents.empty() || (item.parents.size() == 1 && item.parents[0] == (*args)[command]);
    // "++" and "--" open and close a table.
    if (!ours || item.name == "++" || item.name == "--" || given(item.name)) continue;
    if (item.inputs.size() == 1 && item.inputs[0] == "false") continue;  // a flag left off
    add.push_back("--" + item.name);
    if (item.inputs.size() == 1 && item.inputs[0] == "true") continue;  // a flag
    for (const std::string& v : item.inputs) add.push_back(v);
  }
  args->insert(args->begin() + command + 1, add.begin(), add.end());
  if (!add.empty()) *from = " (with the options of --config " + path + ")";
  return true;
}

}  // namespace

// Exit status: 0 the command did its work (or --help, --version), 1 it
// failed (one line on stderr), 2 the command line is bad (kExitUsage), 3
// nightly or bundle diff found regressions (kExitRegressions), 130 tune
// was interrupted (kExitInterrupted).
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

  std::vector<CliCommand> commands;
  AddFarmCommands(app, &commands);
  AddStoreCommands(app, &commands);
  AddOpsCommands(app, &commands);
  AddTuneCommands(app, &commands);
  AddSearchCommands(app, &commands);
  AddSweepCommands(app, &commands);
  AddEngineCommands(app, &commands);
  AddRetimeCommands(app, &commands);

  // The log of the long-running processes (base/log.h).
  std::string log_level, log_format;
  for (const CliCommand& command : commands) {
    if (!command.logs) continue;
    command.app->add_option("--log-level", log_level,
                            "debug, info, warn or error (default: $TUNEFARM_LOG_LEVEL, else info)")
        ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
    command.app->add_option("--log-format", log_format,
                            "text, or json: one JSON object per line (default: $TUNEFARM_LOG_FORMAT, else text)")
        ->check(CLI::IsMember({"text", "json"}));
  }

  std::vector<std::string> words(argv, argv + argc);
  std::string from_config;  // said with a command line the parse refuses
  if (!ExpandConfigFile(&words, &from_config)) return kExitUsage;
  std::vector<char*> expanded;
  for (std::string& w : words) expanded.push_back(w.data());
  try {
    app.parse(static_cast<int>(expanded.size()), expanded.data());
  } catch (const CLI::ParseError& e) {
    // --help and --version end the parse too, with status 0.
    if (e.get_exit_code() == 0) return app.exit(e);
    return UsageError(app, e, static_cast<int>(expanded.size()), expanded.data(), from_config);
  }
  const CliCommand* chosen = nullptr;
  for (const CliCommand& command : commands) {
    if (command.app->parsed()) {
      chosen = &command;
      break;
    }
  }
  if (!chosen) return kExitUsage;  // require_subcommand(1) lets none through
  // --verbose is the debug level (the lease and unit lines), unless a level is named.
  if (log_level.empty() && chosen->verbose && chosen->verbose()) log_level = "debug";
  if (Status st = log::Configure(log_level, log_format); !st.ok()) {
    std::fprintf(stderr, "tunefarm: %s\n", st.message().c_str());
    return kExitUsage;
  }
  return chosen->run(&g_stop);
}
