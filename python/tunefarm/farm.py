"""Tuning from Python: a farm in this process, or a coordinator's farm.

    farm = tunefarm.Farm.local(store="tunefarm.db")                  # this host's GPUs
    farm = tunefarm.Farm.connect("tcp://farm:5555", client_key="me.key", coordinator_key="farm.pub")
    sweep = farm.tune("gemm", shapes=[{"M": 4096, "N": 4096, "K": 4096}], budget=300)
    sweep.wait()                      # progress on stderr; the final status dict
    sweep.best()                      # [{"op", "dtype", "gpu_model", "shape", "config", "median_us", ...}]
    farm.publish("bundles/gemm")      # a signed bundle of the winners

Pure Python over libtunefarm_farm.so (tune/farm_c.h) through ctypes, as the
rest of the package is over libtunefarm_c.so. Rows are plain dicts: "shape"
and "config" as dicts ({"M": 4096}, {"BM": 128, "SCHEDULE": "stream_k"}),
the rest as `tunefarm results --format json` writes them (median_us,
ci95_us, status, winner, coverage, baseline, ...). `to_dataframe(rows)`
gives a pandas DataFrame where pandas is installed.
"""

import ctypes
import ctypes.util
import json
import os
import sys
import time
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from . import _native
from ._native import TunefarmError

Row = Dict[str, Any]
ShapeLike = Union[Mapping[str, int], str]

_HERE = os.path.dirname(os.path.abspath(__file__))
_lib = None


def _first_existing(paths):
    for p in paths:
        if p and os.path.exists(p):
            return os.path.normpath(p)
    return None


def _farm_lib():
    """libtunefarm_farm.so: $TUNEFARM_FARM_LIB, else beside the package in a
    checkout (build/client/) or a packed artifact (lib/), else the loader's
    path."""
    candidates = [os.environ.get("TUNEFARM_FARM_LIB"),
                  os.path.join(_HERE, "../../build/client/libtunefarm_farm.so"),
                  os.path.join(_HERE, "../../lib/libtunefarm_farm.so")]
    found = ctypes.util.find_library("tunefarm_farm")
    global _lib
    if _lib is None:
        P, S, D, ERR = _native.P, _native.S, _native.D, _native.ERR
        _lib = _native.load_library("libtunefarm_farm.so", "TUNEFARM_FARM_LIB",
                                    [c for c in candidates if c] + ([found] if found else []), {
            "tunefarm_farm_local": (P, [S, ERR]),
            "tunefarm_farm_connect": (P, [S, S, S, D, ERR]),
            "tunefarm_farm_open_store": (P, [S, ERR]),
            "tunefarm_farm_destroy": (None, [P]),
            "tunefarm_farm_info": (P, [P, ERR]),
            "tunefarm_farm_submit": (P, [P, S, ERR]),
            "tunefarm_farm_status": (P, [P, S, ERR]),
            "tunefarm_farm_cancel": (P, [P, S, ERR]),
            "tunefarm_farm_results": (P, [P, S, ERR]),
            "tunefarm_farm_publish": (P, [P, S, ERR]),
            "tunefarm_farm_free": (None, [P]),
        }, free="tunefarm_farm_free")
    return _lib


def _default_ops_dir():
    """$TUNEFARM_OPS_DIR, else the ops beside the package (a checkout's ops/,
    a packed artifact's share/tunefarm/ops), else ./ops."""
    return _first_existing([os.environ.get("TUNEFARM_OPS_DIR"), os.path.join(_HERE, "../../ops"),
                            os.path.join(_HERE, "../../share/tunefarm/ops")]) or "ops"


def _default_binary():
    """The `tunefarm` program (a CUDA worker's runner processes are its own):
    $TUNEFARM_BINARY, else beside the package (build/cli/, libexec/)."""
    return _first_existing([os.environ.get("TUNEFARM_BINARY"), os.path.join(_HERE, "../../build/cli/tunefarm"),
                            os.path.join(_HERE, "../../libexec/tunefarm")])


def _value(text: str):
    # A config's spelling (Config::Canonical): ints, true/false, or string
    # tokens, which never look like either.
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        return text


def _pairs(text: str) -> Dict[str, Any]:
    """"BM=128,SCHEDULE=stream_k,TMA=true" -> {"BM": 128, "SCHEDULE": "stream_k", "TMA": True}."""
    out = {}
    for part in filter(None, text.split(",")):
        name, _, value = part.partition("=")
        out[name] = _value(value)
    return out


