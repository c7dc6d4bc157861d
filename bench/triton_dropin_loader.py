"""A plain reader of the per-device config files `tunefarm export` writes,
as a serving engine reads its own (vLLM's fused-MoE loader: the file named by
`torch.cuda.get_device_name()` with spaces as '_', `json.load`, the entry of
the nearest key). For each width it launches the example's plain
`@triton.jit` kernel (no tunefarm in the path) with the file's config and
checks the output against torch.

    python3 bench/triton_dropin_loader.py softmax|layernorm CONFIG_DIR [--cols N ...]

Prints one line per width and a JSON summary last; exits 1 if the file is
missing, unreadable, or a launch gives a wrong answer.
"""
import argparse
import glob
import importlib.util
import json
import os
import sys

import torch


def load_example(name):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "python", "triton_%s.py" % name)
    spec = importlib.util.spec_from_file_location("triton_" + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class WithConfig:
    """kernel[grid](...) with the file's config as launch keywords."""

    def __init__(self, fn, config):
        self.fn, self.config = fn, config

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.fn[grid](*args, **kwargs, **self.config)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("example", choices=("softmax", "layernorm"))
    p.add_argument("config_dir")
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--cols", type=int, nargs="+")
    args = p.parse_args()
    device = torch.cuda.get_device_name().replace(" ", "_")
    # Other fixed dims come first in the name ("DTYPES=...,device_name=X.json").
    found = sorted(glob.glob(os.path.join(glob.escape(args.config_dir), "*device_name=%s.json" % glob.escape(device))))
    path = found[0] if found else os.path.join(args.config_dir, "device_name=%s.json" % device)
    with open(path) as f:
        configs = {int(k): v for k, v in json.load(f).items()}
    ex = load_example(args.example)
    failures = 0
    for n in args.cols or sorted(configs):
        config = configs[min(configs, key=lambda k: abs(k - n))]
        x = torch.randn(args.rows, n, device="cuda", dtype=torch.float16 if args.example == "layernorm" else torch.float32)
        if args.example == "softmax":
            got = ex.softmax(x, kernel=WithConfig(ex.softmax_kernel.fn, config))
            ok = torch.allclose(got, torch.softmax(x, dim=1), atol=1e-5)
        else:
            w = torch.rand(n, device="cuda", dtype=x.dtype)
            b = torch.rand(n, device="cuda", dtype=x.dtype)
            got = ex.layer_norm(x, w, b, kernel=WithConfig(ex.layer_norm_fwd.fn, config))
            ok = torch.allclose(got, torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5), atol=1e-2)
        failures += not ok
        print("%s %s=%d: %s from %s, %s" % (args.example, "n_cols" if args.example == "softmax" else "N", n, config,
                                             os.path.basename(path), "right" if ok else "WRONG"), flush=True)
    print(json.dumps({"example": args.example, "file": os.path.basename(path), "keys": sorted(configs),
                      "wrong": failures}))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
