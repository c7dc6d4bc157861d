"""tunefarm.triton: @triton.autotune's arguments, tuned on the farm.

Change one import and a kernel's tuning moves to the farm:

    import triton, triton.language as tl
    import tunefarm.triton                                  # was: (nothing)

    @tunefarm.triton.autotune(                              # was: @triton.autotune(
        configs=[triton.Config({"BLOCK": 128}, num_warps=4),
                 triton.Config({"BLOCK": 256}, num_warps=8)],
        key=["n"])
    @triton.jit
    def scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr): ...

    scale[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)

The arguments are Triton 3.x's: `configs` (triton.Config: kwargs, num_warps,
num_stages, num_ctas, maxnreg where set), `key` (argument names),
`prune_configs_by` ({"perf_model", "top_k", "early_config_prune"}),
`reset_to_zero`, `restore_value`, `pre_hook`, `post_hook`; `warmup`, `rep`,
`do_bench`, `use_cuda_graph` and `cache_results` are accepted and ignored
with one note (the farm's timing discipline decides: docs/timing.md). It
also wraps a kernel already wrapped by `triton.autotune` (its configs, key
and hooks are read).

What happens on a call with a new key (Triton's: the values of the `key`
arguments, and every tensor argument's dtype):
  - the configs are pruned as Triton would (early_config_prune, then
    perf_model's top_k) and become the key's config list ("listed");
  - the call's arguments are described (tensors: shape, stride, dtype;
    other values as they are) and the grid evaluated for each config; the
    farm's harness makes inputs of the same shapes from a seed (floats from
    a normal distribution, integers 0 or 1), never from the caller's data;
  - the check is against the output of the first config left by pruning
    (the rows say checked_against "default"), or against `reference`
    ("reference"): the outputs are the arguments the first config writes;
  - reset_to_zero, restore_value, pre_hook and post_hook apply to the
    farm's timed runs, as they apply to Triton's benchmark runs (a pre_hook
    replaces the reset and restore); a config's own pre_hook runs before
    each launch; one config left by pruning is launched without a tuning;
  - the key is answered as tunefarm.autotune answers (tunefarm/autotuning.py:
    this process's answers, a bundle, the store, then a tuning on a local
    farm; TUNEFARM_AUTOTUNE=lookup answers the first config on a miss and
    never starts a farm; TUNEFARM_FORCE_DEFAULTS the first config).
The farm's key is the `key` arguments as dims (positive ints) and the first
floating tensor's dtype (f16, bf16 or f32).

The object exposes what Triton's Autotuner does: `configs`, `keys`,
`best_config` (the last call's), `cache` ({Triton key: config}), `fn`;
TRITON_PRINT_AUTOTUNING=1 prints each key's answer as Triton does.
"""

import fcntl
import inspect
import json
import os
import threading
import time
import warnings
import zlib
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ._native import TunefarmError
from .autotuning import Autotuned, _NAME

# triton.Config's launch fields, in the farm's configs beside its kwargs
# (those set: Triton leaves num_ctas and maxnreg None on most configs).
CONFIG_FIELDS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
_IGNORED = ("warmup", "rep", "do_bench", "use_cuda_graph", "cache_results")
_SIGNATURES = "tunefarm_triton_calls.json"  # per key: the arguments and grids (beside the op's package)
_FARM_DTYPES = {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}


def _dtype_name(dtype):
    """'float16' for torch.float16 (and a stand-in's dtype string)."""
    return str(dtype).rsplit(".", 1)[-1]


def config_dict(config, where="configs"):
    """A triton.Config as the farm's config: its kwargs and the launch fields
    it sets. Raises TypeError naming `where` for anything else."""
    kwargs = getattr(config, "kwargs", None)
    if not isinstance(kwargs, Mapping) or not hasattr(config, "num_warps"):
        raise TypeError("tunefarm.triton.autotune: %s is %r, not a triton.Config (kwargs, num_warps, num_stages)"
                        % (where, config))
    out = {}
    for name, value in kwargs.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise TypeError("tunefarm.triton.autotune: %s: kwarg %r is not a name" % (where, name))
        out[name] = value
    for field in CONFIG_FIELDS:
        value = getattr(config, field, None)
        if value is not None:
            out[field] = value
    return out


def _is_tensor(a):
    return hasattr(a, "shape") and hasattr(a, "dtype") and hasattr(a, "stride")


