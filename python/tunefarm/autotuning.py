"""tunefarm.autotune (this module: tunefarm.autotuning): tune a Python-DSL kernel on its first call with a new key.

    def make_inputs(dims, dtype, seed): ...        # every kernel argument, outputs included
    def reference(args, dims, dtype): ...          # the expected output

    @tunefarm.autotune(
        space={"BM": [64, 128], "BN": [64, 128], "BK": [32, 64], "WARPS": [4, 8], "STAGES": [3, 4]},
        rules=["BM * BN <= 128 * 128"],
        key=lambda a, b, c: {"M": a.shape[0], "N": b.shape[1], "K": a.shape[1]},
        dtype=lambda a, b, c: "f16",
        inputs=make_inputs, reference=reference)
    def matmul(config, a, b, c):                   # launches with `config` (a dict)
        ...

    matmul(a, b, c)    # first call with this key: tunes it, then launches the winner

The space and the key sit next to the kernel, as in Triton's, TileLang's and
cuTile's autotuners; the tuning is the farm's: the decorator writes a program
op (its module served by tunefarm.harness: the reference check, inputs from a
seed, the L2 flush, the stopping rule, the compile pool) and tunes the key on
a local farm (Farm.local: this host's GPUs) into a store that `tunefarm
results --store` reads. Answers are reused in this process and, from the
store, in later ones; the op's files are kept beside the store, so an edited
kernel module is a new kernel and its keys are tuned again.

Where an answer comes from, per key (dims and dtype):
  1. TUNEFARM_FORCE_DEFAULTS set (not "" or "0"): the op's default config;
  2. this process's earlier answer;
  3. `bundle` (a tunefarm.Bundle) when it answers at "exact" or "predicted";
  4. the store, where this kernel was tuned for the key;
  5. mode "tune" (default; TUNEFARM_AUTOTUNE=tune|lookup overrides): tune now;
     mode "lookup": the default config, counted in .misses.
With TUNEFARM_FARM=tcp://host:port (CURVE keys in TUNEFARM_CLIENT_KEY and
TUNEFARM_COORDINATOR_KEY; TUNEFARM_GPU to name the one GPU model), keys are
tuned on that coordinator's farm and read from its store instead (the op's
files and the index of tuned keys stay beside `store`).
A config from the bundle or the store that is not a point of the declared
space (other axes, a value off an axis's list) is ignored with a warning
naming it: the next source answers. A tuning runs on a local farm that is
private to this process (tunefarm.Farm.local) and is closed when the tuning
ends.
"""

import hashlib
import inspect
import json
import os
import re
import threading
import warnings
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ._native import TunefarmError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DTYPES = ("f16", "bf16", "f32")  # an op's dtypes (ops/README.md)
_INT64_MAX = (1 << 63) - 1  # a dim's largest value (the C API's int64)


def _forced_defaults():
    return os.environ.get("TUNEFARM_FORCE_DEFAULTS", "") not in ("", "0")


def _default_store():
    return os.environ.get("TUNEFARM_AUTOTUNE_STORE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "tunefarm",
        "autotune.db")


def _toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    return json.dumps(v)  # a TOML basic string


