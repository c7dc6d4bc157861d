"""Would a launch bound to its buffers cost less replayed as a graph of
one kernel? Times, in timeit's loop as bench/python_launch.py does: the
buffer-bound step(), the ctypes floor of a kernel launch, torch's
CUDAGraph.replay() of the same launch, and cuGraphLaunch of that graph
called through ctypes (the floor of a graph launch from Python).

    python3 graph_floor.py BUNDLE.tfb KEY.pub
"""
import ctypes
import statistics
import sys
import timeit

import torch

import tunefarm

bundle = tunefarm.Bundle.load(sys.argv[1], [sys.argv[2]])
kernel = bundle.kernel("gemm", "f16")
m, n, k = 64, 64, 64
a = torch.randn((m, k), device="cuda", dtype=torch.float16)
b = torch.randn((n, k), device="cuda", dtype=torch.float16)
c = torch.empty((m, n), device="cuda", dtype=torch.float16)
dims = {"M": m, "N": n, "K": k}
step = kernel.bind(dims, buffers=(a, b, c))
step()
torch.cuda.synchronize()
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    step()
torch.cuda.current_stream().wait_stream(side)
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    step()
g.replay()
torch.cuda.synchronize()
print("graph correct:", bool(torch.allclose(c.float(), (a @ b.T).float(), rtol=1e-2, atol=1e-2)))
cuda = ctypes.CDLL("libcuda.so.1")
graph_launch = cuda.cuGraphLaunch
graph_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
graph_launch.restype = ctypes.c_int
held = ctypes.PyDLL("libcuda.so.1").cuGraphLaunch
exec_handle = g.raw_cuda_graph_exec() if hasattr(g, "raw_cuda_graph_exec") else None
print("raw exec:", exec_handle)
stream = torch.cuda.current_stream().cuda_stream
c_launch = tunefarm._c().launch_args_held
dims_arr = (ctypes.c_int64 * 3)(m, n, k)
block = tunefarm._LaunchArgs(kernel._h, ctypes.addressof(dims_arr), stream)
block.buffers[:3] = [a.data_ptr(), b.data_ptr(), c.data_ptr()]
names = dict(step=step, g=g, c_launch=c_launch, block_ref=ctypes.byref(block), graph_launch=graph_launch,
             held=held, ex=ctypes.c_void_p(exec_handle or 0), st=ctypes.c_void_p(stream),
             torch=torch, sync=torch.cuda.synchronize, one=torch.ones(1, device="cuda"))
stmts = {"step()": "step()", "kernel floor": "c_launch(block_ref)", "torch replay": "g.replay()",
         "torch.add": "torch.add(one, one)"}
if exec_handle:
    stmts["cuGraphLaunch floor"] = "graph_launch(ex, st)"
    stmts["cuGraphLaunch held"] = "held(ex, st)"
timers = {key: timeit.Timer(s, setup="sync()", globals=names) for key, s in stmts.items()}
times = {key: [] for key in stmts}
for _ in range(30):
    for key, t in timers.items():
        times[key].append(t.timeit(200) / 200 * 1e6)
torch.cuda.synchronize()
for key, v in times.items():
    print("%-22s median %6.2f us  least round %6.2f us" % (key, statistics.median(v), min(v)))