def describe(name, value):
    """How the harness makes an argument like `value` (JSON): a tensor's
    shape, stride and dtype; a list's length and item type (host stand-ins);
    a plain value as it is."""
    if _is_tensor(value):
        return {"tensor": {"shape": [int(d) for d in value.shape], "stride": [int(s) for s in value.stride()],
                           "dtype": _dtype_name(value.dtype)}}
    if isinstance(value, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return {"list": {"len": len(value), "item": "int" if value and all(isinstance(v, int) for v in value)
                         else "float"}}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"value": value}
    raise TunefarmError("tunefarm.triton.autotune: argument %s is a %s: the farm makes tensors, lists and plain "
                        "values (bool, int, float, str, None); pass inputs= for others" % (name, type(value).__name__))


def make_argument(desc, seed, index):
    """An argument as `desc` (describe) says, its data from `seed`: the same
    for every config of a key."""
    if "value" in desc:
        return desc["value"]
    if "list" in desc:
        n, item = desc["list"]["len"], desc["list"]["item"]
        if item == "int":
            return [(i * 7919 + seed + index) % 2 for i in range(n)]
        return [((i * 7919 + seed + 31 * index) % 1000) / 500.0 - 1.0 for i in range(n)]
    import torch
    t = desc["tensor"]
    dtype = getattr(torch, t["dtype"])
    g = torch.Generator(device="cuda")
    g.manual_seed(seed * 1009 + index)
    if dtype.is_floating_point:
        data = torch.randn(t["shape"], generator=g, device="cuda", dtype=torch.float32).to(dtype)
    elif dtype == torch.bool:
        data = torch.randint(0, 2, t["shape"], generator=g, device="cuda").bool()
    else:
        data = torch.randint(0, 2, t["shape"], generator=g, device="cuda").to(dtype)
    out = torch.empty_strided(t["shape"], t["stride"], dtype=dtype, device="cuda")
    out.copy_(data)
    return out


def _clone(a):
    if _is_tensor(a):
        return a.clone()
    return list(a) if isinstance(a, list) else a


def _same(a, b):
    if _is_tensor(a):
        return bool((a == b).all()) if a.shape == b.shape else False
    return a == b


def _copy_into(dst, src):
    if _is_tensor(dst):
        dst.copy_(src)
    elif isinstance(dst, list):
        dst[:] = src


def _zero(a):
    if _is_tensor(a):
        a.zero_()
    elif isinstance(a, list):
        a[:] = [type(v)(0) for v in a]  # 0 * NaN is NaN: a poisoned output zeroes too


