"""tunefarm: signed tuning bundles and the kernels the farm measured, from Python.

A pure-Python package over tunefarm's C API (libtunefarm_c.so, tune/c.h)
through ctypes: it runs on any CPython 3 and imports nothing beyond the
standard library (torch and CuPy are used only when their arrays are passed).

    import tunefarm
    bundle = tunefarm.Bundle.load("bundles/tune-gemm.tfb", ["farm.key.pub"])
    answer = bundle.lookup("gemm", "f16", "h100-80gb-hbm3", {"M": 4096, "N": 4096, "K": 4096})
    answer.level, answer.config, answer.entry      # "exact", {"BM": 128, ...}, {...}

    gemm = bundle.kernel("gemm", "f16")             # on CUDA device 0
    gemm.launch({"M": m, "N": n, "K": k}, a, b, c)  # torch tensors, CuPy arrays or device pointers
    gemm.last.level                                 # who answered this launch

    bundle.misses()                                 # shapes answered below "exact", most asked first
    bundle.write_misses("misses.jsonl")             # for `tunefarm sweep from-misses`

docs/python.md has the whole surface.

The library is found through $TUNEFARM_LIB (its path), else beside the
package in a checkout (build/libtune/) or a packed artifact (lib/), else on
the loader's path.
"""

import builtins
import ctypes
import ctypes.util
import functools
import gc
import keyword
import operator
import os
import struct
import threading
import weakref
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from . import _native

__all__ = ["Answer", "Bundle", "Farm", "Kernel", "Launch", "Sweep", "TunefarmError", "autotune", "library_path",
           "register_torch_op", "to_dataframe"]


from ._native import TunefarmError


def _candidates():
    env = os.environ.get("TUNEFARM_LIB")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    for rel in ("../../build/libtune/libtunefarm_c.so", "../../lib/libtunefarm_c.so"):
        yield os.path.normpath(os.path.join(here, rel))
    found = ctypes.util.find_library("tunefarm_c")
    if found:
        yield found


_lib = None
library_path = None


def _c():
    """The C library, loaded on first use and its signatures declared."""
    global _lib, library_path
    if _lib is not None:
        return _lib
    P, S, I64P, U64P = ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_uint64)
    err = _native.ERR
    sigs = {
        "tunefarm_bundle_load": (P, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), S, err]),
        "tunefarm_bundle_destroy": (None, [P]),
        "tunefarm_bundle_lookup": (P, [P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                       ctypes.POINTER(ctypes.c_char_p), I64P, S, ctypes.c_char_p, err]),
        "tunefarm_lookup_prepare": (P, [P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                        ctypes.POINTER(ctypes.c_char_p), S, err]),
        "tunefarm_lookup_destroy": (None, [P]),
        "tunefarm_bundle_info": (P, [P, err]),
        "tunefarm_bundle_misses": (P, [P, err]),
        "tunefarm_bundle_write_misses": (ctypes.c_int, [P, ctypes.c_char_p, err]),
        "tunefarm_launcher_open": (P, [P, ctypes.c_int, err]),
        "tunefarm_launcher_destroy": (None, [P]),
        "tunefarm_launcher_device": (P, [P]),
        "tunefarm_kernel_prepare": (P, [P, ctypes.c_char_p, ctypes.c_char_p, err]),
        "tunefarm_kernel_destroy": (None, [P]),
        "tunefarm_kernel_signature": (P, [P]),
        "tunefarm_kernel_launch": (ctypes.c_int, [P, I64P, S, U64P, S, P, err]),
        "tunefarm_kernel_launch_args": (ctypes.c_int, [P]),
        "tunefarm_kernel_error": (P, [P]),
        "tunefarm_kernel_last": (P, [P]),
        "tunefarm_free": (None, [P]),
    }
    _lib = _native.load_library("libtunefarm_c.so", "TUNEFARM_LIB", list(_candidates()), sigs, free="tunefarm_free")
    library_path = _lib.tunefarm_path
    # The bound launches' call (Launch._fast_call): without declared argument
    # types (it takes a reference made once, so ctypes converts nothing per
    # call) and holding the GIL (a PyDLL handle: no release and retake around
    # a call of a few microseconds), as torch launches.
    _lib.launch_args_held = ctypes.PyDLL(library_path)["tunefarm_kernel_launch_args"]
    _lib.launch_args_held.restype = ctypes.c_int
    # Bundle.lookup's call (_PreparedLookup.answer), holding the GIL for the
    # same reason; its arguments are addresses made once.
    _lib.lookup_held = ctypes.PyDLL(library_path)["tunefarm_lookup"]
    _lib.lookup_held.restype = ctypes.c_int
    _lib.lookup_held.argtypes = [P, P, S, P, P]
    return _lib


