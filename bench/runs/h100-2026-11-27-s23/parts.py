"""Where a bound launch's host time goes, part by part, with timeit (no
lambda between the loop and the call), beside the same figures with the
GPU keeping up (a 64^3 GEMM) and falling behind (128x4096x4096), and
torch.add small and large.

    python3 parts.py BUNDLE.tfb KEY.pub
"""
import ctypes
import statistics
import struct
import sys
import timeit

import torch

import tunefarm


def per_call_us(stmt, g, number=200, repeat=40):
    # setup runs untimed before each repeat: the GPU is idle when timing starts
    t = timeit.Timer(stmt, setup="torch.cuda.synchronize()", globals=g).repeat(repeat, number)
    torch.cuda.synchronize()
    return statistics.median(t) / number * 1e6


def cpu_ns(stmt, g, number=20000, repeat=15):
    return min(timeit.Timer(stmt, globals=g).repeat(repeat, number)) / number * 1e9


def variant(kernel, bound, mode, ordinal):
    """A fast call written as the library writes it, with `mode`'s changes."""
    n = len(kernel.buffers)
    names = ["b%d" % i for i in range(n)]
    dev = {"get_device": "%s.get_device() != o", "is_cuda": "not %s.is_cuda", "none": None}[mode[1]]
    checks = []
    for nm in names:
        if dev:
            checks.append(dev % nm)
        if mode[2]:
            checks.append("not %s.is_contiguous()" % nm)
    head = ["def call(*bs):", "    try:", "        %s, = bs" % ", ".join(names)] if mode[0] == "star" else \
           ["def call(%s):" % ", ".join(names), "    try:"]
    body = ["        fast = not (%s)" % (" or ".join(checks) or "False"),
            "    except (AttributeError, ValueError):",
            "        fast = False",
            "    if not fast:",
            "        raise RuntimeError('slow')",
            "    pack(block, 16, raw_stream(o), %s)" % ", ".join("%s.data_ptr()" % x for x in names),
            "    if launch(args) != 0:",
            "        raise RuntimeError('failed')"]
    launch = tunefarm._c()["tunefarm_kernel_launch_args"]
    launch.restype = ctypes.c_int
    scope = {"o": ordinal, "block": memoryview(bound._args).cast("B"),
             "pack": struct.Struct("=%dQ" % (1 + n)).pack_into, "args": bound._args_ref, "launch": launch,
             "raw_stream": torch._C._cuda_getCurrentRawStream}
    exec("\n".join(head + body), scope)
    return scope["call"]


def main():
    bundle = tunefarm.Bundle.load(sys.argv[1], [sys.argv[2]])
    kernel = bundle.kernel("gemm", "f16")
    print(torch.cuda.get_device_name(0), torch.__version__, sys.version.split()[0])
    out = {}
    g = {"torch": torch}
    x1, y1 = torch.ones(1, device="cuda"), torch.ones(1, device="cuda")
    xl, yl, zl = (torch.ones(1 << 24, device="cuda") for _ in range(3))
    g.update(x1=x1, y1=y1, xl=xl, yl=yl, zl=zl)
    a = torch.randn(128, 4096, device="cuda", dtype=torch.float16)
    g.update(a=a, pdev=torch.Tensor.get_device, pcont=torch.Tensor.is_contiguous, pptr=torch.Tensor.data_ptr,
             rs=torch._C._cuda_getCurrentRawStream)
    libc = ctypes.CDLL(None)
    g.update(crand=libc.rand, prand=ctypes.PyDLL(None).rand, cfree=tunefarm._c()["tunefarm_free"])
    try:
        import cffi
        ffi = cffi.FFI()
        ffi.cdef("int rand(void); void tunefarm_free(void*);")
        g.update(frand=ffi.dlopen(None).rand)
        out["cffi"] = cffi.__version__
        out["cpu_ns cffi frand()"] = cpu_ns("frand()", g)
    except Exception as e:  # not installed on this host
        out["cffi"] = repr(e)
    for stmt in ["crand()", "prand()", "cfree(None)", "pass", "a.get_device()", "a.is_cuda", "a.device.index", "a.is_contiguous()", "pcont(a)",
                 "a.data_ptr()", "pptr(a)", "rs(0)", "a.get_device() != 0 or not a.is_contiguous()"]:
        out["cpu_ns " + stmt] = cpu_ns(stmt, g)
    for shape in [(64, 64, 64), (128, 4096, 4096)]:
        m, n, k = shape
        A = torch.randn((m, k), device="cuda", dtype=torch.float16) / 8
        B = torch.randn((n, k), device="cuda", dtype=torch.float16) / 8
        C = torch.empty((m, n), device="cuda", dtype=torch.float16)
        bound = kernel.bind({"M": m, "N": n, "K": k})
        bound(A, B, C)
        torch.cuda.synchronize()
        ok = bool(torch.allclose(C.float(), torch.nn.functional.linear(A, B).float(), rtol=1e-2, atol=1e-2))
        gs = dict(g, L=bound, A=A, B=B, C=C, floor=tunefarm._c().tunefarm_kernel_launch_args, ref=bound._args_ref,
                  lam=lambda: bound(A, B, C))
        tag = "%dx%dx%d" % shape
        out["correct " + tag] = ok
        out["us floor " + tag] = per_call_us("floor(ref)", gs)
        out["us bound " + tag] = per_call_us("L(A, B, C)", gs)
        out["us bound.call " + tag] = per_call_us("L.call(A, B, C)", gs)
        out["us bound via lambda " + tag] = per_call_us("lam()", gs)
        for mode in [("star", "get_device", True), ("fixed", "get_device", True), ("fixed", "is_cuda", True),
                     ("fixed", "none", False)]:
            gs["V"] = variant(kernel, bound, mode, 0)
            out["us variant %s " % "/".join(map(str, mode)) + tag] = per_call_us("V(A, B, C)", gs)
        out["us linear " + tag] = per_call_us("torch.nn.functional.linear(A, B)", gs)
    out["us torch.add 1 elem"] = per_call_us("torch.add(x1, y1)", g)
    out["us torch.add 16M elem out="] = per_call_us("torch.add(xl, yl, out=zl)", g)
    out["us torch.add 1 elem again"] = per_call_us("torch.add(x1, y1)", g)
    for name, v in out.items():
        print("%-55s %s" % (name, ("%.3f" % v) if isinstance(v, float) else v))


main()
