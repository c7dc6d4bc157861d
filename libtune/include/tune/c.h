/* The C API of tunefarm's deployment side: signed bundles, their lookups,
 * and the launcher of their measured kernels (tune/runtime.h and
 * tune/launcher.h in C++). What the Python package `tunefarm` calls through
 * ctypes; usable from any language with a C FFI.
 *
 * Conventions (LevelDB's c.h):
 * - Objects are opaque handles, made by a *_load / *_open / *_prepare call
 *   and released by the matching *_destroy. A launcher or kernel keeps the
 *   bundle it was made from: handles may be destroyed in any order (the
 *   bundle is freed with the last of them).
 * - A call that can fail takes `char** errptr`. On failure it stores a
 *   malloc'd one-line message there (freeing any message already there) and
 *   returns NULL or -1; on success it leaves *errptr alone. Free messages and
 *   every returned string with tunefarm_free().
 * - No C++ exception crosses this API.
 * - Answers come as JSON text (a C API of nested structs would be longer and
 *   no easier to use):
 *     {"level": "exact", "config": {"BM": 128, ...},
 *      "entry": {"gpu_model": ..., "shape": {...}, "config_id": ..., "kernel_hash": ...,
 *                "arch": ..., "median_us": ...} or null}
 *   with, at the "predicted" level (a shape never tuned, answered by the
 *   bundle's shape selector), "candidates": [{"config": ..., "entry": ...}]
 *   the configs it chose from; and, for a launch, "arch", "grid", "block",
 *   "smem_bytes" and "replayed" (true: the kernel's graph was replayed,
 *   tune/launcher.h) besides. A config's params are numbers, except those
 *   of an op's string axes (JSON strings, "SCHEDULE": "stream_k") and
 *   boolean axes (JSON true/false).
 * - Threads: a bundle and a launcher may be used from several threads; a
 *   kernel from one thread at a time.
 */
#ifndef TUNEFARM_C_H_
#define TUNEFARM_C_H_

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define TUNEFARM_EXPORT __attribute__((visibility("default")))
#else
#define TUNEFARM_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tunefarm_bundle_t tunefarm_bundle_t;
typedef struct tunefarm_launcher_t tunefarm_launcher_t;
typedef struct tunefarm_kernel_t tunefarm_kernel_t;

/* Loads the signed bundle at `path`, checked against `ntrusted` trusted keys
 * (each a public key file's path or its text). */
TUNEFARM_EXPORT tunefarm_bundle_t* tunefarm_bundle_load(const char* path, const char* const* trusted, size_t ntrusted,
                                        char** errptr);
TUNEFARM_EXPORT void tunefarm_bundle_destroy(tunefarm_bundle_t* bundle);

/* The answer of the fallback chain for (op, dtype, gpu_model, shape), the
 * shape as `ndims` (name, value) pairs; `arch` (e.g. "sm_89", or NULL) lets
 * the op's default for that architecture answer before the op-wide one.
 * JSON as above. */
TUNEFARM_EXPORT char* tunefarm_bundle_lookup(const tunefarm_bundle_t* bundle, const char* op, const char* dtype,
                                             const char* gpu_model, const char* const* dim_names,
                                             const int64_t* dim_values, size_t ndims, const char* arch,
                                             char** errptr);

/* What the bundle holds: {"name": ..., "farm_version": ..., "created_unix": ...,
 * "signer_key_id": ..., "entries": N, "ops": {"gemm": {"dims": ["M", "N", "K"],
 * "dtypes": ["f16"]}, ...}, "dtypes": [every dtype the farm knows]}. */
TUNEFARM_EXPORT char* tunefarm_bundle_info(const tunefarm_bundle_t* bundle, char** errptr);

/* The lookups answered below "exact" so far (tune/runtime.h, "Misses"):
 * {"misses": [{"op": ..., "dtype": ..., "gpu_model": ..., "shape": {...},
 * "level": ..., "count": N}, ...], "dropped": N}, most asked first. */
TUNEFARM_EXPORT char* tunefarm_bundle_misses(const tunefarm_bundle_t* bundle, char** errptr);
/* Appends them to `path` as JSON lines (`tunefarm sweep from-misses` reads
 * them). 0 on success, -1 with *errptr set. */
TUNEFARM_EXPORT int tunefarm_bundle_write_misses(const tunefarm_bundle_t* bundle, const char* path, char** errptr);

/* Opens CUDA device `ordinal` for the bundle's kernels. */
TUNEFARM_EXPORT tunefarm_launcher_t* tunefarm_launcher_open(const tunefarm_bundle_t* bundle, int ordinal, char** errptr);
TUNEFARM_EXPORT void tunefarm_launcher_destroy(tunefarm_launcher_t* launcher);
/* {"ordinal": 0, "name": ..., "model": ..., "arch": "sm_90", ...} */
TUNEFARM_EXPORT char* tunefarm_launcher_device(const tunefarm_launcher_t* launcher);

TUNEFARM_EXPORT tunefarm_kernel_t* tunefarm_kernel_prepare(tunefarm_launcher_t* launcher, const char* op, const char* dtype,
                                           char** errptr);
TUNEFARM_EXPORT void tunefarm_kernel_destroy(tunefarm_kernel_t* kernel);
/* {"dims": ["M", "N", "K"], "buffers": ["A", "B", "C"], "dirs": ["in", "in", "out"]}
 * (each buffer's direction: "in", "out" or "inout") */
TUNEFARM_EXPORT char* tunefarm_kernel_signature(const tunefarm_kernel_t* kernel);
/* Launches on `stream` (a CUstream, or NULL). `dims` in the signature's
 * order, `buffers` device pointers in its order. 0 or -1. */
TUNEFARM_EXPORT int tunefarm_kernel_launch(tunefarm_kernel_t* kernel, const int64_t* dims, size_t ndims, const uint64_t* buffers,
                           size_t nbuffers, void* stream, char** errptr);
/* The launch of a hot loop (Python's bound launches): as
 * tunefarm_kernel_launch, its arguments in one block that the caller fills
 * in place between calls (a binding then converts one pointer per call, not
 * four), with the signature's counts of `dims` and `buffers` and no
 * errptr: on failure it returns -1 and tunefarm_kernel_error() gives the
 * message. Nothing is allocated on success. A kernel with more than
 * TUNEFARM_LAUNCH_MAX_BUFFERS buffers is launched by tunefarm_kernel_launch. */
#define TUNEFARM_LAUNCH_MAX_BUFFERS 16
typedef struct tunefarm_launch_args {
  tunefarm_kernel_t* kernel;
  const int64_t* dims;
  void* stream; /* a CUstream, or NULL */
  uint64_t buffers[TUNEFARM_LAUNCH_MAX_BUFFERS];
} tunefarm_launch_args_t;
TUNEFARM_EXPORT int tunefarm_kernel_launch_args(const tunefarm_launch_args_t* args);
/* The last failed tunefarm_kernel_launch_args's message (free it); "no kernel" for NULL. */
TUNEFARM_EXPORT char* tunefarm_kernel_error(const tunefarm_kernel_t* kernel);
/* What answered the last launch: JSON as above. */
TUNEFARM_EXPORT char* tunefarm_kernel_last(const tunefarm_kernel_t* kernel);

TUNEFARM_EXPORT void tunefarm_free(void* ptr);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TUNEFARM_C_H_ */
