"""Where a bound launch's host time goes: the generated call's parts, each
timed alone on the GPU host with torch tensors (median of 30 rounds of 2000
calls, ns per call). Usage: python3 launch_parts.py BUNDLE.tfb KEY.pub"""
import ctypes, struct, sys, time, statistics
import torch
import tunefarm

def per_call_ns(fn, n=2000, rounds=30):
    out = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t = time.perf_counter_ns()
        for _ in range(n):
            fn()
        out.append((time.perf_counter_ns() - t) / n)
    return statistics.median(out)

bundle = tunefarm.Bundle.load(sys.argv[1], [sys.argv[2]])
kernel = bundle.kernel("gemm", "f16")
m, n, k = 128, 4096, 4096
a = torch.randn((m, k), device="cuda", dtype=torch.float16)
b = torch.randn((n, k), device="cuda", dtype=torch.float16)
c = torch.empty((m, n), device="cuda", dtype=torch.float16)
bound = kernel.bind({"M": m, "N": n, "K": k})
raw = torch._C._cuda_getCurrentRawStream
args = bound._args
ref = bound._args_ref
block = memoryview(args).cast("B")
pack = struct.Struct("=4Q").pack_into
off = tunefarm._LaunchArgs.stream.offset
launch = tunefarm._c()["tunefarm_kernel_launch_fast"]
launch.restype = ctypes.c_int
pa, pb, pc, st = a.data_ptr(), b.data_ptr(), c.data_ptr(), raw(0)
parts = {
    "checks (get_device, is_contiguous x3)": lambda: not (a.get_device() != 0 or not a.is_contiguous() or b.get_device() != 0 or not b.is_contiguous() or c.get_device() != 0 or not c.is_contiguous()),
    "data_ptr x3": lambda: (a.data_ptr(), b.data_ptr(), c.data_ptr()),
    "raw_stream": lambda: raw(0),
    "pack into the block": lambda: pack(block, off, st, pa, pb, pc),
    "pack with the values": lambda: pack(block, off, raw(0), a.data_ptr(), b.data_ptr(), c.data_ptr()),
    "setitem x3 on the block's buffers": lambda: args.buffers.__setitem__(slice(0, 3), (pa, pb, pc)),
    "launch(ref) (C and driver)": lambda: launch(ref),
    "bound.call": lambda: bound.call(a, b, c),
    "bound()": lambda: bound(a, b, c),
    "torch.add": lambda: torch.add(a[:1, :1], a[:1, :1]),
}
for name, fn in parts.items():
    print("%-40s %8.0f ns" % (name, per_call_ns(fn)))
