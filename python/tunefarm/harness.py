"""tunefarm.harness: the farm's check and timing discipline for Python kernels.

A program op whose kernel is written in Python (Triton, TileLang, cuTile,
CuTe DSL, plain torch) names this harness as its serve command:

    [program]
    files = ["matmul.py"]
    serve = "python3 -m tunefarm.harness matmul.py"

The worker starts it once per GPU (the GPU is its device 0) and sends it one
JSON request per line (docs/program-ops.md); the harness answers each
measurement with its check result and timing samples. The kernel module
defines:

    make_inputs(dims, dtype, seed) -> list   every kernel argument, in order,
                                             on the GPU (outputs included)
    reference(args, dims, dtype) -> the expected output (a tuple of them for several);
                                             not needed where the op's [check] says
                                             default = true (the default config's outputs
                                             are the expected ones) or skip = true
    make_kernel(config, dtype) -> fn         fn(*args) launches the kernel (no sync)
    outputs(args) -> list                    optional: the outputs (default [args[-1]])
    default_outputs(args, dims, dtype)       optional, under [check] default = true: the
                                             default config's outputs as the module runs it
                                             (a Triton wrapper: the call's first config left
                                             by pruning), instead of the op's default config
    warm(config, dtype, dims)                optional: compile without launching
                                             (runs in a pool process, ahead of timing)
    baseline(dtype) -> fn                    optional: the op's [baseline] (a torch or
                                             vendor call), timed and checked as a kernel
    BASELINE_VERSION = "..."                 optional: its version in reports (default:
                                             torch's, where torch is loaded)

The discipline is the farm's own (docs/timing.md): inputs made from the
request's seed (the same for every config of a shape), the reference (or the
default config's outputs) computed once per shape, outputs poisoned (NaN) before the checked run, a tolerance check
where NaN never passes, the L2 cache flushed by a read before every sample,
CUDA events around each sample, samples taken until the 95% confidence
interval is within the target (or the caps), the SM clock read. A "plan"
request lists the unit's configs: their `warm` runs in a pool of processes
(one per core of the device's share of the host, up to 16) while the GPU
times earlier configs, so a cold sweep is bound by the GPU rather than by one
compiler thread (Triton's cache, shared between processes, then holds the
compiled kernels). The pool is forked from the harness once the module is
imported and before CUDA starts, so the framework is imported once, not once
a process (spawned instead where the module started CUDA or a thread).

Without torch or a CUDA device (tests on hosts without a GPU) the harness
times on the host with perf_counter and checks lists of numbers; those figures
are not GPU measurements, as the sim backend's rows already say.
"""

import argparse
import ctypes
import importlib.util
import json
import math
import multiprocessing
import os
import sys
import tempfile
import time
import traceback

PROTOCOL = 1
MAX_JOBS = 256  # compile processes at most, whatever is asked
WARMUP_WAIT_SECONDS = 60  # the framework's one-time work before the pool forks
MAX_ENERGY_SECONDS = 10  # an energy window at most (TimingPolicy's kMaxEnergySeconds)

RULE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sampling_rule.json")
_POLICY_FIELDS = ("warmup", "min_samples", "max_samples", "target_rel_ci", "rank_rel_ci", "refine_within",
                  "max_seconds", "early_stop_factor")
_COUNT_FIELDS = ("warmup", "min_samples", "max_samples")


def load_rule(path=RULE_FILE):
    """The sampling rule's data (python/tunefarm/sampling_rule.json, which the
    C++ build embeds as base/sampling_rule.h): checked, as a dict. Raises
    ValueError naming the file and the field."""
    def number(value, field, count=False):
        if isinstance(value, bool) or not isinstance(value, int if count else (int, float)) \
                or not math.isfinite(value) or value < 0 or value > 1e6:
            raise ValueError("%s: %s: %r is not a %s" % (path, field, value,
                                                         "count" if count else "non-negative number"))
        return value if count else float(value)
    try:
        with open(path, encoding="utf-8") as f:
            rule = json.load(f)
        max_batch = number(rule["max_batch"], "max_batch", True)
        if not isinstance(rule["policy"], dict):
            raise ValueError("%s: policy: not an object" % path)
        policy = {k: number(rule["policy"].get(k), "policy." + k, k in _COUNT_FIELDS) for k in _POLICY_FIELDS}
        t95 = rule["t95"]
        small = [number(t, "t95.dof_1_up[%d]" % i) for i, t in enumerate(t95["dof_1_up"])]
        anchors = [(number(a[0], "t95.anchors[%d][0]" % i, True), number(a[1], "t95.anchors[%d][1]" % i))
                   for i, a in enumerate(t95["anchors"])]
        normal = number(t95["normal"], "t95.normal")
    except KeyError as e:
        raise ValueError("%s: no field %s" % (path, e)) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, TypeError, IndexError) as e:
        raise ValueError("%s: %s" % (path, str(e).splitlines()[0] if str(e) else type(e).__name__)) from None
    if max_batch < 1 or policy["min_samples"] < 1 or policy["max_samples"] < 1:
        raise ValueError("%s: max_batch, policy.min_samples and policy.max_samples are at least 1" % path)
    if not small or min(small) <= 0 or not anchors or anchors[0][0] != len(small) or \
            any(b[0] <= a[0] for a, b in zip(anchors, anchors[1:])):
        raise ValueError("%s: t95: positive t values, then anchors from the table's last dof upward" % path)
    return {"max_batch": max_batch, "policy": policy, "t95": small, "t95_anchors": anchors, "t95_normal": normal}


