// tunefarm: the command-line front end of the farm.
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "base/log.h"

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

}  // namespace

// Exit status: 0 the command did its work (or --help, --version), 1 it
// failed (one line on stderr), 2 the command line is bad (kExitUsage), 3
// nightly or bundle diff found regressions (kExitRegressions).
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
    return app.exit(e) == 0 ? 0 : kExitUsage;
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
