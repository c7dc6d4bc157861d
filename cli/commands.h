// The CLI's commands. Each returns the process exit code: 0 success, 1 a
// failure it explains on stderr in one line, 2 bad usage (kExitUsage), 3
// regressions (kExitRegressions), 130 interrupted (kExitInterrupted). They are grouped in files by what they
// work on: commands_farm.cc (a running farm), commands_store.cc (stores and
// bundles), commands_ops.cc (op folders, keys), commands_tune.cc (a farm on
// this host), commands_search.cc (search strategies), commands_sweep.cc (sweep files), commands_engine.cc (serving engines'
// config files). None is thread-safe: one command runs per process.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "coordinator.h"
#include "coordinator_client.h"
#include "bundle/bundle.h"
#include "report/row_table.h"
#include "store/result_store.h"
#include "worker.h"

namespace tune {

struct CoordinatorArgs {
  CoordinatorOptions opts;
  size_t max_ingest_backlog_mib = CoordinatorOptions{}.max_ingest_backlog_bytes >> 20;
  size_t max_ingest_queue_mib = CoordinatorOptions{}.max_ingest_queue_bytes >> 20;
  uint64_t store_reserve_mib = CoordinatorOptions{}.store_reserve_bytes >> 20;
};
struct WorkerArgs {
  WorkerOptions opts;
  std::string sim_models = "h100";
  std::string devices;
  std::vector<std::string> include_roots;  // NAME=PATH
  std::string sim_truth;                   // --sim-truth FILE
};
// How a client reaches the coordinator.
struct SubmitArgs {
  std::string sweep_file, ops_dir;  // "" = DefaultOpsDir()
  ClientArgs client;
  bool wait = false;
  double timeout = 0;  // --wait's bound, seconds; 0 = none
  std::string retry;   // failure classes to measure again, "timeout,crash" (the sweep file's when empty)
  std::optional<int64_t> priority;  // unset = the sweep file's, else kDefaultSweepPriority
  std::string format = "table";     // table | json: {"sweep_id"}, with --wait the sweep's progress
};
struct StatusArgs {
  std::string sweep_id;
  ClientArgs client;
  std::string format = "table";  // table | json
  bool wait = false;   // status ID --wait: wait for the sweep again
  double timeout = 0;
};
struct KeysArgs {
  std::string out, name;
  bool force = false;
};
struct QueryArgs {
  std::string store = "tunefarm.db", format = "table";
  ResultFilter filter;
  std::string config;     // only this config: its id or its params ("BM=128,BN=64,...", any order)
  bool full_log = false;  // after the table, each failure's whole message (compile logs)
  std::string reports;    // write the profiles' report files under this folder
  std::optional<uint32_t> top;  // per key, only its N best rows (the winner among them); 0 = every row; RowsPerKey
  ClientArgs remote{.endpoint = "", .curve_secret_key = "", .coordinator_key = ""};  // read the store through this coordinator instead
  std::string objective = "time";  // what picks each key's winner (Objective)
};
struct CompareArgs {
  std::string store = "tunefarm.db", format = "table", out;
  std::string op, dtype, shape;
  std::vector<std::string> gpus;
  ClientArgs remote{.endpoint = "", .curve_secret_key = "", .coordinator_key = ""};
};
struct PublishArgs {
  std::string store = "tunefarm.db", out, name, sign_key;
  ResultFilter filter;
  bool no_kernels = false;      // a config-only bundle
  double min_vs_baseline = 0;   // PublishOptions::min_vs_baseline
  bool unsigned_bundle = false;  // write it unsigned (deployments refuse it)
  ClientArgs remote{.endpoint = "", .curve_secret_key = "", .coordinator_key = ""};
  std::string sweep;             // only the keys this sweep (id or a prefix of it) measured; "" = every key
  std::string objective = "time";  // what picks each key's winner (Objective)
};
struct BundleArgs {
  std::string file, op, dtype, gpu, shape;
  std::vector<std::string> keys;  // trusted public key files
  std::string format = "table";    // table | json
};
// The rows per key a table (text or markdown) of `tune`, `results` and
// `best` prints unless --top says otherwise: a screenful; JSON and CSV,
// read by programs, get every row.
inline constexpr uint32_t kTableTop = 10;
inline uint32_t RowsPerKey(std::optional<uint32_t> top, RowFormat format) {
  return top.value_or(format == RowFormat::kTable || format == RowFormat::kMarkdown ? kTableTop : 0);
}

struct TuneArgs {
  std::string sweep_file;
  std::vector<std::string> ops;  // none: DefaultGemm (commands_tune.cc)
  std::vector<std::string> dtypes = {"f16"},
                           shapes = {"M=4096,N=4096,K=4096"};
  std::string ops_dir, store = "tunefarm.db", bundle, format = "table", sign_key;
  bool unsigned_bundle = false;  // write the bundle unsigned
  unsigned sim_workers = 1;
  uint32_t configs_per_unit = 0;
  uint32_t confirm_top = 0;        // 0 = the sweep file's (none without one)
  uint32_t profile_top = 0;        // 0 = the sweep file's (none without one)
  double confirm_seconds = 0;      // 0 = the sweep file's, else kDefaultConfirmSeconds
  std::string confirm_timing;      // "" = the sweep file's, else kDefaultConfirmTiming
  std::string timing;              // "" = the sweep file's, else each op's (ApplySweepTiming)
  std::string objective;           // "" = the sweep file's, else time (SweepSubmit::objective)
  bool one_pass = false;           // no refine pass (SweepSubmit::refine_pass)
  std::string strategy;            // "" = the sweep file's, else auto (SweepSubmit::strategy)
  std::optional<uint64_t> seed;    // unset = the sweep file's, else 0
  uint64_t budget = 0;             // 0 = the sweep file's, else the strategy's default
  double budget_seconds = 0;       // 0 = the sweep file's, else none
  std::string retry;               // failure classes to measure again (the sweep file's when empty)
  uint64_t max_raw_configs = SchedulerOptions{}.max_raw_configs;  // the local coordinator's bound
  uint32_t search_in_flight = 0;                                   // SchedulerOptions::search_in_flight
  // --config, repeatable: "BM=128,BN=256,...", measured instead of the op's
  // space (SweepSubmit::configs); none = the sweep file's list, else the space.
  std::vector<std::string> configs;
  bool quiet = false;
  std::optional<uint32_t> top;  // rows per key printed: RowsPerKey
  WorkerArgs worker;
};

// Configs per key a retime measures by default (`retime`, a farm's
// nightly): the winner and two runners-up.
inline constexpr uint32_t kDefaultRetimeTop = 3;

struct NightlyArgs {
  TuneArgs tune;
  std::string history;         // one folder per night: store/, bundle.tfb, report.json
  double noise_floor = 0.02;   // smallest relative change that counts
  uint32_t keep = 0;           // nights of `history` kept, newest first; 0 = every one
  // A farm's coordinator to run the sweep on (its store keeps the rows; the
  // night's bundle is published from it remotely); empty: a farm on this host.
  ClientArgs remote{.endpoint = "", .curve_secret_key = "", .coordinator_key = ""};
  double timeout = 0;          // --coordinator: the longest wait for the sweep, seconds; 0 = none
  // --coordinator: configs per key of last night's bundle measured again
  // (RetimeOnFarm) before tonight's bundle is published; 0 = none.
  uint32_t retime_top = kDefaultRetimeTop;
  // "table": the comparison as text on stdout; "json": one document on
  // stdout (the night, its reports, whether it regressed); "markdown": the
  // comparison as markdown on stdout. With json and markdown the rest goes
  // to stderr.
  std::string format = "table";
};
// `nightly` exits with this when a winner got slower than the noise allows.
inline constexpr int kExitRegressions = 3;
// A command line that does not parse (an unknown option, a bad value): the
// exit status of usage errors, as POSIX utilities have it. --help and
// --version exit 0; failures of the work itself exit 1.
inline constexpr int kExitUsage = 2;
// `tune` stopped by SIGINT or SIGTERM (its sweep cancelled), as shells
// report a process ended by SIGINT.
inline constexpr int kExitInterrupted = 130;

// --format table|csv|json on a command that prints data (status, bundle
// show/lookup/diff; results, best and compare have their own, with the same
// names); --json stays as a hidden spelling of --format json.
// With `markdown`, markdown is a choice too.
void AddFormatOption(CLI::App* app, std::string* format, bool markdown = false);
// --objective time|energy|edp: what picks each key's winner (Objective).
void AddObjectiveOption(CLI::App* app, std::string* objective);

// One command of the command line: its CLI11 sub-app and what runs once the
// command line named it and parsed.
struct CliCommand {
  CLI::App* app = nullptr;
  // Runs the command with the values parsed into it; returns its exit code.
  // `stop` turns true on SIGINT or SIGTERM: long-running commands return soon
  // after.
  std::function<int(const std::atomic<bool>* stop)> run;
  // A long-running process (coordinator, worker, tune, nightly): it takes
  // --log-level and --log-format.
  bool logs = false;
  // Whether its --verbose was given (empty: it has none): the debug log
  // level, unless --log-level names one.
  std::function<bool()> verbose = {};
};

// Each adds its group's sub-apps (with every option, default and help text)
// to `app`, in the order `tunefarm --help` lists them, and appends their
// commands to `out`, leaves of nested sub-apps (`bundle show`) included. The
// values the sub-apps parse into belong to those commands: keep them while
// `app` parses. Never fails.
void AddFarmCommands(CLI::App& app, std::vector<CliCommand>* out);   // coordinator .. cancel
void AddStoreCommands(CLI::App& app, std::vector<CliCommand>* out);  // results .. bundle
void AddOpsCommands(CLI::App& app, std::vector<CliCommand>* out);    // op, keys
void AddTuneCommands(CLI::App& app, std::vector<CliCommand>* out);   // tune, nightly
void AddSearchCommands(CLI::App& app, std::vector<CliCommand>* out); // search replay
void AddSweepCommands(CLI::App& app, std::vector<CliCommand>* out);  // sweep from-misses
void AddEngineCommands(CLI::App& app, std::vector<CliCommand>* out); // export, import-configs
void AddRetimeCommands(CLI::App& app, std::vector<CliCommand>* out); // retime

// Re-timing on a farm (commands_retime.cc; `retime` and a farm's nightly).
// A key of the farm's answers (one winner each): GPU model, op, dtype, shape.
std::string ModelKeyOf(const Measurement& m);
// A bundle's entries as the keys to retime: each a row naming its key,
// kernel hash, config and figure.
std::vector<Measurement> RetimeKeysOf(const Bundle& bundle);
// Measures each key of `keys` (rows naming key, kernel hash and winner
// config) again on the farm at `c`: its winner and the next valid configs
// of its kernel in the farm's store, up to `top`, as one retime sweep per
// key (SweepSubmit::retime) named `name`, waited for (`timeout` seconds
// each; 0 = no bound). Returns the rows each retime stored, by ModelKeyOf,
// ranked (RankRows). Errors name the key or the sweep.
Result<std::map<std::string, std::vector<Measurement>>> RetimeOnFarm(
    const ClientArgs& c, const std::vector<Measurement>& keys, uint32_t top, const std::string& ops_dir,
    const std::string& name, uint32_t priority, double timeout, const std::atomic<bool>* stop);
// The retimed row of `key`'s own config, or null.
const Measurement* RetimedRowOf(const std::map<std::string, std::vector<Measurement>>& retimed,
                                const Measurement& key);
// `previous` with each entry's figure replaced by its config's retimed row
// (entries without a valid one left out): the same configs, timed tonight,
// for CompareBundles against `previous`. Other configs' stored rows are
// last night's, so they are no part of this comparison.
Bundle RetimedBundle(const Bundle& previous, const std::map<std::string, std::vector<Measurement>>& retimed);

// Worker options shared by `worker` and `tune`.
void AddWorkerOptions(CLI::App* app, WorkerArgs* args, bool for_tune = false);
void AddQueryOptions(CLI::App* app, QueryArgs* args);
// --coordinator and its keys, excluding `store` (the --store option).
void AddRemoteReadOptions(CLI::App* app, ClientArgs* remote, CLI::Option* store);
void AddClientOptions(CLI::App* app, ClientArgs* args);
// --connect-timeout: how long a command waits for the coordinator's
// connection and handshake before saying nothing listens or answers there.
CLI::Option* AddConnectTimeoutOption(CLI::App* app, ClientArgs* args);

int RunCoordinator(CoordinatorArgs& args, const std::atomic<bool>* stop);
int RunWorker(WorkerArgs& args, const std::atomic<bool>* stop);
int RunRunner(int device);
int RunSubmit(const SubmitArgs& args, const std::atomic<bool>* stop);
int RunStatus(const StatusArgs& args);
int RunCancel(const StatusArgs& args);
int RunResults(const QueryArgs& args, bool best_only);
int RunPublish(const PublishArgs& args);
int RunCompare(const CompareArgs& args);
int RunBundleShow(const BundleArgs& args);
int RunBundleLookup(const BundleArgs& args);
int RunBundleVerify(const BundleArgs& args);
// Compares two bundles' winners (regressions above noise: kExitRegressions).
int RunBundleDiff(const std::string& before, const std::string& after, double noise_floor,
                  const std::string& format);
int RunKeysCurve(const KeysArgs& args);
int RunKeysSign(const KeysArgs& args);
int RunTune(TuneArgs& args, const std::atomic<bool>* stop);
int RunNightly(NightlyArgs& args, const std::atomic<bool>* stop);

}  // namespace tune
