"""`tunefarm results --format t4` against the published T4 results schema.

A sim sweep's rows (every config of gemm at one shape, failures included)
written as a T4 document validate against Kernel Tuner's schema
(tests/data/t4/results-schema.json) with Debian's python3-jsonschema, carry
the farm's figures in T4's units, and say that they are simulated. Exits 77
(skipped) where python3-jsonschema is missing.

Run: TUNEFARM_BINARY=build/cli/tunefarm python3 tests/python/test_t4.py
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

try:
    import jsonschema
except ImportError:
    jsonschema = None

BINARY = os.path.abspath(os.environ.get("TUNEFARM_BINARY", "build/cli/tunefarm"))
SOURCE = os.environ.get("TUNEFARM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SCHEMA = os.path.join(SOURCE, "tests", "data", "t4", "results-schema.json")

# The farm's row status -> T4's invalidity (report/t4.h).
INVALIDITY = {
    "ok": "correct", "unchecked": "correct", "compile_error": "compile", "wrong_result": "correctness",
    "nan": "correctness", "check_not_passed": "correctness", "timeout": "timeout", "skipped": "timeout",
    "crash": "runtime", "launch_error": "runtime", "resources": "runtime", "no_samples": "runtime",
}


class T4Export(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tunefarm-t4.")
        cls.run_cli("tune", "--backend", "sim", "--op", "gemm", "--dtype", "f16", "--shape", "M=256,N=256,K=256",
                    "--ops-dir", os.path.join(SOURCE, "ops"), "--store", "db", "--bundle", "b", "--unsigned",
                    "--quiet")
        cls.doc = json.loads(cls.run_cli("results", "--store", "db", "--format", "t4").stdout)
        cls.rows = json.loads(cls.run_cli("results", "--store", "db", "--format", "json").stdout)
        with open(SCHEMA) as f:
            cls.schema = json.load(f)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def run_cli(cls, *args):
        return subprocess.run([BINARY, *args], cwd=cls.dir, check=True, capture_output=True, text=True)

    def test_the_document_validates_against_the_published_schema(self):
        jsonschema.Draft202012Validator.check_schema(self.schema)
        jsonschema.Draft202012Validator(self.schema).validate(self.doc)
        self.assertEqual(self.doc["schema_version"], "1.0.0")
        self.assertEqual(len(self.doc["results"]), len(self.rows))
        # The validator does find what breaks the schema (it is no empty check).
        broken = json.loads(json.dumps(self.doc))
        del broken["results"][0]["times"]
        with self.assertRaises(jsonschema.ValidationError):
            jsonschema.Draft202012Validator(self.schema).validate(broken)

    def test_each_result_carries_its_rows_figures_in_ms_and_its_status_as_invalidity(self):
        by_key = {(r["shape"], r["config_id"]): r for r in self.rows}
        valid = 0
        for res in self.doc["results"]:
            meta = res["metadata"]
            row = by_key[(meta["shape"], meta["config_id"])]
            self.assertEqual(res["invalidity"], INVALIDITY[row["status"]], row["status"])
            self.assertEqual(meta["status"], row["status"])
            self.assertEqual(res["correctness"], 0 if res["invalidity"] == "correctness" else 1)
            self.assertEqual(res["objectives"], ["time"])
            self.assertTrue(all(isinstance(v, (int, str, bool)) for v in res["configuration"].values()))
            if res["invalidity"] == "correct":
                valid += 1
                measured = {m["name"]: m for m in res["measurements"]}
                self.assertAlmostEqual(measured["time"]["value"], row["median_us"] / 1000.0, places=9)
                self.assertEqual(measured["time"]["unit"], "ms")
                self.assertEqual(measured["samples"]["value"], row["samples"])
                self.assertEqual(res["times"]["runtimes"], [measured["time"]["value"]])
            else:
                self.assertEqual(res["times"]["runtimes"], [])
        self.assertGreater(valid, 0)

    def test_sim_rows_say_they_are_simulated(self):
        for res in self.doc["results"]:
            self.assertEqual(res["metadata"]["backend"], "sim")
            self.assertIs(res["metadata"]["simulated"], True)
            self.assertEqual(res["metadata"]["op"], "gemm")
            self.assertEqual(res["metadata"]["dtype"], "f16")

    def test_best_writes_t4_too(self):
        best = json.loads(self.run_cli("best", "--store", "db", "--format", "t4").stdout)
        jsonschema.Draft202012Validator(self.schema).validate(best)
        self.assertEqual({r["invalidity"] for r in best["results"]}, {"correct"})


if __name__ == "__main__":
    if jsonschema is None:
        print("skipped: python3-jsonschema is not installed")
        sys.exit(77)
    unittest.main()