try:
    RULE = load_rule()
except ValueError as e:  # a broken installation: nothing can be timed
    raise SystemExit("tunefarm.harness: %s" % e)
# The stream hold (TorchDevice.time): spin cycles, counted at a clock above
# any GPU's boost clock, so a hold lasts at least as long as meant.
HOLD_CLOCK_HZ = 3.5e9
HOLD_MIN_CYCLES = int(20e-6 * HOLD_CLOCK_HZ)
HOLD_MAX_CYCLES = int(50e-3 * HOLD_CLOCK_HZ)
MAX_BATCH = RULE["max_batch"]  # samples between two synchronisations, as the farm's runner


def student_t95(dof):
    """Two-sided 95% Student t for `dof` degrees of freedom: the farm's
    StudentT95 (base/stats.h), from the same table."""
    small, anchors, normal = RULE["t95"], RULE["t95_anchors"], RULE["t95_normal"]
    if dof <= 0:
        return math.inf
    if dof <= len(small):
        return small[dof - 1]
    # Beyond the table, t is close to linear in 1/dof between the anchors.
    inv = 1.0 / dof
    for lo, hi in zip(anchors, anchors[1:]):
        if dof <= hi[0]:
            f = (1.0 / lo[0] - inv) / (1.0 / lo[0] - 1.0 / hi[0])
            return lo[1] + f * (hi[1] - lo[1])
    last = anchors[-1]
    return normal + (last[1] - normal) * inv * last[0]


def summarize(samples):
    """(median, mean, ci95 half-width) of `samples`: the farm's ComputeStats
    (base/stats.h), operation for operation, so that both give the same
    figures (a plain loop: sum() of floats is compensated on newer Pythons)."""
    s = sorted(samples)
    n = len(s)
    median = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
    total = 0.0
    for x in s:
        total += x
    mean = total / n
    if n < 2:
        return median, mean, 0.0
    ss = 0.0
    for x in s:
        d = x - mean
        ss += d * d
    stdev = math.sqrt(ss / (n - 1))
    return median, mean, student_t95(n - 1) * stdev / math.sqrt(n)


def _ceil(x):
    return math.ceil(x) if math.isfinite(x) else x


def next_sampling(policy, best_so_far_us, wall_cap, n, median, mean, ci95, timed_seconds, wall_seconds):
    """(stop, batch): the farm's NextSampling (measure/sampling.h,
    libtune/src/measure/sampling.cc) operation for operation, so that both
    give the same steps (tests/python/test_sampling_rule.py holds them to
    it; change them together). `policy` holds RULE["policy"]'s fields; stop
    is "no" (take `batch` more), "early", "noise_target", "max_samples",
    "time_cap" or "wall_cap" (batch 0)."""
    max_samples = max(1, policy["max_samples"])
    min_samples = min(max(1, policy["min_samples"]), max_samples)

    def step(need):
        # `need` may be huge, infinite or NaN (a tiny target or mean).
        most = min(MAX_BATCH, max_samples - n)
        return "no", most if need >= most else int(need) if need >= 1 else 1

    if n == 0:
        return step(min_samples)
    if n >= max_samples:
        return "max_samples", 0
    best = best_so_far_us
    contender = best <= 0 or median <= (1.0 + policy["refine_within"]) * best
    target = policy["target_rel_ci"] if contender else max(policy["target_rel_ci"], policy["rank_rel_ci"])
    if n >= min_samples:
        factor = policy["early_stop_factor"]
        if factor > 0 and best > 0 and median > factor * best:
            return "early", 0
        if mean > 0 and ci95 <= target * mean:
            return "noise_target", 0
    if timed_seconds >= policy["max_seconds"]:
        return "time_cap", 0
    if wall_cap > 0 and wall_seconds >= wall_cap:
        return "wall_cap", 0
    need = float(MAX_BATCH)
    rel = ci95 / mean if mean > 0 else 0.0
    if n < min_samples:
        need = min_samples - n
    elif rel > 0 and target > 0:
        need = _ceil(float(n) * (rel / target) * (rel / target)) - n
    if mean > 0:
        left = (policy["max_seconds"] - timed_seconds) / (mean * 1e-6)
        need = min(need, max(1.0, _ceil(left)))
    return step(need)


def timing_policy(timing):
    """The policy of a request's `timing` (docs/program-ops.md), the rule's
    defaults for the fields it lacks."""
    policy = dict(RULE["policy"])
    for k in _POLICY_FIELDS:
        if timing.get(k) is not None:
            policy[k] = int(timing[k]) if k in _COUNT_FIELDS else float(timing[k])
    return policy


