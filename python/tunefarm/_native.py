"""The ctypes plumbing the package's modules share: finding and loading
tunefarm's C libraries, declaring their functions, and their conventions
(tune/c.h): `char** errptr` errors and malloc'd JSON answers."""

import ctypes
import json
import os

P, S, D = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_double
ERR = ctypes.POINTER(ctypes.c_char_p)


class TunefarmError(Exception):
    """A call into tunefarm failed; the message is tunefarm's one line."""


def load_library(name, env_var, candidates, sigs, free):
    """Loads the first of `candidates` that loads (paths; a bare name goes to
    the loader), declares `sigs` ({function: (restype, argtypes)}) and notes
    its `free` function. Raises TunefarmError naming what was tried."""
    tried = []
    for path in candidates:
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            continue
        for fn, (res, args) in sigs.items():
            f = getattr(lib, fn)
            f.restype = res
            f.argtypes = args
        lib.tunefarm_path = path
        lib.tunefarm_free_fn = getattr(lib, free)
        return lib
    raise TunefarmError("%s not found; set %s to its path (tried: %s)" % (name, env_var, ", ".join(tried)))


def call(lib, fn, *args):
    """Calls a C function whose last argument is errptr; raises on error."""
    errptr = ctypes.c_char_p(None)
    out = fn(*args, ctypes.byref(errptr))
    if errptr.value is not None:
        message = errptr.value.decode("utf-8", "replace")
        lib.tunefarm_free_fn(ctypes.cast(errptr, ctypes.c_void_p))
        raise TunefarmError(message)
    return out


def take_json(lib, ptr):
    """The JSON text a C call returned, freed."""
    if not ptr:
        raise TunefarmError("tunefarm returned nothing")
    try:
        return json.loads(ctypes.string_at(ptr).decode("utf-8", "replace"))
    finally:
        lib.tunefarm_free_fn(ptr)
