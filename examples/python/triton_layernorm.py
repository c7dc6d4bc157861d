"""The layer norm forward of Triton's tutorials (05-layer-norm), written out
again, tuned with `@tunefarm.triton.autotune` in place of
`@triton.autotune`: the configs are the block width and warps, the key the
row width. Mean and Rstd are outputs beside Y, checked with it against the
first config's output.

    PYTHONPATH=<tunefarm>/python python3 examples/python/triton_layernorm.py [--rows 4096] [--cols 1024 ...]
        [--store DB] [--compare]
"""
import argparse
import os
import time

import torch
import triton
import triton.language as tl

import tunefarm.triton

CONFIGS = [triton.Config({"BLOCK_SIZE": b}, num_warps=w) for b in (512, 1024, 2048, 4096) for w in (2, 4, 8)]


def _prune(configs, named_args, **kwargs):
    # A block wider than the row (rounded up) only adds masked lanes.
    width = triton.next_power_of_2(named_args["N"])
    kept = [c for c in configs if c.kwargs["BLOCK_SIZE"] <= max(width, 512)]
    return kept or configs[:1]


@tunefarm.triton.autotune(configs=CONFIGS, key=["N"], prune_configs_by={"early_config_prune": _prune},
                          store=os.environ.get("LAYERNORM_STORE"))
@triton.jit
def layer_norm_fwd(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(Y + cols, y, mask=mask)


def layer_norm(x, w, b, eps=1e-5, kernel=layer_norm_fwd):
    m, n = x.shape
    y = torch.empty_like(x)
    mean = torch.empty((m,), dtype=torch.float32, device=x.device)
    rstd = torch.empty((m,), dtype=torch.float32, device=x.device)
    kernel[(m,)](x, y, w, b, mean, rstd, x.stride(0), n, eps)
    return y


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--cols", type=int, nargs="+", default=[1024, 4096, 8192])
    p.add_argument("--store", help="tunefarm store (default: $LAYERNORM_STORE, else ~/.cache/tunefarm/autotune.db)")
    p.add_argument("--compare", action="store_true", help="time tunefarm's winner beside triton.autotune's")
    args = p.parse_args()
    if args.store:
        layer_norm_fwd._tuned.store = args.store
    by_triton = triton.autotune(configs=CONFIGS, key=["N"], prune_configs_by={"early_config_prune": _prune})(
        layer_norm_fwd.fn)
    for n in args.cols:
        x = torch.randn(args.rows, n, device="cuda", dtype=torch.float16)
        w = torch.rand(n, device="cuda", dtype=torch.float16)
        b = torch.rand(n, device="cuda", dtype=torch.float16)
        t0 = time.perf_counter()
        y = layer_norm(x, w, b)
        torch.cuda.synchronize()
        took = time.perf_counter() - t0
        want = torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5)
        ok = torch.allclose(y, want, atol=1e-2)
        line = "N=%d: %s in %.2f s, %s" % (n, layer_norm_fwd.best_config, took, "right" if ok else "WRONG")
        if args.compare:
            layer_norm(x, w, b, kernel=by_triton)  # triton.autotune tunes on its first call
            farm_ms, triton_ms = tunefarm.triton.do_bench_pair(lambda: layer_norm(x, w, b), lambda: layer_norm(x, w, b, kernel=by_triton))
            line += "; do_bench: tunefarm %.4f ms, triton.autotune %.4f ms (%s)" % (
                farm_ms, triton_ms, by_triton.best_config)
        print(line, flush=True)


if __name__ == "__main__":
    main()
