"""y = 2 * x on lists, as a stand-in kernel module for tunefarm.harness."""
import os
import random


class CompilationError(Exception):
    pass


def make_inputs(dims, dtype, seed):
    log = os.environ.get("HARNESS_WARM_LOG")
    if log:
        with open(log, "a") as f:
            f.write("inputs pid=%d\n" % os.getpid())
    rng = random.Random(seed)
    x = [rng.uniform(-1, 1) for _ in range(dims["N"])]
    return [x, [0.0] * dims["N"]]


def reference(args, dims, dtype):
    return [2 * v for v in args[0]]


def warm(config, dtype, dims):
    log = os.environ.get("HARNESS_WARM_LOG")
    if log:
        with open(log, "a") as f:
            f.write("warm SCALE=%d UNROLL=%d pid=%d\n" % (config["SCALE"], config["UNROLL"], os.getpid()))


def make_kernel(config, dtype):
    if config["SCALE"] == 4:
        raise CompilationError("SCALE=4: no such kernel")
    factor = 2 if config["SCALE"] != 3 else 2.5

    def run(x, y):
        for _ in range(config["SCALE"]):  # more work, slower
            for i in range(len(x)):
                y[i] = factor * x[i]
    return run


BASELINE_VERSION = "host-loop-1"


def baseline(dtype):
    """The op's [baseline]: the plain loop a user would write first."""
    def run(x, y):
        for i in range(len(x)):
            y[i] = 2 * x[i]
    return run
