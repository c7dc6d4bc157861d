"""The fused softmax of Triton's tutorials (02-fused-softmax), written out
again, with one import changed: `@tunefarm.triton.autotune` where the
tutorial's readers write `@triton.autotune`. The first call with a new
`n_cols` tunes it on this host's GPU with the farm's harness (checked
against the first config's output); later calls and later processes launch
the stored winner.

    PYTHONPATH=<tunefarm>/python python3 examples/python/triton_softmax.py [--rows 4096] [--cols 1024 ...]
        [--store DB] [--compare]

Prints per width the config, the seconds the first call took, the check
against torch.softmax and, with --compare, both winners timed by
triton.testing.do_bench in this process: tunefarm's and `triton.autotune`'s
over the same configs.
"""
import argparse
import os
import time

import torch
import triton
import triton.language as tl

import tunefarm.triton

CONFIGS = [triton.Config({}, num_warps=w, num_stages=s) for w in (2, 4, 8, 16) for s in (1, 2, 3)]


@tunefarm.triton.autotune(configs=CONFIGS, key=["n_cols"], store=os.environ.get("SOFTMAX_STORE"))
@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols, BLOCK_SIZE: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row in tl.range(row_start, n_rows, row_step):
        row_ptr = in_ptr + row * in_row_stride
        offsets = tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_cols
        x = tl.load(row_ptr + offsets, mask=mask, other=-float("inf"))
        x = x - tl.max(x, axis=0)
        num = tl.exp(x)
        y = num / tl.sum(num, axis=0)
        tl.store(out_ptr + row * out_row_stride + offsets, y, mask=mask)


def softmax(x, kernel=softmax_kernel):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    kernel[(min(n_rows, 4 * sms),)](y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE=block)
    return y


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--cols", type=int, nargs="+", default=[781, 1024, 4096])
    p.add_argument("--store", help="tunefarm store (default: $SOFTMAX_STORE, else ~/.cache/tunefarm/autotune.db)")
    p.add_argument("--compare", action="store_true", help="time tunefarm's winner beside triton.autotune's")
    args = p.parse_args()
    if args.store:
        softmax_kernel._tuned.store = args.store
    by_triton = triton.autotune(configs=CONFIGS, key=["n_cols"])(softmax_kernel.fn)
    for cols in args.cols:
        x = torch.randn(args.rows, cols, device="cuda")
        t0 = time.perf_counter()
        y = softmax(x)
        torch.cuda.synchronize()
        took = time.perf_counter() - t0
        ok = torch.allclose(y, torch.softmax(x, dim=1), atol=1e-5)
        line = "n_cols=%d: %s in %.2f s, %s" % (cols, softmax_kernel.best_config, took, "right" if ok else "WRONG")
        if args.compare:
            softmax(x, by_triton)  # triton.autotune tunes on its first call
            farm_ms, triton_ms = tunefarm.triton.do_bench_pair(lambda: softmax(x), lambda: softmax(x, by_triton))
            line += "; do_bench: tunefarm %.4f ms, triton.autotune %.4f ms (%s)" % (
                farm_ms, triton_ms, by_triton.best_config)
        print(line, flush=True)


if __name__ == "__main__":
    main()