class Autotuned:
    """The decorated kernel: call it as the function without its config.
    .op (the op's name), .space, .default, .answers ({key: (level, config)}),
    .misses (keys answered by the default in lookup mode), .tunes (keys
    tuned in this process), .store."""

    def __init__(self, fn, space, key, dtype, inputs, reference, outputs, rules, default, op, dtypes, rtol,
                 atol, bundle, gpu_model, store, mode, strategy, budget, farm_options, timing=None, check=True,
                 objective=None):
        if not callable(fn):
            raise TypeError("autotune: decorates a function fn(config, *args)")
        self.fn = fn
        self.op = op or fn.__name__
        if not _NAME.match(self.op):
            raise ValueError("autotune: op name %r is not a name ([A-Za-z_][A-Za-z0-9_]*)" % self.op)
        if not isinstance(space, Mapping) or not space:
            raise ValueError("autotune %s: space must be a dict of axis name to a list of values" % self.op)
        self.space = {}
        for axis, values in space.items():
            if not isinstance(axis, str) or not _NAME.match(axis):
                raise ValueError("autotune %s: axis %r is not a name" % (self.op, axis))
            values = list(values)
            if not values:
                raise ValueError("autotune %s: axis %s has no values" % (self.op, axis))
            kinds = {bool if isinstance(v, bool) else int if isinstance(v, int) else str if isinstance(v, str)
                     else None for v in values}
            if None in kinds or len(kinds) != 1:
                raise ValueError("autotune %s: axis %s: values must be all ints, all bools or all strings, got %r"
                                 % (self.op, axis, values))
            if str in kinds:
                for v in values:
                    if not _NAME.match(v) or v in ("true", "false"):
                        raise ValueError("autotune %s: axis %s: %r is not a macro token ([A-Za-z_][A-Za-z0-9_]*)"
                                         % (self.op, axis, v))
            self.space[axis] = values
        self.default = dict(default) if default is not None else {a: v[0] for a, v in self.space.items()}
        for axis, value in self.default.items():
            if axis not in self.space or value not in self.space[axis]:
                raise ValueError("autotune %s: default %s=%r is not a value of the space" % (self.op, axis, value))
        for name, f in (("key", key), ("inputs", inputs)):
            if not callable(f):
                raise TypeError("autotune %s: %s must be a function" % (self.op, name))
        self.key, self.inputs, self.reference, self.outputs = key, inputs, reference, outputs
        self.dtype = dtype
        self.dtypes = list(dtypes) if dtypes else None
        self.rules = list(rules)
        self.rtol, self.atol = rtol, atol
        self.check = bool(check)
        self.bundle, self.gpu_model = bundle, gpu_model
        self.store = os.fspath(store) if store else _default_store()
        self.mode = mode
        self.strategy, self.budget = strategy, budget
        if timing not in (None, "cold", "hot"):
            raise ValueError("autotune: timing must be \"cold\" or \"hot\", not %r" % (timing,))
        self.timing = timing
        if objective not in (None, "time", "energy", "edp"):
            raise ValueError("autotune: objective must be \"time\", \"energy\" or \"edp\", not %r" % (objective,))
        self.objective = objective or "time"
        self.farm_options = dict(farm_options or {})
        self.answers: Dict[Any, Any] = {}
        self.misses: Dict[Any, int] = {}
        self.tunes = 0
        # A key's config list (dims, dtype) -> [config dicts] or None: its
        # tuning measures those ("listed") instead of searching the space.
        self.configs_for = None
        # Without a reference: the default config's outputs as the caller's
        # module computes them, (args, dims, dtype) -> expected, or None for
        # the harness to run the op's default config (tunefarm.triton's
        # first config left by pruning).
        self.default_outputs = None
        # Files the caller writes into the package folder beside the kernel
        # (tunefarm.triton's recorded calls): shipped with the op, outside
        # the digest that decides whether the keys tuned before still hold.
        self.extra_files: List[str] = []
        self._farm = None
        self._lock = threading.Lock()
        self.__name__ = getattr(fn, "__name__", self.op)
        self.__doc__ = getattr(fn, "__doc__", None)

    def __repr__(self):
        return "<tunefarm.autotune %s: %d axes, %d configs at most, %d key(s) answered>" % (
            self.op, len(self.space), _product(len(v) for v in self.space.values()), len(self.answers))

    # --- the harness's side: the op package's module imports these --------
    def make_inputs(self, dims, dtype, seed):
        return self.inputs(dims, dtype, seed)

    def make_kernel(self, config, dtype):
        def run(*args):
            return self.fn(config, *args)
        return run

    # --- the caller's side -------------------------------------------------
    def __call__(self, *args, **kwargs):
        config = self.config_for(*args, **kwargs)
        return self.fn(config, *args, **kwargs)

    def _key_of(self, *args, **kwargs):
        try:
            dims = self.key(*args, **kwargs)
        except Exception as e:
            raise TunefarmError("autotune %s: the key function raised %s: %s" % (self.op, type(e).__name__, e)) from e
        if not isinstance(dims, Mapping) or not dims:
            raise TunefarmError("autotune %s: the key function must return a dict of dim name to int, not %r"
                                % (self.op, dims))
        for name, value in dims.items():
            if not isinstance(name, str) or not _NAME.match(name):
                raise TunefarmError("autotune %s: key dim %r is not a name" % (self.op, name))
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise TunefarmError("autotune %s: key dim %s = %r is not a positive int" % (self.op, name, value))
            if value > _INT64_MAX:
                raise OverflowError("autotune %s: key dim %s = %d is beyond int64 (at most 2**63 - 1)"
                                    % (self.op, name, value))
        dtype = self.dtype(*args, **kwargs) if callable(self.dtype) else self.dtype
        if dtype not in _DTYPES:
            raise TunefarmError("autotune %s: unknown dtype %r (known: %s)" % (self.op, dtype, ", ".join(_DTYPES)))
        return dict(dims), dtype

    def config_for(self, *args, **kwargs) -> Dict[str, Any]:
        """The config a call with these arguments launches (tuning its key
        first where the mode says so)."""
        serving = os.environ.get("TUNEFARM_AUTOTUNE_SERVING")
        if serving is not None:
            # The harness imports the kernel's module to serve it: a module
            # that calls the tuned function when imported would tune again
            # from inside its own tuning.
            raise TunefarmError("autotune %s: called while tunefarm's harness imports this module to serve %s: put "
                                "the code that calls it under `if __name__ == \"__main__\":`" % (self.op, serving))
        if _forced_defaults():
            return dict(self.default)
        dims, dtype = self._key_of(*args, **kwargs)
        key = (dtype,) + tuple(sorted(dims.items()))
        hit = self.answers.get(key)
        if hit is not None:
            return hit[1]
        with self._lock:
            if key not in self.answers:
                self.answers[key] = self._answer(dims, dtype)
        return self.answers[key][1]

    def _off_space(self, config):
        """Why `config` is not a point of the declared space (its axes, each
        value one of its axis's list, of the same type: True is not 1), or
        None when it is one."""
        if not isinstance(config, Mapping):
            return "not a dict"
        extra = sorted(str(a) for a in config if a not in self.space)
        missing = [a for a in self.space if a not in config]
        if extra or missing:
            return "; ".join(filter(None, ["no axis " + ", ".join(extra) if extra else "",
                                           "missing " + ", ".join(missing) if missing else ""]))
        for axis, values in self.space.items():
            v = config[axis]
            if not any(type(v) is type(x) and v == x for x in values):
                return "%s=%r is not one of %r" % (axis, v, values)
        return None

    def _in_space(self, config, source, dims, dtype):
        """True when `config` (from `source`) is a point of the space; else
        warns, naming it and why, and answers False."""
        why = self._off_space(config)
        if why is None:
            return True
        warnings.warn("autotune %s: ignoring the config %r from %s for %s: not in the declared space (%s)"
                      % (self.op, config, source, _key_text(dims, dtype), why), RuntimeWarning, stacklevel=2)
        return False

    def may_tune(self):
        """Whether a miss is tuned now (mode "tune", defaults not forced)."""
        return not _forced_defaults() and (os.environ.get("TUNEFARM_AUTOTUNE") or self.mode) == "tune"

    def _answer(self, dims, dtype):
        if self.bundle is not None:
            a = self.bundle.lookup(self.op, dtype, self.gpu_model or "", dims)
            if a.level in ("exact", "predicted") and self._in_space(a.config, "the bundle", dims, dtype):
                return a.level, a.config
        package = self._package(dims, dtype)
        tuned = self._tuned(package).get(_key_text(dims, dtype))
        if tuned is not None:
            with self._open_farm(os.path.dirname(package), tuning=False) as store:
                rows = store.best(op=self.op, dtype=dtype, gpu_model=tuned["gpu_model"], shape=dims,
                                  objective=self.objective)
            if rows and self._in_space(rows[0]["config"], "the store " + self._store_name(), dims, dtype):
                return "tuned", rows[0]["config"]
        mode = os.environ.get("TUNEFARM_AUTOTUNE") or self.mode
        if mode not in ("tune", "lookup"):
            raise TunefarmError("autotune %s: mode %r: tune or lookup" % (self.op, mode))
        if mode == "lookup":
            k = _key_text(dims, dtype)
            self.misses[k] = self.misses.get(k, 0) + 1
            return "default", dict(self.default)
        config = self._tune(package, dims, dtype)
        if not self._in_space(config, "its tuning", dims, dtype):
            return "default", dict(self.default)
        return "tuned", config

    def _package(self, dims, dtype):
        """Writes the op's package beside the store (ops/<op>/): the kernel's
        module, an entry module the harness serves, op.toml. Returns its
        folder; a package whose files changed forgets the keys tuned before."""
        try:
            module_file = inspect.getsourcefile(self.fn)
        except TypeError:
            module_file = None
        if not module_file or not os.path.exists(module_file):
            raise TunefarmError("autotune %s: the kernel must be defined in a module file (the harness imports it)"
                                % self.op)
        attr = self.fn.__name__
        folder = os.path.join(self.store + ".ops", self.op)
        module_name = os.path.basename(module_file)
        entry = (
            '"""Serves the autotuned kernel %s of %s to tunefarm.harness (written by tunefarm.autotune)."""\n'
            "import importlib.util, os, sys\n"
            "_here = os.path.dirname(os.path.abspath(__file__))\n"
            "sys.path.insert(0, _here)\n"
            "os.environ['TUNEFARM_AUTOTUNE_PACKAGE'] = _here  # where the package's side files are\n"
            "os.environ['TUNEFARM_AUTOTUNE_SERVING'] = %r  # a call of the tuned function fails: config_for\n"
            "_spec = importlib.util.spec_from_file_location('tunefarm_autotuned_module', os.path.join(_here, %r))\n"
            "_module = importlib.util.module_from_spec(_spec)\n"
            "_spec.loader.exec_module(_module)\n"
            "_tuned = getattr(_module, %r, None)\n"
            "if not hasattr(_tuned, 'make_kernel'):\n"
            "    raise SystemExit('%s: %s is not the tunefarm-decorated kernel (decorate it where it is defined, "
            "keeping its name)')\n"
            "make_inputs = _tuned.make_inputs\n"
            "make_kernel = _tuned.make_kernel\n"
            "if _tuned.reference is not None:\n"
            "    reference = _tuned.reference\n"
            "if _tuned.outputs is not None:\n"
            "    outputs = _tuned.outputs\n"
            "if getattr(_tuned, 'default_outputs', None) is not None:\n"
            "    default_outputs = _tuned.default_outputs\n") % (attr, module_name, self.op, module_name, attr, module_name, attr)
        # Every dtype unless told: the package, and with it what was tuned,
        # must not change with the dtype of a call.
        dtypes = self.dtypes or list(_DTYPES)
        if dtype not in dtypes:
            raise TunefarmError("autotune %s: dtype %s is not among its dtypes %s" % (self.op, dtype, dtypes))
        toml = ["# Written by tunefarm.autotune for %s in %s; rewritten when either changes." % (attr, module_name),
                "[op]", "name = %s" % json.dumps(self.op),
                "dims = [%s]" % ", ".join(json.dumps(d) for d in dims),
                "dtypes = [%s]" % ", ".join(json.dumps(d) for d in dtypes),
                "default = { %s }" % ", ".join("%s = %s" % (k, _toml_value(v)) for k, v in self.default.items()),
                "", "[params]"]
        toml += ["%s = [%s]" % (axis, ", ".join(_toml_value(v) for v in values)) for axis, values in self.space.items()]
        if self.rules:
            toml += ["", "[constraints]", "rules = [%s]" % ", ".join(json.dumps(r) for r in self.rules)]
        toml += ["", "[program]", 'files = [%s]' % ", ".join(json.dumps(f) for f in
                                                          [module_name, "tunefarm_entry.py"] + self.extra_files),
                 'serve = "python3 -m tunefarm.harness tunefarm_entry.py"', "timeout = 60"]
        # Without a reference every config is checked against the default
        # config's outputs, so that one fast because it is wrong cannot win.
        toml += ["", "[check]", "rtol = %r" % float(self.rtol), "atol = %r" % float(self.atol)]
        if not self.check:
            toml += ["skip = true"]
        elif self.reference is None:
            toml += ["default = true"]
        with open(module_file, "rb") as f:
            source = f.read()
        files = {"op.toml": "\n".join(toml) + "\n", "tunefarm_entry.py": entry, module_name: source}
        digest = hashlib.sha256(b"".join(n.encode() + b"\0" + (c if isinstance(c, bytes) else c.encode())
                                         for n, c in sorted(files.items()))).hexdigest()
        os.makedirs(folder, exist_ok=True)
        index = self._index_path(folder)
        if self._read_index(index).get("digest") != digest:
            for name, content in files.items():
                mode = "wb" if isinstance(content, bytes) else "w"
                with open(os.path.join(folder, name), mode) as f:
                    f.write(content)
            self._write_index(index, {"digest": digest, "tuned": {}})
        return folder

    @staticmethod
    def _index_path(folder):
        return os.path.join(folder, "tunefarm_tuned.json")

    @staticmethod
    def _read_index(path):
        try:
            with open(path) as f:
                index = json.load(f)
            return index if isinstance(index, dict) and isinstance(index.get("tuned"), dict) else {}
        except (OSError, ValueError):
            return {}

    @staticmethod
    def _write_index(path, index):
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(index, f, indent=1, sort_keys=True)
        os.replace(tmp, path)

    def _tuned(self, package):
        return self._read_index(self._index_path(package)).get("tuned", {})

    @staticmethod
    def _endpoint():
        return os.environ.get("TUNEFARM_FARM") or None

    def _store_name(self):
        return "the farm at " + self._endpoint() if self._endpoint() else self.store

    def _open_farm(self, ops_dir, tuning):
        """The farm a key is tuned on and read from: the coordinator at
        $TUNEFARM_FARM (CURVE keys $TUNEFARM_CLIENT_KEY and
        $TUNEFARM_COORDINATOR_KEY) where set; else a local farm started for
        the tuning, or the store alone for a read."""
        from .farm import Farm
        endpoint = self._endpoint()
        if endpoint:
            return Farm.connect(endpoint, client_key=os.environ.get("TUNEFARM_CLIENT_KEY") or None,
                                coordinator_key=os.environ.get("TUNEFARM_COORDINATOR_KEY") or None, ops_dir=ops_dir)
        if not tuning:
            return Farm.open_store(self.store)
        opts = dict(allow_programs=True)
        opts.update(self.farm_options)
        return Farm.local(store=self.store, ops_dir=ops_dir, **opts)

    def _tune(self, package, dims, dtype):
        """Tunes the key on a local farm started for it and closed when it
        ends (a farm runs program ops as this user: none is left serving),
        or on the coordinator at $TUNEFARM_FARM ($TUNEFARM_GPU: the one GPU
        model to tune on; default every model of the farm)."""
        self._farm = self._open_farm(os.path.dirname(package), tuning=True)
        try:
            listed = self.configs_for(dims, dtype) if self.configs_for else None
            gpus = [os.environ["TUNEFARM_GPU"]] if os.environ.get("TUNEFARM_GPU") else ["*"]
            sweep = self._farm.tune(self.op, shapes=[dims], dtypes=[dtype], strategy=None if listed else self.strategy,
                                    budget=self.budget, name="autotune-" + self.op, configs=listed, gpus=gpus,
                                    timing=self.timing, objective=None if self.objective == "time" else self.objective)
            sweep.wait()
            best = sweep.best()
            results = sweep.results() if not best else []
        finally:
            self.close()
        self.tunes += 1
        if not best:
            failures = {}
            for r in results:
                failures[r["status"]] = failures.get(r["status"], 0) + 1
            reason = next((r["reason"] for r in results if r.get("reason")), "")
            raise TunefarmError("autotune %s: no config of %s passed its check (%s)%s" % (
                self.op, _key_text(dims, dtype), ", ".join("%s: %d" % kv for kv in sorted(failures.items()))
                or "nothing measured", "; the first failure: " + reason.strip().splitlines()[-1] if reason else ""))
        index_path = self._index_path(package)
        index = self._read_index(index_path)
        index["tuned"][_key_text(dims, dtype)] = {"gpu_model": best[0]["gpu_model"], "sweep": sweep.id}
        self._write_index(index_path, index)
        return best[0]["config"]

    def close(self):
        """Stops the local farm of a tuning under way, if any (each tuning
        closes its own when it ends)."""
        if self._farm is not None:
            self._farm.close()
            self._farm = None