def _call(fn, *args):
    """Calls a C function whose last argument is errptr; raises on error."""
    return _native.call(_c(), fn, *args)


def _take_json(ptr):
    """The JSON text a C call returned, freed."""
    return _native.take_json(_c(), ptr)


class Answer:
    """Who answered a lookup or a launch: .level ("exact", "predicted",
    "nearest_shape", "family", "default", "miss"), .config (dict, None for a
    miss: ints, and str or bool for the op's string or boolean axes) and .entry (the tuned entry or model default it came from, a dict,
    or None); .candidates, at the "predicted" level (a shape never tuned,
    answered by the bundle's shape selector), the configs it chose from as
    [{"config": ..., "entry": ...}], else []; a launch's answer also has
    .arch, .grid, .block and .smem_bytes."""

    def __init__(self, d):
        self.level = d.get("level")
        self.config = d.get("config")
        self.entry = d.get("entry")
        self.candidates = d.get("candidates", [])
        self.arch = d.get("arch")
        self.grid = tuple(d["grid"]) if "grid" in d else None
        self.block = tuple(d["block"]) if "block" in d else None
        self.smem_bytes = d.get("smem_bytes")
        self.replayed = d.get("replayed")

    def __repr__(self):
        more = ", candidates=%d" % len(self.candidates) if self.candidates else ""
        return "Answer(level=%r, config=%r%s)" % (self.level, self.config, more)


def _pointer(x, ordinal):
    """A device pointer from a torch tensor or a CuPy array (contiguous, on
    CUDA device `ordinal`), an object with __cuda_array_interface__ (no
    strides), or an int (taken as is)."""
    if isinstance(x, int):
        return x
    name = type(x).__name__
    if hasattr(x, "data_ptr"):                       # torch
        if not x.is_cuda or x.device.index != ordinal:
            raise TunefarmError("launch: a %s on %s, not on CUDA device %d" % (name, x.device, ordinal))
        if not x.is_contiguous():
            raise TunefarmError("launch: a non-contiguous tensor (call .contiguous() first)")
        return int(x.data_ptr())
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:                              # CuPy, Numba, ...
        if cai.get("strides") is not None and not getattr(getattr(x, "flags", None), "c_contiguous", False):
            raise TunefarmError("launch: a strided %s (pass a C-contiguous copy)" % name)
        device = getattr(getattr(x, "device", None), "id", ordinal)
        if device != ordinal:
            raise TunefarmError("launch: a %s on CUDA device %s, not %d" % (name, device, ordinal))
        return int(cai["data"][0])
    raise TypeError("tunefarm: cannot take a device pointer from %r" % name)


def _stream(stream, args):
    """A CUstream handle: the one given (torch or CuPy stream, or int), else
    the current stream of the framework whose arrays were passed."""
    if stream is None:
        for a in args:
            if hasattr(a, "data_ptr") and hasattr(a, "device"):
                import torch  # only reached with torch tensors
                return int(torch.cuda.current_stream(a.device).cuda_stream)
            if hasattr(a, "data") and hasattr(a.data, "ptr"):
                import cupy
                return int(cupy.cuda.get_current_stream().ptr)
        return 0
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    raise TypeError("tunefarm: cannot take a CUDA stream from %r" % type(stream).__name__)


_INT64_MAX = (1 << 63) - 1


def _dim_int(what, name, v):
    """A dim's value as an int64 the C API takes: an int or an integer type
    (numpy's). A bool or any other type is a TypeError, a value beyond int64
    an OverflowError (ctypes would wrap it: 2**64 + 4096 is 4096 to C), a
    negative one a TunefarmError (a dim is a size); each names the dim."""
    if isinstance(v, bool) or not hasattr(type(v), "__index__"):
        raise TypeError("%s: dim %s must be an int, not %s" % (what, name, type(v).__name__))
    v = operator.index(v)
    if v > _INT64_MAX or v < -_INT64_MAX - 1:
        raise OverflowError("%s: dim %s = %d is beyond int64 (at most 2**63 - 1)" % (what, name, v))
    if v < 0:
        raise TunefarmError("%s: dim %s = %d is negative (a dim is a size, >= 0)" % (what, name, v))
    return v


def _dim_ints(kernel, values):
    """`values` as int64s, checked by _dim_int (kernel.dims names them)."""
    return [_dim_int(kernel.op, name, v) for name, v in zip(kernel.dims, values)]