def next_batch(timing, samples, timed_seconds):
    """How many samples to take next; 0 to stop (next_sampling, no wall cap:
    the worker bounds a request's wall time from outside)."""
    policy = timing_policy(timing)
    best = float(timing.get("best_so_far_us", 0) or 0)
    if not samples:
        return next_sampling(policy, best, 0, 0, 0.0, 0.0, 0.0, timed_seconds, 0.0)[1]
    median, mean, ci = summarize(samples)
    return next_sampling(policy, best, 0, len(samples), median, mean, ci, timed_seconds, 0.0)[1]


def sample(fn, args, timing, batch_of):
    """Warm-up runs, then batches of samples (batch_of(n) -> n times in
    microseconds) until next_batch says stop."""
    for _ in range(timing_policy(timing)["warmup"]):
        fn(*args)
    samples, timed = [], 0.0
    while True:
        n = next_batch(timing, samples, timed)
        if n == 0:
            return samples
        got = batch_of(n)
        samples.extend(got)
        timed += sum(got) * 1e-6


def module_folder_first(path):
    """The kernel module's folder first on sys.path: what it ships beside it
    (a framework too) wins over what the host has."""
    folder = os.path.dirname(os.path.abspath(path))
    if not sys.path or sys.path[0] != folder:
        sys.path.insert(0, folder)