def _product(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def _key_text(dims, dtype):
    return "%s %s" % (dtype, ",".join("%s=%d" % kv for kv in dims.items()))


def autotune(space: Mapping[str, Sequence[Any]], key: Callable[..., Mapping[str, int]],
             inputs: Callable[..., List[Any]], reference: Optional[Callable[..., Any]] = None, *,
             dtype: Any = "f16", outputs: Optional[Callable[..., List[Any]]] = None, rules: Sequence[str] = (),
             default: Optional[Mapping[str, Any]] = None, op: Optional[str] = None,
             dtypes: Optional[Sequence[str]] = None, rtol: float = 1e-2, atol: float = 1e-2, bundle=None,
             gpu_model: Optional[str] = None, store: Optional[str] = None, mode: str = "tune",
             strategy: Optional[str] = None, budget: Optional[int] = None,
             farm: Optional[Mapping[str, Any]] = None,
             timing: Optional[str] = None, check: bool = True,
             objective: Optional[str] = None) -> Callable[[Callable[..., Any]], Autotuned]:
    """Decorates fn(config, *args): calls with a new key (the dims `key`
    returns, and the dtype: a string or a function of the arguments) are
    answered by the fallback above and, in mode "tune", tuned on a local farm
    with the farm's harness. `space`: axis -> values (ints, bools or string
    tokens); `rules`: op.toml constraint expressions over the axes, dims,
    dsize and device limits; `inputs(dims, dtype, seed)` and
    `reference(args, dims, dtype)` as a harness module's make_inputs and
    reference (no reference: every config's outputs are checked against the
    default config's, within rtol/atol; `check=False` skips the check and
    marks the rows unchecked); `strategy`/`budget` as in
    Farm.tune; `timing`: "cold" (default) or "hot" L2, as in Farm.tune;
    `objective`: "time" (default), "energy" (per call) or "edp", what the
    search and the winner minimise, as in Farm.tune (every config's energy
    is then measured: NVML on a GPU); `farm`: Farm.local's options (backend, devices, ...); `store`:
    default $TUNEFARM_AUTOTUNE_STORE, else ~/.cache/tunefarm/autotune.db."""
    def wrap(fn):
        return Autotuned(fn, space, key, dtype, inputs, reference, outputs, rules, default, op, dtypes, rtol, atol,
                         bundle, gpu_model, store, mode, strategy, budget, farm, timing=timing, check=check,
                         objective=objective)
    return wrap
