"""Launch the gemm kernel tunefarm measured, from a signed bundle, on torch tensors.

    PYTHONPATH=<tunefarm>/python python3 examples/python/gemm_torch.py BUNDLE.tfb FARM.pub \
        [--op gemm_sm90] [--shape M,N,K ...] [--runs 50] [--json results.json]

For each shape: C = A @ B.T through the bundle's kernel (tunefarm picks the
config and the cubin for this GPU), checked against torch.nn.functional.linear
in float32 with the op's tolerances (rtol = atol = 1e-2, every element), then
timed with CUDA events, the L2 cache flushed by a read before each run as the farm times,
and set beside the bundle's own median for that shape.
"""
import argparse
import json
import statistics
import sys

import torch

import tunefarm

DEFAULT_SHAPES = ["4096,4096,4096", "2048,2048,2048", "1024,1024,1024", "128,4096,4096", "64,8192,2048",
                  "1024,16384,1024", "3000,5000,1000"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle")
    ap.add_argument("key", help="the public key the bundle must be signed with")
    ap.add_argument("--op", default="gemm_sm90")
    ap.add_argument("--shape", action="append", help="M,N,K (repeatable)")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()

    bundle = tunefarm.Bundle.load(args.bundle, [args.key])
    gemm = bundle.kernel(args.op, "f16")
    device = gemm.device
    print("device %s (%s, %s)" % (device["name"], device["model"], device["arch"]))
    # Read (not written) before each run: a write would leave dirty lines in L2
    # that the kernel then pays to write back, as the farm's own flush avoids.
    flush = torch.ones(64 << 20, dtype=torch.int32, device="cuda")
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    rows, ok = [], True
    print("%-18s %-14s %-44s %10s %10s %8s %10s" % ("shape", "level", "config", "median_us", "bundle_us", "diff",
                                                    "max_err"))
    for text in args.shape or DEFAULT_SHAPES:
        m, n, k = (int(x) for x in text.split(","))
        a = torch.rand(m, k, dtype=torch.float16, device="cuda") * 2 - 1
        b = torch.rand(n, k, dtype=torch.float16, device="cuda") * 2 - 1
        c = torch.empty(m, n, dtype=torch.float16, device="cuda")
        gemm.launch({"M": m, "N": n, "K": k}, a, b, c)
        ref = torch.nn.functional.linear(a.float(), b.float())
        err = (c.float() - ref).abs()
        passed = bool((err <= 1e-2 + 1e-2 * ref.abs()).all())
        ok &= passed
        times = []
        for _ in range(args.runs):
            flush.max()
            start.record()
            gemm.launch({"M": m, "N": n, "K": k}, a, b, c)
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1e3)
        median = statistics.median(times)
        last = gemm.last
        tuned = last.entry["median_us"] if last.level == "exact" and last.entry else None
        diff = "%+.1f%%" % (100 * (median / tuned - 1)) if tuned else "-"
        config = ",".join("%s=%d" % kv for kv in last.config.items())
        print("%-18s %-14s %-44s %10.2f %10s %8s %10.2e%s" % (text, last.level, config, median,
                                                             "%.2f" % tuned if tuned else "-", diff,
                                                             float(err.max()), "" if passed else "  FAIL"))
        rows.append({"shape": {"M": m, "N": n, "K": k}, "level": last.level, "config": last.config, "arch": last.arch,
                     "median_us": median, "bundle_median_us": tuned, "max_abs_error": float(err.max()),
                     "passed": passed})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "op": args.op, "runs": args.runs, "rows": rows}, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
