"""tunefarm.autotune on a Triton matmul: the first call with a new shape tunes
it on this host's GPU with the farm's harness; later calls, and later
processes, launch the stored winner.

    PYTHONPATH=<tunefarm>/python python3 examples/python/autotune_triton.py [--store DB] [--shape M,N,K ...]

Prints, per shape, where the config came from ("tuned": measured by the
farm, now or by an earlier process), the config, the seconds the first call
took, and the output's check against torch.matmul.
"""
import argparse
import json
import os
import time

import torch
import triton
import triton.language as tl

import tunefarm

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_m, num_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % group) % size_m)
    pid_n = (pid % group) // size_m
    rm = (pid_m * BM + tl.arange(0, BM)) % M
    rn = (pid_n * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    a = a_ptr + rm[:, None] * sam + rk[None, :] * sak
    b = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        acc = tl.dot(tl.load(a, mask=rk[None, :] < K - k * BK, other=0.0),
                     tl.load(b, mask=rk[:, None] < K - k * BK, other=0.0), acc)
        a += BK * sak
        b += BK * sbk
    cm = pid_m * BM + tl.arange(0, BM)
    cn = pid_n * BN + tl.arange(0, BN)
    tl.store(c_ptr + scm * cm[:, None] + scn * cn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(cm[:, None] < M) & (cn[None, :] < N))


def make_inputs(dims, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    m, n, k = dims["M"], dims["N"], dims["K"]
    a = (torch.rand((m, k), generator=g, device="cuda") * 2 - 1).to(DTYPES[dtype])
    b = (torch.rand((k, n), generator=g, device="cuda") * 2 - 1).to(DTYPES[dtype])
    return [a, b, torch.empty((m, n), device="cuda", dtype=DTYPES[dtype])]


def reference(args, dims, dtype):
    return torch.matmul(args[0].float(), args[1].float())


@tunefarm.autotune(
    space={"BM": [32, 64, 128], "BN": [64, 128, 256], "BK": [32, 64], "GROUP_M": [1, 8], "WARPS": [4, 8],
           "STAGES": [3, 4]},
    rules=["(BM*BK + BK*BN) * STAGES * dsize <= smem_optin", "BM*BN <= 128*256"],
    key=lambda a, b, c: {"M": a.shape[0], "N": b.shape[1], "K": a.shape[1]},
    dtype=lambda a, b, c: "f16" if a.dtype == torch.float16 else "bf16",
    dtypes=["f16", "bf16"],
    inputs=make_inputs, reference=reference,
    strategy="auto", budget=int(os.environ.get("AUTOTUNE_BUDGET", "100")),
    store=os.environ.get("TUNEFARM_AUTOTUNE_STORE"))
def matmul(config, a, b, c):
    m, k = a.shape
    n = b.shape[1]
    grid = (triton.cdiv(m, config["BM"]) * triton.cdiv(n, config["BN"]),)
    _matmul[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                  BM=config["BM"], BN=config["BN"], BK=config["BK"], GROUP_M=config["GROUP_M"],
                  num_warps=config["WARPS"], num_stages=config["STAGES"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", action="append", help="M,N,K (repeatable; default 512,4096,4096)")
    ap.add_argument("--json", help="write the per-shape results here")
    args = ap.parse_args()
    out = []
    for text in args.shape or ["512,4096,4096"]:
        m, n, k = (int(x) for x in text.split(","))
        a = torch.randn((m, k), device="cuda", dtype=torch.float16)
        b = torch.randn((k, n), device="cuda", dtype=torch.float16)
        c = torch.empty((m, n), device="cuda", dtype=torch.float16)
        t0 = time.perf_counter()
        matmul(a, b, c)
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        level, config = matmul.answers[("f16", ("K", k), ("M", m), ("N", n))]
        ok = torch.allclose(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-1)
        print("%dx%dx%d: %s %s, first call %.1f s, %s" % (m, n, k, level, config, first,
                                                           "matches torch.matmul" if ok else "WRONG"))
        out.append({"shape": [m, n, k], "level": level, "config": config, "first_call_s": first, "correct": ok})
    matmul.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
