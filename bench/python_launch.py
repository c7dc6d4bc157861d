"""Host cost of launching a bundle's kernel from Python, beside torch's own
ops, and the kernel inside torch.compile(fullgraph=True) and a CUDA graph.

    PYTHONPATH=<tunefarm>/python python3 bench/python_launch.py BUNDLE.tfb FARM.pub \
        [--op gemm] [--shape M,N,K] [--small-shape M,N,K] [--calls 200] [--rounds 30]
        [--pin none|quietest] [--json out.json]

Host time per call is the enqueue time of `--calls` back-to-back calls,
each written as a user writes it and compiled into timeit's loop (the GPU
is synchronised between rounds, so no call waits for a full launch queue),
median over `--rounds` (and the least round, timeit's figure for the host
alone); the calls take turns a round each, so a slow spell of the host
falls on all alike. Printed for: Kernel.launch (its bound
launch looked up by the dims per call), a bound Launch (Kernel.bind), the
launch bound to its buffers too (Kernel.bind(dims, buffers=(a, b, c)),
called with none), the op registered with torch (tunefarm.register_torch_op, eager),
torch.add on one-element tensors (torch's cheapest op) and
torch.nn.functional.linear on the same shape; the bound launch and linear
again on --small-shape (a kernel shorter than its launch: the GPU keeps up
with the host, as with torch.add); the bound launch (following the current
stream, and bound to that stream), the floor and torch.add again on a
stream torch made (not the legacy default stream). Then the registered op in
torch.compile(fullgraph=True) and a captured CUDA graph, each checked
against torch.nn.functional.linear (C = A @ B.T, rtol = atol = 1e-2), and
the refusals: a tensor on the host, a non-contiguous tensor, a buffer left
out, a capture on a stream the launch was not bound to (nothing launched in
each case). Last, whether the launch replayed the kernel's graph (it does
outside a capture) and whether the captured launch did (it must not: the
capture records the kernel).
"""
import argparse
import json
import os
import statistics
import sys
import timeit

import torch

import tunefarm


def per_call_us(stmts, names, calls, rounds, least=None):
    """{name: host µs per call} of each statement of `stmts` ({name: Python
    source over `names`}), the median over `rounds` of `calls` runs compiled
    into timeit's loop (no Python call stands between the loop and the
    statement). The statements take turns, a round each, so that a slow
    spell of the host falls on all of them alike. The GPU is synchronised,
    untimed, before each round. Where `least` is a dict, the least round of
    each goes there too (timeit's own figure: what the host costs when
    nothing else runs on its CPU; the median has the neighbours in it)."""
    g = dict(names, sync=torch.cuda.synchronize)
    timers = {k: timeit.Timer(stmt, setup="sync()", globals=g) for k, stmt in stmts.items()}
    times = {k: [] for k in stmts}
    for _ in range(rounds):
        for k, t in timers.items():
            times[k].append(t.timeit(calls) / calls * 1e6)
    torch.cuda.synchronize()
    if least is not None:
        least.update({k: min(v) for k, v in times.items()})
    return {k: statistics.median(v) for k, v in times.items()}