def load_module(path):
    """Imports the kernel module at `path` (its folder first on sys.path)."""
    path = os.path.abspath(path)
    module_folder_first(path)
    spec = importlib.util.spec_from_file_location("tunefarm_kernel_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in ("make_inputs", "make_kernel"):  # reference: unless the op skips its check
        if not callable(getattr(module, name, None)):
            raise SystemExit("tunefarm.harness: %s defines no %s()" % (path, name))
    return module


def config_key(config):
    return json.dumps(config, sort_keys=True)


def classify(exc):
    """The farm's failure class of an exception raised by a kernel, and
    whether the CUDA context is lost for good (the process must go)."""
    name = type(exc).__name__
    text = str(exc)
    if "OutOfResources" in name or "OutOfMemory" in name or "out of resource" in text.lower():
        return "resources", False
    if "Compil" in name or "compil" in text[:200].lower():
        return "compile_error", False
    lost = any(s in text for s in ("illegal memory access", "unspecified launch failure", "misaligned address",
                                   "device-side assert", "an illegal instruction", "CUDA error"))
    return "launch_error", lost


def tail(text, limit=3000):
    return text if len(text) <= limit else "[...]\n" + text[-limit:]


# --- energy --------------------------------------------------------------

# The host device's board, as the sim models one: figures for tests only.
HOST_MODEL_POWER_W = 50.0


def energy_window(fn, args, seconds, read_mj, sync):
    """Energy per call (uJ) and mean power (W) over `seconds` of back-to-back
    calls, from an energy counter in millijoules (docs/timing.md, "Energy");
    None when the counter did not move. Calls go in batches that double up
    to 256 between synchronisations, so the device stays busy while the host
    enqueues."""
    sync()
    e0, t0 = read_mj(), time.perf_counter()
    calls, batch = 0, 1
    while True:
        for _ in range(batch):
            fn(*args)
        calls += batch
        sync()
        wall = time.perf_counter() - t0
        if wall >= seconds:
            break
        batch = min(2 * batch, 256)
    e1 = read_mj()
    if e0 is None or e1 is None or e1 <= e0 or wall <= 0:
        return None
    joules = (e1 - e0) / 1000.0
    return joules / calls * 1e6, joules / wall


class Nvml:
    """NVML through ctypes (libnvidia-ml.so.1): the energy counter and the
    enforced power limit of torch's device 0. Readings only: the harness
    never changes clocks or limits."""

    def __init__(self, torch):
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        if lib.nvmlInit_v2() != 0:
            raise OSError("nvmlInit failed")
        props = torch.cuda.get_device_properties(0)
        handle = ctypes.c_void_p()
        found = False
        uuid = getattr(props, "uuid", None)
        if uuid is not None:
            text = str(uuid)
            text = text if text.startswith("GPU-") else "GPU-" + text
            found = lib.nvmlDeviceGetHandleByUUID(text.encode(), ctypes.byref(handle)) == 0
        if not found and hasattr(props, "pci_bus_id"):
            bus = "%08x:%02x:%02x.0" % (getattr(props, "pci_domain_id", 0), props.pci_bus_id, props.pci_device_id)
            found = lib.nvmlDeviceGetHandleByPciBusId_v2(bus.encode(), ctypes.byref(handle)) == 0
        if not found:
            raise OSError("NVML does not know torch's device 0")
        self.lib, self.handle = lib, handle

    def energy_mj(self):
        value = ctypes.c_ulonglong()
        if self.lib.nvmlDeviceGetTotalEnergyConsumption(self.handle, ctypes.byref(value)) != 0:
            return None
        return value.value

    def power_limit_w(self):
        value = ctypes.c_uint()
        if self.lib.nvmlDeviceGetEnforcedPowerLimit(self.handle, ctypes.byref(value)) != 0:
            return 0.0
        return value.value / 1000.0


# --- devices -------------------------------------------------------------

class TorchDevice:
    """The GPU through torch: CUDA events, an L2 flush by a read, NaN poison."""

    name = "cuda"

    def __init__(self, torch):
        self.torch = torch
        torch.cuda.init()
        props = torch.cuda.get_device_properties(0)
        l2 = int(getattr(props, "L2_cache_size", 0) or 0) or (64 << 20)
        # A read, not a write: a write would leave dirty lines in L2 that the
        # kernel then pays to write back.
        self.flush = torch.ones(max(2 * l2, 64 << 20) // 4, dtype=torch.int32, device="cuda")
        self.events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                       for _ in range(MAX_BATCH)]
        # The stream hold of time(): torch's spin kernel, where it has one.
        self.held = torch.cuda.Event()
        # TUNEFARM_HARNESS_HOLD=0 turns it off (to measure what it changes).
        held = hasattr(torch.cuda, "_sleep") and os.environ.get("TUNEFARM_HARNESS_HOLD", "1") != "0"
        self.hold_cycles = HOLD_MIN_CYCLES if held else 0
        self.hold_retries = 0      # batches taken again, the hold too short
        self.unheld_batches = 0    # batches the longest hold did not cover

    def sync(self):
        self.torch.cuda.synchronize()

    def poison(self, outs):
        for o in outs:
            if o.is_floating_point():
                o.fill_(float("nan"))
            else:
                o.fill_(-1)

    def keep(self, out):
        """A copy of an output, as the reference of a check."""
        return out.clone()

    def check(self, outs, expected, check):
        """(passed, max_abs_err, mismatch share, nan seen)."""
        torch = self.torch
        worst, bad, total, nan = 0.0, 0, 0, False
        if len(outs) != len(expected):
            raise ValueError("%d outputs, %d references" % (len(outs), len(expected)))
        for got, want in zip(outs, expected):
            g = got.float()
            w = want.to(g.device).float()
            if g.shape != w.shape:
                raise ValueError("output shape %s, reference %s" % (tuple(g.shape), tuple(w.shape)))
            finite = torch.isfinite(g)
            nan = nan or not bool(finite.all())
            diff = (g - w).abs()
            close = (diff <= check["atol"] + check["rtol"] * w.abs()) & finite
            bad += int((~close).sum())
            total += g.numel()
            if g.numel():
                worst = max(worst, float(torch.where(finite, diff, torch.zeros_like(diff)).max()))
        share = bad / total if total else 0.0
        return (not nan) and share <= check["max_mismatch"], worst, share, nan

    def time(self, fn, args, timing):
        # "hot": no flush, so that each sample reads what the last left in L2.
        hot = timing.get("l2") == "hot"
        def batch_of(n):
            # The stream is held (a spin kernel) while the host enqueues the
            # batch, so that the GPU runs flush, events and kernel back to
            # back: a Python launch slower than the kernel never lands inside
            # a sample (nvbench's blocking kernel). A batch whose hold ended
            # before the host finished enqueuing is taken again, held longer.
            while True:
                if self.hold_cycles:
                    self.torch.cuda._sleep(self.hold_cycles)
                    self.held.record()
                t0 = time.perf_counter()
                for i in range(n):
                    start, end = self.events[i]
                    if not hot:
                        self.flush.max()
                    start.record()
                    fn(*args)
                    end.record()
                enqueue = time.perf_counter() - t0
                still_held = self.hold_cycles and not self.held.query()
                self.events[n - 1][1].synchronize()
                if not self.hold_cycles or still_held:
                    break
                self.hold_retries += 1
                if self.hold_cycles >= HOLD_MAX_CYCLES:
                    self.unheld_batches += 1  # a host this slow: the batch is kept, and counted
                    break
                self.hold_cycles = min(HOLD_MAX_CYCLES, 2 * max(self.hold_cycles, int(enqueue * HOLD_CLOCK_HZ)))
            if self.hold_cycles:
                # Next batch: twice this one's enqueue time (per sample), at least the floor.
                per_sample = enqueue / n
                self.hold_cycles = min(HOLD_MAX_CYCLES, max(HOLD_MIN_CYCLES, int(2 * per_sample * HOLD_CLOCK_HZ) * n))
            # Event resolution is about half a microsecond: never 0.
            return [max(self.events[i][0].elapsed_time(self.events[i][1]) * 1000.0, 1e-3) for i in range(n)]
        return sample(fn, args, timing, batch_of)

    def clock_mhz(self):
        try:
            return int(self.torch.cuda.clock_rate())
        except Exception:  # pynvml missing: the clock goes unread
            return 0

    def energy(self, fn, args, seconds):
        """{energy_uj, power_w, power_limit_w} over `seconds` of calls, or a
        string saying why there is none (no NVML, a board without an
        energy counter)."""
        if not hasattr(self, "nvml"):
            try:
                self.nvml = Nvml(self.torch)
            except (OSError, AttributeError) as exc:
                self.nvml = "NVML: %s" % exc
        if isinstance(self.nvml, str):
            return self.nvml
        got = energy_window(fn, args, seconds, self.nvml.energy_mj, self.sync)
        if got is None:
            return "NVML: the energy counter did not move (a board without one?)"
        return {"energy_uj": got[0], "power_w": got[1], "power_limit_w": self.nvml.power_limit_w()}


class HostDevice:
    """No GPU: lists of numbers, perf_counter. For tests only."""

    name = "host"

    def sync(self):
        pass

    def poison(self, outs):
        for o in outs:
            o[:] = [float("nan")] * len(o)

    def keep(self, out):
        return list(out)

    def check(self, outs, expected, check):
        worst, bad, total, nan = 0.0, 0, 0, False
        if len(outs) != len(expected):
            raise ValueError("%d outputs, %d references" % (len(outs), len(expected)))
        for got, want in zip(outs, expected):
            if len(got) != len(want):
                raise ValueError("output length %d, reference %d" % (len(got), len(want)))
            for g, w in zip(got, want):
                total += 1
                if not math.isfinite(g):
                    nan, bad = True, bad + 1
                    continue
                d = abs(g - w)
                worst = max(worst, d)
                bad += d > check["atol"] + check["rtol"] * abs(w)
        share = bad / total if total else 0.0
        return (not nan) and share <= check["max_mismatch"], worst, share, nan

    def time(self, fn, args, timing):
        # "hot": no flush, so that each sample reads what the last left in L2.
        hot = timing.get("l2") == "hot"
        def batch_of(n):
            out = []
            for _ in range(n):
                t0 = time.perf_counter()
                fn(*args)
                out.append(max((time.perf_counter() - t0) * 1e6, 1e-3))
            return out
        return sample(fn, args, timing, batch_of)

    def clock_mhz(self):
        return 0

    def energy(self, fn, args, seconds):
        """The window of TorchDevice.energy with a modelled board drawing
        HOST_MODEL_POWER_W: figures for tests only, as the sim's are."""
        start = time.perf_counter()
        got = energy_window(fn, args, seconds, lambda: (time.perf_counter() - start) * HOST_MODEL_POWER_W * 1000.0,
                            self.sync)
        return "the host's modelled counter did not move" if got is None else {"energy_uj": got[0], "power_w": got[1]}


def open_device():
    """The GPU through torch; the host only where the worker's device is
    simulated (or no worker started us): a GPU worker never gets host figures."""
    backend = os.environ.get("TUNEFARM_BACKEND", "")
    if backend == "sim":
        return HostDevice()
    try:
        import torch
        if torch.cuda.is_available():
            return TorchDevice(torch)
        why = "torch sees no CUDA device (CUDA_VISIBLE_DEVICES=%s)" % os.environ.get("CUDA_VISIBLE_DEVICES", "")
    except ImportError as e:
        why = "cannot import torch: %s" % e
    if backend == "cuda":
        raise SystemExit("tunefarm.harness: %s; a GPU worker's figures must come from its GPU" % why)
    return HostDevice()


# --- the compile pool ------------------------------------------------------

_pool_module = None


def _pool_start(path):
    """A spawned pool process: imports the kernel module itself."""
    global _pool_module
    _pool_module = load_module(path)
    _triton_compile_only()


def _pool_forked(protocol_fd):
    """A forked pool process: the module came with the fork. The answers'
    descriptor goes, so that only the harness holds the worker's pipe."""
    try:
        os.close(protocol_fd)
    except OSError:
        pass
    _triton_compile_only()


def _pool_warm(config, dtype, shapes):
    """Runs in a pool process: compiles one config for every shape (its
    specialisations may differ by shape). Returns an error text or None."""
    try:
        for dims in shapes or [{}]:
            _pool_module.warm(config, dtype, dims)
        return None
    except Exception:
        return traceback.format_exc()


# Triton does work once per process that forked pool processes can share or
# skip; each step is optional, and a Triton without the names below only
# compiles slower.

def _triton_before_fork():
    """Runs in the harness while the kernel module imports, without CUDA:
    Triton's cache key starts with a hash of its compiler library (hundreds
    of megabytes), made at a process's first compile; its driver's C helpers
    are built by a C compiler on a cold cache. Done here once, the forked
    pool processes inherit the key and find the helpers built."""
    try:
        try:
            from triton.runtime.cache import triton_key
        except ImportError:
            from triton.compiler.compiler import triton_key
        triton_key()
    except Exception:  # a later compile says what is wrong
        pass
    try:
        from triton.backends.nvidia.driver import CudaUtils
        CudaUtils()
    except Exception:
        pass


def _triton_compile_only():
    """In a pool process: Triton asks for the current CUDA stream even when
    it compiles without launching, and that creates a CUDA context, seconds
    for each of the pool's processes at once and GPU memory. A pool process
    never launches, so its stream is the null stream, taken without one."""
    triton = sys.modules.get("triton")
    if triton is None:
        return
    try:
        triton.runtime.driver.active.get_current_stream = lambda *device: 0
    except Exception:
        pass


def start_framework_warmup(module_path):
    """A thread doing, while the kernel module imports, the one-time work of
    its framework's compiler that forked pool processes then inherit (no
    CUDA). None when the module uses no framework known here."""
    import threading
    try:
        uses_triton = "triton" in open(module_path).read()
    except OSError:
        return None
    if not uses_triton or importlib.util.find_spec("triton") is None:
        return None
    module_folder_first(module_path)  # the Triton the module will import
    thread = threading.Thread(target=_triton_before_fork, name="tunefarm-warmup", daemon=True)
    thread.start()
    return thread


def cuda_started():
    """Whether this process has initialised the CUDA driver (torch's device
    queries, CuPy or cuda-python at the module's import do): a process
    forked after that cannot use CUDA. Asked of libcuda itself, which counts
    devices only once initialised (before, it answers "not initialised"; a
    stub library or a host without a GPU answers another error)."""
    import ctypes
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False  # no driver on this host: nothing to start
    count = ctypes.c_int(0)
    return libcuda.cuDeviceGetCount(ctypes.byref(count)) == 0  # CUDA_SUCCESS


def fork_is_safe():
    """Whether this process may fork its pool: no second Python thread (one
    holding a lock would leave it held in the child) and no CUDA yet."""
    import threading
    if "fork" not in multiprocessing.get_all_start_methods() or threading.active_count() > 1:
        return False
    return not cuda_started()


def start_pool(jobs, module_path, module, protocol_fd):
    """The compile pool, its processes started now. Forked from this process
    once the kernel module is imported (the framework's import, seconds, paid
    once instead of once a process); spawned, each importing the module,
    where forking is not safe."""
    global _pool_module
    from concurrent.futures import ProcessPoolExecutor
    if fork_is_safe():
        _pool_module = module
        pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork"),
                                   initializer=_pool_forked, initargs=(protocol_fd,))
        how = "forked"
    else:
        pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_pool_start, initargs=(module_path,))
        how = "spawned"
    # A fork context starts every process at the first submit (now, before
    # this process opens the device); a spawn context one per submit.
    for _ in range(jobs):
        pool.submit(int)
    return pool, how


