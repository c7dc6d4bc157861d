// The backend of program ops (opspec/op_definition.h ProgramSpec): a worker hands
// a unit of a program op to it instead of its CUDA or sim backend. It runs
// the op's own commands, in the op's package unpacked on the worker, with
// the device of the backend it stands beside.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "measure/backend.h"
#include "measure/program/program_process.h"

namespace tune {

// The bounds a program gets unless told otherwise: files of 4 GiB at most,
// 65536 open files, 1024 processes, and half the host's memory resident.
program::BoxLimits DefaultProgramLimits();

struct ProgramBackendOptions {
  // Where packages are unpacked (one folder per package digest) and builds
  // kept; created on first use.
  std::string work_dir;
  // Program ops run arbitrary commands of whoever submitted the sweep: a
  // worker runs them only when its operator allows it (`work
  // --allow-programs`; `tune` allows its own). Refused otherwise, as a
  // compile error that says so.
  bool allowed = false;
  // Put before PYTHONPATH, so that a Python program finds the tunefarm
  // package (its harness) shipped with this binary. "" = none.
  std::string python_path;
  // The host's cores that this device's programs may keep busy (a serve
  // process sizes its compile pool by it: TUNEFARM_CPUS): a worker shares
  // its host's cores among its devices. 0 = not said.
  unsigned cpus = 0;
  // Programs run in a box (program_process.h, docs/program-ops.md), confined
  // by Landlock: they read the host's files but the protected paths (the
  // worker's key files, its configuration: `protected_paths`, and always
  // DefaultProtectedPaths()), write only their work folder, the framework
  // caches of the home folder (ProgramCacheFolders()), their own TMPDIR
  // (removed after each process) and devices, never a protected path;
  // they cannot reach the worker's process (/proc/<worker>/{mem,environ,
  // fd}), TCP (Landlock ABI 4+) or abstract unix sockets made outside the
  // box (ABI 6+). They see an allow-listed part of the worker's
  // environment only (ProgramEnvironment). Whatever they start dies with
  // them. On a kernel without Landlock they are refused (a compile error
  // that says so) unless `allow_unconfined`.
  std::vector<std::string> protected_paths;
  bool allow_unconfined = false;
  // Each program in a user and mount namespace of its own (confine.h
  // PrivateShmRaw): its own /dev/shm, the host's /run out of sight. Where
  // the kernel refuses unprivileged user namespaces, programs share the
  // host's /dev/shm and see /run, as with this off (docs/program-ops.md).
  bool private_namespace = true;
  // Bounds on each program's processes, memory, files (DefaultProgramLimits).
  program::BoxLimits limits = DefaultProgramLimits();
};

// A backend for program ops on `device` (the CUDA or sim device it shares):
//   Compile runs [program] build once per (config, dtype), in a build folder
//     of its own kept between units (a failure is a compile error with the
//     build's output);
//   Measure runs [program] run once per (config, shape), or asks the serve
//     process (started on first use, one per backend, restarted after a
//     crash, a timeout or another op); a non-zero exit is a crash, a run
//     past [program] timeout is killed with its whole process group and is a
//     timeout, and what the program prints is checked (program_protocol.h);
//   Plan tells a serve process the unit's configs so it may compile ahead.
// Thread-safety as Backend: Compile from many threads, Measure from one.
std::unique_ptr<Backend> MakeProgramBackend(const DeviceInfo& device, const std::string& toolchain,
                                            ProgramBackendOptions options);

// How this host confines programs: "landlock", or "none" (the kernel has
// no Landlock: programs run only where allow_unconfined says so).
std::string ProgramBackendConfinement();

// The paths every program box protects (neither read nor written), beside
// a worker's own: the package's configuration and keys (/etc/tunefarm) and
// state, the coordinator's store among it (/var/lib/tunefarm), the same
// under the running binary's prefix (a relocatable install), the user's
// tunefarm configuration ($XDG_CONFIG_HOME/tunefarm or ~/.config/tunefarm)
// and $TUNEFARM_SIGN_KEY.
std::vector<std::string> DefaultProtectedPaths();

// The paths programs may write: the caches of the frameworks program ops
// are written in, in the home folder (~/.cache stands for $XDG_CACHE_HOME
// when it is set) and where the worker's environment moves them
// (TRITON_CACHE_DIR, TRITON_HOME, TORCHINDUCTOR_CACHE_DIR, CUDA_CACHE_PATH,
// TILELANG_CACHE_DIR), and the harness's log ($TUNEFARM_HARNESS_LOG), all
// created when missing so that the grant holds. A protected path among
// them stays protected.
std::vector<std::string> ProgramCacheFolders();

// The environment of a program, before the farm's own variables: the
// worker's variables whose names the allow-list in program_backend.cc
// names (PATH, HOME, locale, CUDA_*, TRITON_*, ...), and those named in
// $TUNEFARM_PROGRAM_ENV (space- or comma-separated), which is how an
// operator passes another one through. The rest (tokens, key paths, the
// worker's own settings) stays with the worker.
std::vector<std::string> ProgramEnvironment();

// The folder holding the tunefarm Python package that ships with the running
// binary: $TUNEFARM_PYTHON, else python/ or share/tunefarm/python/ above the
// folder of the binary (or of the farm's library, in a Python process),
// else an absolute $PYTHONPATH entry holding it, else the source tree's
// while the binary sits in the build tree it was built in (not once moved);
// "" when none holds one.
std::string TunefarmPythonPath();

}  // namespace tune