def _shape_text(shape: ShapeLike) -> str:
    if isinstance(shape, str):
        return shape
    if not isinstance(shape, Mapping) or not shape:
        raise TypeError("a shape is a dict of dim name to int, like {'M': 4096}, not %r" % (shape,))
    for name, value in shape.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError("shape dim %s must be an int, not %s" % (name, type(value).__name__))
        if not -(1 << 63) <= value < (1 << 63):
            raise OverflowError("shape dim %s = %d is beyond int64 (at most 2**63 - 1)" % (name, value))
    return ",".join("%s=%d" % (k, v) for k, v in shape.items())


def _rows(text_rows: List[Row]) -> List[Row]:
    for r in text_rows:
        r["shape"] = _pairs(r["shape"])
        r["config"] = _pairs(r["config"])
    return text_rows


def to_dataframe(rows: Iterable[Row]):
    """Rows as a pandas DataFrame (pandas must be installed): one column per
    key, "shape" and "config" flattened to dim and param columns. Raises
    TunefarmError naming the package where pandas is missing."""
    try:
        import pandas  # only here: the package needs nothing beyond the standard library
    except ImportError:
        raise _native.TunefarmError("to_dataframe needs pandas (Debian: apt install python3-pandas; "
                                    "the rows themselves are plain dicts)") from None
    flat = []
    for r in rows:
        f = {k: v for k, v in r.items() if k not in ("shape", "config")}
        f.update(r.get("shape", {}))
        f.update(r.get("config", {}))
        flat.append(f)
    return pandas.DataFrame(flat)


def _is_program_op(folder):
    """Whether the op.toml in `folder` has a [program] table (unreadable:
    no, the farm says why)."""
    try:
        with open(os.path.join(folder, "op.toml"), encoding="utf-8", errors="replace") as f:
            return any(line.strip() == "[program]" for line in f)
    except OSError:
        return False


class Sweep:
    """A submitted sweep: .id, .name, .ops, .dtypes, .shapes, .timing (op
    -> "cold" | "hot"). wait() follows it to its end, cancel() stops it,
    results() and best() read its keys' rows (every row the store holds for
    its ops, dtypes and shapes timed as it times them)."""

    def __init__(self, farm: "Farm", answer: Dict[str, Any]):
        self.farm = farm
        self.id = answer["sweep_id"]
        self.name = answer["name"]
        self.ops = list(answer["ops"])
        self.dtypes = list(answer["dtypes"])
        self.shapes = [_pairs(s) for s in answer["shapes"]]
        self.strategy = answer.get("strategy")
        self.objective = answer.get("objective", "time")  # what its best() picks by
        self.timing = dict(answer.get("timing") or {})  # op -> "cold" | "hot": its rows are those
        self._last = None

    def __repr__(self):
        state = self._last["state"] if self._last else "submitted"
        if not self.ops:  # found by id (Farm.sweep): the farm's status names no ops or shapes
            return "<tunefarm.Sweep %s %r: %s>" % (self.id, self.name, state)
        return "<tunefarm.Sweep %s %r: %s, %d shape(s), %s>" % (self.id, self.name, ",".join(self.ops),
                                                                len(self.shapes), state)

    def status(self) -> Dict[str, Any]:
        """Its progress: state ("running", "done", "failed", "cancelled"),
        units and pairs done and total, failures by class, what it waits for."""
        self._last = self.farm._json("tunefarm_farm_status", self.id.encode())
        return self._last

    def wait(self, timeout: Optional[float] = None, progress: Optional[bool] = None, poll: float = 0.25) -> Dict[str, Any]:
        """Waits for the sweep to end and returns its final status. Progress
        goes to stderr (default: when it is a terminal). Raises TunefarmError
        when it failed or was cancelled, or when `timeout` seconds pass (the
        sweep goes on: wait again, or cancel())."""
        if progress is None:
            progress = sys.stderr.isatty()
        start = time.monotonic()
        told = False
        while True:
            s = self.status()
            if progress:
                sys.stderr.write("\rsweep %s: %s, %d/%d pairs, %d failed  " % (
                    self.id, s["state"], s["pairs_done"], s["pairs_total"], s["pairs_failed"]))
                sys.stderr.flush()
            if s["state"] != "running":
                if progress:
                    sys.stderr.write("\n")
                if s["state"] != "done":
                    raise _native.TunefarmError("sweep %s %s%s" % (self.id, s["state"],
                                                                   ": " + s["error"] if s.get("error") else ""))
                return s
            if s.get("waits") and not told:
                told = True
                sys.stderr.write("\nsweep %s waits for %s\n" % (self.id, "; ".join(s["waits"])))
            if timeout is not None and time.monotonic() - start >= timeout:
                raise _native.TunefarmError("sweep %s still running after %.0f s: it goes on (wait() again, or "
                                            "cancel())" % (self.id, timeout))
            time.sleep(poll)

    def cancel(self) -> Dict[str, Any]:
        """Stops the sweep: nothing more of it is measured; what is stored stays."""
        self._last = self.farm._json("tunefarm_farm_cancel", self.id.encode())
        return self._last

    def _keys(self, best: bool) -> List[Row]:
        if not self.ops:
            raise TunefarmError("sweep %s: its ops and shapes are known to the process that submitted it; read its "
                                "rows with farm.results(op=..., dtype=...)" % self.id)
        shapes = [dict(s) for s in self.shapes]
        out = []
        for op in self.ops:
            for dtype in self.dtypes:
                timing = self.timing.get(op)
                out += [r for r in self.farm._query(best, self.objective, op=op, dtype=dtype)
                        if r["shape"] in shapes and (timing is None or r.get("timing", "cold") == timing)]
        return out

    def results(self) -> List[Row]:
        """Every stored row of its keys (failures included, "status" says)."""
        return self._keys(False)

    def best(self) -> List[Row]:
        """One winner per (GPU model, op, dtype, shape) of its keys, as publish picks it."""
        return self._keys(True)


