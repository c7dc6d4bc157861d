"""Tuning from Python (tunefarm.Farm) over the real farm library, with Debian's python3.

A farm in this process (Farm.local, sim backend) and a farm of real processes
(`tunefarm coordinator` and a sim `tunefarm worker` on loopback, reached with
Farm.connect): sweeps submitted, watched, cancelled and read as plain dicts,
winners published into a bundle the deployment side loads, and the CLI's
remote reads (`results --coordinator`) agreeing with the store read in place.

Run: TUNEFARM_BINARY=build/cli/tunefarm TUNEFARM_LIB=build/libtune/libtunefarm_c.so \
     TUNEFARM_FARM_LIB=build/client/libtunefarm_farm.so PYTHONPATH=python python3 tests/python/test_farm.py
"""
import json
import os
import errno
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import unittest

import tunefarm

BINARY = os.path.abspath(os.environ["TUNEFARM_BINARY"])
SOURCE = os.environ.get("TUNEFARM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
OPS = os.path.join(SOURCE, "ops")
SHAPE = {"M": 512, "N": 512, "K": 512}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tcp_listeners(pid="self"):
    """The TCP (v4 and v6) sockets of process `pid` that listen: their local
    addresses as /proc/net/tcp writes them."""
    inodes = set()
    fd_dir = "/proc/%s/fd" % pid
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    out = []
    for table in ("tcp", "tcp6"):
        try:
            with open("/proc/%s/net/%s" % (pid, table)) as f:
                lines = f.read().splitlines()[1:]
        except FileNotFoundError:
            continue  # no IPv6 here
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # st == TCP_LISTEN
                out.append("%s %s" % (table, fields[1]))
    return out


# Run as another user: connects a Unix socket to argv[1], prints the uid and
# the outcome ("connected" or the errno's name).
CONNECT_AS_ANOTHER_USER = """
import errno, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
    outcome = "connected"
except OSError as e:
    outcome = errno.errorcode.get(e.errno, str(e.errno))
print(os.getuid(), outcome)
"""


class LocalFarm(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tunefarm-farm.")
        subprocess.run([BINARY, "keys", "sign", "--out", os.path.join(cls.dir, "farm.key")], check=True,
                       capture_output=True)
        cls.farm = tunefarm.Farm.local(store=os.path.join(cls.dir, "db"), backend="sim", sim_models=["h100"],
                                       ops_dir=OPS)

    @classmethod
    def tearDownClass(cls):
        cls.farm.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_a_budgeted_sweep_is_tuned_watched_and_read_as_dicts(self):
        self.assertTrue(self.farm.info["simulated"])
        sweep = self.farm.tune("gemm", shapes=[SHAPE], strategy="random", budget=40, seed=3)
        self.assertIn(sweep.id, repr(sweep))
        final = sweep.wait(progress=False)
        self.assertEqual(final["state"], "done")
        self.assertEqual(final["id"], sweep.id)
        rows = sweep.results()
        self.assertEqual(len(rows), 40)  # the budget, per key
        for r in rows:
            for key in ("op", "dtype", "gpu_model", "shape", "config", "median_us"):
                self.assertIn(key, r)
            self.assertEqual(r["shape"], SHAPE)
            self.assertIsInstance(r["config"]["BM"], int)
        best = sweep.best()
        self.assertEqual(len(best), 1)
        self.assertEqual(best[0]["coverage"]["state"], "searched")
        self.assertEqual(best[0]["coverage"]["evaluated"], 40)
        self.assertLessEqual(best[0]["median_us"], min(r["median_us"] for r in rows if r["status"].startswith("ok")))
        # The farm-wide reads see the same key.
        self.assertIn(best[0]["config"], [b["config"] for b in self.farm.best(op="gemm", shape=SHAPE)])
        self.assertIn(sweep.id, [s["id"] for s in self.farm.sweeps()])

    def test_published_winners_load_on_the_deployment_side(self):
        sweep = self.farm.tune("gemm", shapes=[{"M": 256, "N": 256, "K": 256}], strategy="random", budget=20)
        sweep.wait(progress=False)
        out = os.path.join(self.dir, "bundle")
        made = self.farm.publish(out, op="gemm", sign_key=os.path.join(self.dir, "farm.key"))
        self.assertEqual(made["bundle"], out + ".tfb")
        self.assertGreaterEqual(made["entries"], 1)
        with tunefarm.Bundle.load(made["bundle"], [os.path.join(self.dir, "farm.key.pub")]) as b:
            winner = sweep.best()[0]
            answer = b.lookup("gemm", "f16", winner["gpu_model"], {"M": 256, "N": 256, "K": 256})
            self.assertEqual(answer.level, "exact")
            self.assertEqual(answer.config, winner["config"])

    def test_a_config_list_is_measured_exactly_and_a_bad_one_names_its_index(self):
        listed = [{"BM": 128, "BN": 128, "BK": 32, "WM": 2, "WN": 2, "STAGES": 3, "GROUP_M": 8},
                  "BM=64,BN=64,BK=32,WM=1,WN=2,STAGES=2,GROUP_M=1"]
        shape = {"M": 192, "N": 192, "K": 192}
        sweep = self.farm.tune("gemm", shapes=[shape], configs=listed)
        self.assertEqual(sweep.wait(progress=False)["state"], "done")
        rows = sweep.results()
        self.assertEqual(sorted(sorted(r["config"].items()) for r in rows),
                         sorted([sorted(listed[0].items()),
                                 sorted(dict(BM=64, BN=64, BK=32, WM=1, WN=2, STAGES=2, GROUP_M=1).items())]))
        self.assertEqual(sweep.best()[0]["coverage"]["strategy"], "listed/1")
        with self.assertRaisesRegex(tunefarm.TunefarmError, r"configs\[1\]: no value for param 'GROUP_M'"):
            self.farm.tune("gemm", shapes=[shape], configs=[listed[0], {"BM": 64, "BN": 64, "BK": 32, "WM": 1,
                                                                          "WN": 2, "STAGES": 2}])
        with self.assertRaisesRegex(tunefarm.TunefarmError, r"configs\[1\]: .* listed twice"):
            self.farm.tune("gemm", shapes=[shape], configs=[listed[0], dict(listed[0])])
        # The same list again measures nothing; as a retime it is measured
        # again, confirmed, and its rows take the place of the stored ones.
        again = self.farm.tune("gemm", shapes=[shape], configs=listed).wait(progress=False)
        self.assertEqual(again["units_total"], 0, again)
        retimed = self.farm.tune("gemm", shapes=[shape], configs=listed, retime=True).wait(progress=False)
        self.assertEqual(retimed["state"], "done", retimed)
        self.assertGreater(retimed["units_total"], 0, retimed)
        rows = [r for r in self.farm.results(op="gemm") if r["shape"] == shape]
        self.assertEqual(len(rows), 2, rows)
        self.assertTrue(all(r["confirmed"] for r in rows), rows)
        with self.assertRaisesRegex(tunefarm.TunefarmError, r"a retime measures chosen configs again"):
            self.farm.tune("gemm", shapes=[shape], retime=True)

    def test_a_cancelled_sweep_stops_and_wait_says_so(self):
        shapes = [{"M": m, "N": 4096, "K": 4096} for m in (64, 128, 192, 256, 320, 384, 448, 512)]
        sweep = self.farm.tune("gemm", shapes=shapes, strategy="exhaustive")
        status = sweep.cancel()
        self.assertEqual(status["state"], "cancelled")
        with self.assertRaisesRegex(tunefarm.TunefarmError, "cancelled"):
            sweep.wait(progress=False)
        # Its keys are marked partial where anything of them was stored.
        for r in sweep.best():
            self.assertEqual(r["coverage"]["state"], "partial")

    def test_bad_requests_name_the_field(self):
        cases = [
            (dict(ops="gemm", shapes=[SHAPE], strategy="annealing"), "strateg"),
            (dict(ops="gemm", shapes=[SHAPE], budget=0), "budget"),
            (dict(ops="gemm", shapes=[SHAPE], budget=-5), "budget"),
            (dict(ops="gemm", shapes=[SHAPE], budget_seconds=0.0), "budget_seconds"),
            (dict(ops="no_such_op", shapes=[SHAPE]), "no_such_op"),
            (dict(ops="gemm", shapes=[]), "shapes"),
            (dict(ops="gemm", shapes=[SHAPE], seed="seven"), "seed"),
            (dict(ops="gemm", shapes=[SHAPE], priority=101), "priority"),
            (dict(ops="gemm", shapes=[SHAPE], timing="warm"), "timing: 'warm' is not cold or hot"),
        ]
        for kwargs, word in cases:
            with self.subTest(kwargs=kwargs):
                with self.assertRaisesRegex(tunefarm.TunefarmError, word):
                    self.farm.tune(**kwargs)
        with self.assertRaisesRegex(TypeError, "dim M"):
            self.farm.tune("gemm", shapes=[{"M": "big"}])
        with self.assertRaisesRegex(tunefarm.TunefarmError, "backend"):
            tunefarm.Farm.local(store=os.path.join(self.dir, "x"), backend="fpga")
        with self.assertRaisesRegex(tunefarm.TunefarmError, "max_raw_configs"):
            tunefarm.Farm.local(store=os.path.join(self.dir, "x"), backend="sim", max_raw_configs=0)
        # A program op on a local farm that refuses them: Python's word for the switch, not a CLI flag.
        with self.assertRaisesRegex(tunefarm.TunefarmError, r"op program_sum is a program op: .*allow_programs=True"):
            self.farm.tune("program_sum", shapes=[{"N": 1024}], dtypes=["f32"],
                           ops_dir=os.path.join(SOURCE, "tests", "data", "ops"))

    def test_a_sweeps_priority_is_kept_and_shown(self):
        sweep = self.farm.tune("gemm", shapes=[{"M": 128, "N": 128, "K": 128}], strategy="random", budget=4,
                               priority=80)
        self.assertEqual(sweep.wait(progress=False)["priority"], 80)
        self.assertEqual([s["priority"] for s in self.farm.sweeps() if s["id"] == sweep.id], [80])

    def test_a_hot_sweep_keeps_rows_of_its_own_that_say_so(self):
        small = {"M": 256, "N": 256, "K": 256}
        cold = self.farm.tune("gemm", shapes=[small], strategy="random", budget=4, seed=9)
        hot = self.farm.tune("gemm", shapes=[small], strategy="random", budget=4, seed=9, timing="hot")
        for sweep, timing in ((cold, "cold"), (hot, "hot")):
            self.assertEqual(sweep.wait(progress=False)["state"], "done")
            rows = sweep.results()
            self.assertEqual(len(rows), 4)
            self.assertEqual({r["timing"] for r in rows}, {timing})
        self.assertFalse({r["kernel_hash"] for r in cold.results()} & {r["kernel_hash"] for r in hot.results()})

    def test_energy_is_measured_where_asked_and_picks_winners_by_objective(self):
        with self.assertRaisesRegex(tunefarm.TunefarmError, "energy_seconds"):
            tunefarm.Farm.local(store=os.path.join(self.dir, "x"), backend="sim", energy_seconds=60)
        with tunefarm.Farm.local(store=os.path.join(self.dir, "db-energy"), backend="sim", sim_models=["h100"],
                                 ops_dir=OPS, energy_seconds=0.1) as farm:
            shape = {"M": 512, "N": 512, "K": 512}
            sweep = farm.tune("gemm", shapes=[shape], strategy="random", budget=8, seed=3)
            self.assertEqual(sweep.wait(progress=False)["state"], "done")
            rows = [r for r in sweep.results() if r["status"] == "ok"]
            self.assertTrue(rows)
            for r in rows:
                self.assertEqual(r["power_limit_w"], 700)
                self.assertAlmostEqual(r["energy_uj"], r["power_w"] * r["median_us"], delta=1e-6 * r["energy_uj"])
            by_energy = farm.best(objective="energy")
            self.assertEqual(len(by_energy), 1)
            same_pass = [r for r in rows if r["refined"] == by_energy[0]["refined"]]
            self.assertLessEqual(by_energy[0]["energy_uj"], 1.01 * min(r["energy_uj"] for r in same_pass))
            with self.assertRaisesRegex(tunefarm.TunefarmError, "objective"):
                farm.best(objective="watts")
            # The bundle says what picked its winner, its energy and what checked it.
            published = farm.publish(os.path.join(self.dir, "energy-bundle"), unsigned=True, objective="energy")
            with open(published["json"]) as f:
                entry = json.load(f)["entries"][0]
            self.assertEqual(entry["objective"], "energy")
            self.assertEqual(entry["config_id"], by_energy[0]["config_id"])
            self.assertAlmostEqual(entry["energy_uj"], by_energy[0]["energy_uj"], delta=1e-6 * entry["energy_uj"])
            self.assertEqual(entry["power_limit_w"], 700)
            self.assertEqual(entry["checked_against"], "reference")

    def socket_path(self):
        endpoint = self.farm.info["endpoint"]
        self.assertTrue(endpoint.startswith("ipc://"), "the local farm listens on %s, not a private socket" % endpoint)
        return endpoint[len("ipc://"):]

    def test_the_farm_listens_only_on_a_socket_in_a_folder_of_its_own(self):
        path = self.socket_path()
        self.assertTrue(stat.S_ISSOCK(os.stat(path).st_mode))
        folder = os.lstat(os.path.dirname(path))
        self.assertTrue(stat.S_ISDIR(folder.st_mode))
        self.assertEqual(stat.S_IMODE(folder.st_mode), 0o700)
        self.assertEqual(folder.st_uid, os.geteuid())
        # No TCP port of this process that another local user could reach
        # (the farm has no HTTP port either).
        self.assertEqual(tcp_listeners(), [])
        # This user's processes do reach it (a plain connect, then closed).
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(path)

    def test_another_user_cannot_connect(self):
        path = self.socket_path()
        if os.geteuid() != 0:
            self.skipTest("not root: cannot run a process as another user (uid 65534) here; the folder's mode and "
                          "owner are checked by test_the_farm_listens_only_on_a_socket_in_a_folder_of_its_own")
        # Debian's interpreter: one under root's home would not run as nobody.
        python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
        out = subprocess.run([python, "-c", CONNECT_AS_ANOTHER_USER, path], user=65534, group=65534,
                             extra_groups=[], cwd="/", capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.split(), ["65534", "EACCES"])

    def test_closing_the_farm_removes_its_socket_folder(self):
        with tempfile.TemporaryDirectory(prefix="tunefarm-xdg.") as runtime:
            os.chmod(runtime, 0o700)
            saved = os.environ.get("XDG_RUNTIME_DIR")
            os.environ["XDG_RUNTIME_DIR"] = runtime
            try:
                farm = tunefarm.Farm.local(store=os.path.join(self.dir, "db-closed"), backend="sim",
                                           sim_models=["h100"], ops_dir=OPS)
            finally:
                if saved is None:
                    del os.environ["XDG_RUNTIME_DIR"]
                else:
                    os.environ["XDG_RUNTIME_DIR"] = saved
            endpoint = farm.info["endpoint"]
            self.assertTrue(endpoint.startswith("ipc://" + runtime + "/tunefarm-local-"), endpoint)
            self.assertEqual(len(os.listdir(runtime)), 1)
            farm.close()
            self.assertEqual(os.listdir(runtime), [])

    def test_tune_runs_its_farm_privately_and_removes_its_folder(self):
        with tempfile.TemporaryDirectory(prefix="tunefarm-xdg.") as runtime:
            os.chmod(runtime, 0o700)
            env = dict(os.environ, XDG_RUNTIME_DIR=runtime)
            proc = subprocess.Popen([BINARY, "tune", "--backend", "sim", "--sim-models", "h100", "--op", "gemm",
                                     "--dtype", "f16", "--shape", "M=512,N=512,K=512", "--strategy", "random",
                                     "--budget", "40", "--ops-dir", OPS, "--store", os.path.join(self.dir, "db-tune"),
                                     "--bundle", os.path.join(self.dir, "tune-bundle"), "--unsigned", "--quiet"],
                                    env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            folders, listeners = set(), []
            while proc.poll() is None:
                time.sleep(0.01)
                try:
                    folders.update(os.listdir(runtime))
                    listeners += tcp_listeners(proc.pid)
                except (FileNotFoundError, ProcessLookupError):
                    pass  # it ended meanwhile
            log = proc.communicate()[0]
            self.assertEqual(proc.returncode, 0, log)
            self.assertEqual(listeners, [])
            self.assertTrue(all(f.startswith("tunefarm-local-") for f in folders), folders)
            self.assertEqual(os.listdir(runtime), [])

    def test_dataframes_where_pandas_is_installed(self):
        try:
            import pandas  # noqa: F401
        except ImportError:
            # Without it: one line naming the package, not a bare ImportError.
            with self.assertRaisesRegex(tunefarm.TunefarmError, "to_dataframe needs pandas"):
                tunefarm.to_dataframe([])
            return
        sweep = self.farm.tune("gemm", shapes=[SHAPE], strategy="random", budget=10, seed=9)
        sweep.wait(progress=False)
        frame = tunefarm.to_dataframe(sweep.results())
        self.assertIn("median_us", frame.columns)
        self.assertIn("BM", frame.columns)


class Retry(unittest.TestCase):
    """`tune --retry CLASSES` (and Farm.tune(retry=...)): stored failures of
    those classes are measured again and replaced; others stay results."""

    def test_stored_failures_of_the_named_classes_are_measured_again(self):
        with tempfile.TemporaryDirectory(prefix="tunefarm-retry.") as d:
            def tune(*extra):
                out = subprocess.run([BINARY, "tune", "--backend", "sim", "--op", "gemm", "--ops-dir", OPS, "--shape",
                                      "M=512,N=512,K=512", "--store", os.path.join(d, "db"), "--unsigned", "--quiet",
                                      "--bundle", os.path.join(d, "b"), "--strategy", "exhaustive", *extra],
                                     capture_output=True, text=True)
                return out.returncode, out.stdout + out.stderr

            def failures():
                rows = json.loads(subprocess.run([BINARY, "results", "--store", os.path.join(d, "db"), "--format",
                                                  "json"], capture_output=True, text=True, check=True).stdout)
                self.assertEqual(len(rows), 296)  # one row per config, whatever was retried
                out = {}
                for r in rows:
                    if r["status"] not in ("ok", "ok, refined", "ok, confirmed"):
                        kind = r["status"].split(":")[0].split(",")[0].strip()
                        out[kind] = out.get(kind, 0) + 1
                return out
            rc, log = tune("--sim-faults", "hang=0.2,crash=0.1")
            self.assertEqual(rc, 0, log)
            before = failures()
            self.assertGreater(before.get("timeout", 0), 0, before)
            self.assertGreater(before.get("crash", 0), 0, before)
            rc, log = tune()  # a stored failure is a result: nothing measured again
            self.assertEqual(rc, 0, log)
            self.assertEqual(failures(), before)
            rc, log = tune("--retry", "timeout")
            self.assertEqual(rc, 0, log)
            after = failures()
            self.assertNotIn("timeout", after)
            self.assertEqual(after.get("crash"), before["crash"])
            rc, log = tune("--retry", "timeout,bogus")
            self.assertEqual(rc, 2)
            self.assertIn("--retry: 'bogus' is not a failure class", log)


class ConnectedFarm(unittest.TestCase):
    """A coordinator and a sim worker as processes; Python as a client."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tunefarm-connect.")
        cls.endpoint = "tcp://127.0.0.1:%d" % free_port()
        cls.store = os.path.join(cls.dir, "db")
        cls.log = log = open(os.path.join(cls.dir, "farm.log"), "w")
        cls.procs = [
            subprocess.Popen([BINARY, "coordinator", "--bind", cls.endpoint, "--store", cls.store], stdout=log,
                             stderr=log),
            subprocess.Popen([BINARY, "worker", "--connect", cls.endpoint, "--backend", "sim", "--sim-models", "a100"],
                             stdout=log, stderr=log),
        ]
        cls.farm = tunefarm.Farm.connect(cls.endpoint, timeout=20, ops_dir=OPS)

    @classmethod
    def tearDownClass(cls):
        cls.farm.close()
        for p in cls.procs:
            p.terminate()
            p.wait(timeout=20)
        cls.log.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_a_sweep_through_a_coordinator_reads_back_remotely(self):
        sweep = self.farm.tune("gemm", shapes=[SHAPE], strategy="random", budget=30, seed=1)
        final = sweep.wait(progress=False, timeout=120)
        self.assertEqual(final["pairs_failed"], 0)
        rows = sweep.results()
        self.assertEqual(len(rows), 30)
        self.assertEqual({r["gpu_model"] for r in rows}, {"sim-a100"})
        # The CLI reads the same rows through the coordinator as from its
        # store on this host.
        cli = lambda *a: subprocess.run([BINARY, *a], check=True, capture_output=True, text=True).stdout
        remote = json.loads(cli("results", "--coordinator", self.endpoint, "--format", "json"))
        local = json.loads(cli("results", "--store", self.store, "--format", "json"))
        self.assertEqual(remote, local)
        self.assertEqual(len(remote), 30)
        self.assertEqual(cli("best", "--coordinator", self.endpoint), cli("best", "--store", self.store))
        out = os.path.join(self.dir, "remote-bundle")
        made = self.farm.publish(out, unsigned=True)
        self.assertEqual(made["entries"], 1)
        self.assertTrue(os.path.exists(out + ".json"))

    def test_a_sweep_is_found_by_its_id_or_a_prefix(self):
        sweep = self.farm.tune("gemm", shapes=[SHAPE], strategy="random", budget=2, seed=7)
        again = self.farm.sweep(sweep.id[:8] if sum(s["id"].startswith(sweep.id[:8]) for s in self.farm.sweeps()) == 1
                                else sweep.id)
        self.assertEqual(again.id, sweep.id)
        self.assertEqual(again.wait(progress=False, timeout=120)["state"], "done")
        with self.assertRaisesRegex(tunefarm.TunefarmError, "sweep 'nope': no sweep of this farm has that id"):
            self.farm.sweep("nope")
        with self.assertRaisesRegex(tunefarm.TunefarmError, "its ops and shapes are known to the process"):
            again.results()

    def test_submit_format_json_prints_one_document(self):
        sweep = os.path.join(self.dir, "json.toml")
        with open(sweep, "w") as f:
            f.write('[sweep]\nname = "json"\nops = ["gemm"]\ndtypes = ["f16"]\nstrategy = "random"\nbudget = 3\n'
                    'shapes = [ { M = 512, N = 512, K = 512 } ]\n')
        run = lambda *a: subprocess.run([BINARY, "submit", sweep, "--coordinator", self.endpoint, "--ops-dir", OPS,
                                         "--format", "json", *a], capture_output=True, text=True, timeout=120)
        quick = run()
        self.assertEqual(quick.returncode, 0, quick.stderr)
        self.assertTrue(json.loads(quick.stdout)["sweep_id"])
        waited = run("--wait")
        self.assertEqual(waited.returncode, 0, waited.stderr)
        doc = json.loads(waited.stdout)  # stdout holds the one document; progress goes to stderr
        self.assertEqual(doc["state"], "done")
        self.assertEqual(doc["name"], "json")
        self.assertIn("pipeline", doc)

    def test_a_coordinator_that_is_not_there_is_said_in_one_line(self):
        with tunefarm.Farm.connect("tcp://127.0.0.1:%d" % free_port(), timeout=1) as nobody:
            with self.assertRaisesRegex(tunefarm.TunefarmError, "did not answer"):
                nobody.sweeps()
            # A read of the rows (a long request once connected) is held to
            # the farm's timeout for its connection, not to the read's.
            for read in (nobody.results, nobody.best):
                with self.assertRaisesRegex(tunefarm.TunefarmError, "no connection in 1 s"):
                    read()
        with self.assertRaisesRegex(tunefarm.TunefarmError, "CURVE"):
            tunefarm.Farm.connect(self.endpoint, client_key="only-one.key")


class CurveFarm(unittest.TestCase):
    """Farm.connect with CURVE keys: the client's key on the coordinator's
    client allow-list reads and tunes; a key not on it is told why."""

    def test_a_client_key_on_the_list_tunes_and_one_off_it_is_told(self):
        with tempfile.TemporaryDirectory(prefix="tunefarm-curve.") as d:
            key = lambda name: os.path.join(d, "keys", name + ".key")
            for name in ("coordinator", "worker", "me", "stranger"):
                subprocess.run([BINARY, "keys", "curve", "--out", key(name), "--name", name], check=True,
                               capture_output=True)
            shutil.copy(key("worker") + ".pub", os.path.join(d, "workers.allow"))
            shutil.copy(key("me") + ".pub", os.path.join(d, "clients.allow"))
            endpoint = "tcp://127.0.0.1:%d" % free_port()
            with open(os.path.join(d, "farm.log"), "w") as log:
                procs = [
                    subprocess.Popen([BINARY, "coordinator", "--bind", endpoint, "--store", os.path.join(d, "db"),
                                      "--curve-key", key("coordinator"), "--allow-list",
                                      os.path.join(d, "workers.allow"), "--client-allow-list",
                                      os.path.join(d, "clients.allow")], stdout=log, stderr=log),
                    subprocess.Popen([BINARY, "worker", "--connect", endpoint, "--backend", "sim", "--curve-key",
                                      key("worker"), "--coordinator-key", key("coordinator") + ".pub"],
                                     stdout=log, stderr=log),
                ]
                try:
                    with tunefarm.Farm.connect(endpoint, client_key=key("me"), coordinator_key=key("coordinator") + ".pub",
                                               timeout=20, ops_dir=OPS) as farm:
                        sweep = farm.tune("gemm", shapes=[SHAPE], strategy="random", budget=12)
                        sweep.wait(progress=False, timeout=120)
                        self.assertEqual(len(sweep.results()), 12)
                        self.assertIn("CURVE", repr(farm))
                    with tunefarm.Farm.connect(endpoint, client_key=key("stranger"),
                                               coordinator_key=key("coordinator") + ".pub", timeout=5) as farm:
                        with self.assertRaisesRegex(tunefarm.TunefarmError, "allow-list"):
                            farm.sweeps()
                finally:
                    for p in procs:
                        p.terminate()
                        p.wait(timeout=20)


if __name__ == "__main__":
    unittest.main()
