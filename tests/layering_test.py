#!/usr/bin/env python3
"""libtune's stages include only the stages below them.

Each folder of libtune/src/ is a stage of the data flow and a CMake target
that links only the stages below it (libtune/CMakeLists.txt). A public header
tune/X.h belongs to the stage whose folder holds X.cc (or to the one named in
HEADER_STAGE); a private header "<stage>/..." to that stage. Every source and
header of a stage may include headers of the stages in ALLOWED[stage] only,
and the programs keep DESIGN.md's rules: the coordinator never sees the CUDA
backend, the worker never owns the store.

Usage: layering_test.py SOURCE_DIR   (exit 0: clean; 1: violations, listed)
"""
import pathlib
import re
import sys

ALLOWED = {
    "base": {"base"},
    "spec": {"base", "spec"},
    "measure": {"base", "spec", "measure"},
    # Every Cap'n Proto encoding (envelopes, records, the bundle's helpers),
    # with no transport: the disk formats never depend on ZeroMQ.
    "codec": {"base", "spec", "codec"},
    # Envelopes over ZeroMQ, CURVE: only the programs that speak it link it.
    "wire": {"base", "spec", "codec", "wire"},
    "store": {"base", "spec", "codec", "store"},
    "publish": {"base", "spec", "codec", "store", "publish"},
    "report": {"base", "spec", "codec", "store", "publish", "report"},
    # The HTTP status side of the farm's processes (pages, JSON, /metrics):
    # no store, no reports; the HTML rules it shares with reports are base's.
    "serve": {"base", "serve"},
    # What deployments link: the bundle format and its signatures, no more
    # (the build links it without the store's or the wire's libraries).
    "runtime": {"base", "publish", "runtime"},
    # The runtime plus the Driver API, opened at run time.
    "launcher": {"base", "publish", "runtime", "launcher"},
    # The C API over the runtime and the launcher (libtunefarm_c.so).
    "capi": {"base", "runtime", "launcher", "capi"},
}
# Public headers with no source file of their name.
HEADER_STAGE = {"status.h": "base", "json_text.h": "base", "backend.h": "measure", "c.h": "capi",
                "limits.h": "base"}
# Includes (by prefix) a program folder may not have (DESIGN.md, "Dependency rule").
FORBIDDEN = {
    "coordinator": {"tune/cuda_backend.h": "the coordinator never links the CUDA backend",
                    "measure/cuda/": "the coordinator never links the CUDA backend"},
    "worker": {"tune/result_store.h": "the worker never owns the store"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def main(root: pathlib.Path) -> int:
    src = root / "libtune" / "src"
    stages = sorted(p.name for p in src.iterdir() if p.is_dir())
    problems = []
    if set(stages) != set(ALLOWED):
        problems.append(f"libtune/src stages {stages} differ from this test's {sorted(ALLOWED)}")
    header_stage = dict(HEADER_STAGE)
    for stage in stages:
        for cc in (src / stage).rglob("*.cc"):
            header_stage.setdefault(cc.stem + ".h", stage)
    for h in (root / "libtune" / "include" / "tune").glob("*.h"):
        if h.name not in header_stage:
            problems.append(f"libtune/include/tune/{h.name}: no stage (add its source or HEADER_STAGE)")

    def stage_of(include: str):
        if include.startswith("tune/"):
            return header_stage.get(include[len("tune/"):])
        head = include.split("/", 1)[0]
        return head if head in ALLOWED and "/" in include else None

    files = [(stage, f) for stage in stages for f in (src / stage).rglob("*") if f.suffix in (".cc", ".h")]
    files += [(header_stage.get(h.name), h) for h in (root / "libtune" / "include" / "tune").glob("*.h")]
    for stage, f in files:
        if stage is None:
            continue
        for inc in INCLUDE.findall(f.read_text(encoding="utf-8")):
            to = stage_of(inc)
            if to is not None and to not in ALLOWED[stage]:
                problems.append(f"{f.relative_to(root)}: stage '{stage}' includes \"{inc}\" of stage '{to}'")
    for program, rules in FORBIDDEN.items():
        for f in (root / program).rglob("*"):
            if f.suffix not in (".cc", ".h"):
                continue
            for inc in INCLUDE.findall(f.read_text(encoding="utf-8")):
                for prefix, why in rules.items():
                    if inc.startswith(prefix):
                        problems.append(f"{f.relative_to(root)}: includes \"{inc}\": {why}")
    for p in problems:
        print(p)
    print(f"layering: {len(files)} files of {len(stages)} stages, {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