class Kernel:
    """An (op, dtype) prepared on a device; see Bundle.kernel. One thread at a time."""

    BOUND_SHAPES = 64  # the shapes launch() keeps bound

    def __init__(self, launcher, op, dtype):
        self._launcher = launcher  # keeps the launcher (and bundle) alive
        self._h = _call(_c().tunefarm_kernel_prepare, launcher._h, op.encode(), dtype.encode())
        sig = _take_json(_c().tunefarm_kernel_signature(self._h))
        self.op, self.dtype = op, dtype
        self.device = launcher.device  # {"name", "model", "arch", ...}
        self.dims = list(sig["dims"])
        self.buffers = list(sig["buffers"])
        self.dirs = list(sig.get("dirs", ["inout"] * len(self.buffers)))  # "in", "out" or "inout" per buffer
        self._bound = {}  # (dims, stream or None) -> Launch, for launch()
        self._int_types = (int,) * len(self.dims)

    def launch(self, dims, *buffers, stream=None):
        """Launches the measured kernel: `dims` a dict by name or a sequence
        in .dims order; `buffers` in .buffers order (scalar arguments come
        from the bundle's launch plan); `stream` a torch/CuPy stream or a
        CUstream int (default: the current stream of the arrays' framework).
        Each shape (and stream) is bound once (bind) and kept, the last
        BOUND_SHAPES bound: a shape launched again costs a bound launch and
        one lookup."""
        values = tuple(self._dim_values(dims))
        if len(values) != len(self.dims):
            raise TunefarmError("launch %s: %d dims for %d (%s)" % (self.op, len(values), len(self.dims),
                                                                      ", ".join(self.dims)))
        if len(buffers) != len(self.buffers):
            raise TunefarmError(_buffer_count(self, "launch", len(buffers)))
        if tuple(map(type, values)) != self._int_types:  # a float equal to a bound dim would find its Launch
            values = tuple(_dim_ints(self, values))
        self._launch_for(values, None if stream is None else _stream(stream, ())).call(*buffers)

    def _launch_for(self, values, stream):
        """The Launch of (dims, a tuple of ints; a CUstream int or None),
        bound on first use and kept, the last BOUND_SHAPES of them."""
        key = (values, stream)
        bound = self._bound.get(key)
        if bound is None:
            if len(self._bound) >= self.BOUND_SHAPES:
                del self._bound[next(iter(self._bound))]  # the first bound of those kept
            bound = self._bound[key] = Launch(self, values, stream, own_class=False)
        return bound

    def _dim_values(self, dims):
        if isinstance(dims, dict):
            missing = [n for n in self.dims if n not in dims]
            if missing:
                raise TunefarmError("launch %s: dims %s missing" % (self.op, ", ".join(missing)))
            return [dims[n] for n in self.dims]
        return list(dims)

    def bind(self, dims, stream=None, *, buffers=None) -> "Launch":
        """A launch of this kernel prepared for one shape: `launch = gemm.bind(
        {"M": m, "N": n, "K": k})`, then `launch(a, b, c)` per call. What can be
        done once is (dims, the stream's kind); a call checks its tensors and
        launches. The answer's lookup is remembered for the Kernel's last
        shape: launches of two shapes taking turns on one Kernel look it up
        again at each turn (a Kernel per shape does not). `stream`: as
        launch(); default: the current stream of the tensors' framework at
        each call (so a CUDA graph capture records the launch on its stream).

        With `buffers` (all of them, in .buffers order) the launch is bound
        to them too, as a CUDA graph is to its addresses: they are checked
        once, here, and held (a torch tensor with its storage, which outlives
        a later set_ of the tensor), and `launch()` takes no argument: the
        current stream and the launch. Like a CUDA graph it then launches on
        those addresses: a storage resized since (resize_ that grows it)
        has moved, and the launch must be bound again."""
        return Launch(self, self._dim_values(dims), stream, buffers or ())

    @property
    def last(self) -> Answer:
        """The Answer of the last launch (level, config, entry, arch, geometry)."""
        return Answer(_take_json(_c().tunefarm_kernel_last(self._h)))

    def __repr__(self):
        return "Kernel(%r, %r, device %d %s, dims %s, buffers %s)" % (
            self.op, self.dtype, self.device.get("ordinal", 0), self.device.get("model"), ",".join(self.dims),
            ",".join(self.buffers))

    def __del__(self):
        if getattr(self, "_h", None):
            _c().tunefarm_kernel_destroy(self._h)
            self._h = None