class DefaultFailed(Exception):
    """The default config, whose outputs a check against the default
    compares every config's with, failed: no config of the shape can run."""


class Harness:
    def __init__(self, module_path, jobs, log=None, protocol_fd=-1):
        self.log = log
        self.started = time.perf_counter()
        if log:
            log.write("# harness started at %.3f (Unix time)\n" % time.time())
        warmup = start_framework_warmup(module_path) if jobs > 0 else None
        self.module = load_module(module_path)
        self.note("module loaded")
        if warmup is not None:
            # Before the fork. A thread still running then (a C build that
            # hangs) makes the pool spawned instead.
            warmup.join(WARMUP_WAIT_SECONDS)
            self.note("framework warmed up" if not warmup.is_alive() else "framework warm-up still running")
        self.pool = None
        if jobs > 0 and callable(getattr(self.module, "warm", None)):
            try:
                self.pool, how = start_pool(jobs, module_path, self.module, protocol_fd)
                self.note("compile pool: %d processes %s" % (jobs, how))
            except Exception:  # no processes to be had: compiles happen here
                self.note("no compile pool: " + traceback.format_exc().strip().splitlines()[-1])
        self.device = open_device()
        self.note("device ready (%s)" % self.device.name)
        self.warming = {}      # config key -> future
        self.energy_notes = set()  # why no energy figures came, each said once
        self.kernels = {}      # (config key, dtype) -> fn
        self.shape_key = None
        self.args = self.outs = self.expected = None

    def note(self, text):
        """A line of the log (--log): where a sweep's time goes."""
        if self.log:
            self.log.write("%9.3f %s\n" % (time.perf_counter() - self.started, text))
            self.log.flush()

    def plan(self, req):
        if self.pool is None:
            return
        fresh = 0
        for config in req.get("configs", []):
            key = (config_key(config), req["dtype"])
            if key not in self.warming and key not in self.kernels:
                try:
                    self.warming[key] = self.pool.submit(_pool_warm, config, req["dtype"], req.get("shapes", []))
                except Exception:
                    self.drop_pool()
                    return
                fresh += 1
        self.note("plan: %d configs, %d to warm" % (len(req.get("configs", [])), fresh))

    def drop_pool(self):
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
        self.pool = None
        self.warming.clear()

    def kernel(self, config, dtype):
        """The kernel of `config` (made once, at most 256 kept)."""
        key = (config_key(config), dtype)
        fn = self.kernels.get(key)
        if fn is None:
            if len(self.kernels) >= 256:
                self.kernels.clear()
            fn = self.kernels[key] = self.module.make_kernel(config, dtype)
        return fn

    def inputs(self, dims, dtype, seed, check):
        """The shape's inputs, outputs and expected outputs: the module's
        reference, the default config's outputs (check against = default:
        what an op with no reference is checked with), or none."""
        against = check.get("against") or ("none" if check.get("skip") else "reference")
        key = (config_key(dims), dtype, seed, against)
        if key != self.shape_key:
            self.args = self.outs = self.expected = None  # the previous shape's memory goes first
            self.shape_key = None
            args = list(self.module.make_inputs(dims, dtype, seed))
            outputs = getattr(self.module, "outputs", None)
            outs = list(outputs(args)) if callable(outputs) else [args[-1]]
            default_outputs = getattr(self.module, "default_outputs", None)
            if against == "default" and not callable(default_outputs):
                try:
                    fn = self.kernel(check["default"], dtype)
                    self.device.poison(outs)
                    fn(*args)
                    self.device.sync()
                except Exception:
                    raise DefaultFailed("the default config %s (what the check compares with) failed; no config "
                                       "can be checked: %s" % (config_key(check["default"]), tail(traceback.format_exc())))
                expected = [self.device.keep(o) for o in outs]
            else:
                # An op that skips its check needs no reference (nor defines one).
                if against == "none":
                    expected = None
                elif against == "default":
                    try:
                        expected = default_outputs(args, dims, dtype)
                    except Exception:
                        raise DefaultFailed("the module's default config (what the check compares with) failed; no "
                                           "config can be checked: %s" % tail(traceback.format_exc()))
                else:
                    expected = self.module.reference(args, dims, dtype)
                # One output's reference is that output; several come as a tuple.
                many = isinstance(expected, tuple) or (isinstance(expected, list) and len(outs) > 1)
                expected = list(expected) if many else [expected]
            self.args, self.outs, self.expected = args, outs, list(expected)
            self.device.sync()
            self.shape_key = key
        return self.args, self.outs, self.expected

    def measure(self, req):
        answer = {"tunefarm": PROTOCOL, "id": req["id"]}
        config, dtype, dims = req["config"], req["dtype"], req["dims"]
        baseline = req.get("baseline")  # the op's [baseline] instead of a config
        key = ("baseline:%s" % baseline, dtype) if baseline else (config_key(config), dtype)
        warming = self.warming.pop(key, None)
        t0 = time.perf_counter()
        try:
            # Before waiting for the compile: a new shape's inputs and
            # reference are made while the pool still works on it.
            skip_check = bool(req["check"].get("skip"))
            args, outs, expected = self.inputs(dims, dtype, int(req.get("seed", 0)), req["check"])
        except DefaultFailed as exc:
            answer.update(failure="launch_error", message=str(exc))
            return answer, False
        except Exception:
            # The inputs or reference of this shape: no config can run.
            answer.update(failure="launch_error", message="inputs/reference: " + tail(traceback.format_exc()))
            return answer, False
        t1 = time.perf_counter()
        if warming is not None:
            try:
                error = warming.result()  # shows again below, where it is classified
                if error:
                    self.note("warm %s failed in the pool: %s" % (key[0], error.strip().splitlines()[-1]))
            except Exception:
                # The pool broke (a compiler crashed, memory ran out): the
                # harness goes on compiling in its own process.
                self.note("compile pool broken: " + traceback.format_exc().splitlines()[-1])
                self.drop_pool()
        t2 = time.perf_counter()
        try:
            if baseline:
                fn = self.kernels.get(key)
                if fn is None:
                    fn = self.kernels[key] = self.make_baseline(dtype)
            else:
                fn = self.kernel(config, dtype)
            self.device.poison(outs)
            fn(*args)
            self.device.sync()
        except Exception as exc:
            failure, lost = classify(exc)
            answer.update(failure=failure, message=tail(traceback.format_exc()))
            return answer, lost
        try:
            passed, worst, share, nan = (True, 0.0, 0.0, False) if skip_check else self.device.check(
                outs, expected, req["check"])
        except Exception:
            answer.update(failure="wrong_result", message="check: " + tail(traceback.format_exc()))
            return answer, False
        if not math.isfinite(worst):
            answer.update(failure="wrong_result", message="the reference or the output holds Inf (max abs error %r)" % worst)
            return answer, False
        answer.update(max_abs_err=worst, mismatch=share)
        if nan:
            answer.update(failure="nan", message="the output holds NaN or Inf")
            return answer, False
        if not passed:
            against = " of the default config's" if req["check"].get("against") == "default" else ""
            answer.update(check="fail", message="%.4g of the outputs outside%s rtol=%g atol=%g (max abs error %.4g)" % (
                share, against, req["check"]["rtol"], req["check"]["atol"], worst))
            return answer, False
        t3 = time.perf_counter()
        try:
            samples = self.device.time(fn, args, req.get("timing", {}))
        except Exception as exc:
            failure, lost = classify(exc)
            answer.update(failure=failure, message=tail(traceback.format_exc()))
            return answer, lost
        self.note("measure %s: inputs %.3f s, waited %.3f s for its compile, first run and check %.3f s, "
                  "%d samples in %.3f s" % (key[0], t1 - t0, t2 - t1, t3 - t2, len(samples), time.perf_counter() - t3))
        if not skip_check:
            answer["check"] = "pass"
        answer.update(samples_us=samples, clock_mhz=self.device.clock_mhz())
        energy_seconds = float(req.get("timing", {}).get("energy_seconds", 0) or 0)
        if energy_seconds > 0:
            # After the samples, on the config's own warm state (docs/timing.md, "Energy").
            try:
                energy = self.device.energy(fn, args, min(energy_seconds, MAX_ENERGY_SECONDS))
            except Exception as exc:
                failure, lost = classify(exc)
                answer.update(failure=failure, message="energy window: " + tail(traceback.format_exc()))
                return answer, lost
            if isinstance(energy, dict):
                answer.update(energy)
            elif energy not in self.energy_notes:
                self.energy_notes.add(energy)
                self.note("no energy figures: " + energy)
        if baseline:
            version = getattr(self.module, "BASELINE_VERSION", None)
            if version is None and "torch" in sys.modules:
                version = sys.modules["torch"].__version__
            if version:
                answer["baseline_version"] = str(version)
        return answer, False

    def make_baseline(self, dtype):
        """The module's baseline(dtype): what the op's [baseline] names."""
        make = getattr(self.module, "baseline", None)
        if make is None:
            raise LookupError("the op declares a [baseline] but its module defines no baseline(dtype)")
        return make(dtype)

    def serve(self, stdin, stdout):
        for line in stdin:
            line = line.strip()
            if not line:
                continue
            try:
                req = json.loads(line)
            except ValueError:
                sys.stderr.write("tunefarm.harness: not a request: %r\n" % line[:200])
                continue
            cmd = req.get("cmd")
            if cmd == "plan":
                self.plan(req)
            elif cmd == "measure":
                answer, lost = self.measure(req)
                stdout.write(json.dumps(answer, allow_nan=False) + "\n")
                stdout.flush()
                if lost:
                    # The CUDA context is gone for good: a new process takes over.
                    sys.stderr.write("tunefarm.harness: the CUDA context is lost; exiting\n")
                    os._exit(3)
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)


