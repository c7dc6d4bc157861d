#!/usr/bin/env python3
"""libtune's stages include only the stages below them.

Each folder of libtune/src/ is a stage of the data flow and a CMake target
that links only the stages below it (libtune/CMakeLists.txt). A header's stage
is its folder: libtune/src/<stage>/.../x.h, included as "<stage>/.../x.h".
libtune/include/tune/ holds the installed contract only, the headers that
libtune/CMakeLists.txt's install(FILES ...) rules name; any other header there
is a stage's header in the wrong place. The tune/ prefix is that contract's
alone: a stage includes "tune/X.h" only where X.h is installed, so that no
header (a generated one included) passes for the contract, nor escapes the
stage rules below by its prefix. An installed header tune/X.h belongs
to the stage whose folder holds X.cc (or to the one named in HEADER_STAGE) and
includes installed headers only. Every source and header of a stage may
include headers of the stages in ALLOWED[stage] only, and the programs keep
DESIGN.md's rules: the coordinator never sees the CUDA backend, the worker
never owns the store.

What deployments link is what they include: the targets of the deployed
stages (base, codec, bundle, runtime, launcher, the C API) compile their own
stage's sources only (no file list borrowed from another stage) and link
exactly the stage targets whose headers their files include, and no farm
stage (store, wire, ...), so that a deployment's link graph is its include
graph.

Search strategies have one home, libtune/src/search/ (search/registry.h):
no production source outside it names a strategy. The names are the
registry table's (search/strategy_table.h); outside search/, code (comments
left out) may not hold the literals "exhaustive", "random" or "evolution",
a proposer such as "model/1", nor compare or assign a literal to a strategy
(`strategy == "..."`, `strategy = "..."`): it asks the registry
(MeasuresWhole, ResolveStrategy, kDefaultStrategy, ...). A bare "model" or
"auto" is not checked: "model" is also a GPU model's JSON key and "auto" a
backend's and a timing's name. search/strategy_table.h is the one header
every stage may include (opspec validates sweep files' names, codec gives
old clients their default): it must stay code-free, a table and constants
with no include of a stage's header and no function.

The clock has one home, libtune/src/base/ (base/clock.h, and Env in
base/env.h): no production source outside it (comments left out) reads the
time itself through std::time, time(nullptr), std::chrono's system_clock,
steady_clock or high_resolution_clock, gettimeofday or clock_gettime. Code
handed an Env or a `now` uses it; the rest calls base/clock.h (NowSeconds,
NowUnixSeconds, ...), so that tests and replays can control time. Files
that may not are named in CLOCK_EXEMPT with the reason.

The CUDA driver and NVRTC are called in two places only: the CUDA
backend (libtune/src/measure/cuda/, which implements the device layer,
device/device_api.h, for the one runner in measure/runner/) and the
deployment launcher (libtune/src/launcher/). No other production source
(comments left out) calls a cu* or nvrtc* function, and measure/runner/
includes nothing of measure/cuda/, so a second GPU vendor is a folder beside
measure/cuda/, not edits across the farm. Vendor libraries (the driver,
NVRTC, NVML, cuBLASLt) are opened at run time through one loader,
base/shared_library.h: no other production source calls dlopen, dlsym or
dlclose (the files named in LIBRARY_OPEN_HOMES aside, with the reason).

Every end of the protocol (the coordinator's ROUTER, the DEALERs of
workers, builders and clients) is a wire/link.h Link: no production source
outside libtune/src/wire/ makes a DEALER or ROUTER socket, sets the frame
limit (maxmsgsize) or sets up CURVE on a socket itself.

Usage: layering_test.py SOURCE_DIR   (exit 0: clean; 1: violations, listed)
"""
import pathlib
import re
import sys