def _buffer_count(kernel, verb, given):
    """The message for `given` buffers where `kernel` takes others."""
    return "%s %s: %d buffers for %d (%s)" % (verb, kernel.op, given, len(kernel.buffers), ", ".join(kernel.buffers))


def _plain_name(name):
    """An ASCII identifier that is no keyword and does not start with "_"."""
    return name.isascii() and name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("_")


def _launch_name(kernel):
    """What a launch function is called: <op>_<dtype>, else "launch"."""
    name = "%s_%s" % (kernel.op, kernel.dtype)
    return name if _plain_name(name) else "launch"


@functools.lru_cache(maxsize=256)
def _compiled(source):
    """A launch function's code, compiled once per source: the source is the
    same for every shape of a kernel (the values are in the scope)."""
    return compile(source, "<tunefarm launch>", "exec")


class _LaunchArgs(ctypes.Structure):
    """tunefarm_launch_args_t (tune/c.h): a launch's arguments, filled in place."""
    MAX_BUFFERS = 16  # TUNEFARM_LAUNCH_MAX_BUFFERS
    _fields_ = [("kernel", ctypes.c_void_p), ("dims", ctypes.c_void_p), ("stream", ctypes.c_void_p),
                ("buffers", ctypes.c_uint64 * MAX_BUFFERS)]


# A bound launch writes the stream and the buffers with one pack from here.
assert _LaunchArgs.buffers.offset == _LaunchArgs.stream.offset + 8