def count_of(name, text):
    """A count of processes from `text` (an option or a variable `name`);
    SystemExit naming it otherwise."""
    try:
        n = int(text.strip())
    except ValueError:
        n = -1
    if not 0 <= n <= MAX_JOBS:
        raise SystemExit("tunefarm.harness: %s=%r is not a count of processes (0 to %d)" % (name, text, MAX_JOBS))
    return n


def default_jobs():
    """The compile pool's width: $TUNEFARM_HARNESS_JOBS, else the cores this
    process may use, cut to this device's share of the host
    ($TUNEFARM_CPUS: a worker with several GPUs runs a harness for each),
    at most 16."""
    jobs = os.environ.get("TUNEFARM_HARNESS_JOBS", "").strip()
    if jobs:
        return count_of("TUNEFARM_HARNESS_JOBS", jobs)
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    share = os.environ.get("TUNEFARM_CPUS", "").strip()
    if share.isascii() and share.isdigit() and int(share) > 0:
        cores = min(cores, int(share))
    return max(1, min(16, cores))


def writable_folder(path):
    """None when `path` (made when missing) takes a new file, else why not."""
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path):
            return None
    except OSError as e:
        return e.strerror or str(e)


def usable_triton_cache():
    """A Triton cache this process can write. A TRITON_CACHE_DIR the worker's
    box does not grant (or another user's folder) would fail every config's
    compile; then this run gets one of its own under TMPDIR, said in one line."""
    named = os.environ.get("TRITON_CACHE_DIR")
    if not named:
        return
    why = writable_folder(named)
    if why is None:
        return
    own = tempfile.mkdtemp(prefix="triton-cache-")
    os.environ["TRITON_CACHE_DIR"] = own
    print("harness: TRITON_CACHE_DIR=%s is not writable here (%s); this run uses %s" % (named, why, own),
          file=sys.stderr)