ALLOWED = {
    "base": {"base"},
    "opspec": {"base", "opspec"},
    # What the runner needs of a device and its compiler: interfaces only,
    # implemented per vendor under measure/ (measure/cuda/).
    "device": {"base", "opspec", "device"},
    "measure": {"base", "opspec", "device", "measure"},
    # Which configs to measure next (strategies, their model, replay): pure
    # functions of a space and observations; the coordinator feeds them.
    "search": {"base", "opspec", "search"},
    # The Cap'n Proto discipline and the record converters every encoding
    # shares, with no transport: the disk formats never depend on ZeroMQ.
    "codec": {"base", "codec"},
    # The deployed format: the bundle's codec, signatures, shape selector and
    # launch plan (what deployments and publish share).
    "bundle": {"base", "codec", "bundle"},
    # The envelopes between the farm's processes.
    "protocol": {"base", "opspec", "codec", "protocol"},
    # Envelopes over ZeroMQ, CURVE: only the programs that speak it link it.
    "wire": {"base", "opspec", "codec", "protocol", "wire"},
    "store": {"base", "opspec", "codec", "protocol", "store"},
    "publish": {"base", "opspec", "codec", "protocol", "store", "bundle", "publish"},
    "report": {"base", "opspec", "codec", "protocol", "store", "bundle", "publish", "report"},
    # The HTTP status side of the farm's processes (pages, JSON, /metrics):
    # no store, no reports; the HTML rules it shares with reports are base's.
    "serve": {"base", "serve"},
    # What deployments link: the bundle format and its signatures, no more
    # (the build links it without the store's or the wire's libraries).
    "runtime": {"base", "bundle", "runtime"},
    # The runtime plus the Driver API, opened at run time.
    "launcher": {"base", "bundle", "runtime", "launcher"},
    # The C API over the runtime and the launcher (libtunefarm_c.so).
    "capi": {"base", "runtime", "launcher", "capi"},
}
# What deployments link (libtune/CMakeLists.txt): each of these stages'
# targets links exactly the stages its own files include, no file list and
# no stage linked for nothing (see link_problems).
DEPLOYMENT_TARGETS = {"base": "tune_base", "codec": "tune_codec", "bundle": "tune_bundle",
                      "runtime": "tunefarm_runtime", "launcher": "tunefarm_launcher", "capi": "tunefarm_c"}
TARGET_SOURCES = re.compile(r"\b(?:tunefarm_stage|add_library)\s*\(\s*(\w+)\s+(?:SOURCES|STATIC|SHARED)\b([^)]*)\)")
LINK_RULE = re.compile(r"\btarget_link_libraries\s*\(\s*([\w$]+)\b([^)]*)\)")
# Installed headers with no source file of their name.
HEADER_STAGE = {"status.h": "base"}
# Includes (by prefix) a program folder may not have (DESIGN.md, "Dependency rule").
FORBIDDEN = {
    "coordinator": {"measure/cuda/": "the coordinator never links the CUDA backend"},
    "worker": {"store/result_store.h": "the worker never owns the store"},
    # The runner is every vendor's: it reaches its device through
    # device/device_api.h only (a second vendor is a folder beside measure/cuda/).
    "libtune/src/measure/runner": {"measure/cuda/": "the runner speaks to its device through device/device_api.h"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# The strategies' table: includable from every stage (see the docstring).
STRATEGY_TABLE = "search/strategy_table.h"
# Production sources that may not name a strategy (the search stage aside).
PROGRAMS = ("coordinator", "worker", "cli", "client")
STRATEGY_LITERAL = re.compile(r'"(?:exhaustive|random|evolution)"|"(?:exhaustive|random|evolution|model)/\d+"'
                              r'|\bstrategy\w*\s*(?:==|!=|=)\s*"')
# Reading the time without base/clock.h or an Env (see the docstring).
CLOCK_READ = re.compile(r"\bstd::time\s*\(|(?<![\w.>])(?:::)?time\s*\(\s*(?:nullptr|NULL|0)?\s*\)"
                        r"|\b(?:system_clock|steady_clock|high_resolution_clock)\b"
                        r"|\b(?:gettimeofday|clock_gettime)\s*\(")
# Production files that may read a clock themselves, each with the reason
# (paths relative to the source root). None today: program ops' box between
# fork and exec (measure/program/program_process.cc) calls only raw,
# async-signal-safe syscalls and reads no clock there; were it to, the raw
# clock_gettime would belong here, since base/clock.h's std::chrono is not
# async-signal-safe.
CLOCK_EXEMPT = {}
# A call of the CUDA driver (cuLaunchKernel, ...) or NVRTC (nvrtcCompileProgram, ...).
DRIVER_CALL = re.compile(r"\b(?:cu[A-Z]\w*|nvrtc[A-Z]\w*)\s*\(")
# Where such calls live (see the docstring).
DRIVER_HOMES = ("libtune/src/measure/cuda/", "libtune/src/launcher/")
# A socket of the protocol, or its options and CURVE set-up (see the docstring).
LINK_SOCKET = re.compile(r"\bsocket_type::(?:dealer|router)\b|\bConfigureCurve(?:Server|Client)\s*\(|\bmaxmsgsize\b")
# Opening a library at run time (see the docstring), and the files that may.
LIBRARY_OPEN = re.compile(r"\bdl(?:open|sym|close)\s*\(")
LIBRARY_OPEN_HOMES = {
    "libtune/src/base/shared_library.cc": "the one loader",
    # NVRTC loads its builtins by name on its first compile; preloaded
    # (RTLD_GLOBAL, unconfined) a confined compile finds them loaded.
    "libtune/src/measure/cuda/nvrtc_compile.cc": "NVRTC's builtins, preloaded for confined compiles",
}
BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)
FUNCTION_BODY = re.compile(r"\)\s*(?:const\s*)?\{")
INSTALL_FILES = re.compile(r"\binstall\s*\(\s*FILES\b([^)]*)\)")
INSTALLED_HEADER = re.compile(r"\binclude/tune/([\w.-]+\.h)\b")


def installed_headers(root: pathlib.Path) -> set:
    """The header names that libtune/CMakeLists.txt installs from include/tune/."""
    text = (root / "libtune" / "CMakeLists.txt").read_text(encoding="utf-8")
    return {h for rule in INSTALL_FILES.findall(text) for h in INSTALLED_HEADER.findall(rule)}


def strategy_problems(root: pathlib.Path) -> list:
    """Strategy names outside libtune/src/search/, and a table that grew code."""
    problems = []
    table = root / "libtune" / "src" / STRATEGY_TABLE
    if not table.exists():
        return [f"libtune/src/{STRATEGY_TABLE}: missing (the strategies' table)"]
    text = table.read_text(encoding="utf-8")
    for inc in INCLUDE.findall(text):
        problems.append(f"libtune/src/{STRATEGY_TABLE}: includes \"{inc}\"; every stage includes it, so it "
                        "includes no stage's header")
    if FUNCTION_BODY.search(text):
        problems.append(f"libtune/src/{STRATEGY_TABLE}: defines a function; it holds the table and constants only")
    src = root / "libtune" / "src"
    folders = [d for d in src.iterdir() if d.is_dir() and d.name != "search"]
    folders += [root / "libtune" / "include"] + [root / p for p in PROGRAMS]
    for folder in folders:
        for f in sorted(folder.rglob("*")):
            if f.suffix not in (".cc", ".h"):
                continue
            for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
                code = line.split("//", 1)[0]
                m = STRATEGY_LITERAL.search(code)
                if m:
                    problems.append(f"{f.relative_to(root)}:{n}: names a strategy ({m.group(0).strip()}): "
                                    "strategies have one home, libtune/src/search/ (search/registry.h)")
    return problems


def production_lines(root: pathlib.Path, skip):
    """(path relative to root, line number, code) of every production source
    line (libtune's stages and installed headers, the programs), comments
    left out, of the files `skip(rel)` does not name."""
    folders = [d for d in (root / "libtune" / "src").iterdir() if d.is_dir()]
    folders += [root / "libtune" / "include"] + [root / p for p in PROGRAMS]
    for folder in folders:
        for f in sorted(folder.rglob("*")):
            rel = f.relative_to(root).as_posix()
            if f.suffix not in (".cc", ".h") or skip(rel):
                continue
            # Block comments become as many blank lines, so line numbers hold.
            text = BLOCK_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), f.read_text(encoding="utf-8"))
            for n, line in enumerate(text.splitlines(), 1):
                yield rel, n, line.split("//", 1)[0]