class Launch:
    """A Kernel's launch for one shape (Kernel.bind): call it with the
    buffers, in the kernel's .buffers order (a missing one raises, naming
    it), or with none where it was bound to its buffers. torch tensors must
    be contiguous and on the kernel's device; CuPy arrays and device
    pointers (int) are taken as Kernel.launch takes them. One thread at a
    time, as its Kernel."""

    def __init__(self, kernel, values, stream, buffers=(), own_class=True):
        if len(values) != len(kernel.dims):
            raise TunefarmError("bind %s: %d dims for %d (%s)" % (kernel.op, len(values), len(kernel.dims),
                                                                    ", ".join(kernel.dims)))
        values = _dim_ints(kernel, values)
        self.kernel = kernel
        self.dims = dict(zip(kernel.dims, values))
        self._dims = (ctypes.c_int64 * len(values))(*values)
        self._args = _LaunchArgs(kernel._h, ctypes.addressof(self._dims), None)
        self._args_ref = ctypes.byref(self._args)
        self._nbuffers = len(kernel.buffers)
        self._ordinal = kernel.device["ordinal"]
        self._bound_stream = None if stream is None else _stream(stream, ())
        self._held = None  # the buffers a launch is bound to, and their storage
        # The launch itself. Calling the Launch runs it with no Python frame
        # in between: `__call__` is looked up on the type, so each Launch
        # gets a class of its own whose `__call__` is this function (not
        # those Kernel.launch keeps, which it calls by .call: a class costs
        # more to make than the rest of a Launch).
        self.call = self._buffers_bound_call(buffers) if buffers else self._fast_call()
        if own_class:
            self.__class__ = type(type(self).__name__, (type(self),),
                                  {"__call__": staticmethod(self.call), "__slots__": ()})

    def _fail(self):
        ptr = _c().tunefarm_kernel_error(self.kernel._h)
        try:
            message = ctypes.string_at(ptr).decode("utf-8", "replace") if ptr else "launch failed"
        finally:
            _c().tunefarm_free(ptr)
        raise TunefarmError(message)

    def _general(self, *buffers):
        """Any buffers: the checks and pointers of Kernel.launch."""
        if len(buffers) != self._nbuffers:
            raise TypeError(_buffer_count(self.kernel, "launch", len(buffers)))  # as a missing argument is
        ptrs = [_pointer(b, self._ordinal) for b in buffers]
        stream = self._bound_stream if self._bound_stream is not None else _stream(None, buffers)
        self._check_capture(buffers)
        if len(ptrs) > _LaunchArgs.MAX_BUFFERS:  # more than a block holds: the checked call
            _call(_c().tunefarm_kernel_launch, self.kernel._h, self._dims, len(self._dims),
                  (ctypes.c_uint64 * len(ptrs))(*ptrs), len(ptrs), stream)
            return
        self._args.buffers[:len(ptrs)] = ptrs
        self._args.stream = stream
        if _c().tunefarm_kernel_launch_args(self._args_ref) != 0:
            self._fail()

    def _check_capture(self, buffers):
        if self._bound_stream is None or not any(hasattr(b, "data_ptr") for b in buffers):
            return
        import torch
        if torch.cuda.is_current_stream_capturing() and \
                torch.cuda.current_stream(self._ordinal).cuda_stream != self._bound_stream:
            raise TunefarmError("launch %s: a CUDA graph capture on another stream than the one this launch was "
                                "bound to (bind without a stream to follow the current one)" % self.kernel.op)

    def _buffers_bound_call(self, buffers):
        """The call of a Launch bound to its buffers (Kernel.bind): they are
        checked and written into the launch block once, here, and held; a
        call writes the stream (the current one, or none to write where the
        stream is bound too) and launches."""
        if len(buffers) != self._nbuffers:
            raise TunefarmError(_buffer_count(self.kernel, "bind", len(buffers)))
        ptrs = [_pointer(b, self._ordinal) for b in buffers]
        self._held = [(b, b.untyped_storage()) if hasattr(b, "untyped_storage") else b for b in buffers]
        launch, args, fail, o, fixed = _c().launch_args_held, self._args_ref, self._fail, self._ordinal, \
            self._bound_stream
        try:
            import torch
            raw_stream = torch._C._cuda_getCurrentRawStream if any(hasattr(b, "data_ptr") for b in buffers) else None
            capturing = torch._C._cuda_isCurrentStreamCapturing
        except (ImportError, AttributeError):
            raw_stream = None
        if len(ptrs) > _LaunchArgs.MAX_BUFFERS:  # more than a block holds: the general call, buffers fixed
            def call():
                self._general(*buffers)
        elif raw_stream is None:  # CuPy arrays or pointers: the stream as Kernel.launch takes it
            self._args.buffers[:len(ptrs)] = ptrs

            def call():
                self._check_capture(buffers)
                self._args.stream = fixed if fixed is not None else _stream(None, buffers)
                if launch(args) != 0:
                    fail()
        elif fixed is None:
            self._args.buffers[:len(ptrs)] = ptrs
            block, pack = memoryview(self._args).cast("B"), struct.Struct("=Q").pack_into

            def call():
                pack(block, _LaunchArgs.stream.offset, raw_stream(o))
                if launch(args) != 0:
                    fail()
        else:
            self._args.buffers[:len(ptrs)] = ptrs
            self._args.stream = fixed

            def call():
                if capturing() and raw_stream(o) != fixed:
                    self._check_capture(buffers)  # refuses it
                if launch(args) != 0:
                    fail()
        call.__name__ = call.__qualname__ = _launch_name(self.kernel)
        return call

    def _fast_call(self):
        """The call for torch tensors, written out for this kernel: one
        parameter per buffer (named as the kernel names it, so a missing one
        is a TypeError naming it), per tensor one device and one contiguity
        check and its pointer, the current stream (or, bound to a stream, a
        look at whether a capture runs elsewhere), then one C call. Anything
        else takes _general."""
        if not 0 < self._nbuffers <= _LaunchArgs.MAX_BUFFERS:
            return self._general
        try:
            import torch
            raw_stream = torch._C._cuda_getCurrentRawStream
            capturing = torch._C._cuda_isCurrentStreamCapturing
        except (ImportError, AttributeError):
            return self._general
        names = list(self.kernel.buffers)
        if len(set(names)) != len(names) or not all(_plain_name(n) and not hasattr(builtins, n) for n in names):
            names = ["b%d" % i for i in range(self._nbuffers)]
        fname = _launch_name(self.kernel)
        # The function's own names start with "_", the buffers' never do, nor
        # name a builtin (the code names AttributeError).
        lines = ["def %s(%s):" % (fname, ", ".join(names)),
                 "    try:",
                 "        _fast = not (%s)" % " or ".join("%s.get_device() != _o or not %s.is_contiguous()" % (n, n)
                                                      for n in names),
                 "    except AttributeError:  # not torch tensors",
                 "        _fast = False",
                 "    if not _fast:",
                 "        return _general(%s)" % ", ".join(names)]
        if self._bound_stream is None:
            stream = "_raw_stream(_o)"
        else:  # _general refuses a capture on another stream
            stream = "_stream"
            lines += ["    if _capturing() and _raw_stream(_o) != _stream:",
                      "        return _general(%s)" % ", ".join(names)]
        lines += ["    _pack(_block, %d, %s, %s)" % (_LaunchArgs.stream.offset, stream,
                                                  ", ".join("%s.data_ptr()" % n for n in names)),
                  "    if _launch(_args) != 0:",
                  "        _fail()"]
        # The stream and the pointers go into the block with one call.
        pack = struct.Struct("=%dQ" % (1 + self._nbuffers)).pack_into
        scope = {"_o": self._ordinal, "_block": memoryview(self._args).cast("B"), "_pack": pack,
                 "_args": self._args_ref, "_launch": _c().launch_args_held, "_raw_stream": raw_stream,
                 "_capturing": capturing, "_stream": self._bound_stream, "_general": self._general,
                 "_fail": self._fail}
        exec(_compiled("\n".join(lines)), scope)
        return scope[fname]

    def __call__(self, *buffers):  # replaced per instance in __init__ (where own_class)
        return self.call(*buffers)

    def __repr__(self):
        return "Launch(%r, %r, %s%s)" % (self.kernel.op, self.kernel.dtype,
                                         ",".join("%s=%d" % kv for kv in self.dims.items()),
                                         ", its buffers bound" if self._held is not None else "")


