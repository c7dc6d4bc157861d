// tunefarm: the command-line front end of the farm.
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
int UsageError(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
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
  for (int j = i; j < argc && hint.empty(); ++j) {
    std::string arg = argv[j];
    if (arg.rfind("--", 0) != 0) continue;
    arg = arg.substr(2, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - 2);
    if (what.find("--" + arg) == std::string::npos) continue;
    std::vector<std::string> options;
    for (const CLI::Option* o : at->get_options())
      for (const std::string& n : o->get_lnames()) options.push_back(n);
    if (const std::string near = tune::NearestName(arg, options); !near.empty()) hint = " (did you mean --" + near + "?)";
  }
  std::fprintf(stderr, "%s: %s%s; `%s --help` says more\n", path.c_str(), what.c_str(), hint.c_str(), path.c_str());
  return tune::kExitUsage;
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

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version end the parse too, with status 0.
    if (e.get_exit_code() == 0) return app.exit(e);
    return UsageError(app, e, argc, argv);
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
