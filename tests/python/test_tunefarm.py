"""The Python package `tunefarm` over the real C library, with Debian's python3.

A signed bundle is made by the real CLI (`tunefarm tune --backend sim`); the package loads it, answers lookups at each
level, refuses unsigned, tampered and untrusted bundles, and launches only
where a CUDA device is present (else those tests skip).

Run: TUNEFARM_BINARY=build/cli/tunefarm TUNEFARM_LIB=build/libtune/libtunefarm_c.so \
     PYTHONPATH=python python3 tests/python/test_tunefarm.py
"""
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types
import unittest

import tunefarm

BINARY = os.path.abspath(os.environ["TUNEFARM_BINARY"])
SOURCE = os.environ.get("TUNEFARM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


class BundleFromPython(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tunefarm-py.")
        run = lambda *a: subprocess.run([BINARY, *a], cwd=cls.dir, check=True, capture_output=True, text=True)
        run("keys", "sign", "--out", "farm.key")
        run("keys", "sign", "--out", "other.key")
        run("tune", "--backend", "sim", "--op", "gemm", "--dtype", "f16", "--shape", "M=256,N=256,K=256", "--shape",
            "M=1024,N=1024,K=1024", "--ops-dir", os.path.join(SOURCE, "ops"), "--store", "db", "--bundle", "b",
            "--sign-key", "farm.key")
        cls.tfb = os.path.join(cls.dir, "b.tfb")
        cls.pub = os.path.join(cls.dir, "farm.key.pub")
        with open(os.path.join(cls.dir, "b.json")) as f:
            cls.json = json.load(f)
        cls.gpu = cls.json["entries"][0]["gpu_model"]
        cls.bundle = tunefarm.Bundle.load(cls.tfb, [cls.pub])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def entry(self, m):
        return next(e for e in self.json["entries"] if e["shape"]["M"] == m and e["gpu_model"] == self.gpu)

    def test_the_vendor_baseline_stands_beside_every_key(self):
        # ops/gemm declares cuBLASLt as its [baseline]: the sim backend
        # simulates it, and results carry it and the winner's ratio to it.
        out = subprocess.run([BINARY, "best", "--store", "db", "--format", "json"], cwd=self.dir, check=True,
                             capture_output=True, text=True).stdout
        rows = json.loads(out)
        self.assertTrue(rows)
        for row in rows:
            self.assertEqual(row["baseline"]["library"], "cublaslt")
            self.assertEqual(row["baseline"]["backend"], "sim")
            self.assertEqual(row["baseline"]["status"], "ok")
            self.assertAlmostEqual(row["vs_baseline"], row["baseline"]["median_us"] / row["median_us"], places=6)

    def test_importing_needs_no_torch(self):
        self.assertNotIn("torch", sys.modules)

    def test_levels_as_a_deployment_answers(self):
        exact = self.bundle.lookup("gemm", "f16", self.gpu, {"M": 256, "N": 256, "K": 256})
        self.assertEqual(exact.level, "exact")
        self.assertEqual(exact.config, self.entry(256)["config"])
        self.assertEqual(exact.entry["shape"], {"M": 256, "N": 256, "K": 256})
        # Dims in any order, by name.
        self.assertEqual(self.bundle.lookup("gemm", "f16", self.gpu, {"K": 256, "N": 256, "M": 256}).level, "exact")
        # A shape never tuned: the bundle's shape selector (fitted on the two
        # tuned shapes) answers with one of its candidates, tuned entries.
        predicted = self.bundle.lookup("gemm", "f16", self.gpu, {"M": 900, "N": 1100, "K": 1000})
        self.assertEqual(predicted.level, "predicted")
        self.assertTrue(predicted.candidates)
        self.assertIn(predicted.config, [c["config"] for c in predicted.candidates])
        tuned = [{"M": 256, "N": 256, "K": 256}, {"M": 1024, "N": 1024, "K": 1024}]
        for c in predicted.candidates:
            self.assertIn(c["entry"]["shape"], tuned)
        self.assertEqual(exact.candidates, [])
        # No tuned bf16: the op's default (the model defaults are per dtype).
        default = self.bundle.lookup("gemm", "bf16", self.gpu, {"M": 256, "N": 256, "K": 256})
        self.assertEqual(default.level, "default")
        self.assertEqual(default.config, self.json["defaults"]["gemm"])
        self.assertIsNone(default.entry)
        miss = self.bundle.lookup("softmax", "f16", self.gpu, {"N": 4})
        self.assertEqual(miss.level, "miss")
        self.assertIsNone(miss.config)

    def test_lookups_answer_as_the_json_call_without_json_and_each_answer_is_the_callers(self):
        c = tunefarm._c()

        def json_call(op, dtype, gpu, shape, arch=None):
            names = [n.encode() for n in shape]
            ptr = tunefarm._call(c.tunefarm_bundle_lookup, self.bundle._handle(), op.encode(), dtype.encode(),
                                 gpu.encode(), (ctypes.c_char_p * len(names))(*names),
                                 (ctypes.c_int64 * len(names))(*shape.values()), len(names),
                                 arch.encode() if arch else None)
            return tunefarm._take_json(ptr)

        queries = [("gemm", "f16", self.gpu, {"M": 256, "N": 256, "K": 256}, None),          # exact
                   ("gemm", "f16", self.gpu, {"K": 1024, "M": 1024, "N": 1024}, None),       # exact, another order
                   ("gemm", "f16", self.gpu, {"M": 900, "N": 1100, "K": 1000}, None),        # predicted
                   ("gemm", "f16", "l40s", {"M": 256, "N": 256, "K": 256}, "sm_89"),         # default
                   ("gemm", "bf16", self.gpu, {"M": 256, "N": 256, "K": 256}, None),         # no bf16: default
                   ("softmax", "f16", self.gpu, {"N": 4}, None)]                             # miss
        self.bundle.info  # noqa: B018 (cached before the JSON readers are taken away)
        want = [json_call(*q) for q in queries]
        taken = tunefarm._take_json
        tunefarm._take_json = None  # Bundle.lookup reads no JSON answer
        try:
            for _ in range(2):  # first answers, then those kept
                for q, w in zip(queries, want):
                    a = self.bundle.lookup(*q[:4], arch=q[4])
                    self.assertEqual((a.level, a.config, a.entry, a.candidates),
                                     (w["level"], w["config"], w["entry"], w.get("candidates", [])), q)
                    if a.config is not None:  # the caller's own: changing it changes no later answer
                        a.config["BM"] = -1
                    if a.entry is not None:
                        a.entry["shape"]["M"] = -1
        finally:
            tunefarm._take_json = taken
        self.assertEqual({w["level"] for w in want}, {"exact", "predicted", "default", "miss"})

    def test_misses_are_counted_written_and_become_the_next_sweep(self):
        import tomllib
        ask = {"M": 900, "N": 1100, "K": 1000}
        with tunefarm.Bundle.load(self.tfb, [self.pub]) as b:
            for _ in range(3):
                b.lookup("gemm", "f16", self.gpu, ask)
            b.lookup("gemm", "f16", self.gpu, {"M": 256, "N": 256, "K": 256})  # exact: no miss
            b.lookup("gemm", "f16", self.gpu, {"M": 2000, "N": 2000, "K": 2000})
            misses = b.misses()
            self.assertEqual([m["count"] for m in misses], [3, 1])
            self.assertEqual(misses[0]["shape"], ask)
            self.assertEqual(misses[0]["level"], "predicted")
            self.assertEqual(misses[0]["gpu_model"], self.gpu)
            first = os.path.join(self.dir, "misses-a.jsonl")
            b.write_misses(first)
        self.assertIn("closed", repr(b))
        with self.assertRaisesRegex(tunefarm.TunefarmError, "closed"):
            b.lookup("gemm", "f16", self.gpu, ask)
        # TUNEFARM_MISSES, read at load: written when the bundle goes.
        second = os.path.join(self.dir, "misses-b.jsonl")
        os.environ["TUNEFARM_MISSES"] = second
        try:
            b = tunefarm.Bundle.load(self.tfb, [self.pub])
        finally:
            del os.environ["TUNEFARM_MISSES"]
        b.lookup("gemm", "f16", "h200", {"M": 4096, "N": 4096, "K": 4096})  # another model: its default
        b.close()
        with open(second) as f:
            lines = [json.loads(line) for line in f]
        self.assertEqual([(m["gpu_model"], m["level"], m["count"]) for m in lines], [("h200", "default", 1)])
        run = lambda *a: subprocess.run([BINARY, *a], cwd=self.dir, capture_output=True, text=True)
        r = run("sweep", "from-misses", first, second, "--out", "next.toml", "--gpus", "*")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.dir, "next.toml"), "rb") as f:
            sweep = tomllib.load(f)["sweep"]
        self.assertEqual(sweep["ops"], ["gemm"])
        self.assertEqual(sweep["gpus"], ["*"])
        self.assertEqual(sweep["shapes"][0], ask)  # most asked first
        self.assertEqual(len(sweep["shapes"]), 3)
        # It is a sweep the farm runs.
        r = run("tune", "--sweep", "next.toml", "--ops-dir", os.path.join(SOURCE, "ops"), "--backend", "sim",
                "--store", "db-next", "--bundle", "next", "--sign-key", "farm.key", "--quiet")
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
        # A damaged line is refused naming its file and line.
        with open(os.path.join(self.dir, "bad.jsonl"), "w") as f:
            f.write('{"op": "gemm", "dtype": "f16", "gpu_model": "h100", "shape": {"M": -1}, "level": "x", "count": 1}\n')
        r = run("sweep", "from-misses", "bad.jsonl")
        self.assertEqual(r.returncode, 1)
        self.assertIn("bad.jsonl:1: field 'shape.M'", r.stderr)

    def test_mistakes_are_errors_naming_them_and_objects_say_what_they_are(self):
        b = self.bundle
        with self.assertRaisesRegex(tunefarm.TunefarmError, "unknown dtype 'fp16'"):
            b.lookup("gemm", "fp16", self.gpu, {"M": 1, "N": 1, "K": 1})
        with self.assertRaisesRegex(tunefarm.TunefarmError, "missing K"):
            b.lookup("gemm", "f16", self.gpu, {"M": 1, "N": 1})
        with self.assertRaisesRegex(tunefarm.TunefarmError, "no dim Q"):
            b.lookup("gemm", "f16", self.gpu, {"M": 1, "N": 1, "K": 1, "Q": 1})
        with self.assertRaises(TypeError):
            b.lookup("gemm", "f16", self.gpu, {"M": 1.5, "N": 1, "K": 1})
        self.assertIn("entries of gemm", repr(b))
        self.assertEqual(b.info["ops"]["gemm"]["dims"], ["M", "N", "K"])
        self.assertIn("predicted", repr(b.lookup("gemm", "f16", self.gpu, {"M": 900, "N": 1100, "K": 1000})))
        self.assertTrue(set(tunefarm.__all__) <= set(dir(tunefarm)))

    def test_dims_beyond_int64_or_negative_are_refused_naming_the_dim(self):
        b = self.bundle
        self.assertEqual(b.lookup("gemm", "f16", self.gpu, {"M": 256, "N": 256, "K": 256}).level, "exact")
        # 2**64 + 256 is 256 to a C int64: it must not answer 256's entry.
        with self.assertRaisesRegex(OverflowError, "^lookup gemm: dim N = %d is beyond int64" % (2**64 + 256)):
            b.lookup("gemm", "f16", self.gpu, {"M": 256, "N": 2**64 + 256, "K": 256})
        with self.assertRaisesRegex(OverflowError, "dim M = %d is beyond int64" % -(2**64 - 256)):
            b.lookup("gemm", "f16", self.gpu, {"M": -(2**64 - 256), "N": 256, "K": 256})
        with self.assertRaisesRegex(OverflowError, "dim K = %d" % 2**63):
            b.lookup("gemm", "f16", self.gpu, {"M": 256, "N": 256, "K": 2**63})
        with self.assertRaisesRegex(tunefarm.TunefarmError, "^lookup gemm: dim K = -1 is negative"):
            b.lookup("gemm", "f16", self.gpu, {"M": 256, "N": 256, "K": -1})
        self.assertNotEqual(b.lookup("gemm", "f16", self.gpu, {"M": 256, "N": 256, "K": 2**63 - 1}).level, "exact")
        # A sweep's shape, before any C call.
        with self.assertRaisesRegex(OverflowError, "shape dim M = %d is beyond int64" % 2**64):
            tunefarm.farm._shape_text({"M": 2**64, "N": 1})

    def test_a_model_without_tuned_shapes_gets_its_family_then_the_default(self):
        # Another model of no known family: the op default, or where its
        # architecture is given and op.toml declares one, the default for it.
        other = self.bundle.lookup("gemm", "f16", "l40s", {"M": 256, "N": 256, "K": 256})
        self.assertEqual(other.level, "default")
        self.assertEqual(other.config, self.json["defaults"]["gemm"])
        l40s = self.bundle.lookup("gemm", "f16", "l40s", {"M": 256, "N": 256, "K": 256}, arch="sm_89")
        self.assertEqual(l40s.level, "default")
        declared = next(d for d in self.json["arch_defaults"] if d["op"] == "gemm" and d["arch"] == "sm_89")
        self.assertEqual(l40s.config, declared["config"])
        self.assertNotEqual(l40s.config, other.config)

    def test_untrusted_unsigned_and_tampered_bundles_are_refused_naming_the_file(self):
        with self.assertRaisesRegex(tunefarm.TunefarmError, "not trusted"):
            tunefarm.Bundle.load(self.tfb, [os.path.join(self.dir, "other.key.pub")])
        with self.assertRaisesRegex(tunefarm.TunefarmError, "no trusted public key"):
            tunefarm.Bundle.load(self.tfb, [])
        with open(self.tfb, "rb") as f:
            data = bytearray(f.read())
        data[len(data) // 2] ^= 1
        bad = os.path.join(self.dir, "tampered.tfb")
        with open(bad, "wb") as f:
            f.write(data)
        with self.assertRaisesRegex(tunefarm.TunefarmError, "tampered.tfb: .*signature check failed"):
            tunefarm.Bundle.load(bad, [self.pub])
        with self.assertRaisesRegex(tunefarm.TunefarmError, "missing.tfb"):
            tunefarm.Bundle.load(os.path.join(self.dir, "missing.tfb"), [self.pub])

    def test_tune_signs_by_default_with_a_key_it_makes_once(self):
        env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(self.dir, "config"))
        env.pop("TUNEFARM_SIGN_KEY", None)
        args = ["tune", "--backend", "sim", "--op", "gemm", "--dtype", "f16", "--shape", "M=256,N=256,K=256", "--ops-dir",
                os.path.join(SOURCE, "ops"), "--store", "db2"]
        first = subprocess.run([BINARY, *args, "--bundle", "d1"], cwd=self.dir, env=env, capture_output=True, text=True)
        self.assertEqual(first.returncode, 0, first.stderr)
        key = os.path.join(self.dir, "config", "tunefarm", "bundle.key")
        self.assertIn("created the signing key " + key, first.stderr)
        self.assertIn("deployments trust " + key + ".pub", first.stderr)
        second = subprocess.run([BINARY, *args, "--bundle", "d2"], cwd=self.dir, env=env, capture_output=True, text=True)
        self.assertEqual(second.returncode, 0, second.stderr)
        self.assertNotIn("created the signing key", second.stderr)
        for name in ("d1.tfb", "d2.tfb"):
            tunefarm.Bundle.load(os.path.join(self.dir, name), [key + ".pub"])
        unsigned = subprocess.run([BINARY, *args, "--bundle", "u", "--unsigned"], cwd=self.dir, env=env,
                                  capture_output=True, text=True)
        self.assertEqual(unsigned.returncode, 0, unsigned.stderr)
        with self.assertRaisesRegex(tunefarm.TunefarmError, "not signed .*publish it again without --unsigned"):
            tunefarm.Bundle.load(os.path.join(self.dir, "u.tfb"), [key + ".pub"])

    def test_the_launch_block_is_laid_out_as_the_c_header_says_and_an_empty_one_launches_nothing(self):
        self.assertEqual(ctypes.sizeof(tunefarm._LaunchArgs), 24 + 8 * tunefarm._LaunchArgs.MAX_BUFFERS)
        self.assertEqual((tunefarm._LaunchArgs.stream.offset, tunefarm._LaunchArgs.buffers.offset), (16, 24))
        launch = tunefarm._c().tunefarm_kernel_launch_args
        self.assertEqual(launch(ctypes.byref(tunefarm._LaunchArgs())), -1)  # no kernel
        self.assertEqual(launch(None), -1)

    def test_launching_needs_a_device_and_says_so_otherwise(self):
        try:
            kernel = self.bundle.kernel("gemm", "f16")
        except tunefarm.TunefarmError as e:
            self.assertRegex(str(e), "launcher: ")
            self.skipTest("no CUDA device: %s" % e)
        self.assertEqual(kernel.dims, ["M", "N", "K"])
        self.assertEqual(kernel.buffers, ["A", "B", "C"])
        with self.assertRaisesRegex(tunefarm.TunefarmError, "2 dims for 3"):
            kernel.launch([1, 2], 0, 0, 0)
        with self.assertRaisesRegex(tunefarm.TunefarmError, "dims K missing"):
            kernel.launch({"M": 1, "N": 2}, 0, 0, 0)
        try:
            import torch
        except ImportError:
            return
        a = torch.zeros(64, 64, dtype=torch.float16, device="cuda")
        with self.assertRaisesRegex(tunefarm.TunefarmError, "non-contiguous"):
            kernel.launch([64, 64, 64], a, a.t(), a)
        with self.assertRaisesRegex(tunefarm.TunefarmError, "not on CUDA device 0"):
            kernel.launch([64, 64, 64], a, a.cpu(), a)


