#!/usr/bin/env python3
"""Writes the exported models experiments/eager_vs_compiled.toml and
bench/compiled.py run, with runner-export (python/runner_export.py):

  OUT/resnet18-b1.*   torchvision's resnet18 (1000 classes), input 1x3x224x224
  OUT/resnet18-b32.*  the same weights, input 32x3x224x224
  OUT/gpt2-b1.*       experiments/models/gpt2_small.py, 1 sequence of 64 tokens
  OUT/gpt2-b32.*      the same weights, 32 sequences

each as .pt2 (AOTInductor), .ts (TorchScript), .safetensors (the weights),
.reference.safetensors (input and eager output) and .json (metadata and
the export times). A model whose .json exists and was written by this
torch version is not exported again (--force does). AOTInductor compiles
for this machine's CPU (-march=native): make them on the machine that runs
them. About 5-10 minutes on 2 cores.

  ~/.cache/runner/venv-torch-2.14.1/bin/python scripts/make_models.py models
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import runner_export  # noqa: E402

LM = os.path.join(ROOT, "experiments", "models", "gpt2_small.py")
EXPORTS = {
    "resnet18-b1": ["--torchvision", "resnet18", "--input-shape", "1,3,224,224"],
    "resnet18-b32": ["--torchvision", "resnet18", "--input-shape", "32,3,224,224"],
    "gpt2-b1": ["--python", f"{LM}:batch1"],
    "gpt2-b32": ["--python", f"{LM}:batch32"],
}


def up_to_date(prefix):
    import torch
    try:
        with open(prefix + ".json") as f:
            meta = json.load(f)["metadata"]
    except (OSError, ValueError, KeyError):
        return False
    return meta.get("runner.torch_version") == torch.__version__ and all(
        os.path.exists(prefix + s) for s in (".pt2", ".ts", ".safetensors", ".reference.safetensors"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="folder to write (experiments/ reads ../models)")
    ap.add_argument("--only", help="comma-separated names (default all): " + ", ".join(EXPORTS))
    ap.add_argument("--force", action="store_true", help="export even when up to date")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(EXPORTS)
    for name in names:
        if name not in EXPORTS:
            sys.exit(f"make_models.py: unknown model '{name}' (one of {', '.join(EXPORTS)})")
        prefix = os.path.join(args.out, name)
        if not args.force and up_to_date(prefix):
            print(f"{name}: up to date")
            continue
        code = runner_export.main(EXPORTS[name] + ["--out", prefix])
        if code != 0:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
