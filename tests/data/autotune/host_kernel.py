"""A kernel tuned by tunefarm.autotune on hosts without a GPU: y = 2 * x on
lists, where UNROLL picks how many items a step writes and SLOW repeats
the work (slower configs). The harness times it on the host, never a GPU
figure; tests/python/test_autotune.py drives it."""
import os

import tunefarm


def make_inputs(dims, dtype, seed):
    x = [((i * 7919 + seed) % 1000) / 500.0 - 1.0 for i in range(dims["N"])]
    return [x, [0.0] * dims["N"]]


def reference(args, dims, dtype):
    return [2 * v for v in args[0]]


@tunefarm.autotune(
    space={"UNROLL": [1, 2, 4], "SLOW": [1, 3], "ORDER": ["forward", "backward"]},
    rules=["UNROLL <= N"],
    key=lambda x, y: {"N": len(x)},
    dtype="f32",
    inputs=make_inputs,
    reference=reference,
    store=os.environ.get("AUTOTUNE_TEST_STORE"),
    farm={"backend": "sim", "sim_models": ["h100"]},
    strategy="exhaustive",
)
def double(config, x, y):
    n = len(x)
    steps = range(0, n, config["UNROLL"])
    if config["ORDER"] == "backward":
        steps = list(reversed(steps))
    for _ in range(config["SLOW"]):
        for i in steps:
            for j in range(i, min(i + config["UNROLL"], n)):
                y[j] = 2 * x[j]
