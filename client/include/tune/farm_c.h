/* The C API of tunefarm's farm side: run a farm in this process or talk to
 * a coordinator, submit sweeps, watch and cancel them, read their results
 * and winners, publish bundles. What the Python package's tunefarm.Farm
 * calls through ctypes (libtunefarm_farm.so). Deployments, which only load
 * bundles and launch kernels, use tune/c.h (libtunefarm_c.so) and need
 * none of this library's dependencies.
 *
 * Conventions: those of tune/c.h (opaque handles, `char** errptr` with a
 * malloc'd one-line message, strings freed with tunefarm_farm_free, no C++
 * exception crosses the API). Requests and answers are JSON text.
 *
 * Threads: a farm handle is used from one thread at a time.
 */
#ifndef TUNEFARM_FARM_C_H_
#define TUNEFARM_FARM_C_H_

#include <stddef.h>

#if defined(__GNUC__)
#define TUNEFARM_FARM_EXPORT __attribute__((visibility("default")))
#else
#define TUNEFARM_FARM_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tunefarm_farm_t tunefarm_farm_t;

/* A farm in this process, as `tunefarm tune` runs one: a coordinator on
 * loopback and workers on this host's GPUs. `options_json`:
 *   {"store": "tunefarm.db",        the result store's folder (made if missing)
 *    "backend": "auto",             "auto" (CUDA; no silent simulation), "cuda" or "sim"
 *    "sim_models": ["sim-h100"],    sim: the simulated GPU models
 *    "devices": [0, 1],             cuda: which devices (default: all)
 *    "workers": 1,                  sim: workers
 *    "tunefarm_binary": path,       cuda: the `tunefarm` program, whose `runner` times kernels
 *    "allow_programs": false,       run program ops (Triton, ...) as this user
 *    "max_raw_configs": 4000000,    the bound on an op's raw config points (tune --max-raw-configs)
 *    "log_level": "warn"}           the farm's log lines on stderr: debug, info, warn, error
 * Every key may be left out. Its devices are said on stderr. */
TUNEFARM_FARM_EXPORT tunefarm_farm_t* tunefarm_farm_local(const char* options_json, char** errptr);

/* A running coordinator at `endpoint`; with CURVE, `client_secret_key` is
 * this client's secret key file and `coordinator_key` the coordinator's
 * public key file (both NULL: plaintext). `timeout_seconds` bounds each
 * request (0: 10 s). Nothing is sent until the first call. */
TUNEFARM_FARM_EXPORT tunefarm_farm_t* tunefarm_farm_connect(const char* endpoint, const char* client_secret_key,
                                                            const char* coordinator_key, double timeout_seconds,
                                                            char** errptr);

/* A store on this host, read-only (whether or not a coordinator owns it):
 * results and publish work; submit, status and cancel are refused. */
TUNEFARM_FARM_EXPORT tunefarm_farm_t* tunefarm_farm_open_store(const char* path, char** errptr);

/* Stops a local farm's loops (a running sweep stays in its store and
 * resumes when a farm opens that store again) and frees the handle. */
TUNEFARM_FARM_EXPORT void tunefarm_farm_destroy(tunefarm_farm_t* farm);

/* {"endpoint": ..., "local": true, "store": ... (local and store-only farms),
 *  "devices": [{"index", "name", "model", "backend", "arch"}, ...] (local only),
 *  "simulated": bool (local only)} */
TUNEFARM_FARM_EXPORT char* tunefarm_farm_info(tunefarm_farm_t* farm, char** errptr);

/* Submits a sweep. `sweep_json`, either {"sweep_file": path, "ops_dir": ...}
 * or the sweep itself:
 *   {"name": "py-gemm", "ops": ["gemm"], "ops_dir": "ops" (default: as the CLI),
 *    "dtypes": ["f16"], "shapes": [{"M": 4096, "N": 4096, "K": 4096}, ...],
 *    "gpus": ["*"], "strategy": "auto", "seed": 0, "budget": 500,
 *    "budget_seconds": 0, "confirm_top": 0, "one_pass": false,
 *    "retry": ["timeout"],           (stored failures of these classes are measured again)
 *    "priority": 50}                 0..100, higher leased first (default: the sweep file's, else 50)
 * checked as `tunefarm tune` checks its flags. Answers {"sweep_id", "name",
 * "ops", "dtypes", "shapes" (as "M=4096,N=4096,K=4096"), "strategy"}. */
TUNEFARM_FARM_EXPORT char* tunefarm_farm_submit(tunefarm_farm_t* farm, const char* sweep_json, char** errptr);

/* A sweep's progress: {"id", "name", "state" ("running", "done",
 * "failed", "cancelled"), "units_total", "units_done", "pairs_total",
 * "pairs_done", "pairs_failed", "failed_by_class": {...}, "gpu_models",
 * "waiting_for", "waits", "skipped", "expanding", "priority", "error", "started_unix",
 * "finished_unix"}; "" = every sweep the coordinator knows, as
 * {"sweeps": [...], "workers": N, "store_fault": "..." or ""}. */
TUNEFARM_FARM_EXPORT char* tunefarm_farm_status(tunefarm_farm_t* farm, const char* sweep_id, char** errptr);

/* Cancels a running sweep (what is stored stays); answers its progress. A
 * sweep that ended already is left as it ended ("state" says how). */
TUNEFARM_FARM_EXPORT char* tunefarm_farm_cancel(tunefarm_farm_t* farm, const char* sweep_id, char** errptr);

/* Stored rows as `tunefarm results --format json` prints them (a JSON
 * array; with "best": true, one winner per key, as `tunefarm best`).
 * `query_json`: {"gpu_model", "op", "dtype", "shape" ("M=..,N=.."),
 * "best": false}, each optional. A connected farm reads its coordinator's
 * store remotely; a local farm reads its own. */
TUNEFARM_FARM_EXPORT char* tunefarm_farm_results(tunefarm_farm_t* farm, const char* query_json, char** errptr);

/* Publishes a bundle of the winners the filter selects (as `tunefarm
 * publish`): `request_json` {"out": path without extension (required),
 * "name", "gpu_model", "op", "dtype", "sign_key", "unsigned": false,
 * "min_vs_baseline": 0}. Answers {"bundle": "<out>.tfb", "json":
 * "<out>.json", "entries": N, "notes": [...]}. */
TUNEFARM_FARM_EXPORT char* tunefarm_farm_publish(tunefarm_farm_t* farm, const char* request_json, char** errptr);

TUNEFARM_FARM_EXPORT void tunefarm_farm_free(void* ptr);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TUNEFARM_FARM_C_H_ */
