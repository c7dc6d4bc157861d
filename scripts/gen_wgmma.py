#!/usr/bin/env python3
"""Writes the wgmma helpers of the sm_90a GEMM ops: fence, commit, wait, the
swizzled shared-memory descriptor, and the mma_async wrappers (one per N).

The instruction names every accumulator register, so each N needs its own
asm statement; each op package carries its copy (a package is
self-contained) and this script is their one home. Usage:
    scripts/gen_wgmma.py 32 64 96 128 160 192 224 256 > ops/gemm_hopper/wgmma.cuh
    scripts/gen_wgmma.py 64 128 192 256 > ops/gemm_sm90/wgmma.cuh
"""
import sys


PRELUDE = r"""
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator reads or writes across the
// asynchronous wgmma that owns them.
template <int N>
__device__ __forceinline__ void fence_regs(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// Shared-memory matrix descriptor of a K-major tile with 128-byte rows and
// the 128-byte swizzle: 8-row atoms 1024 bytes apart (stride byte offset);
// the leading byte offset is unused for this layout and set to 1 by
// convention.
__device__ __forceinline__ unsigned long long make_desc(unsigned addr) {
  unsigned long long d = (unsigned long long)((addr & 0x3FFFF) >> 4);
  d |= (unsigned long long)1 << 16;
  d |= (unsigned long long)(1024 >> 4) << 32;
  d |= (unsigned long long)1 << 62;
  return d;
}"""


def wrapper(n):
    regs = n // 2
    lines = [f"__device__ __forceinline__ void wgmma(float (&d)[{regs}], unsigned long long desc_a,",
             "                                      unsigned long long desc_b) {",
             "  asm volatile(",
             '      "{\\n"',
             '      ".reg .pred p;\\n"',
             f'      "setp.ne.b32 p, %{regs + 2}, 0;\\n"',
             f'      "wgmma.mma_async.sync.aligned.m64n{n}k16.f32." WGMMA_AB "." WGMMA_AB "\\n"',
             '      "{"']
    for i in range(0, regs, 16):
        chunk = ", ".join(f"%{j}" for j in range(i, min(i + 16, regs)))
        sep = "," if i + 16 < regs else ""
        lines.append(f'      "{chunk}{sep}"')
    lines.append(f'      "}}, %{regs}, %{regs + 1}, p, 1, 1, 0, 0;\\n"')
    lines.append('      "}\\n"')
    outs = [f'"+f"(d[{j}])' for j in range(regs)]
    lines.append("      : " + ", ".join(outs[:8]) + ("," if regs > 8 else ""))
    for i in range(8, regs, 8):
        lines.append("        " + ", ".join(outs[i:i + 8]) + ("," if i + 8 < regs else ""))
    lines.append('      : "l"(desc_a), "l"(desc_b), "r"(1));')
    lines.append("}")
    return "\n".join(lines)


def main():
    ns = [int(a) for a in sys.argv[1:]]
    if not ns or any(n % 8 or not 8 <= n <= 256 for n in ns):
        sys.exit("usage: gen_wgmma.py N... (multiples of 8 from 8 to 256)")
    print("// wgmma for sm_90a: fence/commit/wait, the shared-memory descriptor, and")
    print("// mma_async wrappers: D[64 x N] += A[64 x 16] * B[N x 16]^T, both")
    print("// operands K-major in 128-byte-swizzled shared memory (matrix descriptors),")
    print("// fp32 accumulators in registers, f16 or bf16 inputs (WGMMA_AB is \"f16\" or")
    print("// \"bf16\"). Overloaded on the accumulator array's length (N/2). sm_90a only.")
    print("// Written by scripts/gen_wgmma.py " + " ".join(map(str, ns)) + "; edit that, not this.")
    print("#pragma once")
    print(PRELUDE)
    for n in ns:
        print()
        print(wrapper(n))


if __name__ == "__main__":
    main()