def home_problems(root: pathlib.Path, pattern: re.Pattern, home, what: str) -> list:
    """Production lines outside `home` (a predicate of the path) that match
    `pattern`: "<file>:<line>: <what, with the match>"."""
    problems = []
    for rel, n, code in production_lines(root, home):
        m = pattern.search(code)
        if m:
            problems.append(f"{rel}:{n}: " + what.format(m.group(0).strip()))
    return problems


# The rules with one home each (see the docstring): pattern, home, message.
HOME_RULES = (
    (CLOCK_READ, lambda rel: rel.startswith("libtune/src/base/") or rel in CLOCK_EXEMPT,
     "reads the clock ({}): the clock has one home, libtune/src/base/ (base/clock.h, or the Env or `now` the "
     "code is handed)"),
    (DRIVER_CALL, lambda rel: rel.startswith(DRIVER_HOMES),
     "calls the CUDA driver or NVRTC ({}): those calls live in libtune/src/measure/cuda/ and libtune/src/launcher/"),
    (LIBRARY_OPEN, lambda rel: rel in LIBRARY_OPEN_HOMES,
     "opens a library itself ({}): vendor libraries are opened through libtune/src/base/shared_library.h"),
    (LINK_SOCKET, lambda rel: rel.startswith("libtune/src/wire/"),
     "sets up a socket of the protocol itself ({}): every end goes through libtune/src/wire/link.h (options, "
     "CURVE, envelopes)"),
)


