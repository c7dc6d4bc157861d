"""tunefarm.autotune on a host without a GPU (sim farm, host-timed Python kernel).

The first process tunes the key on its first call and stores the rows; a
second process answers from the store without tuning; the switches
(TUNEFARM_FORCE_DEFAULTS, lookup mode), an edited kernel and bad
declarations behave as documented.

Run: TUNEFARM_BINARY=build/cli/tunefarm TUNEFARM_FARM_LIB=build/client/libtunefarm_farm.so \
     PYTHONPATH=python python3 tests/python/test_autotune.py
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types
import unittest
import warnings

import tunefarm
import tunefarm.harness

BINARY = os.path.abspath(os.environ["TUNEFARM_BINARY"])
SOURCE = os.environ.get("TUNEFARM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
KERNEL_DIR = os.path.join(SOURCE, "tests", "data", "autotune")

CALL = """
import json, sys
import host_kernel
x = [float(i % 17) for i in range(256)]
y = [0.0] * 256
host_kernel.double(x, y)
level, config = next(iter(host_kernel.double.answers.values()))
print(json.dumps({"level": level, "config": config, "right": y == [2 * v for v in x],
                  "tunes": host_kernel.double.tunes, "farm_left_open": host_kernel.double._farm is not None,
                  "misses": len(host_kernel.double.misses)}))