class Autotuner:
    """The decorated kernel: launch it as Triton's, `kernel[grid](*args)`."""

    def __init__(self, fn, configs, key, prune_configs_by, reset_to_zero, restore_value, pre_hook, post_hook,
                 reference, inputs, store, mode, farm, rtol, atol, op, ignored):
        wrapped = fn if hasattr(fn, "configs") and hasattr(fn, "fn") and hasattr(fn, "keys") else None
        if wrapped is not None:  # a kernel under triton.autotune: its declaration is the default
            fn = wrapped.fn
            configs = configs if configs is not None else wrapped.configs
            key = key if key is not None else wrapped.keys
            reset_to_zero = reset_to_zero or getattr(wrapped, "reset_to_zero", None)
            restore_value = restore_value or getattr(wrapped, "restore_value", None)
            # Triton keeps a user's hooks under these names, flagged as the user's.
            if pre_hook is None and getattr(wrapped, "user_defined_pre_hook", False):
                pre_hook = wrapped.pre_hook
            if post_hook is None and getattr(wrapped, "user_defined_post_hook", False):
                post_hook = wrapped.post_hook
            if prune_configs_by is None:
                prune_configs_by = {k: getattr(wrapped, k, None) for k in ("perf_model", "early_config_prune")}
                prune_configs_by["top_k"] = getattr(wrapped, "configs_top_k", None)
        self.fn = fn
        # The Python function under @triton.jit (and @triton.heuristics):
        # the module file the harness imports, the kernel's name.
        base = fn
        while not inspect.isfunction(base) and hasattr(base, "fn"):
            base = base.fn
        self.base_fn = base
        name = getattr(self.base_fn, "__name__", None) or "kernel"
        self.arg_names = list(getattr(fn, "arg_names", None) or _arg_names(self.base_fn))
        if configs is None or not isinstance(configs, (list, tuple)) or not configs:
            raise TypeError("tunefarm.triton.autotune %s: configs must be a non-empty list of triton.Config" % name)
        self.configs = list(configs)
        dicts = [config_dict(c, "configs[%d]" % i) for i, c in enumerate(self.configs)]
        for i, d in enumerate(dicts):
            for kw in d:
                if kw not in CONFIG_FIELDS and kw not in self.arg_names:
                    raise KeyError("Keyword argument %s was specified but unrecognised (configs[%d] of %s; its "
                                   "arguments: %s)" % (kw, i, name, ", ".join(self.arg_names)))
            if set(d) != set(dicts[0]):
                raise ValueError("tunefarm.triton.autotune %s: configs[%d] sets %s, configs[0] sets %s: the farm's "
                                 "configs share their fields" % (name, i, sorted(d), sorted(dicts[0])))
        self._dicts = dicts
        self._by_id = {_config_id(d): c for d, c in zip(dicts, self.configs)}
        self.keys = list(key or [])
        for what, names in (("key", self.keys), ("reset_to_zero", reset_to_zero or []),
                            ("restore_value", restore_value or [])):
            for n in names:
                if n not in self.arg_names:
                    raise ValueError("tunefarm.triton.autotune %s: %s names %r, no argument of %s (its arguments: "
                                     "%s)" % (name, what, n, name, ", ".join(self.arg_names)))
        self.reset_to_zero, self.restore_value = list(reset_to_zero or []), list(restore_value or [])
        prune = dict(prune_configs_by or {})
        self.perf_model, self.early_config_prune = prune.get("perf_model"), prune.get("early_config_prune")
        self.top_k = prune.get("top_k")
        self.pre_hook, self.post_hook = pre_hook, post_hook
        self.user_inputs = inputs
        if ignored:
            warnings.warn("tunefarm.triton.autotune %s: %s ignored: the farm's timing discipline decides how each "
                          "config is timed" % (name, ", ".join(sorted(ignored))), RuntimeWarning, stacklevel=3)
        self.cache: Dict[Any, Any] = {}
        self.best_config = None
        self._lock = threading.Lock()
        self._listed: Dict[Any, List[Dict[str, Any]]] = {}  # farm key -> its config list
        # The harness's side, one shape at a time (the harness holds one
        # shape's inputs): the recorded call, how its flat argument list
        # splits into positional and keyword arguments, a generation that
        # makes kernels drop the last shape's grid, the shape's saved inputs
        # and expected outputs.
        self._calls = None
        self._call = None
        self._layout = None
        self._generation = 0
        self._saved: Dict[int, Any] = {}
        self._expected: Dict[int, Any] = {}
        space = {}
        for d in dicts:
            for axis in dicts[0]:
                value = d[axis]
                space.setdefault(axis, [])
                if not any(type(v) is type(value) and v == value for v in space[axis]):
                    space[axis].append(value)
        # Without a reference of the caller's the configs are checked against
        # the call's first config (what Triton would launch untuned): the
        # rows say "default".
        self._tuned = Autotuned(self.base_fn, space, self._dims_of, self._farm_dtype_of, self.make_inputs,
                                reference, self.outputs, [], dicts[0], op or name, None, rtol, atol, None, None,
                                store, mode, None, None, farm)
        self._tuned.configs_for = lambda dims, dtype: self._listed.get(_farm_key(dims, dtype))
        # What the package's entry module serves the harness (autotuning.py's
        # _package): the caller's reference, or the first config's outputs.
        self.reference = reference
        self.default_outputs = self._tuned.default_outputs = self.first_outputs if reference is None else None
        self._tuned.extra_files = [_SIGNATURES]
        self.__name__ = name
        self.__doc__ = getattr(self.base_fn, "__doc__", None)

    def __repr__(self):
        return "<tunefarm.triton.autotune %s: %d configs, key %s>" % (self.__name__, len(self.configs), self.keys)

    # --- the caller's side ---------------------------------------------------
    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)

    def _named(self, args, kwargs):
        named = dict(zip(self.arg_names, args))
        named.update({k: v for k, v in kwargs.items() if k in self.arg_names})
        return named

    def _dims_of(self, *args, **kwargs):
        named = self._named(args, kwargs)
        dims = {}
        for k in self.keys:
            v = named.get(k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise TunefarmError("tunefarm.triton.autotune %s: key argument %s = %r: the farm's keys are "
                                    "positive ints" % (self.__name__, k, v))
            dims[k] = v
        # Triton's key holds every tensor's dtype; the farm's dtype names one
        # of f16, bf16, f32: any other mix is a dim of its own.
        dtypes = [_dtype_name(a.dtype) for a in named.values() if hasattr(a, "dtype")]
        if dtypes and (len(set(dtypes)) > 1 or dtypes[0] not in _FARM_DTYPES):
            dims["DTYPES"] = 1 + zlib.crc32(",".join(dtypes).encode()) % (1 << 30)
        if not dims:  # a kernel tuned once whatever its arguments
            dims["ANY"] = 1
        return dims

    def _farm_dtype_of(self, *args, **kwargs):
        for a in self._named(args, kwargs).values():
            if hasattr(a, "dtype") and _dtype_name(a.dtype) in _FARM_DTYPES:
                return _FARM_DTYPES[_dtype_name(a.dtype)]
        return "f32"

    def triton_key(self, named):
        """Triton's key: the `key` arguments' values, then every tensor
        argument's dtype."""
        return tuple(named[k] for k in self.keys if k in named) + tuple(
            str(a.dtype) for a in named.values() if hasattr(a, "dtype"))

    def prune(self, nargs, kwargs):
        """The configs a call measures, pruned as Triton prunes them:
        early_config_prune(configs, positional arguments, **keyword ones),
        then perf_model's top_k (a count, or a share of the configs when a
        float <= 1; one at least)."""
        configs = list(self.configs)
        if self.early_config_prune:
            configs = list(self.early_config_prune(configs, nargs, **kwargs))
        if self.perf_model and self.top_k:
            k = self.top_k
            k = int(len(configs) * k) if isinstance(k, float) and k <= 1.0 else int(k)
            if len(configs) > k:
                est = {id(c): self.perf_model(**nargs, **kwargs, **(c.all_kwargs() if hasattr(c, "all_kwargs")
                                                                    else config_dict(c))) for c in configs}
                configs = sorted(configs, key=lambda c: est[id(c)])[:max(1, k)]
        if not configs:
            raise TunefarmError("tunefarm.triton.autotune %s: pruning left no config" % self.__name__)
        return configs

    def _grid_of(self, grid, named, d):
        if callable(grid):
            grid = grid({**named, **d})
        grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
        if not all(isinstance(g, int) and not isinstance(g, bool) for g in grid):
            raise TunefarmError("tunefarm.triton.autotune %s: the grid %r is not ints" % (self.__name__, grid))
        return list(grid)

    def _record(self, dims, dtype, args, kwargs, listed, grid):
        """Writes what the harness needs to call the kernel as this call did:
        its positional and keyword arguments' descriptions as passed, each
        listed config's grid, the first listed config (what the others are
        checked against). Beside the op's package, locked against another
        process recording another key."""
        named = self._named(args, kwargs)
        call = {"args": [describe(n, a) for n, a in zip(self.arg_names, args)],
                "kwargs": {k: describe(k, v) for k, v in sorted(kwargs.items())},
                "grids": {_config_id(d): self._grid_of(grid, named, d) for d in listed},
                "first": listed[0]}
        folder = os.path.join(self._tuned.store + ".ops", self._tuned.op)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, _SIGNATURES)
        with open(path + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            calls = _read_json(path)
            calls[_farm_key_text(dims, dtype)] = call
            tmp = "%s.%d.tmp" % (path, os.getpid())
            with open(tmp, "w") as f:
                json.dump(calls, f, indent=1, sort_keys=True)
            os.replace(tmp, path)

    def run(self, *args, grid, **kwargs):
        kwargs.pop("warmup", None)  # Triton's Heuristics and direct .run() callers pass it
        named = self._named(args, kwargs)
        key = self.triton_key(named)
        config = self.cache.get(key)
        if config is None:
            with self._lock:
                if key not in self.cache:
                    self.cache[key] = self._answer(args, kwargs, named, grid)
            config = self.cache[key]
        self.best_config = config
        if getattr(config, "pre_hook", None):
            config.pre_hook({**named, **config_dict(config)})
        return self.fn[grid](*args, **kwargs, **config_dict(config))

    def _answer(self, args, kwargs, named, grid):
        started = time.perf_counter()
        nargs = dict(zip(self.arg_names, args))
        pruned = self.prune(nargs, {k: v for k, v in kwargs.items() if k in self.arg_names})
        listed = [config_dict(c) for c in pruned]
        if len(pruned) == 1:  # as Triton: one config left is not timed
            return pruned[0]
        dims = self._dims_of(*args, **kwargs)
        dtype = self._farm_dtype_of(*args, **kwargs)
        self._listed[_farm_key(dims, dtype)] = listed
        if self._tuned.may_tune():  # what a tuning's harness reads; lookup writes nothing
            self._record(dims, dtype, args, kwargs, listed, grid)
        d = self._tuned.config_for(*args, **kwargs)
        if d not in listed and d == self._tuned.default:  # the default answers a miss: the call's first instead
            d = listed[0]
        config = self._by_id.get(_config_id(d)) or _AsConfig(d)
        if os.environ.get("TRITON_PRINT_AUTOTUNING") == "1":
            print("Triton autotuning for function %s finished after %.2fs; best config selected: %s;"
                  % (self.__name__, time.perf_counter() - started, config))
        return config

    # --- the harness's side (the op package's entry imports these) ---------
    def make_inputs(self, dims, dtype, seed):
        if self.user_inputs:
            self._call, self._layout = None, None
            return list(self.user_inputs(dims, dtype, seed))
        path = os.path.join(os.environ.get("TUNEFARM_AUTOTUNE_PACKAGE", "."), _SIGNATURES)
        if self._calls is None:  # read once: the package does not change under a serving harness
            self._calls = _read_json(path)
        call = self._calls.get(_farm_key_text(dims, dtype))
        if call is None:
            raise TunefarmError("tunefarm.triton.autotune %s: no call of %s recorded in %s" % (
                self.__name__, _farm_key_text(dims, dtype), path))
        self._call, self._layout = call, (len(call["args"]), list(call["kwargs"]))
        self._generation += 1
        descs = call["args"] + [call["kwargs"][k] for k in self._layout[1]]
        return [make_argument(a, seed, i) for i, a in enumerate(descs)]

    def _split(self, flat):
        """The harness's flat argument list as the call passed it: positional
        arguments, then keyword ones."""
        if self._layout is None:  # inputs= made them: all positional
            return list(flat), {}
        n, names = self._layout
        return list(flat[:n]), dict(zip(names, flat[n:]))

    def _config_of(self, d):
        return self._by_id.get(_config_id(d)) or _AsConfig(d)

    def _bench_launch(self, d, config, flat, grid):
        """One launch as Triton's benchmark runs it: its pre_hook (else the
        reset_to_zero arguments zeroed and the restore_value ones restored),
        the config's pre_hook, the launch, the post_hook."""
        args, kwargs = self._split(flat)
        named = {**dict(zip(self.arg_names, args)), **kwargs}
        full = {**named, **d}
        if self.pre_hook:
            self.pre_hook(full)
        else:
            for n in self.reset_to_zero:
                if n in named:
                    _zero(named[n])
            for n in self.restore_value:
                saved = self._saved.get(id(named.get(n)))
                if saved is not None:
                    _copy_into(named[n], saved)
        if getattr(config, "pre_hook", None):
            config.pre_hook(full)
        self.fn[grid](*args, **kwargs, **d)
        if self.post_hook:
            self.post_hook(full, None)

    def _grid_for(self, d):
        if self._call is None:
            raise TunefarmError("tunefarm.triton.autotune %s: no recorded call gives the grid (pass inputs= only "
                                "with a static grid)" % self.__name__)
        grid = self._call["grids"].get(_config_id(d))
        if grid is None:
            raise TunefarmError("tunefarm.triton.autotune %s: no grid recorded for config %s" % (self.__name__, d))
        return tuple(grid)

    def _first(self):
        return dict(self._call["first"]) if self._call else self._dicts[0]

    def outputs(self, args):
        """The arguments the call's first config writes (run once on
        copies), its outputs to check; each restore_value argument's value is
        kept first (every run starts from it)."""
        self._saved, self._expected = {}, {}
        pos, kw = self._split(args)
        named = {**dict(zip(self.arg_names, pos)), **kw}
        for n in self.restore_value:
            if n in named:
                self._saved[id(named[n])] = _clone(named[n])
        copies = [_clone(a) for a in args]
        first = self._first()
        self._bench_launch(first, self._config_of(first), copies, self._grid_for(first))
        written = [i for i, (a, c) in enumerate(zip(args, copies))
                   if (_is_tensor(a) or isinstance(a, list)) and not _same(a, c)]
        if not written:
            raise TunefarmError("tunefarm.triton.autotune %s: the first config wrote no argument: nothing to check"
                                % self.__name__)
        self._expected[id(args)] = [copies[i] for i in written]
        return [args[i] for i in written]

    def first_outputs(self, args, dims, dtype):
        """What the call's first config wrote, the outputs every config is
        checked against where the caller gave no reference."""
        expected = self._expected.get(id(args))
        if expected is None:
            self.outputs(args)
            expected = self._expected[id(args)]
        return tuple(expected) if len(expected) > 1 else expected[0]

    def make_kernel(self, config, dtype):
        d = dict(config)
        launched = self._config_of(d)
        cached = [None, None]  # (generation, grid): a new shape's inputs drop the last shape's grid

        def run(*args):
            if cached[0] != self._generation:
                cached[:] = [self._generation, self._grid_for(d)]
            self._bench_launch(d, launched, args, cached[1])
        return run

    def close(self):
        self._tuned.close()


class _AsConfig:
    """A config the store answered that is none of `configs` (another
    version of the kernel's list): launched from its fields."""

    def __init__(self, d):
        self.kwargs = {k: v for k, v in d.items() if k not in CONFIG_FIELDS}
        for f in CONFIG_FIELDS:
            setattr(self, f, d.get(f))
        self.pre_hook = None

    def all_kwargs(self):
        return {**self.kwargs, **{f: getattr(self, f) for f in CONFIG_FIELDS if getattr(self, f) is not None}}

    def __str__(self):
        return ", ".join("%s: %s" % kv for kv in self.all_kwargs().items())


def _arg_names(fn):
    return list(inspect.signature(fn).parameters)


def _config_id(d):
    return json.dumps(d, sort_keys=True)


def _farm_key(dims, dtype):
    return (dtype,) + tuple(sorted(dims.items()))


def _farm_key_text(dims, dtype):
    return "%s %s" % (dtype, ",".join("%s=%d" % kv for kv in sorted(dims.items())))


def _read_json(path):
    try:
        with open(path) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def autotune(configs: Optional[Sequence[Any]] = None, key: Optional[Sequence[str]] = None,
             prune_configs_by: Optional[Mapping[str, Any]] = None, reset_to_zero: Optional[Sequence[str]] = None,
             restore_value: Optional[Sequence[str]] = None, pre_hook=None, post_hook=None, warmup=None, rep=None,
             use_cuda_graph=None, do_bench=None, cache_results=None, *, reference=None, inputs=None,
             store: Optional[str] = None, mode: str = "tune", farm: Optional[Mapping[str, Any]] = None,
             rtol: float = 1e-2, atol: float = 1e-2, op: Optional[str] = None):
    """Triton's @triton.autotune, tuned on the farm (this module's doc).
    Beyond Triton's arguments: `reference(args, dims, dtype)` to check
    against instead of the first config, `inputs(dims, dtype, seed)` to make
    the arguments instead of from the first call's shapes, `store`, `mode`,
    `farm`, `rtol`/`atol` and `op` as tunefarm.autotune's."""
    given = dict(warmup=warmup, rep=rep, use_cuda_graph=use_cuda_graph, do_bench=do_bench,
                 cache_results=cache_results)
    ignored = [k for k in _IGNORED if given.get(k) not in (None, False)]

    def wrap(fn):
        return Autotuner(fn, configs, key, prune_configs_by, reset_to_zero, restore_value, pre_hook, post_hook,
                         reference, inputs, store, mode, farm, rtol, atol, op, ignored)
    return wrap


def do_bench_pair(a, b, rounds=7):
    """Two callables timed by triton.testing.do_bench in this process, as a
    kernel's answer from the farm is compared with @triton.autotune's:
    `rounds` rounds, a and b interleaved and the order swapped each round
    (the GPU's clock drifts); returns the two medians in ms."""
    from triton.testing import do_bench
    times = ([], [])
    for r in range(rounds):
        for i in ((0, 1) if r % 2 == 0 else (1, 0)):
            times[i].append(do_bench((a, b)[i]))
    return tuple(sorted(t)[len(t) // 2] for t in times)