def open_log(path):
    """The --log file, or None (said in one line) when it cannot be opened:
    the log is a diagnosis, not a reason to fail a sweep."""
    if not path:
        return None
    try:
        return open(path, "a")
    except OSError as e:
        print("harness: cannot write the log %s (%s); no log this run" % (path, e.strerror or e), file=sys.stderr)
        return None


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python3 -m tunefarm.harness",
        description="Serve a Python kernel module to a tunefarm worker (the program-op protocol on "
                    "stdin/stdout; docs/program-ops.md).")
    parser.add_argument("module", help="the kernel module: make_inputs, reference, make_kernel[, outputs, warm]")
    parser.add_argument("--log", default=os.environ.get("TUNEFARM_HARNESS_LOG"),
                        help="append where the time goes (start, plans, each measurement) to this file "
                             "(default: $TUNEFARM_HARNESS_LOG)")
    parser.add_argument("--jobs", type=lambda text: count_of("--jobs", text), default=None,
                        help="processes compiling ahead (warm); 0 = none (default: $TUNEFARM_HARNESS_JOBS, "
                             "else one per core of this device's share ($TUNEFARM_CPUS, set by the worker), "
                             "up to 16)")
    args = parser.parse_args(argv)
    jobs = default_jobs() if args.jobs is None else args.jobs
    # torch asks NVML, not the CUDA driver, whether a GPU is there: a module
    # that asks at its import leaves this process free to fork its pool.
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    # The protocol owns stdout: what the kernel module prints goes to stderr.
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    # Descriptor 1 too: native code, device printf and the pool's processes
    # inherit it, and only answers may reach the worker's pipe.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    log = open_log(args.log)
    usable_triton_cache()
    Harness(args.module, jobs, log, protocol_out.fileno()).serve(sys.stdin, protocol_out)


if __name__ == "__main__":
    main()