class Farm:
    """A farm to tune on: Farm.local(...) runs one in this process (as
    `tunefarm tune` does), Farm.connect(...) talks to a running coordinator.
    A context manager: leaving the `with` block closes it (a local farm's
    loops stop; a running sweep resumes when a farm opens its store again)."""

    def __init__(self, handle, description: str, ops_dir: Optional[str]):
        self._h = handle
        self._lib = _farm_lib()
        self._description = description
        self.ops_dir = ops_dir or _default_ops_dir()

    @classmethod
    def local(cls, store: Union[str, os.PathLike] = "tunefarm.db", backend: str = "auto",
              sim_models: Optional[Sequence[str]] = None, devices: Optional[Sequence[int]] = None,
              workers: int = 1, ops_dir: Optional[str] = None, tunefarm_binary: Optional[str] = None,
              allow_programs: bool = False, log_level: str = "warn",
              max_raw_configs: Optional[int] = None, energy_seconds: float = 0) -> "Farm":
        """A coordinator and workers on this host's GPUs, storing into
        `store`. The farm is private to this process: its coordinator listens
        on a Unix socket in a fresh folder of mode 0700 (removed by close()),
        so no other user can submit to it or pose as its workers. backend "auto" (CUDA; raises where there is no GPU,
        never simulates silently), "cuda" or "sim" (the cost model, every
        figure labelled simulated; `sim_models`, `workers`). `devices`: CUDA
        ordinals (default all). `allow_programs`: run program ops (Triton,
        other Python DSLs) as this user. `log_level`: the farm's log lines on
        stderr (debug, info, warn, error). `max_raw_configs`: the bound on an
        op's raw config points (the product of its axes' sizes; default
        4,000,000), as `tune --max-raw-configs`. `energy_seconds`: measure
        energy per call and mean power after each timing over a window this
        long (NVML's energy counter; the sim's power model), as `tune
        --energy-seconds`; rows then carry energy_uj, power_w and
        power_limit_w (0 = off)."""
        lib = _farm_lib()
        opts = {"store": os.fspath(store), "backend": backend, "workers": int(workers),
                "allow_programs": bool(allow_programs), "log_level": log_level}
        if sim_models is not None:
            opts["sim_models"] = list(sim_models)
        if devices is not None:
            opts["devices"] = [int(d) for d in devices]
        if max_raw_configs is not None:
            opts["max_raw_configs"] = max_raw_configs
        if energy_seconds:
            opts["energy_seconds"] = float(energy_seconds)
        binary = tunefarm_binary or _default_binary()
        if binary:
            opts["tunefarm_binary"] = binary
        h = _native.call(lib, lib.tunefarm_farm_local, json.dumps(opts).encode())
        farm = cls(h, "local, store %s" % os.fspath(store), ops_dir)
        farm._refuses_programs = not allow_programs
        return farm

    @classmethod
    def connect(cls, endpoint: str, client_key: Optional[str] = None, coordinator_key: Optional[str] = None,
                timeout: float = 10.0, ops_dir: Optional[str] = None) -> "Farm":
        """The farm of the coordinator at `endpoint`; with CURVE, `client_key`
        is this client's secret key file (its public key on the coordinator's
        client allow-list) and `coordinator_key` the coordinator's public key
        file. `timeout` bounds each request, in seconds, and a coordinator
        not connected within it is an error then (no answer: the endpoint
        or the keys); a read of its rows (results, best, publish) may run
        longer once connected, up to 300 s."""
        lib = _farm_lib()
        enc = lambda s: os.fsencode(s) if s is not None else None
        h = _native.call(lib, lib.tunefarm_farm_connect, endpoint.encode(), enc(client_key), enc(coordinator_key),
                         float(timeout))
        return cls(h, "coordinator %s%s" % (endpoint, ", CURVE" if client_key else ""), ops_dir)

    @classmethod
    def open_store(cls, store: Union[str, os.PathLike]) -> "Farm":
        """A store on this host, read-only (a coordinator may own it):
        results(), best() and publish() work; tune() raises."""
        lib = _farm_lib()
        h = _native.call(lib, lib.tunefarm_farm_open_store, os.fsencode(store))
        return cls(h, "store %s (read-only)" % os.fspath(store), None)

    def _handle(self):
        if not self._h:
            raise _native.TunefarmError("farm (%s) is closed" % self._description)
        return self._h

    def _json(self, fn: str, *args):
        return _native.take_json(self._lib, _native.call(self._lib, getattr(self._lib, fn), self._handle(), *args))

    @property
    def info(self) -> Dict[str, Any]:
        """endpoint, local; for a local farm also store, devices and simulated."""
        return self._json("tunefarm_farm_info")

    def __repr__(self):
        if not self._h:
            return "<tunefarm.Farm %s (closed)>" % self._description
        return "<tunefarm.Farm %s>" % self._description

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self) -> None:
        if self._h:
            self._lib.tunefarm_farm_destroy(self._h)
            self._h = None

    def __del__(self):
        if getattr(self, "_h", None):
            self.close()

    def tune(self, ops: Union[str, Sequence[str], None] = None, shapes: Sequence[ShapeLike] = (),
             dtypes: Union[str, Sequence[str]] = ("f16",), gpus: Sequence[str] = ("*",),
             strategy: Optional[str] = None, budget: Optional[int] = None, budget_seconds: Optional[float] = None,
             seed: Optional[int] = None, confirm_top: Optional[int] = None, one_pass: bool = False,
             retry: Optional[Sequence[str]] = None, priority: Optional[int] = None,
             name: Optional[str] = None, sweep_file: Optional[str] = None, ops_dir: Optional[str] = None,
             configs: Optional[Sequence[Union[Mapping[str, Any], str]]] = None, retime: bool = False,
             timing: Optional[str] = None, objective: Optional[str] = None) -> Sweep:
        """Submits a sweep and returns its Sweep (call wait()). `ops`: op
        names under `ops_dir` (default: the farm's); `shapes`: dicts
        {"M": 4096, ...} (or "M=4096,..." strings); `strategy`: a name of
        the farm's strategy registry (`tunefarm tune --help` lists them;
        default: the sweep file's, else auto), with an evaluation `budget`
        per key and/or `budget_seconds`; `retry`: failure classes ("timeout", "crash",
        ...) whose stored rows are measured again; `priority`: 0..100 (default
        the sweep file's, else 50), the coordinator leases the work of higher
        ones first. `configs`: an explicit config list (dicts {"BM": 128,
        ...} or "BM=128,..." strings; every param of the op, values from its
        [params] lists, none twice), measured instead of the op's space, as
        Triton's `configs=[...]`; the strategy is then "listed". `retime`:
        measure the configs again where the farm has them, the new rows
        replacing the stored ones (README: `tunefarm retime`). `timing`:
        "cold" (the L2 flushed before every sample) or "hot" (left warm, as
        a small kernel inside a model meets it) for every op, instead of each
        op's own (docs/timing.md); the rows of the two never mix.
        `objective`: what the searches and the sweep's best() minimise,
        "time" (default), "energy" (per call) or "edp" (energy x time); not
        time, every config's energy is measured (docs/timing.md). Or
        `sweep_file`: a sweep TOML file. Bad values raise TunefarmError
        naming the field (and a config's index)."""
        req: Dict[str, Any] = {"ops_dir": os.fspath(ops_dir or self.ops_dir)}
        if getattr(self, "_refuses_programs", False) and ops is not None:
            for op in [ops] if isinstance(ops, str) else list(ops):
                if _is_program_op(os.path.join(req["ops_dir"], op)):
                    raise TunefarmError("tune: op %s is a program op: a local farm runs it with Farm.local(..., "
                                        "allow_programs=True) (as this user, confined: docs/program-ops.md)" % op)
        if sweep_file is not None:
            req["sweep_file"] = os.fspath(sweep_file)
        else:
            if ops is None:
                raise TypeError("tune: name the op(s), or give sweep_file")
            req["ops"] = [ops] if isinstance(ops, str) else list(ops)
            req["dtypes"] = [dtypes] if isinstance(dtypes, str) else list(dtypes)
            req["shapes"] = [_shape_text(s) for s in shapes]
            req["gpus"] = list(gpus)
            if name is not None:
                req["name"] = name
        for key, value in (("strategy", strategy), ("budget", budget), ("budget_seconds", budget_seconds),
                           ("seed", seed), ("confirm_top", confirm_top), ("priority", priority),
                           ("timing", timing), ("objective", objective),
                           ("retry", list(retry) if retry is not None else None),
                           ("configs", [c if isinstance(c, str) else dict(c) for c in configs]
                            if configs is not None else None)):
            if value is not None:
                req[key] = value
        if one_pass:
            req["one_pass"] = True
        if retime:
            req["retime"] = True
        answer = self._json("tunefarm_farm_submit", json.dumps(req).encode())
        if answer.get("note"):  # a local farm measures only this host's GPU models
            print("tunefarm: " + answer["note"], file=sys.stderr)
        return Sweep(self, answer)

    def sweeps(self) -> List[Dict[str, Any]]:
        """Every sweep the coordinator knows, as status dicts."""
        return self._json("tunefarm_farm_status", b"")["sweeps"]

    def sweep(self, sweep_id: str) -> Sweep:
        """A sweep the coordinator knows, by its id or a unique prefix of it
        (one submitted by another process, or before a restart): status(),
        wait() and cancel() follow it. Raises TunefarmError naming the id
        when none or several match."""
        known = self.sweeps()
        found = [s for s in known if s["id"] == sweep_id] or [s for s in known if s["id"].startswith(sweep_id)]
        if len(found) != 1:
            raise TunefarmError("sweep %r: %s" % (sweep_id, "no sweep of this farm has that id" if not found else
                                                  "%d sweeps start with it (%s)" % (len(found), ", ".join(
                                                      s["id"] for s in found[:5]))))
        status = found[0]
        sweep = Sweep(self, {"sweep_id": status["id"], "name": status["name"], "ops": [], "dtypes": [],
                             "shapes": []})
        sweep._last = status
        return sweep

    def _query(self, best: bool, objective: str = "time", **filt) -> List[Row]:
        q = {k: v for k, v in filt.items() if v is not None}
        q["objective"] = objective
        if "shape" in q:
            q["shape"] = _shape_text(q["shape"])
        q["best"] = best
        return _rows(self._json("tunefarm_farm_results", json.dumps(q).encode()))

    def results(self, op: Optional[str] = None, dtype: Optional[str] = None, gpu_model: Optional[str] = None,
                shape: Optional[ShapeLike] = None) -> List[Row]:
        """Stored rows (a connected farm's read from its coordinator), each a
        dict with op, dtype, gpu_model, shape, config, median_us, ci95_us,
        status, winner and more; filters as in `tunefarm results`."""
        return self._query(False, op=op, dtype=dtype, gpu_model=gpu_model, shape=shape)

    def best(self, op: Optional[str] = None, dtype: Optional[str] = None, gpu_model: Optional[str] = None,
             shape: Optional[ShapeLike] = None, objective: str = "time") -> List[Row]:
        """One winner per (GPU model, op, dtype, shape), as publish picks it;
        `objective` "energy" or "edp" picks by energy per call or energy x
        time among rows with energy measured (Farm.local(energy_seconds=))."""
        return self._query(True, objective, op=op, dtype=dtype, gpu_model=gpu_model, shape=shape)

    def publish(self, out: Union[str, os.PathLike], op: Optional[str] = None, dtype: Optional[str] = None,
                gpu_model: Optional[str] = None, name: Optional[str] = None, sign_key: Optional[str] = None,
                unsigned: bool = False, min_vs_baseline: float = 0.0, objective: str = "time") -> Dict[str, Any]:
        """Writes a bundle of the winners at `out` (.tfb and .json), signed as
        `tunefarm publish` signs, the winners picked by `objective` (time,
        energy or edp, as in best()); returns {"bundle", "json", "entries", "notes"}."""
        req = {"out": os.fspath(out), "unsigned": bool(unsigned), "min_vs_baseline": float(min_vs_baseline),
               "objective": objective}
        for key, value in (("op", op), ("dtype", dtype), ("gpu_model", gpu_model), ("name", name),
                           ("sign_key", sign_key)):
            if value is not None:
                req[key] = os.fspath(value)
        return self._json("tunefarm_farm_publish", json.dumps(req).encode())