def operands(kernel, m, n, k):
    """A (m x k), B (n x k), C (m x n) in f16, and gemm_hopper's workspace W
    (zeros, as the op declares it) where the kernel has one."""
    a = torch.randn((m, k), device="cuda", dtype=torch.float16) / 8
    b = torch.randn((n, k), device="cuda", dtype=torch.float16) / 8
    c = torch.empty((m, n), device="cuda", dtype=torch.float16)
    if len(kernel.buffers) == 3:
        return [a, b, c]
    return [a, b, c, torch.zeros(m * n + ((m + 63) // 64) * ((n + 63) // 64), device="cuda", dtype=torch.float32)]


def close(c, want):
    return bool(torch.allclose(c.float(), want.float(), rtol=1e-2, atol=1e-2))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle")
    ap.add_argument("key")
    ap.add_argument("--op", default="gemm")
    ap.add_argument("--shape", default="128,4096,4096")
    ap.add_argument("--small-shape", default="64,64,64", help="a shape whose kernel is shorter than its launch")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--pin", choices=["none", "quietest"], default="none",
                    help="quietest: first pin the process to the CPU (of those it may use) where the floor costs "
                         "least, as a latency-bound process is pinned to a quiet core; none: leave it where it runs")
    ap.add_argument("--json")
    args = ap.parse_args()
    m, n, k = (int(x) for x in args.shape.split(","))
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "op": args.op, "shape": [m, n, k]}

    bundle = tunefarm.Bundle.load(args.bundle, [args.key])
    kernel = bundle.kernel(args.op, "f16")
    print(kernel, file=sys.stderr)
    a, b, c, *extra = operands(kernel, m, n, k)
    bufs = [a, b, c] + extra
    want = torch.nn.functional.linear(a, b)
    dims = {"M": m, "N": n, "K": k}

    kernel.launch(dims, *bufs)
    torch.cuda.synchronize()
    out["answer"] = {"level": kernel.last.level, "config": kernel.last.config, "replayed": kernel.last.replayed}
    out["launch_correct"] = close(c, want)
    bound = kernel.bind(dims)
    op = tunefarm.register_torch_op(kernel)
    one_x, one_y = torch.ones(1, device="cuda"), torch.ones(1, device="cuda")
    # The floor under any Python launch: one ctypes call into the launcher
    # (the handle a bound launch calls), pointers and stream already in hand.
    c_launch = tunefarm._c().launch_args_held
    dims_arr = (tunefarm.ctypes.c_int64 * 3)(m, n, k)
    block = tunefarm._LaunchArgs(kernel._h, tunefarm.ctypes.addressof(dims_arr),
                                 torch.cuda.current_stream().cuda_stream)
    block.buffers[:len(bufs)] = [t.data_ptr() for t in bufs]
    # The same where the GPU keeps up with the host (a kernel shorter than
    # its launch): on the shape above a kernel outlasts its launch and the
    # queue grows through a round, as it does under torch.nn.functional.linear.
    sm, sn, sk = (int(x) for x in args.small_shape.split(","))
    small = operands(kernel, sm, sn, sk)
    small_bound = kernel.bind({"M": sm, "N": sn, "K": sk})
    small_bound(*small)
    torch.cuda.synchronize()
    out["small_shape"] = [sm, sn, sk]
    out["small_correct"] = close(small[2], torch.nn.functional.linear(small[0], small[1]))
    # Each statement as a user writes it, the buffers by name.
    xs = ", ".join("x%d" % i for i in range(len(bufs)))
    ss = ", ".join("s%d" % i for i in range(len(small)))
    names = dict({"x%d" % i: t for i, t in enumerate(bufs)}, **{"s%d" % i: t for i, t in enumerate(small)},
                 torch=torch, kernel=kernel, dims=dims, bound=bound, small=small_bound, op=op, mnk=[m, n, k],
                 fixed=kernel.bind(dims, buffers=bufs),
                 c_launch=c_launch, block_ref=tunefarm.ctypes.byref(block), one_x=one_x, one_y=one_y)
    if args.pin == "quietest":
        floor = {}
        for cpu in sorted(os.sched_getaffinity(0)):
            os.sched_setaffinity(0, {cpu})
            floor[cpu] = per_call_us({"f": "c_launch(block_ref)"}, names, args.calls, 10)["f"]
        out["pinned_cpu"] = min(floor, key=floor.get)
        out["floor_us_by_cpu"] = floor
        os.sched_setaffinity(0, {out["pinned_cpu"]})
        print("pinned to CPU %d; the floor by CPU: %s" % (
            out["pinned_cpu"], " ".join("%d:%.2f" % kv for kv in floor.items())))
    least = {}
    host = per_call_us({
        "kernel_launch": "kernel.launch(dims, %s)" % xs,
        "bound_launch": "bound(%s)" % xs,
        "bound_launch_call": "bound.call(%s)" % xs,
        "bound_to_its_buffers": "fixed()",
        "torch_op_eager": "op(mnk, %s)" % xs,
        "ctypes_floor": "c_launch(block_ref)",
        "torch_add_1elem": "torch.add(one_x, one_y)",
        "torch_linear": "torch.nn.functional.linear(x0, x1)",
        "bound_launch_small": "small(%s)" % ss,
        "torch_linear_small": "torch.nn.functional.linear(s0, s1)",
    }, names, args.calls, args.rounds, least)
    # The same on a stream of torch's own making: a launch on the legacy
    # default stream (torch's default) may cost the driver more.
    side = torch.cuda.Stream()
    side_block = tunefarm._LaunchArgs(kernel._h, tunefarm.ctypes.addressof(dims_arr), side.cuda_stream)
    side_block.buffers[:len(bufs)] = [t.data_ptr() for t in bufs]
    names["side_ref"] = tunefarm.ctypes.byref(side_block)
    names["bound_to_side"] = kernel.bind(dims, stream=side)  # bound to the stream: no stream query per call
    with torch.cuda.stream(side):
        side_least = {}
        host.update({k + "_side_stream": v for k, v in per_call_us({
            "bound_launch": "bound(%s)" % xs,
            "bound_to_it": "bound_to_side(%s)" % xs,
            "ctypes_floor": "c_launch(side_ref)",
            "torch_add": "torch.add(one_x, one_y)",
        }, names, args.calls, args.rounds, side_least).items()})
        least.update({k + "_side_stream": v for k, v in side_least.items()})
    out["host_us_per_call"] = host
    out["host_us_per_call_least_round"] = least
    for name, t in host.items():
        print("host per call  %-24s %6.2f us  (least round %.2f)" % (name, t, least[name]))

    c.zero_()
    bound(*bufs)
    torch.cuda.synchronize()
    out["bound_correct"] = close(c, want)
    c.zero_()
    names["fixed"]()
    torch.cuda.synchronize()
    out["bound_to_its_buffers_correct"] = close(c, want)

    def f(x, y, z, *w):
        op([m, n, k], x, y, z, *w)
        return z
    compiled = torch.compile(f, fullgraph=True)
    c.zero_()
    got = compiled(a, b, c, *extra)
    torch.cuda.synchronize()
    out["compile_fullgraph_correct"] = close(got, want)
    names["compiled"] = compiled
    out["compiled_host_us_per_call"] = per_call_us({"c": "compiled(%s)" % xs}, names, args.calls, args.rounds)["c"]

    graph = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        bound(*bufs)  # warm on the side stream, as torch's capture recipe asks
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        bound(*bufs)
    out["captured_replayed"] = kernel.last.replayed  # False: the capture records the kernel itself
    c.zero_()
    graph.replay()
    torch.cuda.synchronize()
    out["cuda_graph_correct"] = close(c, want)
    graph_fixed = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph_fixed):
        names["fixed"]()
    c.zero_()
    graph_fixed.replay()
    torch.cuda.synchronize()
    out["cuda_graph_bound_to_its_buffers_correct"] = close(c, want)
    graph_op = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph_op):
        op([m, n, k], *bufs)
    c.zero_()
    graph_op.replay()
    torch.cuda.synchronize()
    out["cuda_graph_torch_op_correct"] = close(c, want)

    refusals = {}
    sentinel = 7.0

    def refused(name, fn):
        c.fill_(sentinel)
        torch.cuda.synchronize()
        try:
            fn()
            refusals[name] = "NOT REFUSED"
        except (tunefarm.TunefarmError, TypeError, RuntimeError) as e:
            torch.cuda.synchronize()
            untouched = bool((c == sentinel).all())
            refusals[name] = "%s: %s%s" % (type(e).__name__, str(e).splitlines()[0],
                                           "" if untouched else " [BUT C CHANGED]")
    refused("host_tensor", lambda: bound(a.cpu(), b, c, *extra))
    refused("non_contiguous", lambda: bound(a, b.t().contiguous().t(), c, *extra))
    refused("a_buffer_missing", lambda: bound(a, b))
    side = torch.cuda.Stream()
    on_side = kernel.bind(dims, stream=side)

    def capture_elsewhere():
        g = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(g):
                on_side(*bufs)
        finally:
            torch.cuda.synchronize()
    refused("capture_on_another_stream", capture_elsewhere)
    out["refusals"] = refusals
    for name, why in refusals.items():
        print("refused  %-26s %s" % (name, why))
    print(json.dumps({k: v for k, v in out.items() if k.endswith("correct")}))
    print("launched by replaying the kernel's graph: %s; into a capture: %s" % (
        out["answer"]["replayed"], out["captured_replayed"]))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