class _Params(ctypes.Structure):
    """tunefarm_params_t (tune/c.h)."""
    _fields_ = [("n", ctypes.c_size_t), ("names", ctypes.c_void_p), ("values", ctypes.c_void_p),
                ("texts", ctypes.c_void_p), ("kinds", ctypes.c_void_p)]


class _Entry(ctypes.Structure):
    """tunefarm_entry_t (tune/c.h)."""
    _fields_ = [("gpu_model", ctypes.c_char_p), ("shape", _Params), ("config", _Params),
                ("config_id", ctypes.c_char_p), ("kernel_hash", ctypes.c_char_p), ("arch", ctypes.c_char_p),
                ("backend", ctypes.c_char_p), ("median_us", ctypes.c_double), ("baseline", ctypes.c_char_p),
                ("baseline_median_us", ctypes.c_double)]


class _AnswerFields(ctypes.Structure):
    """tunefarm_answer_t (tune/c.h)."""
    _fields_ = [("level", ctypes.c_int), ("level_name", ctypes.c_char_p), ("config", _Params),
                ("entry", ctypes.c_void_p), ("ncandidates", ctypes.c_size_t), ("candidates", ctypes.c_void_p)]


_LEVEL_MISS, _PARAM_BOOL, _PARAM_STRING = 4, 1, 2  # TUNEFARM_LEVEL_MISS, TUNEFARM_PARAM_* (tune/c.h)


def _params_dict(p):
    """A tunefarm_params_t as the JSON answer has it: {name: int, bool or str}."""
    if not p.n:
        return {}
    names = ctypes.cast(p.names, ctypes.POINTER(ctypes.c_char_p))
    values = ctypes.cast(p.values, ctypes.POINTER(ctypes.c_int64))
    texts = ctypes.cast(p.texts, ctypes.POINTER(ctypes.c_char_p))
    kinds = ctypes.cast(p.kinds, ctypes.POINTER(ctypes.c_int))
    out = {}
    for i in range(p.n):
        kind = kinds[i]
        out[names[i].decode("utf-8", "replace")] = (
            values[i] != 0 if kind == _PARAM_BOOL else
            texts[i].decode("utf-8", "replace") if kind == _PARAM_STRING else values[i])
    return out


def _entry_dict(address):
    """The tunefarm_entry_t at `address` as the JSON answer has it, or None."""
    if not address:
        return None
    e = _Entry.from_address(address)
    text = lambda b: b.decode("utf-8", "replace")  # noqa: E731
    d = {"gpu_model": text(e.gpu_model), "shape": _params_dict(e.shape), "config_id": text(e.config_id),
         "kernel_hash": text(e.kernel_hash), "arch": text(e.arch), "backend": text(e.backend),
         "median_us": e.median_us}
    if e.baseline:
        d["baseline"] = text(e.baseline)
        d["baseline_median_us"] = e.baseline_median_us
    return d


def _entry_copy(e):
    return None if e is None else dict(e, shape=dict(e["shape"]))


