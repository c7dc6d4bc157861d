#include "command_util.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <thread>

#include "base/log.h"
#include "coordinator_client.h"
#include "progress.h"
#include "base/clock.h"
#include "base/text.h"

namespace tune {
namespace {

constexpr double kCoordinatorPatienceSeconds = 120;

}  // namespace

int Fail(const std::string& line) {
  if (log::WritesJson()) log::Error("tunefarm", line);
  else std::fprintf(stderr, "tunefarm: %s\n", line.c_str());
  return 1;
}

int Usage(const std::string& line) {
  (void)Fail(line);
  return kExitUsage;
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

Status FinishWorkerArgs(WorkerArgs& args) {
  args.opts.sim_models = SplitList(args.sim_models);
  auto roots = ParseIncludeRoots(args.include_roots);
  if (!roots.ok()) return Status::Error("--include-root: " + roots.status().message());
  args.opts.include_roots = *roots;
  if (!args.sim_truth.empty()) {
    auto truth = SimTruthFromCsv(args.sim_truth);
    if (!truth.ok()) return Status::Error("--sim-truth: " + truth.status().message());
    args.opts.sim_truth = *truth;
  }
  args.opts.cuda_devices.clear();
  for (const auto& d : SplitList(args.devices)) {
    try {
      args.opts.cuda_devices.push_back(std::stoi(d));
    } catch (const std::exception&) {
      return Status::Error("--devices: '" + d + "' is not a device ordinal");
    }
  }
  return Status::OK();
}

Status ApplyRetry(const std::string& text, SweepSubmit* sweep) {
  if (text.empty()) return Status::OK();
  sweep->retry = SplitList(text);
  return CheckRetryClasses(sweep->retry, "--retry");
}

std::string DefaultOpsDir() {
  std::error_code ec;
  const std::filesystem::path above = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path().parent_path();
  if (!ec && std::filesystem::is_directory(above / "share" / "tunefarm" / "ops", ec))
    return (above / "share" / "tunefarm" / "ops").string();
  return "ops";
}

std::string FarmFlags(const ClientArgs& c) {
  std::string flags = "--coordinator " + c.endpoint;
  if (!c.curve_secret_key.empty()) flags += " --curve-key " + c.curve_secret_key;
  if (!c.coordinator_key.empty()) flags += " --coordinator-key " + c.coordinator_key;
  return flags;
}

Result<SweepProgress> WaitForSweep(const ClientArgs& c, const std::string& sweep_id, bool quiet,
                                   const std::atomic<bool>* stop, double poll_seconds, double timeout_seconds,
                                   const std::string& bound_hint) {
  const double start = NowSeconds();
  const std::string goes_on = "sweep " + sweep_id + " goes on at the coordinator: `tunefarm status " + sweep_id +
                              " --wait " + FarmFlags(c) + "` waits again, `tunefarm cancel " + sweep_id + " " +
                              FarmFlags(c) + "` stops it";
  bool told_waiting = false, told_gone = false;
  double waiting_since = -1;  // when the sweep was first seen waiting for a model
  double last_answer = start;
  ProgressLine progress(stderr);
  SweepProgress last;
  std::optional<CoordinatorClient> client;
  while (!stop->load()) {
    if (!client) client.emplace(c.endpoint, 5, c.curve_secret_key, c.coordinator_key);
    auto reply = client->Call(SweepStatusRequest{sweep_id});
    if (!reply.ok()) {
      // A fresh socket next: a restarted coordinator must not inherit a
      // request the old one never answered.
      client.reset();
      // The coordinator may be restarting; sweeps survive that.
      if (NowSeconds() - last_answer > kCoordinatorPatienceSeconds)
        return Status::Unavailable(reply.status().message() + "; no answer for " +
                                   FormatDuration(kCoordinatorPatienceSeconds) + ": sweep " + sweep_id +
                                   " is kept in the coordinator's store and resumes when it starts again");
      if (!told_gone) {
        told_gone = true;
        std::fprintf(stderr, "\n%s; waiting up to %s for it to come back (a restarted coordinator resumes its "
                     "sweeps; Ctrl-C stops the waiting)\n",
                     reply.status().message().c_str(), FormatDuration(kCoordinatorPatienceSeconds).c_str());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    if (told_gone) {
      told_gone = false;
      std::fprintf(stderr, "\ncoordinator %s answers again\n", c.endpoint.c_str());
    }
    last_answer = NowSeconds();
    auto* status = std::get_if<SweepStatus>(&*reply);
    if (!status || status->sweeps.empty()) return Status::Error("coordinator sent no status");
    last = status->sweeps.front();
    if (last.state != "running") {
      if (!quiet) progress.Finish(last, NowSeconds() - start);
      return last;
    }
    // A worker joining in its first seconds (tune's own, a farm's after a
    // restart) is no wait to speak of.
    if (last.waiting_for.empty()) waiting_since = -1;
    else if (waiting_since < 0) waiting_since = NowSeconds();
    if (!last.waiting_for.empty() && !told_waiting && NowSeconds() - waiting_since >= kWaitingNoticeSeconds) {
      told_waiting = true;
      const std::string hint = timeout_seconds > 0 || bound_hint.empty() ? "" : "; " + bound_hint;
      std::fprintf(stderr, "\nwaiting for %s: no live worker has it (the sweep waits for one to join%s)\n",
                   Join(last.waiting_for, ", ").c_str(), hint.c_str());
    }
    if (!quiet) progress.Update(last, NowSeconds() - start);
    if (timeout_seconds > 0 && NowSeconds() - start >= timeout_seconds) {
      // A wait for a model that the notice's delay did not yet name is
      // named here.
      const std::string waiting = last.waiting_for.empty() || told_waiting
                                      ? ""
                                      : " (waiting for " + Join(last.waiting_for, ", ") + ": no live worker has it)";
      return Status::Error("still running after " + FormatDuration(timeout_seconds) + waiting + ": " + goes_on);
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(poll_seconds));
  }
  return Status::Error("interrupted: " + goes_on);
}

void AddFormatOption(CLI::App* app, std::string* format, bool markdown) {
  app->add_option("--format", *format, markdown ? "table, csv, json or markdown" : "table, csv or json")
      ->capture_default_str()
      ->check(markdown ? CLI::IsMember({"table", "csv", "json", "markdown"}) : CLI::IsMember({"table", "csv", "json"}));
  app->add_flag_callback("--json", [format] { *format = "json"; }, "Same as --format json")->group("");
}

void AddObjectiveOption(CLI::App* app, std::string* objective) {
  app->add_option("--objective", *objective,
                  "What picks each key's winner: time (the median), energy (per call) or edp (energy x time); "
                  "energy and edp rank the rows with energy measured (`tune --energy-seconds`), a key without "
                  "any keeps its time winner")
      ->capture_default_str()
      ->check(CLI::IsMember({"time", "energy", "edp"}));
}

}  // namespace tune
