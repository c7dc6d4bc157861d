// One process of a program op: `/bin/sh -c COMMAND` in a given folder with
// a given environment, stdout read as lines with deadlines, stderr kept as
// a bounded tail for failure messages. It runs in a box (a process between
// it and the worker, see program_process.cc) that confines it when given a
// ruleset, gives it a TMPDIR of its own, holds it to its BoxLimits, and
// kills everything it started when it ends or must go, however it detached
// (`setsid -f`, a Python harness's compile pool). Knows nothing of the
// protocol spoken over it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "measure/confine.h"
#include "tune/status.h"

namespace tune::program {

// Bounds on what a program and everything it starts may take. 0 = none.
struct BoxLimits {
  // Per process, set before the exec and inherited (setrlimit):
  // RLIMIT_FSIZE (a write past it fails, SIGXFSZ), RLIMIT_NOFILE (never
  // raised above the worker's hard limit). Core dumps are always off.
  uint64_t max_file_bytes = 0;
  uint64_t max_open_files = 0;
  // Over the program's whole tree, however it detached, counted by the box
  // from /proc several times a second: past either, every process of the
  // tree is killed and the box says why on the program's stderr. Memory is
  // resident memory summed over the processes (shared pages count in each;
  // CUDA's huge virtual reservations do not count, which is why this is no
  // RLIMIT_AS). Processes also get RLIMIT_NPROC (see program_process.cc).
  uint64_t max_processes = 0;
  uint64_t max_memory_bytes = 0;
};

// What a program runs in besides its command (program_process.cc: the box).
struct Box {
  // Enforced by the program on itself before its exec; null: unconfined.
  const confine::FsRuleset* rules = nullptr;
  // With `rules`: socket() refused (confine::DenySocketsRaw), and, when
  // set, a /dev/shm of the program's own (confine::PrivateShmRaw, of at
  // most limits.max_memory_bytes) that the program adds to `rules`, which
  // are then spent: one ruleset per Start. A program that cannot have its
  // /dev/shm is not started. The caller checks CanMakePrivateShm() once.
  bool private_shm = false;
  // With private_shm: the host's /run hidden (PrivateShmRaw).
  bool hide_run = false;
  // A fresh 0700 folder is made here for each process (named after the
  // worker's pid, see RemoveLeftoverTmp) and given as TMPDIR, TMP and
  // TEMP; it is removed with everything in it once the process is gone.
  // "": none.
  std::string tmp_parent;
  BoxLimits limits;
};

// Removes the folders under `tmp_parent` that Box made for processes of
// workers no longer alive (a worker killed mid-run): those of live
// workers, sharing the folder, stay. Returns how many were removed.
int RemoveLeftoverTmp(const std::string& tmp_parent);

class ProgramProcess {
 public:
  ProgramProcess() = default;
  // Kills the process group if it is still there.
  ~ProgramProcess();
  ProgramProcess(const ProgramProcess&) = delete;
  ProgramProcess& operator=(const ProgramProcess&) = delete;

  // Starts `command` under /bin/sh in `cwd`, with exactly the environment
  // `env` ("NAME=value", later entries win) and what `box` adds. stdin is
  // a pipe when `keep_stdin` (a serve process), else /dev/null. Error when
  // a pipe, the TMPDIR or the spawn fails. `box` must outlive the call
  // only.
  Status Start(const std::string& command, const std::string& cwd, const std::vector<std::string>& env,
               bool keep_stdin, const Box& box = {});
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
  // The process's TMPDIR ("" when it has none or it has ended).
  const std::string& tmp_dir() const { return tmp_dir_; }

 private:
  void DrainStderr();
  void CloseFds();
  void RemoveTmp();

  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;
  std::string out_buf_, stderr_tail_, tmp_dir_;
  bool skipping_ = false;  // the rest of a line cut at kMaxLineBytes is dropped
};

}  // namespace tune::program