class BoundLaunchCall(unittest.TestCase):
    """A bound Launch's call, written out per kernel (Launch._fast_call), over
    the real C library, with a stand-in for the few names of torch it uses:
    torch is not installed where CI runs (the GPU host runs it with torch:
    bench/python_launch.py). The stand-in Kernel has no C kernel, so each
    launch that reaches C fails there with "no kernel", after the call has
    filled the launch block: what it wrote is what the C function would get."""

    class Tensor:
        def __init__(self, ptr, device=0, contiguous=True):
            self.ptr, self.index, self.contiguous = ptr, device, contiguous
            self.device = types.SimpleNamespace(index=device)
            self.is_cuda = device is not None

        def get_device(self):
            return -1 if self.index is None else self.index

        def is_contiguous(self):
            return self.contiguous

        def data_ptr(self):
            return self.ptr

        def untyped_storage(self):
            return ("storage of", self.ptr)

    def setUp(self):
        fake = types.ModuleType("torch")
        self.capturing = False  # a CUDA graph capture on the current stream (0x5000 + device)
        fake._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda ordinal: 0x5000 + ordinal,
                                        _cuda_isCurrentStreamCapturing=lambda: self.capturing)
        current = lambda device: types.SimpleNamespace(cuda_stream=0x5000 + getattr(device, "index", device))
        fake.cuda = types.SimpleNamespace(current_stream=current, is_current_stream_capturing=lambda: self.capturing)
        self.saved = sys.modules.get("torch")
        sys.modules["torch"] = fake

    def tearDown(self):
        if self.saved is None:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = self.saved

    def bind(self, op="gemm", buffers=("A", "B", "C"), stream=None, bound=(), ordinal=0):
        kernel = types.SimpleNamespace(op=op, dtype="f16", dims=["M", "N", "K"], buffers=list(buffers), _h=None,
                                       device={"ordinal": ordinal})
        return tunefarm.Launch(kernel, [64, 64, 64], stream, bound)

    def launched(self, launch, *args, **kwargs):
        launch._args.stream = 0
        launch._args.buffers[:] = [0] * tunefarm._LaunchArgs.MAX_BUFFERS
        with self.assertRaisesRegex(tunefarm.TunefarmError, "^no kernel$"):
            launch(*args, **kwargs)
        return launch._args.stream or 0, list(launch._args.buffers[:len(launch.kernel.buffers)])

    def test_tensors_fill_the_block_with_the_current_stream_and_their_pointers(self):
        T = self.Tensor
        launch = self.bind()
        self.assertEqual(launch.call.__name__, "gemm_f16")
        self.assertEqual(self.launched(launch, T(0x100), T(0x200), T(0x300)), (0x5000, [0x100, 0x200, 0x300]))
        self.assertEqual(self.launched(launch, C=T(3), A=T(1), B=T(2)), (0x5000, [1, 2, 3]))
        self.assertEqual(self.launched(launch, 7, 8, 9), (0, [7, 8, 9]))  # pointers: no framework, stream 0
        on_1 = self.bind(ordinal=1)  # the current stream of the kernel's device
        self.assertEqual(self.launched(on_1, T(1, device=1), T(2, device=1), T(3, device=1)), (0x5001, [1, 2, 3]))
        with self.assertRaisesRegex(tunefarm.TunefarmError, "not on CUDA device 1"):
            on_1(T(1, device=1), T(2, device=0), T(3, device=1))

    def test_a_missing_buffer_is_named_and_bad_tensors_are_refused_before_the_block_is_touched(self):
        T = self.Tensor
        launch = self.bind()
        with self.assertRaisesRegex(TypeError, "missing 1 required positional argument: 'C'"):
            launch(T(1), T(2))
        for bad, why in ((T(2, contiguous=False), "non-contiguous"), (T(2, device=1), "not on CUDA device 0"),
                         (T(2, device=None), "not on CUDA device 0")):
            launch._args.buffers[:3] = [0, 0, 0]
            with self.assertRaisesRegex(tunefarm.TunefarmError, why):
                launch(T(1), bad, T(3))
            self.assertEqual(list(launch._args.buffers[:3]), [0, 0, 0])
        with self.assertRaisesRegex(TypeError, "launch gemm: 2 buffers for 3 \\(A, B, C\\)"):
            launch._general(T(1), T(2))  # the path of CuPy arrays and pointers, without torch

    def test_a_launch_bound_to_a_stream_uses_it_and_refuses_a_capture_elsewhere(self):
        T = self.Tensor
        launch = self.bind(stream=0x7000)
        self.assertEqual(launch.call.__name__, "gemm_f16")
        self.assertEqual(self.launched(launch, T(1), T(2), T(3)), (0x7000, [1, 2, 3]))
        self.capturing = True
        launch._args.buffers[:3] = [0, 0, 0]
        with self.assertRaisesRegex(tunefarm.TunefarmError, "capture on another stream"):
            launch(T(1), T(2), T(3))
        self.assertEqual(list(launch._args.buffers[:3]), [0, 0, 0])
        self.assertEqual(self.launched(self.bind(stream=0x5000), T(1), T(2), T(3)), (0x5000, [1, 2, 3]))

    def test_kernel_launch_binds_each_shape_and_stream_once(self):
        T = self.Tensor
        kernel = tunefarm.Kernel.__new__(tunefarm.Kernel)  # a stand-in: the real one needs a GPU
        kernel.__dict__.update(op="gemm", dtype="f16", dims=["M", "N", "K"], buffers=["A", "B", "C"], _h=None,
                               device={"ordinal": 0}, _bound={}, _int_types=(int,) * 3)
        for dims in ({"M": 64, "N": 64, "K": 64}, (64, 64, 64), [64, 64, 64]):
            with self.assertRaisesRegex(tunefarm.TunefarmError, "^no kernel$"):
                kernel.launch(dims, T(1), T(2), T(3))
        self.assertEqual(list(kernel._bound), [((64, 64, 64), None)])
        launch = kernel._bound[(64, 64, 64), None]
        self.assertEqual((launch._args.stream, list(launch._args.buffers[:3])), (0x5000, [1, 2, 3]))
        with self.assertRaisesRegex(tunefarm.TunefarmError, "^no kernel$"):
            kernel.launch((64, 64, 128), T(4), T(5), T(6), stream=types.SimpleNamespace(cuda_stream=0x7000))
        self.assertEqual(kernel._bound[(64, 64, 128), 0x7000]._args.stream, 0x7000)
        with self.assertRaisesRegex(tunefarm.TunefarmError, "2 buffers for 3"):
            kernel.launch((64, 64, 64), T(1), T(2))
        with self.assertRaisesRegex(TypeError, "dim K must be an int, not float"):
            kernel.launch((64, 64, 64.0), T(1), T(2), T(3))
        class Dim:  # an integer type that is not int (as numpy's)
            def __index__(self):
                return 32
        with self.assertRaisesRegex(tunefarm.TunefarmError, "^no kernel$"):
            kernel.launch((Dim(), 64, 64), T(1), T(2), T(3))
        self.assertIn(((32, 64, 64), None), kernel._bound)
        for m in range(kernel.BOUND_SHAPES):
            with self.assertRaisesRegex(tunefarm.TunefarmError, "^no kernel$"):
                kernel.launch((m, 64, 64), T(1), T(2), T(3))
        self.assertEqual(len(kernel._bound), kernel.BOUND_SHAPES)  # the first bound went first
        self.assertNotIn(((64, 64, 64), None), kernel._bound)
        self.assertIn(((kernel.BOUND_SHAPES - 1, 64, 64), None), kernel._bound)
        step = kernel.bind((64, 64, 64), buffers=(T(1), T(2), T(3)))
        self.assertIn("its buffers bound", repr(step))
        self.assertEqual(kernel.bind((64, 64, 64), 0x7000)._bound_stream, 0x7000)  # the stream, as before

    def test_dims_beyond_int64_or_negative_are_refused_before_the_launch_block(self):
        T = self.Tensor
        kernel = tunefarm.Kernel.__new__(tunefarm.Kernel)  # a stand-in, as above
        kernel.__dict__.update(op="gemm", dtype="f16", dims=["M", "N", "K"], buffers=["A", "B", "C"], _h=None,
                               device={"ordinal": 0}, _bound={}, _int_types=(int,) * 3)
        # 2**64 + 64 would reach C as 64 (ctypes wraps): refused, nothing bound.
        with self.assertRaisesRegex(OverflowError, "^gemm: dim M = %d is beyond int64" % (2**64 + 64)):
            kernel.launch((2**64 + 64, 64, 64), T(1), T(2), T(3))
        with self.assertRaisesRegex(OverflowError, "^gemm: dim K = %d is beyond int64" % -(2**63 + 1)):
            kernel.launch({"M": 64, "N": 64, "K": -(2**63 + 1)}, T(1), T(2), T(3))
        with self.assertRaisesRegex(tunefarm.TunefarmError, "^gemm: dim N = -64 is negative"):
            kernel.launch((64, -64, 64), T(1), T(2), T(3))
        self.assertEqual(kernel._bound, {})
        with self.assertRaisesRegex(OverflowError, "dim N = %d" % 2**64):
            kernel.bind((64, 2**64, 64))
        with self.assertRaisesRegex(tunefarm.TunefarmError, "dim K = -1 is negative"):
            kernel.bind((64, 64, -1), buffers=(T(1), T(2), T(3)))
        class Huge:  # an integer type that is not int, beyond int64
            def __index__(self):
                return 2**64 + 32
        with self.assertRaisesRegex(OverflowError, "dim M = %d" % (2**64 + 32)):
            kernel.launch((Huge(), 64, 64), T(1), T(2), T(3))
        # The largest int64 passes the check and reaches C (the stand-in's "no kernel").
        with self.assertRaisesRegex(tunefarm.TunefarmError, "^no kernel$"):
            kernel.launch((2**63 - 1, 64, 64), T(1), T(2), T(3))
        self.assertEqual(list(kernel._bound[(2**63 - 1, 64, 64), None]._dims), [2**63 - 1, 64, 64])

    def test_a_launch_bound_to_its_buffers_checks_them_once_holds_them_and_takes_no_argument(self):
        T = self.Tensor
        launch = self.bind(bound=(T(1), T(2), T(3)))
        self.assertEqual(launch.call.__name__, "gemm_f16")
        self.assertIn("its buffers bound", repr(launch))
        self.assertIn(("storage of", 2), launch._held[1])  # the storage too: memory outlives a set_ of the tensor
        with self.assertRaisesRegex(tunefarm.TunefarmError, "^no kernel$"):
            launch()
        self.assertEqual((launch._args.stream, list(launch._args.buffers[:3])), (0x5000, [1, 2, 3]))
        with self.assertRaisesRegex(TypeError, "gemm_f16"):
            launch(T(1), T(2), T(3))
        with self.assertRaisesRegex(tunefarm.TunefarmError, "^bind gemm: 2 buffers for 3"):
            self.bind(bound=(T(1), T(2)))
        with self.assertRaisesRegex(tunefarm.TunefarmError, "non-contiguous"):
            self.bind(bound=(T(1), T(2, contiguous=False), T(3)))
        with self.assertRaisesRegex(tunefarm.TunefarmError, "not on CUDA device 0"):
            self.bind(bound=(T(1), T(2, device=1), T(3)))
        on_stream = self.bind(stream=0x7000, bound=(T(1), T(2), T(3)))
        with self.assertRaisesRegex(tunefarm.TunefarmError, "^no kernel$"):
            on_stream()
        self.assertEqual((on_stream._args.stream, list(on_stream._args.buffers[:3])), (0x7000, [1, 2, 3]))
        self.capturing = True
        with self.assertRaisesRegex(tunefarm.TunefarmError, "capture on another stream"):
            on_stream()
        on_current = self.bind(stream=0x5000, bound=(T(1), T(2), T(3)))  # the capturing stream itself
        with self.assertRaisesRegex(tunefarm.TunefarmError, "^no kernel$"):
            on_current()
        self.capturing = False
        pointers = self.bind(bound=(7, 8, 9))
        with self.assertRaisesRegex(tunefarm.TunefarmError, "^no kernel$"):
            pointers()
        self.assertEqual((pointers._args.stream or 0, list(pointers._args.buffers[:3])), (0, [7, 8, 9]))

    def test_names_that_cannot_be_parameters_are_replaced(self):
        T = self.Tensor
        for buffers in (("in", "x", "y"), ("_o", "x", "y"), ("_general", "x", "y"), ("x", "x", "y"),
                        ("AttributeError", "x", "y"), ("\ufb01x", "fix", "y")):
            launch = self.bind(buffers=buffers)
            self.assertEqual(launch.call.__code__.co_varnames[:3], ("b0", "b1", "b2"), buffers)
            self.assertEqual(self.launched(launch, T(1), T(2), T(3)), (0x5000, [1, 2, 3]), buffers)
        self.assertEqual(self.bind(buffers=("a", "b", "c")).call.__code__.co_varnames[:3], ("a", "b", "c"))
        self.assertEqual(self.bind(op="gemm-x").call.__name__, "launch")
        self.assertEqual(self.bind(op="g\u00e9mm").call.__name__, "launch")

    def test_more_buffers_than_a_launch_block_holds_take_the_checked_call(self):
        many = ["b%d" % i for i in range(tunefarm._LaunchArgs.MAX_BUFFERS + 1)]
        launch = self.bind(buffers=many)
        with self.assertRaisesRegex(tunefarm.TunefarmError, "tunefarm_kernel_launch: a required argument is NULL"):
            launch(*range(1, len(many) + 1))
        step = self.bind(buffers=many, bound=tuple(range(1, len(many) + 1)))
        with self.assertRaisesRegex(tunefarm.TunefarmError, "tunefarm_kernel_launch: a required argument is NULL"):
            step()