def link_problems(root: pathlib.Path, included: dict) -> list:
    """Deployment targets whose linked stages differ from the stages their
    files include (`included`: stage -> the other stages its files include)."""
    text = (root / "libtune" / "CMakeLists.txt").read_text(encoding="utf-8")
    text = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    stage_of_target = {t: s for s, t in DEPLOYMENT_TARGETS.items()}
    linked = {s: set() for s in DEPLOYMENT_TARGETS}
    problems = []
    for target, sources in TARGET_SOURCES.findall(text):
        stage = stage_of_target.get(target)
        for source in sources.split() if stage else ():
            if not source.startswith(f"src/{stage}/"):
                problems.append(f"libtune/CMakeLists.txt: {target} compiles {source}, another stage's source: "
                                "a deployment links that stage's target instead")
    for target, args in LINK_RULE.findall(text):
        if target in stage_of_target:
            for token in re.findall(r"[\w:]+", args):
                if token in stage_of_target:
                    linked[stage_of_target[target]].add(stage_of_target[token])
                elif re.fullmatch(r"tune(?:farm)?_\w+", token) and token != "tune_schema":
                    problems.append(f"libtune/CMakeLists.txt: {target} links {token}, which deployments do not "
                                    "have (they link base, codec, bundle, runtime, launcher)")
    for stage, target in DEPLOYMENT_TARGETS.items():
        want = included.get(stage, set()) - {stage}
        if linked[stage] != want:
            extra = ", ".join(DEPLOYMENT_TARGETS[s] for s in sorted(linked[stage] - want)) or "none"
            missing = ", ".join(DEPLOYMENT_TARGETS[s] for s in sorted(want - linked[stage])) or "none"
            problems.append(f"libtune/CMakeLists.txt: {target} links stages its files do not include ({extra}) "
                            f"or misses stages they include ({missing}): a deployment links what it includes")
    return problems


def main(root: pathlib.Path) -> int:
    src = root / "libtune" / "src"
    stages = sorted(p.name for p in src.iterdir() if p.is_dir())
    problems = []
    if set(stages) != set(ALLOWED):
        problems.append(f"libtune/src stages {stages} differ from this test's {sorted(ALLOWED)}")
    public_dir = root / "libtune" / "include" / "tune"
    installed = installed_headers(root)
    if not installed:
        problems.append("libtune/CMakeLists.txt: no install(FILES include/tune/...) rule found")
    source_stage = {}
    for stage in stages:
        for cc in (src / stage).rglob("*.cc"):
            source_stage.setdefault(cc.stem + ".h", stage)
    public = {}  # installed header name -> its stage
    for h in sorted(public_dir.glob("*.h")):
        if h.name not in installed:
            home = source_stage.get(h.name, "<stage>")
            problems.append(f"libtune/include/tune/{h.name}: not installed, so not the contract: "
                            f"it belongs in libtune/src/{home}/")
            continue
        public[h.name] = HEADER_STAGE.get(h.name) or source_stage.get(h.name)
        if public[h.name] is None:
            problems.append(f"libtune/include/tune/{h.name}: no stage (add its source or HEADER_STAGE)")

    def stage_of(include: str):
        if include.startswith("tune/"):
            return public.get(include[len("tune/"):])
        head = include.split("/", 1)[0]
        return head if head in ALLOWED and "/" in include else None

    files = [(stage, f) for stage in stages for f in (src / stage).rglob("*") if f.suffix in (".cc", ".h")]
    files += [(public[name], public_dir / name) for name in sorted(public)]
    included = {}  # stage -> the stages its files include
    for stage, f in files:
        if stage is None:
            continue
        for inc in INCLUDE.findall(f.read_text(encoding="utf-8")):
            to = stage_of(inc)
            if inc == STRATEGY_TABLE:
                continue
            if to is not None:
                included.setdefault(stage, set()).add(to)
            if inc.startswith("tune/") and inc[len("tune/"):] not in installed:
                problems.append(f"{f.relative_to(root)}: includes \"{inc}\", which is not installed: tune/ is "
                                "the installed contract's prefix; a stage's header (generated ones too) "
                                "goes under its stage's")
                continue
            if f.parent == public_dir and to is not None and not inc.startswith("tune/"):
                # A deployment's compiler has the installed headers only.
                problems.append(f"{f.relative_to(root)}: installed header includes \"{inc}\", which is not installed")
            elif to is not None and to not in ALLOWED[stage]:
                problems.append(f"{f.relative_to(root)}: stage '{stage}' includes \"{inc}\" of stage '{to}'")
    for program, rules in FORBIDDEN.items():
        for f in (root / program).rglob("*"):
            if f.suffix not in (".cc", ".h"):
                continue
            for inc in INCLUDE.findall(f.read_text(encoding="utf-8")):
                for prefix, why in rules.items():
                    if inc.startswith(prefix):
                        problems.append(f"{f.relative_to(root)}: includes \"{inc}\": {why}")
    problems += link_problems(root, included)
    problems += strategy_problems(root)
    for pattern, home, what in HOME_RULES:
        problems += home_problems(root, pattern, home, what)
    for p in problems:
        print(p)
    print(f"layering: {len(files)} files of {len(stages)} stages, {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
