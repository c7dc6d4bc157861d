"""The sampling loop's stopping rule is the same in tunefarm.harness (Python
kernels) and in the farm's C++ (measure/sampling.h, the CUDA runner): over a
grid of sample sets, policies, best-so-far figures, timed and wall seconds,
both give the same statistics and the same steps, bit for bit, from one copy
of the rule's data (python/tunefarm/sampling_rule.json). The C++ answers come
from sampling_rule_fixture (its path: argv[1]), a real process on pipes.
Runs on Debian's python3 without torch or a GPU."""
import json
import os
import random
import subprocess
import sys
import tempfile
import unittest

SOURCE = os.environ.get("TUNEFARM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "python"))

from tunefarm import harness  # noqa: E402

FIXTURE = None  # set from argv in __main__

POLICIES = [
    {},  # the rule's defaults
    {"min_samples": 10, "max_samples": 40},
    {"min_samples": 1, "max_samples": 3},
    {"min_samples": 50, "max_samples": 20},  # a minimum above the maximum
    {"target_rel_ci": 0.002, "rank_rel_ci": 0.05, "refine_within": 0.02},
    {"target_rel_ci": 1e-300},  # what the target needs overflows any int
    {"target_rel_ci": 0.0, "early_stop_factor": 0.0},  # every sample the caps allow
    {"max_seconds": 1e-5, "max_samples": 1000},
    {"max_seconds": 5.0, "early_stop_factor": 1.05, "refine_within": 0.0},
]
COUNTS = [0, 1, 2, 3, 4, 5, 6, 9, 10, 11, 17, 20, 29, 30, 31, 32, 33, 39, 40, 45, 61, 99, 100, 101, 130]
MEANS_US = [0.9, 13.7, 250.3, 8123.4]
SPREADS = [0.0, 0.0007, 0.004, 0.02, 0.08, 0.4]  # stdev / mean of the generator


def sample_sets():
    rng = random.Random(20261117)
    for n in COUNTS:
        for mean in MEANS_US:
            for spread in SPREADS:
                # Positive timings with a long right tail, as a GPU gives them.
                yield [max(1e-3, mean * (1 + spread * (rng.gauss(0, 1) + 0.5 * rng.expovariate(1.0))))
                       for _ in range(n)]


def steps_for(samples):
    """(best_so_far_us, wall_cap, timed_seconds, wall_seconds) around the
    samples' own mean: no best, a contender's, a ranked one's, one slow
    enough to stop early; caps not reached, reached and passed."""
    mean = sum(samples) / len(samples) if samples else 100.0
    out = []
    for best in (0.0, mean * 1.01, mean * 0.97, mean * 0.85, mean * 0.5):
        for timed in (0.0, 0.004, 0.0999, 0.1, 0.3):
            for wall_cap, wall in ((0.0, 0.0), (0.0, 9.0), (2.0, 1.0), (2.0, 2.0)):
                out.append([best, wall_cap, timed, wall])
    return out


def run_fixture(requests):
    """The fixture's answers to `requests`, in order."""
    text = "".join(json.dumps(r, allow_nan=False) + "\n" for r in requests)
    done = subprocess.run([FIXTURE], input=text, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise AssertionError("sampling_rule_fixture exited %d: %s" % (done.returncode, done.stderr.strip()))
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    if len(answers) != len(requests):
        raise AssertionError("%d requests, %d answers" % (len(requests), len(answers)))
    return answers


class SameRule(unittest.TestCase):
    def test_defaults_are_the_shared_file(self):
        (cpp,) = run_fixture([{"defaults": True}])
        self.assertEqual(cpp["max_batch"], harness.MAX_BATCH)
        self.assertEqual(cpp["policy"], harness.RULE["policy"])
        with open(harness.RULE_FILE, encoding="utf-8") as f:
            shipped = json.load(f)
        self.assertEqual(cpp["policy"], shipped["policy"])
        self.assertEqual(cpp["max_batch"], shipped["max_batch"])

    def test_student_t_is_the_same_table(self):
        dofs = list(range(1, 300)) + [499, 500, 999, 1000, 1001, 5000, 10 ** 6]
        (cpp,) = run_fixture([{"dof": dofs}])
        for dof, t in zip(dofs, cpp["t95"]):
            self.assertEqual(harness.student_t95(dof), t, "dof %d" % dof)

    def test_same_statistics_and_steps(self):
        requests, cases = [], []
        for policy in POLICIES:
            full = dict(harness.RULE["policy"], **policy)
            for samples in sample_sets():
                steps = steps_for(samples)
                requests.append({"policy": full, "samples": samples, "steps": steps})
                cases.append((full, samples, steps))
        answers = run_fixture(requests)
        compared, stops = 0, set()
        for (policy, samples, steps), cpp in zip(cases, answers):
            where = "policy %s, %d samples (mean %.6g)" % (policy, len(samples), cpp["mean"])
            if samples:
                median, mean, ci95 = harness.summarize(samples)
                self.assertEqual((median, mean, ci95), (cpp["median"], cpp["mean"], cpp["ci95"]), where)
            else:
                median = mean = ci95 = 0.0
            for step, want in zip(steps, cpp["steps"]):
                best, wall_cap, timed, wall = step
                got = harness.next_sampling(policy, best, wall_cap, len(samples), median, mean, ci95, timed, wall)
                self.assertEqual(list(got), want, "%s, step %s" % (where, step))
                stops.add(want[0])
                compared += 1
                if wall_cap == 0:
                    # The harness's own loop: a stop is a batch of 0.
                    timing = dict(policy, best_so_far_us=best)
                    self.assertEqual(harness.next_batch(timing, samples, timed), want[1], "%s, step %s" % (where, step))
        # The grid reaches every way the loop can end.
        self.assertEqual(stops, {"no", "early", "noise_target", "max_samples", "time_cap", "wall_cap"})
        self.assertGreater(compared, 100000)


class RuleFile(unittest.TestCase):
    def bad(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write(text)
        try:
            with self.assertRaises(ValueError) as got:
                harness.load_rule(f.name)
        finally:
            os.unlink(f.name)
        message = str(got.exception)
        self.assertTrue(message.startswith(f.name + ": "), message)
        self.assertNotIn("\n", message)
        return message

    def test_a_broken_file_is_one_line_naming_the_field(self):
        with open(harness.RULE_FILE, encoding="utf-8") as f:
            good = json.load(f)
        self.bad("{")
        self.assertIn("max_batch", self.bad("{}"))
        broken = json.loads(json.dumps(good))
        broken["policy"]["min_samples"] = "5"
        self.assertIn("policy.min_samples", self.bad(json.dumps(broken)))
        broken = json.loads(json.dumps(good))
        broken["policy"] = [5, 100]
        self.assertIn("policy", self.bad(json.dumps(broken)))
        broken = json.loads(json.dumps(good))
        broken["t95"]["dof_1_up"][3] = -1
        self.assertIn("t95.dof_1_up[3]", self.bad(json.dumps(broken)))
        broken = json.loads(json.dumps(good))
        broken["t95"]["anchors"][0][0] = 31
        self.assertIn("t95", self.bad(json.dumps(broken)))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_sampling_rule.py SAMPLING_RULE_FIXTURE [unittest args]")
    FIXTURE = sys.argv.pop(1)
    unittest.main(verbosity=2)
