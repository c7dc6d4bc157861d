"""tunefarm.triton.autotune on a host without a GPU or Triton: Triton-like
stand-ins (tests/data/autotune/triton_standin.py) for triton.Config,
@triton.jit and triton.autotune, a sim farm, the harness timing on the host.

The translation from Triton's arguments (configs, key, prune_configs_by,
reset_to_zero) to the farm's op, the check against the first config, the
answer reused from the store by a second process, lookup mode that starts
no farm, and Triton-style errors for Triton-style mistakes.

Run: TUNEFARM_BINARY=build/cli/tunefarm TUNEFARM_FARM_LIB=build/client/libtunefarm_farm.so \
     PYTHONPATH=python python3 tests/python/test_triton_autotune.py
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest
import warnings

SOURCE = os.environ.get("TUNEFARM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
KERNEL_DIR = os.path.join(SOURCE, "tests", "data", "autotune")
sys.path.insert(0, KERNEL_DIR)

import tunefarm  # noqa: E402
import tunefarm.triton  # noqa: E402
import triton_standin as tl  # noqa: E402

BINARY = os.path.abspath(os.environ["TUNEFARM_BINARY"])

CALL = """
import json, os, sys
import triton_kernel, triton_standin
n = int(sys.argv[1])
x = [float(i %% 13) - 6 for i in range(n)]
y = [0.0] * n
triton_kernel.scale[lambda meta: (triton_standin.cdiv(meta["n"], meta["BLOCK"]),)](x, y, n=n)  # n by keyword: the harness passes it so too
best = triton_kernel.scale.best_config
print(json.dumps({"right": y == [2 * v for v in x], "block": best.kwargs["BLOCK"], "num_warps": best.num_warps,
                  "listed": isinstance(best, triton_standin.Config), "tunes": triton_kernel.scale._tuned.tunes,
                  "farm": triton_kernel.scale._tuned._farm is not None,
                  "misses": len(triton_kernel.scale._tuned.misses), "cache": len(triton_kernel.scale.cache)}))