class _PreparedLookup:
    """A tunefarm_lookup_t of Bundle.lookup: (op, dtype, GPU model, arch, dim
    names) bound once; a lookup fills its dims in place and reads plain
    fields, no JSON either way. What an answer points to stays where it is
    while the handle lives (tune/c.h), so each answer is decoded once, kept
    by those addresses, and copied out (a caller may change its Answer)."""

    def __init__(self, bundle, op, dtype, gpu, arch, names):
        encoded = [n.encode() for n in names]
        arr = (ctypes.c_char_p * len(encoded))(*encoded)
        self._h = _call(_c().tunefarm_lookup_prepare, bundle, op.encode(), dtype.encode(), gpu.encode(),
                        arch.encode() if arch else None, arr, len(encoded))
        self._dims = (ctypes.c_int64 * max(len(names), 1))()
        self._fields = _AnswerFields()
        self._err = ctypes.c_char_p(None)
        self._args = (self._h, ctypes.addressof(self._dims), len(names), ctypes.addressof(self._fields),
                      ctypes.addressof(self._err))
        self._decoded = {}  # (level, config, entry, candidates addresses) -> (level, config, entry, candidates)
        self._lock = threading.Lock()  # one lookup at a time fills the dims and reads the fields (tune/c.h)

    def answer(self, values):
        with self._lock:
            self._dims[:len(values)] = values
            if _c().lookup_held(*self._args) != 0:
                message = self._err.value.decode("utf-8", "replace") if self._err.value else "lookup failed"
                _c().tunefarm_free(ctypes.cast(self._err, ctypes.c_void_p))
                self._err.value = None
                raise TunefarmError(message)
            f = self._fields
            key = (f.level, f.config.names, f.entry, f.candidates)
            decoded = self._decoded.get(key)
            if decoded is None:
                candidates = [{"config": _params_dict(_Entry.from_address(c).config), "entry": _entry_dict(c)}
                              for c in (ctypes.cast(f.candidates, ctypes.POINTER(ctypes.c_void_p))[i]
                                        for i in range(f.ncandidates))]
                decoded = self._decoded[key] = (
                    f.level_name.decode(), None if f.level == _LEVEL_MISS else _params_dict(f.config),
                    _entry_dict(f.entry), candidates)
        level, config, entry, candidates = decoded
        return Answer({"level": level, "config": None if config is None else dict(config),
                       "entry": _entry_copy(entry),
                       "candidates": [{"config": dict(c["config"]), "entry": _entry_copy(c["entry"])}
                                      for c in candidates]})

    def close(self):
        if getattr(self, "_h", None):
            _c().tunefarm_lookup_destroy(self._h)
            self._h = None

    __del__ = close


class _Launcher:
    # Holds its bundle (kernels hold their launcher); the bundle keeps its
    # launchers only weakly. Where a garbage collector frees a kernel, its
    # launcher and bundle together, in no order, each C handle keeps the
    # bundle it was made from (tune/c.h).
    def __init__(self, bundle, device):
        self._bundle = bundle
        self._h = _call(_c().tunefarm_launcher_open, bundle._h, int(device))
        self.device = _take_json(_c().tunefarm_launcher_device(self._h))

    def __del__(self):
        if getattr(self, "_h", None):
            _c().tunefarm_launcher_destroy(self._h)
            self._h = None


