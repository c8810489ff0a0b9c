#!/usr/bin/env python3
"""Eager against compiled inference, the same weights and inputs, five ways.

For each model (resnet18 at 3x224x224, the GPT-2-style LM of
experiments/models/gpt2_small.py) and batch size (1, 32), each round runs
every side in a fresh process, in a rotating order:

  runner-eager   runner's native plugin (resnet / transformer_lm) with the
                 exported weights (init_from)
  runner-ts      the torchscript plugin on the exported TorchScript file, frozen
  runner-aoti    the aoti plugin on the AOTInductor package
  py-eager       PyTorch eager in Python (torchvision's ResNet / the LM class)
                 with the same weights, under torch.inference_mode()
  py-compile     the same wrapped in torch.compile (mode "default")

Every side runs on the export's reference input (runner through
model.check_against, then on its synthetic data of the same shape) and
reports its output's largest relative error against the eager output saved
at export (max |y - ref| / max |ref|). A side whose error exceeds --tolerance
is reported as failed, never as faster.

Reported per side, median [min, max] over rounds:
  p50 latency of a batch (ms) and samples/s (batch / p50)
  ratio to py-eager of the p50 latency (> 1: faster than Python eager)
  first call (s): the first forward in a fresh process; for py-compile
  this is when torch.compile compiles, so it is the compile time; for
  runner, the check_against call (the package or module just loaded)
  setup (s): runner's run set-up (building the model, loading the file)
The export and AOTInductor compile times come from the exporter's JSON.

Needs the files of experiments/eager_vs_compiled.toml in --models-dir
(scripts/make_models.py writes them). Run with the venv's python:
  ~/.cache/runner/venv-torch-2.14.1/bin/python bench/compiled.py --rounds 3
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

from python_baseline import (loadavg, med_range, print_table, rotated, run_experiment_file,
                             run_json_worker)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIDES = ["runner-eager", "runner-ts", "runner-aoti", "py-eager", "py-compile"]
MODELS = {
    "resnet18": {
        "data": '[data]\nplugin = "synthetic"\nshape = [3, 224, 224]\nclasses = 1000\nsize = 64\n',
        "native": 'plugin = "resnet"\ndepth = 18\n',
    },
    "gpt2": {
        "data": '[data]\nplugin = "synthetic_tokens"\nvocab = 4096\nseq_len = 64\nsize = 256\n',
        "native": 'plugin = "transformer_lm"\nflavour = "gpt2"\nwidth = 256\ndepth = 4\nheads = 4\n',
    },
}


# ---------------------------------------------------------------- Python sides

def python_model(name):
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18(weights=None, num_classes=1000)
    sys.path.insert(0, os.path.join(ROOT, "experiments", "models"))
    import gpt2_small
    model, _, _ = gpt2_small.build(1)
    return model


def worker(args):
    """One Python side in this process: prints a JSON line."""
    import torch
    from safetensors.torch import load_file

    torch.set_num_threads(args.threads)
    prefix = os.path.join(args.models_dir, f"{args.model}-b{args.batch}")
    model = python_model(args.model)
    model.load_state_dict(load_file(prefix + ".safetensors"))
    model.eval()
    ref = load_file(prefix + ".reference.safetensors")
    x, expected = ref["input"], ref["output"]
    if args.worker == "py-compile":
        model = torch.compile(model)
    with torch.inference_mode():
        start = time.perf_counter()
        y = model(x)
        first = time.perf_counter() - start
        error = ((y.double() - expected.double()).abs().max() / expected.double().abs().max()).item()
        for _ in range(args.warmup):
            model(x)
        times = []
        for _ in range(args.batches):
            start = time.perf_counter_ns()
            model(x)
            times.append(time.perf_counter_ns() - start)
    print(json.dumps({"p50_ns": statistics.median(times), "first_s": first, "error": error,
                      "threads": torch.get_num_threads()}))


def python_side(side, args, model, batch):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", side, "--model", model,
           "--batch", str(batch), "--threads", str(args.threads), "--models-dir", args.models_dir,
           "--batches", str(args.batches), "--warmup", str(args.warmup)]
    got = run_json_worker(cmd, args.timeout)
    return {"p50_ns": got["p50_ns"], "first_s": got["first_s"], "error": got["error"], "setup_s": None}


# ---------------------------------------------------------------- runner sides

def runner_toml(side, model, batch, args):
    prefix = os.path.join(os.path.abspath(args.models_dir), f"{model}-b{batch}")
    if side == "runner-eager":
        lines = MODELS[model]["native"] + f'init_from = "{prefix}.safetensors"\n'
    elif side == "runner-ts":
        lines = f'plugin = "torchscript"\nfile = "{prefix}.ts"\nfreeze = true\n'
    else:
        lines = f'plugin = "aoti"\npackage = "{prefix}.pt2"\n'
    return (f'[experiment]\nname = "compiled-{side}-{model}-{batch}"\nkind = "infer"\n\n'
            f'[device]\ntype = "cpu"\nthreads = {args.threads}\n\n'
            f'[model]\n{lines}check_against = "{prefix}.reference.safetensors"\n'
            f"check_tolerance = {args.tolerance}\n\n"
            + MODELS[model]["data"] + f"batch_size = {batch}\n\n"
            f"[infer]\nbatches = {args.batches}\nwarmup = {args.warmup}\n")


def runner_side(side, args, model, batch, tmp):
    path = os.path.join(tmp, f"{side}-{model}-{batch}.toml")
    with open(path, "w") as f:
        f.write(runner_toml(side, model, batch, args))
    metrics, p50 = run_experiment_file(args.runner, path, os.path.join(tmp, "runner.db"))
    return {"p50_ns": p50["latency"], "first_s": metrics.get("first_call_s"),
            "error": metrics.get("output_max_rel_error"), "setup_s": metrics.get("setup_s")}


# ---------------------------------------------------------------- the driver

def fmt(values, scale=1.0):
    values = [v * scale for v in values if v is not None]
    return med_range(values) if values else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runner", default=os.path.join(ROOT, "build", "bin", "runner"))
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "models"))
    ap.add_argument("--models", default="resnet18,gpt2")
    ap.add_argument("--batch-sizes", default="1,32")
    ap.add_argument("--sides", default=",".join(SIDES))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", type=int, default=20, help="measured batches per run")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--tolerance", type=float, default=1e-3)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--json", help="write every measurement here")
    # Internal: one Python side.
    ap.add_argument("--worker", choices=["py-eager", "py-compile"], help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    sides = args.sides.split(",")
    all_results = {}
    with tempfile.TemporaryDirectory(prefix="runner-compiled-") as tmp:
        for model in args.models.split(","):
            for batch in (int(b) for b in args.batch_sizes.split(",")):
                results = {s: [] for s in sides}
                for r in range(args.rounds):
                    load = loadavg()
                    for side in rotated(sides, r):
                        try:
                            if side.startswith("runner"):
                                got = runner_side(side, args, model, batch, tmp)
                            else:
                                got = python_side(side, args, model, batch)
                        except Exception as e:  # a failed side is reported, not hidden
                            got = {"failed": str(e)[:300]}
                        got["load"] = load
                        results[side].append(got)
                all_results[f"{model}-b{batch}"] = results
                print(f"\n{model}, batch {batch}, {args.threads} threads, {args.rounds} rounds "
                      f"(load {loadavg()})")
                eager = [g.get("p50_ns") for g in results.get("py-eager", [])]
                rows = []
                for side in sides:
                    got = results[side]
                    failed = [g["failed"] for g in got if "failed" in g]
                    errors = [g.get("error") for g in got if g.get("error") is not None]
                    if failed or any(e > args.tolerance for e in errors):
                        why = failed[0] if failed else f"output error {max(errors):.3g} > {args.tolerance}"
                        rows.append([side, "FAILED", "", "", "", "", why])
                        continue
                    p50 = [g["p50_ns"] for g in got]
                    ratios = [e / p for e, p in zip(eager, p50) if e]
                    rows.append([side, fmt(p50, 1e-6), fmt([batch / (p * 1e-9) for p in p50]),
                                 fmt(ratios), fmt([g["first_s"] for g in got]),
                                 fmt([g["setup_s"] for g in got]),
                                 f"{max(errors):.2g}" if errors else "-"])
                print_table(["side", "p50 ms", "samples/s", "x py-eager", "first call s", "setup s",
                             "max rel error"], rows)
                info = os.path.join(args.models_dir, f"{model}-b{batch}.json")
                if os.path.exists(info):
                    with open(info) as f:
                        t = json.load(f)["timings"]
                    print("export: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(t.items())))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(all_results, f, indent=1)


if __name__ == "__main__":
    main()