host_kernel.double.close()
"""


class Autotune(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tunefarm-autotune.")
        cls.store = os.path.join(cls.dir, "autotune.db")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def run_call(self, kernel_dir=KERNEL_DIR, _call=CALL, **env):
        e = dict(os.environ)
        e["PYTHONPATH"] = kernel_dir + os.pathsep + e.get("PYTHONPATH", "")
        e["AUTOTUNE_TEST_STORE"] = self.store
        e.update(env)
        out = subprocess.run([sys.executable, "-c", _call], env=e, capture_output=True, text=True, timeout=240)
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout.strip().splitlines()[-1])

    def test_1_the_first_call_tunes_and_a_new_process_reuses_the_store(self):
        first = self.run_call()
        self.assertTrue(first["right"])
        self.assertEqual(first["level"], "tuned")
        self.assertEqual(first["tunes"], 1)
        # The farm that tuned it (it runs program ops as this user) is closed
        # once the tuning ends, not kept for the life of the process.
        self.assertFalse(first["farm_left_open"])
        # The rows are in a store `tunefarm results` reads: every legal config
        # of the key (exhaustive), each checked against the reference.
        rows = json.loads(subprocess.run([BINARY, "results", "--store", self.store, "--op", "double", "--format",
                                          "json"], capture_output=True, text=True, check=True).stdout)
        self.assertEqual(len({r["config"] for r in rows}), 12)
        self.assertTrue(all(r["check_passed"] for r in rows))
        winner = next(r for r in rows if r["winner"])
        self.assertEqual(winner["shape"], "N=256")
        # A new process: the store answers, nothing is tuned.
        second = self.run_call(TUNEFARM_AUTOTUNE="lookup")
        self.assertEqual(second["level"], "tuned")
        self.assertEqual(second["tunes"], 0)
        self.assertEqual(second["config"], first["config"])
        self.assertEqual(tunefarm.autotuning._key_text({"N": 256}, "f32"), "f32 N=256")

    def test_2_force_defaults_answers_the_default(self):
        out = subprocess.run([sys.executable, "-c", "import host_kernel; print(host_kernel.double.config_for([1.0], [0.0]))"],
                             env=dict(os.environ, PYTHONPATH=KERNEL_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""),
                                      TUNEFARM_FORCE_DEFAULTS="1", AUTOTUNE_TEST_STORE=self.store),
                             capture_output=True, text=True, check=True)
        self.assertEqual(out.stdout.strip(), str({"UNROLL": 1, "SLOW": 1, "ORDER": "forward"}))

    def test_3_an_edited_kernel_is_a_new_kernel(self):
        edited = os.path.join(self.dir, "edited")
        os.makedirs(edited, exist_ok=True)
        with open(os.path.join(KERNEL_DIR, "host_kernel.py")) as f:
            source = f.read()
        with open(os.path.join(edited, "host_kernel.py"), "w") as f:
            f.write(source + "\n# edited\n")
        stale = self.run_call(kernel_dir=edited, TUNEFARM_AUTOTUNE="lookup")
        self.assertEqual(stale["level"], "default")
        self.assertEqual(stale["misses"], 1)
        self.assertTrue(stale["right"])

    def test_4_bad_declarations_and_keys_are_clear_errors(self):
        ok = dict(key=lambda x: {"N": len(x)}, inputs=lambda d, t, s: [[0.0] * d["N"]])

        def kern(config, x):
            pass
        with self.assertRaisesRegex(ValueError, "macro token"):
            tunefarm.autotune(space={"ORDER": ["12abc"]}, **ok)(kern)
        with self.assertRaisesRegex(ValueError, "all ints"):
            tunefarm.autotune(space={"BM": [64, "wide"]}, **ok)(kern)
        with self.assertRaisesRegex(ValueError, "default BM=96"):
            tunefarm.autotune(space={"BM": [64, 128]}, default={"BM": 96}, **ok)(kern)

        def broken_key(x):
            raise KeyError("N")
        k = tunefarm.autotune(space={"BM": [64]}, key=broken_key, inputs=ok["inputs"])(kern)
        with self.assertRaisesRegex(tunefarm.TunefarmError, "key function raised KeyError"):
            k([1.0])
        k = tunefarm.autotune(space={"BM": [64]}, key=lambda x: {"N": "many"}, inputs=ok["inputs"])(kern)
        with self.assertRaisesRegex(tunefarm.TunefarmError, "N = 'many'"):
            k([1.0])
        k = tunefarm.autotune(space={"BM": [64]}, dtype="fp16", **ok)(kern)
        with self.assertRaisesRegex(tunefarm.TunefarmError, "unknown dtype 'fp16'"):
            k([1.0])

    def test_5_a_config_off_the_declared_space_is_ignored_with_a_warning(self):
        class Answering:  # a bundle's lookup (tunefarm.Bundle.lookup) answering `config`
            def __init__(self, config):
                self.config = config

            def lookup(self, op, dtype, gpu, dims):
                return types.SimpleNamespace(level="exact", config=self.config)

        def kern(config, x):
            return config
        space = {"BM": [64, 128], "WIDE": [False, True], "ORDER": ["forward", "backward"]}
        good = {"BM": 128, "WIDE": True, "ORDER": "backward"}
        for config, why in (({"BM": 96, "WIDE": True, "ORDER": "forward"}, "BM=96 is not one of \\[64, 128\\]"),
                            ({"BM": 64, "WIDE": 1, "ORDER": "forward"}, "WIDE=1 is not one of"),
                            ({"BM": True, "WIDE": True, "ORDER": "forward"}, "BM=True is not one of"),
                            ({"BM": 64, "WIDE": True, "ORDER": "sideways"}, "ORDER='sideways'"),
                            ({"BM": 64, "WIDE": True}, "missing ORDER"),
                            ({"BM": 64, "WIDE": True, "ORDER": "forward", "BK": 32}, "no axis BK"),
                            (["BM", 64], "not a dict")):
            k = tunefarm.autotune(space=space, key=lambda x: {"N": len(x)}, inputs=lambda d, t, s: [[0.0] * d["N"]],
                                  dtype="f32", bundle=Answering(config), mode="lookup", store=self.store + "-off",
                                  op="off_space")(kern)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                answer = k([1.0, 2.0])
            self.assertEqual(answer, {"BM": 64, "WIDE": False, "ORDER": "forward"}, config)  # the default
            self.assertEqual(k.misses, {"f32 N=2": 1})
            self.assertEqual(len(caught), 1, [str(w.message) for w in caught])
            message = str(caught[0].message)
            self.assertIn("ignoring the config %r from the bundle" % (config,), message)
            self.assertRegex(message, why)
        k = tunefarm.autotune(space=space, key=lambda x: {"N": len(x)}, inputs=lambda d, t, s: [[0.0] * d["N"]],
                              dtype="f32", bundle=Answering(good), mode="lookup", store=self.store + "-off",
                              op="off_space")(kern)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            self.assertEqual(k([1.0, 2.0]), good)
        self.assertEqual(k.answers[("f32", ("N", 2))], ("exact", good))

    def test_6_key_dims_beyond_int64_are_refused_naming_the_dim(self):
        def kern(config, x):
            return config
        k = tunefarm.autotune(space={"BM": [64]}, key=lambda x: {"N": x}, inputs=lambda d, t, s: [],
                              mode="lookup", store=self.store + "-big")(kern)
        with self.assertRaisesRegex(OverflowError, "key dim N = %d is beyond int64" % (2**64 + 4096)):
            k(2**64 + 4096)
        self.assertEqual(k.answers, {})

    def test_7_a_module_that_tunes_when_imported_is_told_to_guard_it(self):
        # The harness imports the kernel's module to serve it: a script that
        # calls the tuned function at its top level would tune again from
        # inside its own tuning. The tuning fails once, naming the cause.
        with tempfile.TemporaryDirectory(prefix="tunefarm-reentry.") as d:
            with open(os.path.join(KERNEL_DIR, "host_kernel.py")) as f:
                source = f.read()
            with open(os.path.join(d, "unguarded_kernel.py"), "w") as f:
                f.write(source + "\n\ndouble([1.0] * 64, [0.0] * 64)  # no __main__ guard\n")
            e = dict(os.environ)
            e["PYTHONPATH"] = d + os.pathsep + e.get("PYTHONPATH", "")
            e["AUTOTUNE_TEST_STORE"] = os.path.join(d, "store.db")
            out = subprocess.run([sys.executable, "-c", "import unguarded_kernel"], env=e, capture_output=True,
                                 text=True, timeout=240)
            self.assertNotEqual(out.returncode, 0, out.stdout)
            self.assertIn("no config of f32 N=64 passed its check", out.stderr)
            self.assertIn('put the code that calls it under `if __name__ == "__main__":`', out.stderr)

    def tune_variant(self, d, name, edits):
        """Tunes a copy of host_kernel.py with `edits` ((old, new) pairs) as
        module `name` in a store of folder `d`: (the call's answer, the rows)."""
        with open(os.path.join(KERNEL_DIR, "host_kernel.py")) as f:
            source = f.read()
        for old, new in edits:
            self.assertIn(old, source)
            source = source.replace(old, new)
        with open(os.path.join(d, name + ".py"), "w") as f:
            f.write(source)
        store = os.path.join(d, "store.db")
        answer = self.run_call(kernel_dir=d, AUTOTUNE_TEST_STORE=store,
                               _call=CALL.replace("import host_kernel", "import %s as host_kernel" % name))
        rows = json.loads(subprocess.run([BINARY, "results", "--store", store, "--op", "double", "--format",
                                          "json"], capture_output=True, text=True, check=True).stdout)
        return answer, rows

    def test_8_without_a_reference_configs_are_checked_against_the_default(self):
        # No reference: a config that is wrong (UNROLL=4 spoils the last
        # item) fails its check against the default config's outputs and
        # cannot win, however fast it is.
        with tempfile.TemporaryDirectory(prefix="tunefarm-no-reference.") as d:
            answer, rows = self.tune_variant(d, "unreferenced", [
                ("    reference=reference,\n", ""),
                ("y[j] = 2 * x[j]", "y[j] = 2 * x[j] + (1.0 if config['UNROLL'] == 4 and j == n - 1 else 0.0)")])
            self.assertTrue(answer["right"])
            self.assertNotEqual(answer["config"]["UNROLL"], 4)
            self.assertEqual(len(rows), 12)
            wrong = [r for r in rows if r["config"].startswith("UNROLL=4") or ",UNROLL=4" in r["config"]]
            self.assertEqual(len(wrong), 4, [r["config"] for r in rows])
            for r in wrong:
                self.assertEqual(r["status"], "wrong_result", r)
                self.assertIn("default", r["reason"])
            for r in rows:
                if r not in wrong:
                    self.assertEqual((r["status"], r["checked_against"]), ("ok", "default"), r)

    def test_9_an_energy_objective_measures_every_configs_energy_and_picks_by_it(self):
        # objective="energy": the harness reads an energy counter around a
        # window of calls after each timing (the host device's modelled
        # board here: HOST_MODEL_POWER_W), the rows carry it, and the answer
        # is the config of least energy per call.
        with tempfile.TemporaryDirectory(prefix="tunefarm-energy.") as d:
            answer, rows = self.tune_variant(d, "frugal", [
                ('    strategy="exhaustive",\n', '    strategy="exhaustive",\n    objective="energy",\n')])
            self.assertTrue(answer["right"])
            self.assertEqual(len(rows), 12)
            for r in rows:
                self.assertGreater(r["energy_uj"], 0, r)
                self.assertAlmostEqual(r["power_w"], tunefarm.harness.HOST_MODEL_POWER_W, delta=1.0)
            least = min(rows, key=lambda r: r["energy_uj"])
            self.assertEqual({k: str(v) for k, v in answer["config"].items()},
                             dict(kv.split("=", 1) for kv in least["config"].split(",")))
            with self.assertRaisesRegex(ValueError, "objective"):
                tunefarm.autotune(space={"A": [1]}, key=lambda: {}, inputs=lambda *a: [], objective="watts")(
                    _bad_objective)

def _bad_objective(config):
    pass


if __name__ == "__main__":
    unittest.main()
