#!/usr/bin/env python3
"""What a program box's kernel features do to CUDA, torch and Triton on a GPU
host (bench/confinement_h100.md, "Sockets and namespaces"): run as

    ALLOW=1 python3 bench/box_probe.py seccomp+shm+run

MODE names what the process puts on itself before importing torch:
`seccomp` (the box's socket filter; ALLOW: the address families it lets
through, comma-separated numbers, AF_UNIX = 1), `shm` (a user and mount
namespace with a fresh /dev/shm, as confine::PrivateShmRaw), `run` (with
shm: an empty /run too). It then runs a torch matmul, a Triton kernel, a
POSIX semaphore and a forked process pool, printing each outcome. x86-64
only (the filter's numbers are that ABI's).
"""
import ctypes, os, struct, sys, traceback
libc = ctypes.CDLL(None, use_errno=True)
mode = sys.argv[1]
def seccomp():
    PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
    ARCH = 0xC000003E
    def stmt(code, k): return struct.pack("HBBI", code, 0, 0, k)
    def jump(code, k, jt, jf): return struct.pack("HBBI", code, jt, jf, k)
    LD, JEQ, JSET, RET = 0x20, 0x15, 0x45, 0x06
    ERR = 0x00050000 | 13
    allow = [int(x) for x in os.environ.get("ALLOW", "").split(",") if x]
    fam = [stmt(LD, 16)]
    for i, a in enumerate(allow):
        fam.append(jump(JEQ, a, len(allow) - i, 0))  # to ALLOW
    fam += [stmt(RET, ERR), stmt(RET, 0x7fff0000)]
    prog = b"".join([stmt(LD, 4), jump(JEQ, ARCH, 1, 0), stmt(RET, 0x80000000), stmt(LD, 0),
                     jump(JSET, 0x40000000, 0, 1), stmt(RET, 0x80000000), jump(JEQ, 41, 3, 0), jump(JEQ, 425, 1, 0),
                     stmt(RET, 0x7fff0000), stmt(RET, ERR)] + fam)
    buf = ctypes.create_string_buffer(prog)
    class F(ctypes.Structure): _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    f = F(len(prog) // 8, ctypes.addressof(buf))
    assert libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
    assert libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(f), 0, 0) == 0, ctypes.get_errno()
def shm():
    uid, gid = os.geteuid(), os.getegid()
    os.unshare(os.CLONE_NEWUSER | os.CLONE_NEWNS)
    open("/proc/self/uid_map", "w").write(f"{uid} {uid} 1")
    open("/proc/self/setgroups", "w").write("deny")
    open("/proc/self/gid_map", "w").write(f"{gid} {gid} 1")
    assert libc.mount(None, b"/", None, 0x4000 | 0x40000, None) == 0, ctypes.get_errno()
    assert libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", 2 | 4, b"mode=1777") == 0, ctypes.get_errno()
    if "run" in mode:
        assert libc.mount(b"tmpfs", b"/run", b"tmpfs", 2 | 4 | 8 | 1, b"size=4k,mode=755") == 0, ctypes.get_errno()
if "seccomp" in mode: seccomp()
if "shm" in mode: shm()
try:
    import torch
    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    print(mode, "torch matmul ok", float((a @ a).float().sum()) != 0)
    import triton, triton.language as tl
    @triton.jit
    def k(x, n: tl.constexpr):
        i = tl.arange(0, n); tl.store(x + i, tl.load(x + i) * 2)
    x = torch.ones(64, device="cuda"); k[(1,)](x, 64); torch.cuda.synchronize()
    print(mode, "triton ok", float(x.sum()))
    import multiprocessing; multiprocessing.Semaphore().release(); print(mode, "semaphore ok")
except Exception:
    print(mode, "FAILED"); traceback.print_exc()
try:
    import concurrent.futures, multiprocessing
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as p:
        print(mode, "pool ok", sum(p.map(abs, [-1, -2])))
except Exception:
    print(mode, "POOL FAILED"); traceback.print_exc()
