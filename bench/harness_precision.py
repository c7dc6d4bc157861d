"""Precision of tunefarm.harness on small Triton kernels, with and without its
stream hold (the GPU held by a spin kernel while Python enqueues a batch).

    PYTHONPATH=<tunefarm>/python python3 bench/harness_precision.py \
        [--module examples/triton_matmul/matmul.py] [--shape 128,4096,4096] [--configs 40] [--json out.json]

Each config (an even sample of the module's op space, compile failures
skipped) is timed as the harness times a contender: the farm's sampling rule
with its 1% target (95% CI half-width over the mean), at most 100 samples or
0.1 s of kernel time, the L2 flushed before each sample. Both modes time
every config, interleaved. Printed: per mode, the median and p90 of the
relative CI, the share of configs that reached the 1% target, and the
median samples.
"""
import argparse
import itertools
import json
import os
import random
import statistics
import sys

import torch

from tunefarm import harness


def configs_of(module_path, count, seed):
    # The op's axes, read from the op.toml beside the module (tomllib: Python >= 3.11).
    import tomllib
    with open(os.path.join(os.path.dirname(module_path), "op.toml"), "rb") as f:
        spec = tomllib.load(f)
    axes = spec["params"]
    every = [dict(zip(axes, values)) for values in itertools.product(*axes.values())]
    legal = [c for c in every if c.get("BM", 1) * c.get("BN", 1) <= 128 * 256 and
             (c.get("BM", 0) * c.get("BK", 0) + c.get("BK", 0) * c.get("BN", 0)) * c.get("STAGES", 1) * 2 <= 227 * 1024]
    random.Random(seed).shuffle(legal)
    return legal[:count]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--module", default="examples/triton_matmul/matmul.py")
    ap.add_argument("--shape", default="128,4096,4096")
    ap.add_argument("--configs", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()
    m, n, k = (int(x) for x in args.shape.split(","))
    dims = {"M": m, "N": n, "K": k}
    module = harness.load_module(args.module)
    device = harness.TorchDevice(torch)
    held_from = device.hold_cycles
    if not held_from:
        sys.exit("this torch has no torch.cuda._sleep: no hold to compare")
    inputs = module.make_inputs(dims, "f16", 0)
    rows = []
    for config in configs_of(args.module, args.configs, args.seed):
        try:
            fn = module.make_kernel(config, "f16")
            fn(*inputs)
            torch.cuda.synchronize()
        except Exception as e:  # a config that does not compile or launch: not a timing
            print("skip %s: %s" % (config, str(e).splitlines()[0][:80]), file=sys.stderr)
            continue
        row = {"config": config}
        for mode in ("held", "unheld"):
            device.hold_cycles = held_from if mode == "held" else 0
            samples = device.time(fn, inputs, {})
            if mode == "held":
                held_from = device.hold_cycles  # the hold as the last batches sized it
            median, mean, ci = harness.summarize(samples)
            row[mode] = {"median_us": median, "rel_ci": ci / mean, "samples": len(samples)}
        rows.append(row)
        print("%-70s held %7.2f us ci %5.2f%% (%3d)   unheld %7.2f us ci %5.2f%% (%3d)" % (
            ",".join("%s=%s" % kv for kv in config.items()), row["held"]["median_us"], 100 * row["held"]["rel_ci"],
            row["held"]["samples"], row["unheld"]["median_us"], 100 * row["unheld"]["rel_ci"],
            row["unheld"]["samples"]))
    summary = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "shape": dims,
               "configs": len(rows), "hold_retries": device.hold_retries, "unheld_batches": device.unheld_batches}
    for mode in ("held", "unheld"):
        cis = sorted(r[mode]["rel_ci"] for r in rows)
        summary[mode] = {
            "median_rel_ci": statistics.median(cis),
            "p90_rel_ci": cis[int(0.9 * (len(cis) - 1))],
            "share_at_1pct": sum(c <= 0.01 for c in cis) / len(cis),
            "median_samples": statistics.median(r[mode]["samples"] for r in rows),
            "median_kernel_us": statistics.median(r[mode]["median_us"] for r in rows),
        }
    print(json.dumps(summary, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
