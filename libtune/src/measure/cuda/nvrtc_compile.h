// NVRTC compilation of op sources to cubins, with the on-disk cubin cache.
// Shared by CompileConfig (kernel configs, in the worker's compile pool) and
// the runner (the op's reference, once per op and dtype).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "measure/backend.h"
#include "opspec/op_definition.h"

namespace tune::cuda {

// NVRTC type name of a dtype ("f16" -> "__half"); empty when unknown.
std::string DTypeCudaName(const std::string& dtype);

// The include folder holding cuda_fp16.h for NVRTC: $CUDA_HOME/include,
// $CUDA_PATH/include, the toolkit NVRTC was loaded from, /usr/local/cuda.
// Empty when none has it.
const std::string& CudaIncludeDir();

// The include roots of this process (SetIncludeRoots, measure/cuda/cuda_backend.h).
const IncludeRoots& ConfiguredIncludeRoots();

// Options every compile of `spec` for (dtype, arch) gets, params excluded:
// among them -I for each of the op's include roots that this process has.
std::vector<std::string> BaseOptions(const OpSpec& spec, const std::string& dtype, const std::string& arch);

// Sets ck->kernel_hash: the op's KernelHash, or for an op with include
// roots KernelHashWithIncludes of it and their IncludeRootsDigest (also in
// ck->include_digest). False, with ck failed as a compile error, when the
// roots cannot be read or one is not configured here.
bool StampKernelHash(const OpSpec& spec, CompiledKernel* ck);

// One NVRTC program.
struct NvrtcJob {
  std::string file;                  // program name, shown in diagnostics
  std::string source;
  std::vector<std::pair<std::string, std::string>> headers;  // include name -> text
  std::vector<std::string> options;
  std::string entry;                 // kernel whose ptxas resources to report
};

struct NvrtcResult {
  bool ok = false;
  std::string cubin;
  std::string log;                   // full compiler log
  std::string error;                 // one line when !ok
  KernelResources resources;         // registers, static smem, local bytes
};

// Compiles to a cubin (nvrtcGetCUBIN). Thread-safe.
NvrtcResult RunNvrtc(const NvrtcJob& job);

// Resources of `entry` from a `-Xptxas=-v` log. Returns false when the log
// has no report for it.
bool ParsePtxasResources(const std::string& log, const std::string& entry, KernelResources* out);

// OK when the op's kernel in `cubin` takes the parameters its [[args]]
// declare, in count and byte size (a buffer is a pointer: 8; i64 8; i32
// and f32 4; a tensor map 128); else one line with both lists. A kernel launched with other arguments reads
// garbage, or faults only on some shapes.
Status CheckKernelParams(const OpSpec& spec, std::string_view cubin);

// Compiles tunefarm's own kernels (`source`, outside any op package) for
// (dtype, arch), cached like configs under the id "builtin": a runner starts
// for every confirm round (TimingPolicy::new_runner) and finds them there
// instead of waiting for NVRTC each time. Thread-safe.
CompiledKernel CompileBuiltin(const std::string& source, const std::string& entry, const std::string& dtype,
                              const std::string& arch, const std::string& cache_dir);

}  // namespace tune::cuda
