"""One process's launch figures (bound launch, floor, torch.add), for a scan
of the CPU the process is pinned to (taskset -c N python3 pin_scan.py ...).

    python3 pin_scan.py BUNDLE.tfb KEY.pub
"""
import os
import statistics
import sys
import timeit

import torch

import tunefarm


def main():
    bundle = tunefarm.Bundle.load(sys.argv[1], [sys.argv[2]])
    kernel = bundle.kernel("gemm", "f16")
    m, n, k = 64, 64, 64
    a = torch.randn((m, k), device="cuda", dtype=torch.float16)
    b = torch.randn((n, k), device="cuda", dtype=torch.float16)
    c = torch.empty((m, n), device="cuda", dtype=torch.float16)
    bound = kernel.bind({"M": m, "N": n, "K": k})
    bound(a, b, c)
    x = torch.ones(1, device="cuda")
    block = tunefarm._LaunchArgs.from_buffer_copy(bound._args)
    block.stream = None
    g = {"bound": bound, "a": a, "b": b, "c": c, "torch": torch, "x": x, "floor": tunefarm._c().launch_args_held,
         "ref": tunefarm.ctypes.byref(block), "sync": torch.cuda.synchronize}
    stmts = {"bound": "bound(a, b, c)", "floor": "floor(ref)", "add": "torch.add(x, x)"}
    timers = {k: timeit.Timer(s, setup="sync()", globals=g) for k, s in stmts.items()}
    times = {k: [] for k in stmts}
    for _ in range(25):
        for name, t in timers.items():
            times[name].append(t.timeit(200) / 200 * 1e6)
    torch.cuda.synchronize()
    print("cpus %-6s %s" % (",".join(map(str, sorted(os.sched_getaffinity(0)))),
                            "  ".join("%s %.2f" % (name, statistics.median(v)) for name, v in times.items())))


main()
