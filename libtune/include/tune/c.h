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
 *   no easier to use), but for prepared lookups (tunefarm_lookup below),
 *   whose hot path fills plain structs instead:
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
 *   kernel and a prepared lookup from one thread at a time.
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

/* Prepared lookups: the lookup of a hot path, with no JSON. `op`, `dtype`,
 * `gpu_model`, `arch` (or NULL) and the shape's `ndims` dim names are bound
 * once by tunefarm_lookup_prepare; each tunefarm_lookup then takes the dims
 * as integers in that order and fills a tunefarm_answer_t of plain fields.
 * It answers as tunefarm_bundle_lookup does for the same query (the same
 * chain, the same misses counted; dim names that are not the op's answer
 * its default, as there), but refuses with an error what that call would
 * quietly answer with the default: a count of dims other than the one
 * prepared, a negative dim.
 *
 * Ownership: the prepared lookup keeps its bundle (it may be destroyed
 * first, as for a launcher); release it with tunefarm_lookup_destroy.
 * Everything an answer points to (names, texts, arrays, entries) belongs
 * to the prepared lookup and stays valid until it is destroyed: the caller
 * frees nothing of an answer, and may keep its pointers across lookups.
 * The same config or entry is always at the same address, so a binding may
 * cache what it made of it by address.
 *
 * Threads: one thread at a time per prepared lookup (it keeps its last
 * answer, as tune::runtime::PreparedLookup does, and what it has laid out);
 * prepare one per thread. The bundle itself may be shared.
 *
 * Errors: tunefarm_lookup_prepare returns NULL and tunefarm_lookup -1, each
 * with *errptr set as above (NULL handles and arguments included: an error,
 * never a crash). tunefarm_lookup allocates nothing on success once each
 * config and entry it answers with has been answered once. */
typedef struct tunefarm_lookup_t tunefarm_lookup_t;

/* tunefarm_answer_t.level: tune::runtime::Level's values. */
#define TUNEFARM_LEVEL_EXACT 0
#define TUNEFARM_LEVEL_NEAREST_SHAPE 1
#define TUNEFARM_LEVEL_FAMILY 2
#define TUNEFARM_LEVEL_DEFAULT 3
#define TUNEFARM_LEVEL_MISS 4
#define TUNEFARM_LEVEL_PREDICTED 5

/* tunefarm_params_t.kinds: what a param's value is. */
#define TUNEFARM_PARAM_INT 0
#define TUNEFARM_PARAM_BOOL 1   /* values 0 or 1, texts "false" or "true" */
#define TUNEFARM_PARAM_STRING 2 /* texts its spelling ("stream_k"), values its code (what op rules compare) */

/* (name, value) pairs in order: a config's params, a shape's dims. */
typedef struct tunefarm_params {
  size_t n;
  const char* const* names;
  const int64_t* values;
  const char* const* texts; /* "" for an integer */
  const int* kinds;         /* TUNEFARM_PARAM_* */
} tunefarm_params_t;

/* A tuned entry of the bundle, or a GPU model's default (shape.n == 0). */
typedef struct tunefarm_entry {
  const char* gpu_model;
  tunefarm_params_t shape;
  tunefarm_params_t config;
  const char* config_id;
  const char* kernel_hash;
  const char* arch;    /* of the measured cubin; "" for sim */
  const char* backend; /* "cuda" | "sim" */
  double median_us;
  const char* baseline; /* the op's vendor baseline on the same key; "" when not measured */
  double baseline_median_us;
} tunefarm_entry_t;

/* The JSON answer above, as fields. */
typedef struct tunefarm_answer {
  int level;              /* TUNEFARM_LEVEL_* */
  const char* level_name; /* "exact", "predicted", ... */
  tunefarm_params_t config; /* n == 0 and NULL arrays for a miss */
  const tunefarm_entry_t* entry; /* NULL: the op's default, its arch default, or a miss */
  size_t ncandidates;            /* "predicted": the entries the selector chose among */
  const tunefarm_entry_t* const* candidates;
} tunefarm_answer_t;

/* At most 16 dim names, none NULL and no two alike; `dim_names` may be NULL
 * when ndims is 0. An op the bundle lacks is no error (its lookups answer
 * its default or a miss, as tunefarm_bundle_lookup's do). */
TUNEFARM_EXPORT tunefarm_lookup_t* tunefarm_lookup_prepare(const tunefarm_bundle_t* bundle, const char* op,
                                                           const char* dtype, const char* gpu_model,
                                                           const char* arch, const char* const* dim_names,
                                                           size_t ndims, char** errptr);
TUNEFARM_EXPORT void tunefarm_lookup_destroy(tunefarm_lookup_t* lookup);
/* `dims` in the prepared order, `ndims` their count. Fills *answer; 0 or -1
 * (then *answer is left alone). */
TUNEFARM_EXPORT int tunefarm_lookup(tunefarm_lookup_t* lookup, const int64_t* dims, size_t ndims,
                                    tunefarm_answer_t* answer, char** errptr);

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