"""


class TritonAutotune(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tunefarm-triton.")
        cls.store = os.path.join(cls.dir, "autotune.db")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def call(self, n, store=None, **env):
        e = dict(os.environ)
        e["PYTHONPATH"] = KERNEL_DIR + os.pathsep + e.get("PYTHONPATH", "")
        e["AUTOTUNE_TEST_STORE"] = store or self.store
        e.update(env)
        out = subprocess.run([sys.executable, "-c", CALL % (), str(n)], env=e, capture_output=True, text=True,
                             timeout=240)
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout.strip().splitlines()[-1]), out.stdout

    def rows(self):
        return json.loads(subprocess.run([BINARY, "results", "--store", self.store, "--op", "scale", "--format",
                                          "json"], capture_output=True, text=True, check=True).stdout)

    def test_1_the_one_import_change_tunes_checks_against_the_first_config_and_is_reused(self):
        first, _ = self.call(32)
        self.assertTrue(first["right"])
        self.assertEqual(first["tunes"], 1)
        self.assertFalse(first["farm"])
        self.assertTrue(first["listed"])  # one of the kernel's own triton.Config objects
        rows = self.rows()
        # early_config_prune took BLOCK=64 (wider than n=32) off: three configs
        # measured, each a point of Triton's list with its launch fields.
        configs = [(dict(kv.split("=") for kv in r["config"].split(",")), r) for r in rows]
        self.assertEqual(sorted(int(d["BLOCK"]) for d, _ in configs), [4, 5, 8], rows)
        for d, r in configs:
            self.assertIn("num_warps", d)
            self.assertEqual(r["proposer"], "listed/1")
            # BLOCK=5 adds 1: fast because wrong, and the first config's
            # output fails it; the others pass.
            self.assertEqual(bool(r["check_passed"]), d["BLOCK"] != "5", r)
            if r["check_passed"]:
                self.assertEqual(r["checked_against"], "default", r)
        self.assertNotEqual(first["block"], 5)
        # A new process answers from the store: nothing tuned.
        second, _ = self.call(32, TUNEFARM_AUTOTUNE="lookup")
        self.assertTrue(second["right"])
        self.assertEqual(second["tunes"], 0)
        self.assertEqual(second["block"], first["block"])

    def test_2_lookup_mode_never_starts_a_farm(self):
        fresh = os.path.join(self.dir, "fresh.db")
        out, _ = self.call(16, store=fresh, TUNEFARM_AUTOTUNE="lookup")
        self.assertEqual(out["tunes"], 0)
        self.assertEqual(out["misses"], 1)
        self.assertFalse(out["farm"])
        self.assertEqual(out["block"], 4)  # the first config
        self.assertTrue(out["right"])
        self.assertFalse(os.path.exists(fresh), "lookup wrote a store")

    def test_3_triton_print_autotuning_says_the_answer(self):
        _, stdout = self.call(32, TUNEFARM_AUTOTUNE="lookup", TRITON_PRINT_AUTOTUNING="1")
        self.assertRegex(stdout, r"Triton autotuning for function scale finished after [0-9.]+s; best config "
                                 r"selected: BLOCK: \d+, num_warps: \d+")

    def test_4_triton_style_mistakes_are_triton_style_errors(self):
        def kernel(x, y, n, BLOCK):
            pass
        jitted = tl.jit(kernel)
        with self.assertRaisesRegex(TypeError, r"configs\[1\] is \{'BLOCK': 8\}, not a triton.Config"):
            tunefarm.triton.autotune(configs=[tl.Config({"BLOCK": 4}), {"BLOCK": 8}], key=["n"])(jitted)
        with self.assertRaisesRegex(ValueError, "key names 'm', no argument of kernel"):
            tunefarm.triton.autotune(configs=[tl.Config({"BLOCK": 4})], key=["m"])(jitted)
        with self.assertRaisesRegex(KeyError, "Keyword argument BLK was specified but unrecognised"):
            tunefarm.triton.autotune(configs=[tl.Config({"BLK": 4})], key=["n"])(jitted)
        with self.assertRaisesRegex(ValueError, r"configs\[1\] sets"):
            tunefarm.triton.autotune(configs=[tl.Config({"BLOCK": 4}), tl.Config({})], key=["n"])(jitted)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tunefarm.triton.autotune(configs=[tl.Config({"BLOCK": 4})], key=["n"], warmup=25, rep=100)(jitted)
        self.assertEqual(len(caught), 1)
        self.assertIn("rep, warmup ignored", str(caught[0].message))
        k = tunefarm.triton.autotune(configs=[tl.Config({"BLOCK": 4}), tl.Config({"BLOCK": 8})], key=["n"])(jitted)
        with self.assertRaisesRegex(tunefarm.TunefarmError, "key argument n = 0"):
            k[(1,)]([1.0], [0.0], 0)

    def test_5_a_kernel_under_triton_autotune_is_read(self):
        def kernel(x, y, n, BLOCK):
            pass
        inner = tl.autotune(configs=[tl.Config({"BLOCK": 4}, num_warps=2), tl.Config({"BLOCK": 8})], key=["n"],
                            reset_to_zero=["y"])(tl.jit(kernel))
        k = tunefarm.triton.autotune()(inner)
        self.assertEqual([c.kwargs["BLOCK"] for c in k.configs], [4, 8])
        self.assertEqual(k.keys, ["n"])
        self.assertEqual(k.reset_to_zero, ["y"])
        self.assertEqual(k._tuned.space, {"BLOCK": [4, 8], "num_warps": [2, 4], "num_stages": [3], "num_ctas": [1]})
        self.assertEqual(k._tuned.default, {"BLOCK": 4, "num_warps": 2, "num_stages": 3, "num_ctas": 1})

    def test_6_arguments_the_farm_cannot_make_are_named(self):
        with self.assertRaisesRegex(tunefarm.TunefarmError, "argument stream is a object"):
            tunefarm.triton.describe("stream", object())
        self.assertEqual(tunefarm.triton.describe("n", 7), {"value": 7})
        self.assertEqual(tunefarm.triton.describe("x", [1.0, 2.0]), {"list": {"len": 2, "item": "float"}})
        made = tunefarm.triton.make_argument({"list": {"len": 4, "item": "float"}}, 3, 0)
        self.assertEqual(made, tunefarm.triton.make_argument({"list": {"len": 4, "item": "float"}}, 3, 0))
        self.assertNotEqual(made, tunefarm.triton.make_argument({"list": {"len": 4, "item": "float"}}, 4, 0))

    def test_8_one_config_left_by_pruning_is_launched_untimed(self):
        fresh = os.path.join(self.dir, "one.db")
        out, _ = self.call(4, store=fresh)  # early_config_prune keeps BLOCK=4 alone at n=4
        self.assertTrue(out["right"])
        self.assertEqual(out["block"], 4)
        self.assertEqual(out["tunes"], 0)
        self.assertFalse(os.path.exists(fresh), "a tuning ran")

    def test_7_a_coordinator_named_by_tunefarm_farm_tunes_and_answers(self):
        port = free_port()
        endpoint = "tcp://127.0.0.1:%d" % port
        farm_store = os.path.join(self.dir, "farm.db")
        with open(os.path.join(self.dir, "farm.log"), "w") as log:
            procs = [subprocess.Popen([BINARY, "coordinator", "--bind", endpoint, "--store", farm_store],
                                      stdout=log, stderr=subprocess.STDOUT),
                     # The stand-ins are the worker host's "Triton": installed there, not shipped.
                     subprocess.Popen([BINARY, "worker", "--connect", endpoint, "--backend", "sim", "--sim-models",
                                       "a100", "--allow-programs"], stdout=log, stderr=subprocess.STDOUT,
                                      env=dict(os.environ, PYTHONPATH=KERNEL_DIR + os.pathsep +
                                               os.environ.get("PYTHONPATH", "")))]
        try:
            local = os.path.join(self.dir, "remote-index.db")  # holds the op's files and index, no rows
            first, _ = self.call(24, store=local, TUNEFARM_FARM=endpoint)
            self.assertTrue(first["right"])
            self.assertEqual(first["tunes"], 1)
            rows = json.loads(subprocess.run([BINARY, "results", "--coordinator", endpoint, "--op", "scale",
                                              "--format", "json"], capture_output=True, text=True, check=True).stdout)
            self.assertEqual({r["gpu_model"] for r in rows}, {"sim-a100"})
            self.assertEqual({r["shape"] for r in rows}, {"n=24"})
            again, _ = self.call(24, store=local, TUNEFARM_FARM=endpoint, TUNEFARM_AUTOTUNE="lookup")
            self.assertEqual(again["tunes"], 0)
            self.assertEqual(again["misses"], 0)
            self.assertEqual(again["block"], first["block"])
        finally:
            for p in procs:
                p.terminate()
                p.wait(timeout=30)


class DoBenchPair(unittest.TestCase):
    """tunefarm.triton.do_bench_pair: both callables under do_bench, their
    order swapped each round, the medians returned."""

    def test_interleaves_and_takes_medians(self):
        import types
        order = []
        testing = types.ModuleType("triton.testing")
        testing.do_bench = lambda fn: fn()
        saved = {k: sys.modules.get(k) for k in ("triton", "triton.testing")}
        sys.modules["triton"] = types.ModuleType("triton")
        sys.modules["triton.testing"] = testing
        try:
            a_times, b_times = iter([3.0, 1.0, 2.0]), iter([5.0, 9.0, 4.0])
            got = tunefarm.triton.do_bench_pair(lambda: order.append("a") or next(a_times),
                                                lambda: order.append("b") or next(b_times), rounds=3)
        finally:
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v
        self.assertEqual(got, (2.0, 5.0))
        self.assertEqual(order, ["a", "b", "b", "a", "a", "b"])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    unittest.main(verbosity=2)
