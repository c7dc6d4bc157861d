"""A Triton-style kernel on the stand-ins (triton_standin.py), tuned by
tunefarm.triton.autotune with Triton's arguments: y = 2 * x in blocks of
BLOCK, where an odd BLOCK is fast because it is wrong (it adds 1) and its
check against the first config must fail it. The harness times it on the
host, never a GPU figure."""
import os

import tunefarm.triton
from triton_standin import Config, jit, program_id


def prune_wide(configs, named_args, **kwargs):
    # Triton's early_config_prune: no block wider than the vector. As in
    # Triton, named_args holds the positional arguments, kwargs the others.
    n = named_args["n"] if "n" in named_args else kwargs["n"]
    return [c for c in configs if c.kwargs["BLOCK"] <= n]


@tunefarm.triton.autotune(
    configs=[Config({"BLOCK": 4}, num_warps=4), Config({"BLOCK": 8}, num_warps=4),
             Config({"BLOCK": 64}, num_warps=8), Config({"BLOCK": 5}, num_warps=2)],
    key=["n"],
    prune_configs_by={"early_config_prune": prune_wide},
    reset_to_zero=["y"],
    store=os.environ.get("AUTOTUNE_TEST_STORE"),
    farm={"backend": "sim", "sim_models": ["h100"]},
)
@jit
def scale(x, y, n, BLOCK):
    pid = program_id(0)
    for i in range(pid * BLOCK, min(n, (pid + 1) * BLOCK)):
        y[i] += 2 * x[i] + (BLOCK % 2)
