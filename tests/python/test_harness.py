"""tunefarm.harness as a worker runs it: a real process on pipes, its
compile pool (forked or spawned), the width of that pool, and what is left
when the harness dies. Runs on Debian's python3 without torch: the harness
then times on the host (TUNEFARM_BACKEND=sim), never a GPU figure."""
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

SOURCE = os.environ.get("TUNEFARM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
MODULE = os.path.join(SOURCE, "tests", "data", "ops", "harness_host", "kernel.py")
sys.path.insert(0, os.path.join(SOURCE, "python"))

from tunefarm import harness  # noqa: E402

CHECK = {"rtol": 0.01, "atol": 0.01, "max_mismatch": 0}


def plan(configs):
    return {"cmd": "plan", "configs": configs, "dtype": "f32", "shapes": [{"N": 50}]}


def measure(i, config):
    return {"cmd": "measure", "id": i, "config": config, "dtype": "f32", "dims": {"N": 50}, "seed": 7,
            "check": CHECK, "timing": {}}


class Served:
    """The harness in its own session (the worker kills its process group),
    requests on stdin, answers read with a deadline."""

    def __init__(self, module, env=None, args=()):
        self.dir = tempfile.mkdtemp(prefix="tunefarm-harness-")
        self.log = os.path.join(self.dir, "harness.log")
        full = dict(os.environ, TUNEFARM_BACKEND="sim", PYTHONPATH=os.path.join(SOURCE, "python"),
                    HARNESS_WARM_LOG=os.path.join(self.dir, "warm.log"))
        for name in ("TUNEFARM_HARNESS_JOBS", "TUNEFARM_CPUS"):  # the test's own choice only
            full.pop(name, None)
        full.update(env or {})
        self.proc = subprocess.Popen([sys.executable, "-m", "tunefarm.harness", "--log", self.log, module, *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=full, start_new_session=True)

    def send(self, request):
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()

    def read_line(self, seconds=20):
        """A line of stdout, or b"" at its end; None when nothing came in time."""
        ready, _, _ = select.select([self.proc.stdout], [], [], seconds)
        return self.proc.stdout.readline() if ready else None

    def answer(self):
        line = self.read_line()
        if not line:
            raise AssertionError("no answer: %r; stderr: %s" % (line, self.stderr()))
        return json.loads(line)

    def stderr(self):
        return self.proc.stderr.read1(65536).decode(errors="replace") if self.proc.poll() is not None else ""

    def notes(self):
        with open(self.log) as f:
            return f.read()

    def warmers(self):
        path = os.path.join(self.dir, "warm.log")
        if not os.path.exists(path):
            return set()
        with open(path) as f:
            return {line.rsplit("pid=", 1)[1].strip() for line in f if line.startswith("warm ")}

    def close(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            pipe.close()
        shutil.rmtree(self.dir, ignore_errors=True)


CONFIGS = [{"SCALE": s, "UNROLL": 1} for s in (1, 2)]


class CompilePool(unittest.TestCase):
    def serve_two(self, module, env=None):
        h = Served(module, env)
        self.addCleanup(h.close)
        h.send(plan(CONFIGS))
        for i, c in enumerate(CONFIGS):
            h.send(measure(i, c))
            got = h.answer()
            self.assertEqual(got["id"], i)
            self.assertEqual(got.get("check"), "pass", got)
        return h

    def test_the_pool_is_forked_from_the_harness_after_the_import(self):
        h = self.serve_two(MODULE, {"TUNEFARM_HARNESS_JOBS": "2"})
        self.assertIn("compile pool: 2 processes forked", h.notes())
        self.assertTrue(h.warmers(), "no config was warmed in the pool")
        self.assertNotIn(str(h.proc.pid), h.warmers())

    def test_a_module_that_starts_a_thread_gets_a_spawned_pool(self):
        # Forking a process with a second thread may deadlock the child.
        tmp = tempfile.mkdtemp(prefix="tunefarm-threaded-")
        self.addCleanup(shutil.rmtree, tmp, True)
        threaded = os.path.join(tmp, "kernel.py")
        with open(MODULE) as f, open(threaded, "w") as out:
            out.write("import threading, time\n"
                      "threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n" + f.read())
        h = self.serve_two(threaded, {"TUNEFARM_HARNESS_JOBS": "1"})
        self.assertIn("compile pool: 1 processes spawned", h.notes())
        self.assertTrue(h.warmers())
        self.assertNotIn(str(h.proc.pid), h.warmers())

    def test_the_answers_pipe_ends_with_the_harness_not_with_its_pool(self):
        # A pool process keeping the worker's pipe open would leave the
        # worker waiting on a harness that is gone.
        h = self.serve_two(MODULE, {"TUNEFARM_HARNESS_JOBS": "2"})
        os.kill(h.proc.pid, signal.SIGKILL)
        self.assertEqual(h.read_line(seconds=20), b"", "stdout did not end: a pool process holds it")


class Baseline(unittest.TestCase):
    def ask_baseline(self, module):
        """The harness serving `module`, and its answer to a baseline request."""
        h = Served(module)
        self.addCleanup(h.close)
        req = measure(1, {"SCALE": 1, "UNROLL": 1})
        req["baseline"] = "host_loop"
        h.send(req)
        return h, h.answer()

    def test_the_modules_baseline_is_checked_and_timed_with_its_version(self):
        h, got = self.ask_baseline(MODULE)
        self.assertEqual(got.get("check"), "pass", got)
        self.assertTrue(got["samples_us"])
        self.assertEqual(got["baseline_version"], "host-loop-1")
        # A config of the same request shape still runs its own kernel.
        h.send(measure(2, {"SCALE": 3, "UNROLL": 1}))
        self.assertEqual(h.answer().get("check"), "fail")

    def test_a_module_without_one_fails_the_baseline_only(self):
        d = tempfile.mkdtemp(prefix="tunefarm-harness-nobase-")
        self.addCleanup(shutil.rmtree, d, True)
        module = os.path.join(d, "kernel.py")
        with open(MODULE) as f:
            text = f.read()
        with open(module, "w") as f:
            f.write(text.split("BASELINE_VERSION")[0])
        h, got = self.ask_baseline(module)
        self.assertIn("failure", got)
        self.assertIn("defines no baseline(dtype)", got["message"])
        h.send(measure(2, {"SCALE": 1, "UNROLL": 1}))
        self.assertEqual(h.answer().get("check"), "pass")


class StreamHold(unittest.TestCase):
    """TorchDevice.time's stream hold, against a stand-in for torch's CUDA
    side: a batch enqueued while the hold still ran is kept; one whose hold
    ran out before the host finished is timed again with a longer hold."""

    class FakeCuda:
        def __init__(self, hold_runs_out):
            self.hold_runs_out = list(hold_runs_out)  # per batch: the hold ended before the host finished
            self.sleeps, self.ticks = [], 0

        def _sleep(self, cycles):
            self.sleeps.append(cycles)

        def Event(self, enable_timing=False):
            cuda = self

            class E:
                def record(self):
                    cuda.ticks += 1
                    self.t = cuda.ticks

                def query(self):
                    return cuda.hold_runs_out.pop(0) if cuda.hold_runs_out else False

                def synchronize(self):
                    pass

                def elapsed_time(self, end):
                    return 0.020  # ms: 20 us a sample
            return E()

    def device(self, hold_runs_out):
        dev = harness.TorchDevice.__new__(harness.TorchDevice)
        cuda = self.FakeCuda(hold_runs_out)
        dev.torch = type("T", (), {"cuda": cuda})
        dev.flush = type("F", (), {"max": lambda self: None})()
        dev.events = [(cuda.Event(), cuda.Event()) for _ in range(harness.MAX_BATCH)]
        dev.held = cuda.Event()
        dev.hold_cycles, dev.hold_retries, dev.unheld_batches = harness.HOLD_MIN_CYCLES, 0, 0
        return dev, cuda

    def test_a_batch_whose_hold_ran_out_is_taken_again_held_longer(self):
        dev, cuda = self.device([True, True])
        calls = []
        samples = dev.time(lambda: calls.append(1), (), {"max_samples": 5, "min_samples": 5, "warmup": 0})
        self.assertEqual(len(samples), 5)
        self.assertTrue(all(abs(s - 20.0) < 1e-9 for s in samples))
        self.assertEqual(dev.hold_retries, 2)
        self.assertEqual(len(calls), 15)  # two batches timed again
        self.assertGreater(cuda.sleeps[1], cuda.sleeps[0])
        self.assertGreater(cuda.sleeps[2], cuda.sleeps[1])

    def test_without_the_spin_kernel_nothing_is_held(self):
        dev, cuda = self.device([True])
        dev.hold_cycles = 0  # a torch without torch.cuda._sleep, or TUNEFARM_HARNESS_HOLD=0
        samples = dev.time(lambda: None, (), {"max_samples": 5, "min_samples": 5, "warmup": 0})
        self.assertEqual(len(samples), 5)
        self.assertEqual(cuda.sleeps, [])
        self.assertEqual(dev.hold_retries, 0)


class PoolWidth(unittest.TestCase):
    def width(self, **env):
        saved = {k: os.environ.pop(k, None) for k in ("TUNEFARM_CPUS", "TUNEFARM_HARNESS_JOBS")}
        try:
            os.environ.update(env)
            return harness.default_jobs()
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None)
                if v is not None:
                    os.environ[k] = v

    def test_the_devices_share_of_the_cores_bounds_it(self):
        cores = len(os.sched_getaffinity(0))
        self.assertEqual(self.width(), max(1, min(16, cores)))
        self.assertEqual(self.width(TUNEFARM_CPUS="1"), 1)
        self.assertEqual(self.width(TUNEFARM_CPUS="1000"), max(1, min(16, cores)))
        self.assertEqual(self.width(TUNEFARM_CPUS="junk"), max(1, min(16, cores)))
        self.assertEqual(self.width(TUNEFARM_CPUS="²"), max(1, min(16, cores)))
        self.assertEqual(self.width(TUNEFARM_CPUS=" 1\n"), 1)

    def test_an_operator_choice_wins_and_a_bad_one_is_named(self):
        self.assertEqual(self.width(TUNEFARM_CPUS="1", TUNEFARM_HARNESS_JOBS="5"), 5)
        self.assertEqual(self.width(TUNEFARM_HARNESS_JOBS="0"), 0)
        for bad in ("-3", "²", "1e3", "100000"):
            with self.assertRaises(SystemExit) as e:
                self.width(TUNEFARM_HARNESS_JOBS=bad)
            self.assertIn("TUNEFARM_HARNESS_JOBS=%r is not a count" % bad, str(e.exception))

    def test_an_option_wins_over_a_bad_variable(self):
        h = Served(MODULE, {"TUNEFARM_HARNESS_JOBS": "junk"}, args=("--jobs", "1"))
        self.addCleanup(h.close)
        h.send(plan(CONFIGS[:1]))
        h.send(measure(0, CONFIGS[0]))
        self.assertEqual(h.answer().get("check"), "pass")
        self.assertIn("compile pool: 1 processes", h.notes())


class UnwritablePaths(unittest.TestCase):
    """A Triton cache or a log the harness cannot write is said in one line
    each, and the configs are measured all the same."""

    def test_an_unwritable_cache_and_log_are_named_and_the_run_goes_on(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp, True)
        not_a_folder = os.path.join(tmp, "file")
        open(not_a_folder, "w").close()
        log = os.path.join(tmp, "missing", "harness.log")
        h = Served(MODULE, {"TRITON_CACHE_DIR": not_a_folder}, args=("--log", log))
        self.addCleanup(h.close)
        h.send(plan(CONFIGS[:1]))
        h.send(measure(0, CONFIGS[0]))
        self.assertEqual(h.answer().get("check"), "pass")
        h.proc.stdin.close()  # the worker is gone: the harness ends
        h.proc.wait(timeout=60)
        lines = h.proc.stderr.read().decode(errors="replace").splitlines()
        # One line each, said before anything else.
        self.assertTrue(any(line.startswith("harness: TRITON_CACHE_DIR=%s is not writable here (" % not_a_folder)
                            for line in lines[:2]), lines)
        self.assertTrue(any(line.startswith("harness: cannot write the log %s (" % log) for line in lines[:2]), lines)

if __name__ == "__main__":
    unittest.main(verbosity=2)
