"""C = A @ B in Triton (tl.dot), as a kernel module for tunefarm.harness.

A is M x K, B is K x N, C is M x N, row-major, f16 or bf16 with f32
accumulation; tiles are grouped along M (GROUP_M) for L2 reuse. The config
names the tile (BM, BN, BK), the group, the warps and the pipeline stages.
"""
import torch
import triton
import triton.language as tl

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_am = (pid_m * BM + tl.arange(0, BM)) % M
    offs_bn = (pid_n * BN + tl.arange(0, BN)) % N
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BM + tl.arange(0, BM)
    offs_cn = pid_n * BN + tl.arange(0, BN)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def _meta(config):
    return dict(BM=config["BM"], BN=config["BN"], BK=config["BK"], GROUP_M=config["GROUP_M"],
                num_warps=config["WARPS"], num_stages=config["STAGES"])


def _grid(config, m, n):
    return (triton.cdiv(m, config["BM"]) * triton.cdiv(n, config["BN"]),)


def make_inputs(dims, dtype, seed):
    m, n, k = dims["M"], dims["N"], dims["K"]
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = (torch.rand((m, k), generator=g, device="cuda") * 2 - 1).to(DTYPES[dtype])
    b = (torch.rand((k, n), generator=g, device="cuda") * 2 - 1).to(DTYPES[dtype])
    c = torch.empty((m, n), device="cuda", dtype=DTYPES[dtype])
    return [a, b, c]


def reference(args, dims, dtype):
    a, b, _ = args
    return torch.matmul(a.float(), b.float())


def baseline(dtype):
    """The op's [baseline]: torch.matmul (cuBLAS) on the same tensors."""
    def run(a, b, c):
        torch.matmul(a, b, out=c)
    return run


def make_kernel(config, dtype):
    meta = _meta(config)

    def run(a, b, c):
        m, k = a.shape
        n = b.shape[1]
        matmul_kernel[_grid(config, m, n)](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                           c.stride(0), c.stride(1), **meta)
    return run


def warm(config, dtype, dims):
    """Compiles the config for these dims without launching it (Triton's
    warmup: the dtypes stand for the tensors; the ints give the same
    specialisations as the real call), into Triton's on-disk cache."""
    m, n, k = dims["M"], dims["N"], dims["K"]
    t = DTYPES[dtype]
    matmul_kernel.warmup(t, t, t, m, n, k, k, 1, n, 1, n, 1, grid=_grid(config, m, n), **_meta(config))
