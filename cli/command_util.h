// Helpers the CLI's command groups share (commands_*.cc): failure lines,
// waiting on a sweep, writing bundles, opening stores. Not a library
// contract: only the `tunefarm` program includes this.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "farm_access.h"
#include "bundle/bundle.h"
#include "protocol/protocol.h"
#include "publish/publish.h"
#include "store/result_store.h"
#include "tune/status.h"

namespace tune {

// Prints "tunefarm: LINE" on stderr (an error line through a JSON log);
// returns 1, a failure of the work.
int Fail(const std::string& line);
// A bad option value found after parsing: prints it as Fail does; returns
// kExitUsage.
int Usage(const std::string& line);

// "a,b,,c" -> {"a", "b", "c"}: empty items dropped.
std::vector<std::string> SplitList(const std::string& text);

// --retry CLASSES: stored failures of these classes are measured again.
inline constexpr const char* kRetryHelp =
    "Failure classes whose stored rows are measured again, like timeout,crash (compile_error, resources, "
    "launch_error, crash, timeout, wrong_result, nan; default: the sweep file's retry, else none: a stored "
    "failure is a result)";
// Sets `sweep`'s retry classes from --retry's text (when given); an error
// names the flag and the classes.
Status ApplyRetry(const std::string& text, SweepSubmit* sweep);

// Turns the worker flags' text (--sim-models, --devices, --include-root,
// --sim-truth: the file read) into args.opts. Returns an error naming the flag whose value is bad.
Status FinishWorkerArgs(WorkerArgs& args);

// The figures of a `tunefarm results --format csv` file (gzip or not, read
// as `search replay` reads ground truth) as a sim backend's table
// (--sim-truth): each key's valid rows, the faster of a config seen twice.
// Errors name the file and line; a file with no valid row is refused.
Result<std::shared_ptr<const SimTruth>> SimTruthFromCsv(const std::string& path);

// Where op folders are when --ops-dir is not given: the installed
// share/tunefarm/ops beside this binary (a package, a packed farm), else
// ./ops (a checkout).
std::string DefaultOpsDir();
inline constexpr const char* kOpsDirHelp =
    "Folder holding the op folders (default: the installed share/tunefarm/ops, else ./ops)";

// The flags that reach the farm at `c`, as hints spell them for a command
// to paste: "--coordinator tcp://h:5555 --curve-key k --coordinator-key p".
std::string FarmFlags(const ClientArgs& c);

// Waits for a sweep, asking for its state every `poll_seconds` and showing
// its progress on stderr (ProgressLine) unless quiet; says once, on stderr,
// when it has waited kWaitingNoticeSeconds for GPU models no live worker has
// (with `bound_hint`, what bounds that wait: "--timeout bounds the wait";
// empty: nothing to add). Rides out a restarting
// coordinator for a while. Returns its final progress, or an error when the
// coordinator stops answering, `stop` turns true or `timeout_seconds` (0 =
// none) pass; those errors say that the sweep goes on and how to re-attach
// or cancel it.
inline constexpr double kWaitingNoticeSeconds = 3;
Result<SweepProgress> WaitForSweep(const ClientArgs& c, const std::string& sweep_id, bool quiet,
                                   const std::atomic<bool>* stop, double poll_seconds, double timeout_seconds = 0,
                                   const std::string& bound_hint = "--timeout bounds the wait");

}  // namespace tune
