// One process of a program op: `/bin/sh -c COMMAND` in a given folder with
// a given environment, stdout read as lines with deadlines, stderr kept as
// a bounded tail for failure messages. It runs in a box (a process between
// it and the worker, see program_process.cc) that confines it when given a
// ruleset and kills everything it started when it ends or must go, however
// it detached (`setsid -f`, a Python harness's compile pool). Knows nothing
// of the protocol spoken over it.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "measure/confine.h"
#include "tune/status.h"

namespace tune::program {

class ProgramProcess {
 public:
  ProgramProcess() = default;
  // Kills the process group if it is still there.
  ~ProgramProcess();
  ProgramProcess(const ProgramProcess&) = delete;
  ProgramProcess& operator=(const ProgramProcess&) = delete;

  // Starts `command` under /bin/sh in `cwd`, with the worker's environment
  // plus `env` ("NAME=value", later entries win). stdin is a pipe when
  // `keep_stdin` (a serve process), else /dev/null. Error when a pipe or
  // the spawn fails. With `rules`, the program enforces them on itself
  // before its exec (`rules` must outlive the call only).
  Status Start(const std::string& command, const std::string& cwd, const std::vector<std::string>& env,
               bool keep_stdin, const confine::FsRuleset* rules = nullptr);
  bool running() const { return pid_ > 0; }
  // Whether the process has ended (or was never started), without reaping it.
  bool Exited() const;

  // Writes one line (a '\n' is added). Error when the process no longer
  // reads (its stdin closed) or the write would outlast `timeout_seconds`.
  Status WriteLine(const std::string& line, double timeout_seconds);

  enum class ReadOutcome { kLine, kTimeout, kClosed };
  // Waits until `deadline` (NowSeconds() time) for one line of stdout (without
  // its '\n'; a line over 4 MiB is cut there and the rest of it dropped).
  // kTimeout once the deadline is past, whatever is buffered. kClosed:
  // stdout ended.
  ReadOutcome ReadLine(double deadline, std::string* line);

  // After kClosed: waits until `deadline` for the process to exit, then
  // kills what is left of its group and reaps it. Returns how it ended
  // ("exit code 0", "killed by signal 9 (Killed)"); `clean` is set when it
  // exited with 0.
  std::string Finish(double deadline, bool* clean);
  // SIGKILL to the whole group, reaped. Returns how the process ended.
  std::string Kill();

  // The last 16 KiB of what the process wrote to stderr.
  const std::string& stderr_tail() const { return stderr_tail_; }

 private:
  void DrainStderr();
  void CloseFds();

  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;
  std::string out_buf_, stderr_tail_;
  bool skipping_ = false;  // the rest of a line cut at kMaxLineBytes is dropped
};

}  // namespace tune::program
