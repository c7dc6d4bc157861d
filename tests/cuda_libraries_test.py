#!/usr/bin/env python3
"""The farm's binaries start on a host without the CUDA libraries.

libcuda, libnvrtc, cuBLASLt and NVML are opened at run time by the CUDA
backend (measure/cuda/cuda_driver.h, nvrtc_library.h, cublaslt.h, nvml.h),
never linked: a coordinator's or a client's host has none of them, and the
one tunefarm binary must start there. This checks the ELF dependencies of
each binary given, then runs the first with NVRTC made unfindable and checks
that a compile fails with one line naming NVRTC while the rest works.

Usage: cuda_libraries_test.py TUNEFARM_BINARY [SHARED_LIBRARY ...]
"""
import os
import re
import subprocess
import sys
import tempfile

CUDA_LIBRARY = re.compile(r"\b(libcuda|libnvrtc|libcublas|libcublasLt|libnvidia-ml|libcudart)\.so")


def needed(path: str) -> list:
    out = subprocess.run(["readelf", "-d", path], check=True, capture_output=True, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def main(argv) -> int:
    problems = []
    for path in argv[1:]:
        deps = needed(path)
        if not deps:
            problems.append(f"{path}: no NEEDED entries read (not a dynamic ELF file?)")
        for dep in deps:
            if CUDA_LIBRARY.search(dep):
                problems.append(f"{path}: links {dep}; CUDA libraries are opened at run time")
    binary = argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, TUNEFARM_NVRTC=os.path.join(tmp, "no-such-libnvrtc.so"))
        ok = subprocess.run([binary, "--help"], env=env, capture_output=True, text=True)
        if ok.returncode != 0:
            problems.append(f"{binary} --help without NVRTC: exit {ok.returncode}: {ok.stderr.strip()}")
        # A compile without NVRTC: the sim backend's NVRTC compiles, one config.
        ops = os.path.join(os.environ["TUNEFARM_SOURCE_DIR"], "ops")
        run = subprocess.run([binary, "tune", "--ops-dir", ops, "--backend", "sim", "--sim-compile", "nvrtc", "--op", "elementwise",
                              "--dtype", "f32", "--shape", "N=1024", "--strategy", "random", "--budget", "2",
                              "--store", os.path.join(tmp, "store"), "--unsigned", "--bundle", os.path.join(tmp, "b")],
                             env=env, capture_output=True, text=True, timeout=300)
        text = run.stdout + run.stderr
        if "NVRTC (the CUDA toolkit's runtime compiler) is not on this host" not in text:
            problems.append("a compile without NVRTC did not say so; output:\n" + text[-2000:])
    for p in problems:
        print(p)
    print(f"cuda libraries: {len(argv) - 1} binaries, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