class Bundle:
    """A signed bundle, verified on load. A context manager: leaving the
    `with` block closes it (TUNEFARM_MISSES is written then)."""

    def __init__(self, handle, path):
        self._h = handle
        self.path = path
        self._launchers = weakref.WeakValueDictionary()
        self._info = None
        self._lookups = {}  # (op, dtype, gpu, arch, dim names) -> _PreparedLookup, the last LOOKUPS of them

    LOOKUPS = 64  # the (op, dtype, GPU model, arch, dim names) that lookup() keeps prepared

    def _handle(self):
        if not self._h:
            raise TunefarmError("bundle %s is closed" % self.path)
        return self._h

    @property
    def info(self) -> Dict[str, Any]:
        """What the bundle holds: name, farm_version, created_unix,
        signer_key_id, entries (a count), ops ({op: {"dims", "dtypes"}}) and
        dtypes (every dtype the farm knows)."""
        if self._info is None:
            self._info = _take_json(_call(_c().tunefarm_bundle_info, self._handle()))
        return self._info

    def __repr__(self):
        if not self._h:
            return "<tunefarm.Bundle %s (closed)>" % self.path
        i = self.info
        return "<tunefarm.Bundle %s: %r, %d entries of %s, signed by %s>" % (
            self.path, i["name"], i["entries"], ", ".join(sorted(i["ops"])) or "no op", i["signer_key_id"] or "nobody")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self) -> None:
        """Frees the bundle now (its misses go to TUNEFARM_MISSES, if set).
        Refused while kernels of it are alive."""
        if self._h and len(self._launchers) > 0:
            gc.collect()  # kernels that only cycles hold (a Kernel and the launches it keeps bound) go first
        if self._h and len(self._launchers) > 0:
            raise TunefarmError("bundle %s: close: %d launcher(s) of it are still alive (drop its kernels first)"
                                % (self.path, len(self._launchers)))
        if self._h:
            self._close_lookups()
            _c().tunefarm_bundle_destroy(self._h)
            self._h = None

    def _close_lookups(self):
        # Prepared lookups keep the bundle: they go first, so that it is freed
        # (and its misses written) now.
        lookups = getattr(self, "_lookups", {})
        for p in lookups.values():
            p.close()
        lookups.clear()

    @classmethod
    def load(cls, path: Union[str, os.PathLike], trusted_keys: Union[str, os.PathLike, Sequence[str]]) -> "Bundle":
        """Loads `path` and checks its signature against `trusted_keys` (paths
        of public key files, or their text). Raises TunefarmError naming the
        file: unsigned, tampered, signed by a key not trusted, ..."""
        if isinstance(trusted_keys, (str, bytes, os.PathLike)):
            trusted_keys = [trusted_keys]
        keys = [os.fsencode(k) for k in trusted_keys]
        arr = (ctypes.c_char_p * len(keys))(*keys)
        h = _call(_c().tunefarm_bundle_load, os.fsencode(path), arr, len(keys))
        return cls(h, path)

    def lookup(self, op: str, dtype: str, gpu: str, shape: Mapping[str, int], arch: Optional[str] = None) -> Answer:
        """The fallback chain's Answer for (op, dtype, GPU model, shape dict);
        `arch` ("sm_89") lets the op's default for that architecture answer
        before the op-wide one. A dtype the farm does not know, or a shape
        whose dims are not the op's, raises TunefarmError naming it (an op
        the bundle lacks answers its default or "miss", as deployments do)."""
        info = self.info
        if dtype not in info["dtypes"]:
            raise TunefarmError("lookup %s: unknown dtype %r (known: %s)" % (op, dtype, ", ".join(info["dtypes"])))
        if not isinstance(shape, Mapping):
            raise TypeError("lookup %s: shape must be a dict of dim name to int, not %s" % (op, type(shape).__name__))
        dims = info["ops"].get(op, {}).get("dims")
        if dims is not None:
            missing = [d for d in dims if d not in shape]
            extra = [str(d) for d in shape if d not in dims]
            if missing or extra:
                raise TunefarmError("lookup %s: %s (its dims are %s)" % (
                    op, "; ".join(filter(None, ["missing " + ", ".join(missing) if missing else "",
                                                "no dim " + ", ".join(extra) if extra else ""])), ", ".join(dims)))
        values = []
        for name, value in shape.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError("lookup %s: dim %s must be an int, not %s" % (op, name, type(value).__name__))
            values.append(_dim_int("lookup " + op, name, value))
        key = (op, dtype, gpu, arch or None, tuple(shape))
        prepared = self._lookups.get(key)
        if prepared is None:
            handle = self._handle()
            if len(self._lookups) >= self.LOOKUPS:
                self._lookups.pop(next(iter(self._lookups))).close()  # the first prepared of those kept
            prepared = self._lookups[key] = _PreparedLookup(handle, op, dtype, gpu, arch,
                                                            [str(n) for n in shape])
        return prepared.answer(values)

    def misses(self) -> List[Dict[str, Any]]:
        """The lookups and launches answered below "exact" so far, most asked
        first: dicts with op, dtype, gpu_model, shape, level, count."""
        return _take_json(_call(_c().tunefarm_bundle_misses, self._handle()))["misses"]

    def write_misses(self, path: Union[str, os.PathLike]) -> None:
        """Appends misses() to `path` as JSON lines, the input of
        `tunefarm sweep from-misses`."""
        _call(_c().tunefarm_bundle_write_misses, self._handle(), os.fsencode(path))

    def kernel(self, op: str, dtype: str, device: int = 0) -> "Kernel":
        """A Kernel of (op, dtype) on CUDA device `device`: the bundle's
        measured cubins for that device's model and architecture."""
        self._handle()
        launcher = self._launchers.get(device)
        if launcher is None:
            launcher = _Launcher(self, device)
            self._launchers[device] = launcher
        return Kernel(launcher, op, dtype)

    def __del__(self):
        if getattr(self, "_h", None):
            self._close_lookups()
            _c().tunefarm_bundle_destroy(self._h)
            self._h = None


from .farm import Farm, Sweep, to_dataframe  # noqa: E402 (after the classes it does not need)
from .autotuning import autotune  # noqa: E402
from . import triton  # noqa: E402 (tunefarm.triton.autotune; imports no Triton until a tuning runs)
from .torch_op import register_torch_op  # noqa: E402
