"""Row softmax in Triton, in croq-tune's script shape: verify() then bench().

The config comes from tunefarm's environment (TUNEFARM_PARAM_WARPS, _ROWS:
rows per program), the shape from TUNEFARM_DIM_M/_N. Prints croq-tune's
lines, which the farm reads: one VERIFY line, then one TFLOPS line per timed
repetition (each a sample of the farm's figure).
"""
import os

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    for r in range(ROWS):
        row = tl.program_id(0) * ROWS + r
        if row < n_rows:
            x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
            x = x - tl.max(x, axis=0)
            e = tl.exp(x)
            y = e / tl.sum(e, axis=0)
            tl.store(y_ptr + row * n_cols + cols, y.to(y_ptr.dtype.element_ty), mask=cols < n_cols)


WARPS = int(os.environ.get("TUNEFARM_PARAM_WARPS", 4))
ROWS = int(os.environ.get("TUNEFARM_PARAM_ROWS", 1))
M = int(os.environ.get("TUNEFARM_DIM_M", 8192))
N = int(os.environ.get("TUNEFARM_DIM_N", 4096))
SEED = int(os.environ.get("TUNEFARM_SEED", 0))


def kernel_fn(x, y):
    softmax_kernel[(triton.cdiv(M, ROWS),)](x, y, M, N, BLOCK=triton.next_power_of_2(N), ROWS=ROWS,
                                            num_warps=WARPS)


def verify(x, y):
    y.fill_(float("nan"))
    kernel_fn(x, y)
    torch.cuda.synchronize()
    err = (y.float() - torch.softmax(x.float(), dim=1)).abs().max().item()
    print("VERIFY: %s max_abs_err=%g" % ("PASS" if err < 1e-3 else "FAIL", err))
    return err < 1e-3


def bench(x, y, reps=10, iters=20):
    flush = torch.ones(64 << 20, dtype=torch.int32, device="cuda")
    for _ in range(10):
        kernel_fn(x, y)
    for _ in range(reps):
        flush.max()  # the L2 cache cold at each repetition's start
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            kernel_fn(x, y)
        end.record()
        torch.cuda.synchronize()
        ms = start.elapsed_time(end) / iters
        print("TFLOPS: %.2f time_ms: %.6f" % (5.0 * M * N / ms / 1e9, ms))


if __name__ == "__main__":
    torch.manual_seed(SEED)
    x = torch.randn((M, N), device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    if verify(x, y):
        bench(x, y)
