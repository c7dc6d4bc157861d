"""The floor of a Python launch (one ctypes call of
tunefarm_kernel_launch_args, pointers in hand) in a process without torch,
then after torch is imported and has made its CUDA context, then with
torch's allocator and a torch op run: does torch's presence change what the
driver's launch costs?

    python3 torchless.py BUNDLE.tfb KEY.pub [M N K]
"""
import ctypes
import statistics
import sys
import timeit

import tunefarm

cuda = ctypes.CDLL("libcuda.so.1")


def per_call_us(stmt, g, number=200, repeat=60):
    t = timeit.Timer(stmt, setup="sync()", globals=g).repeat(repeat, number)
    return statistics.median(t) / number * 1e6


def main():
    m, n, k = (int(x) for x in (sys.argv[3:6] or (64, 64, 64)))
    bundle = tunefarm.Bundle.load(sys.argv[1], [sys.argv[2]])
    kernel = bundle.kernel("gemm", "f16")
    ptrs = []
    for size in (m * k * 2, n * k * 2, m * n * 2):
        p = ctypes.c_uint64()
        assert cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(size)) == 0
        assert cuda.cuMemsetD8_v2(p, 0, ctypes.c_size_t(size)) == 0
        ptrs.append(p.value)
    dims = (ctypes.c_int64 * 3)(m, n, k)
    block = tunefarm._LaunchArgs(kernel._h, ctypes.addressof(dims), None)
    block.buffers[:3] = ptrs
    kernel.launch(dims[:], *ptrs)  # the answer's lookup, once
    g = {"floor": tunefarm._c().tunefarm_kernel_launch_args, "ref": ctypes.byref(block),
         "noop": tunefarm._c()["tunefarm_free"], "sync": cuda.cuCtxSynchronize}
    rows = []
    for phase in ("no torch", "torch imported", "torch context and allocator", "after torch.add"):
        if phase == "torch imported":
            import torch  # noqa: F401
        elif phase == "torch context and allocator":
            import torch
            x = torch.ones(1, device="cuda")
            torch.cuda.synchronize()
        elif phase == "after torch.add":
            for _ in range(1000):
                torch.add(x, x)
            torch.cuda.synchronize()
        for rep in range(2):
            rows.append((phase, rep, per_call_us("floor(ref)", g), per_call_us("noop(None)", g)))
        assert "torch" not in sys.modules or phase != "no torch"
    for phase, rep, f, b in rows:
        print("%-30s %d  floor %.3f us   a ctypes call of tunefarm_free(NULL) %.3f us" % (phase, rep, f, b))


main()