class CategoricalParamsFromPython(unittest.TestCase):
    """An op with a string and a boolean axis (tests/data/ops/scheduled): its
    configs reach Python as str and bool values, as the op.toml writes them."""

    def test_strings_and_booleans_come_back_as_written(self):
        d = tempfile.mkdtemp(prefix="tunefarm-py-cat.")
        self.addCleanup(shutil.rmtree, d, True)
        run = lambda *a: subprocess.run([BINARY, *a], cwd=d, check=True, capture_output=True, text=True)
        run("keys", "sign", "--out", "k")
        run("tune", "--backend", "sim", "--op", "scheduled", "--dtype", "f16", "--shape", "N=4096", "--ops-dir",
            os.path.join(SOURCE, "tests", "data", "ops"), "--store", "db", "--bundle", "b", "--sign-key", "k")
        with open(os.path.join(d, "b.json")) as f:
            entry = json.load(f)["entries"][0]
        with tunefarm.Bundle.load(os.path.join(d, "b.tfb"), [os.path.join(d, "k.pub")]) as b:
            a = b.lookup("scheduled", "f16", entry["gpu_model"], {"N": 4096})
            self.assertEqual(a.level, "exact")
            self.assertEqual(a.config, entry["config"])
            self.assertIsInstance(a.config["SCHEDULE"], str)
            self.assertIn(a.config["SCHEDULE"], ("direct", "grid_stride", "blocked"))
            self.assertIsInstance(a.config["STAGE_IN_SMEM"], bool)
            self.assertIsInstance(a.config["BLOCK"], int)
            default = b.lookup("scheduled", "f32", entry["gpu_model"], {"N": 4096})
            self.assertEqual(default.level, "default")
            self.assertEqual(default.config, {"BLOCK": 256, "SCHEDULE": "direct", "STAGE_IN_SMEM": False})


if __name__ == "__main__":
    unittest.main(verbosity=2)
