"""Stand-ins for triton.Config, @triton.jit and triton.autotune on hosts
without Triton (tests/python/test_triton_autotune.py): a "kernel" is a
Python function run once per program id of the grid's first axis over
lists; program_id() answers the one running. Triton's launch fields
(num_warps, ...) are accepted and dropped, as a host has no warps."""
import inspect

_pid = [0]


def program_id(axis):
    return _pid[0]


def cdiv(a, b):
    return (a + b - 1) // b


class Config:
    def __init__(self, kwargs, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None, pre_hook=None):
        self.kwargs, self.num_warps, self.num_stages = dict(kwargs), num_warps, num_stages
        self.num_ctas, self.maxnreg, self.pre_hook = num_ctas, maxnreg, pre_hook

    def all_kwargs(self):
        return {**self.kwargs, "num_warps": self.num_warps, "num_stages": self.num_stages,
                "num_ctas": self.num_ctas, "maxnreg": self.maxnreg}

    def __str__(self):
        return ", ".join("%s: %s" % kv for kv in self.all_kwargs().items())


class JITFunction:
    def __init__(self, fn):
        self.fn = fn
        self.arg_names = list(inspect.signature(fn).parameters)
        self.__name__ = fn.__name__

    def __getitem__(self, grid):
        def launch(*args, num_warps=None, num_stages=None, num_ctas=None, maxnreg=None, **kwargs):
            # Bound as Triton binds a launch: an argument given twice, or
            # none given, is a TypeError.
            named = inspect.signature(self.fn).bind(*args, **kwargs).arguments
            g = grid(dict(named)) if callable(grid) else grid
            for pid in range(g[0]):
                _pid[0] = pid
                self.fn(**named)
        return launch


def jit(fn):
    return JITFunction(fn)


class Autotuner:
    """triton.autotune's object, as far as tunefarm.triton reads it."""

    def __init__(self, fn, configs, key, reset_to_zero=None, restore_value=None):
        self.fn, self.configs, self.keys = fn, configs, key
        self.reset_to_zero, self.restore_value = reset_to_zero, restore_value


def autotune(configs, key, reset_to_zero=None, restore_value=None, **ignored):
    return lambda fn: Autotuner(fn, configs, key, reset_to_zero, restore_value)
