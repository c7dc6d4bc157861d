"""@triton.autotune on the configs the farm measured, and the two winners compared.

Used by bench/triton_autotune.sh (bench/triton_autotune.md has the figures):

  python3 bench/triton_autotune.py autotune --results farm.json --shape 4096,4096,4096 --dtype f16
      Times, from a cold Triton cache (TRITON_CACHE_DIR), @triton.autotune over
      exactly the configs the farm measured (tunefarm results --format json) on
      examples/triton_matmul's kernel; prints one JSON line: the wall time of the
      first call (autotuning included) and the config it chose.

  python3 bench/triton_autotune.py compare --a '{"BM":..}' --b '{"BM":..}' --shape ... --dtype f16
      Times two configs of the kernel against each other, interleaved in rounds
      with the harness's own timing; prints their medians and the ratio.
"""
import argparse
import json
import os
import statistics
import sys
import time

START = time.perf_counter()
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "triton_matmul"))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import torch  # noqa: E402
import triton  # noqa: E402

import matmul  # noqa: E402
from tunefarm.harness import TorchDevice  # noqa: E402

PARAMS = ("BM", "BN", "BK", "GROUP_M", "WARPS", "STAGES")


def shape_of(text):
    m, n, k = (int(v) for v in text.split(","))
    return {"M": m, "N": n, "K": k}


def farm_configs(path):
    rows = json.load(open(path))
    rows = rows.get("results", rows) if isinstance(rows, dict) else rows
    seen, out = set(), []
    for r in rows:
        cfg = r["config"] if isinstance(r["config"], dict) else dict(
            kv.split("=") for kv in r["config"].split(","))
        cfg = {k: int(v) for k, v in cfg.items()}
        key = tuple(cfg[p] for p in PARAMS)
        if key not in seen:
            seen.add(key)
            out.append(cfg)
    return out


def autotune(args):
    dims = shape_of(args.shape)
    configs = farm_configs(args.results)
    tconfigs = [triton.Config({"BM": c["BM"], "BN": c["BN"], "BK": c["BK"], "GROUP_M": c["GROUP_M"]},
                              num_warps=c["WARPS"], num_stages=c["STAGES"]) for c in configs]
    tuned = triton.autotune(configs=tconfigs, key=["M", "N", "K"])(matmul.matmul_kernel)
    a, b, c = matmul.make_inputs(dims, args.dtype, 1)
    m, n, k = dims["M"], dims["N"], dims["K"]
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    tuned[lambda meta: (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)](
        a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    torch.cuda.synchronize()
    first_call = time.perf_counter() - t0
    best = tuned.best_config
    chosen = dict(best.kwargs)
    chosen.update(WARPS=best.num_warps, STAGES=best.num_stages)
    print(json.dumps({"configs": len(configs), "first_call_s": round(first_call, 3),
                      "process_s": round(time.perf_counter() - START, 3), "chosen": chosen,
                      "triton": triton.__version__}))


def compare(args):
    """The two winners timed in one process, interleaved, the order swapped
    every round (the GPU's clock drifts as it heats). One config chosen by
    both is one kernel: its ratio is 1 by identity, not by timing."""
    dims = shape_of(args.shape)
    device = TorchDevice(torch)
    inputs = matmul.make_inputs(dims, args.dtype, 1)
    configs = {"a": json.loads(args.a), "b": json.loads(args.b)}
    same = configs["a"] == configs["b"]
    fns = {name: matmul.make_kernel(configs["a" if same else name], args.dtype) for name in ("a", "b")}
    timing = {"warmup": 5, "min_samples": 20, "max_samples": 200, "target_rel_ci": 0.002, "max_seconds": 0.3}
    medians = {"a": [], "b": []}
    for r in range(args.rounds):
        for name in (("a", "b") if r % 2 == 0 else ("b", "a")):
            medians[name].append(statistics.median(device.time(fns[name], inputs, timing)))
    a, b = statistics.median(medians["a"]), statistics.median(medians["b"])
    print(json.dumps({"a_us": round(a, 3), "b_us": round(b, 3), "b_over_a": 1.0 if same else round(b / a, 4),
                      "same_config": same, "rounds": args.rounds}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    at = sub.add_parser("autotune")
    at.add_argument("--results", required=True)
    cp = sub.add_parser("compare")
    cp.add_argument("--a", required=True)
    cp.add_argument("--b", required=True)
    cp.add_argument("--rounds", type=int, default=7)
    for s in (at, cp):
        s.add_argument("--shape", default="4096,4096,4096")
        s.add_argument("--dtype", default="f16")
    args = p.parse_args()
    autotune(args) if args.cmd == "autotune" else compare(args)


if __name__ == "__main__":
    main()
