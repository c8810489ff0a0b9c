#!/usr/bin/env python3
"""Real models: runner against PyTorch Python eager, per model and thread count.

For each model and thread count, each round runs two sides, in an order that
alternates from round to round, each in fresh processes:

  runner  `runner run` on a generated experiment file per mode (default
          isolation: the run in a fresh child process); its figures come from
          its database: the metric samples_per_s and the p50 of the `latency`
          summary, and the per-phase p50s
  eager   the same model, data shapes, dtype (float32), loss, optimizer and
          thread count (torch.set_num_threads; runner's [device] threads) in
          PyTorch Python eager; a fresh process per mode, as runner's runs

Modes:
  train   training samples/s: SGD (lr 0.01, momentum 0.9), cross-entropy, a
          batch per model chosen so that a step takes 0.05-1 s on a 2-core AVX2
          machine at one thread
  b1      inference latency at batch 1: the median (p50) time per batch
  b32     inference throughput at batch 32: samples/s

Both sides time a step alike: from before the batch is drawn (a gather by a
seeded shuffle from a data set held in memory) to after optimizer.step()
(training; loss.item() is read after the clock stops) or after the forward
pass (inference: eval mode, under torch.inference_mode / c10::InferenceMode);
samples/s = measured samples / sum of measured step times. Ratios are
runner's speed over eager's, so > 1 means runner is faster: samples/s over
samples/s, and for b1 eager's p50 latency over runner's. They are taken per
round, then summarised as median [min, max] over the rounds.

Models, each side's build (same sizes, names and layers):
  resnet18  resnet plugin (depth 18, stem cifar), 3x32x32, 10 classes;
            torchvision.models.resnet18 with the CIFAR stem as
            tests/oracle/resnet_reference.py makes it
  resnet50  resnet plugin (depth 50, stem imagenet), 3x64x64, 10 classes;
            torchvision.models.resnet50
  vit       vit plugin (config ti, patch 16), 3x112x112, 10 classes;
            torchvision's VisionTransformer with the sizes of "ti"
  gpt2      transformer_lm (flavour gpt2, width 256, depth 4, 4 heads),
            synthetic_tokens (vocab 1024, 64 tokens); the Gpt class of
            tests/oracle/transformer_lm_reference.py
  llama     transformer_lm (flavour llama, width 256, depth 4, 8 heads, 4 kv
            heads), the same tokens; that script's Llama class
  convnet   convnet plugin (channels 32, 64, batch norm), 3x32x32, 10
            classes; the same layers in torch.nn
  mlp       mlp plugin (784-512-512-10, ReLU); the same in torch.nn

Run with the venv's python (it has torch and torchvision); nothing is
downloaded. The runner build needs the plugins above (`runner_plugins`).
  ~/.cache/runner/venv-torch-2.14.1/bin/python bench/models.py --runner build/bin/runner
"""
import argparse
import ast
import json
import os
import statistics
import sys
import tempfile
import time
import types

from python_baseline import (loadavg, med_range, print_table, rotated, run_experiment_file,
                             run_json_worker)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SEED = 0
LR = 0.01
MOMENTUM = 0.9
MODES = ["train", "b1", "b32"]
PHASES = ["data", "forward", "backward", "optimizer"]

IMAGE_32 = dict(shape=[3, 32, 32], classes=10, size=1024)
TOKENS = dict(vocab=1024, seq_len=64, size=512)
LM = {"plugin": "transformer_lm", "width": 256, "depth": 4}

# Per model: runner's [model] table, the data (runner's loader options; the
# eager side makes the same shapes), and per mode (batch, measured steps,
# warm-up steps). Training batches make a step take 0.05-1 s at one thread on
# a quiet 2-core AVX2 machine; step counts keep the default invocation (every
# model, 1 and 2 threads, 3 rounds) at ~20 minutes there, a third of it the
# eager processes' imports (torch and torchvision: 3-6 s each).
MODELS = {
    "resnet18": dict(model={"plugin": "resnet", "depth": 18, "stem": "cifar"}, data=IMAGE_32,
                     train=(8, 5, 2), b1=(1, 20, 3), b32=(32, 3, 1)),
    "resnet50": dict(model={"plugin": "resnet", "depth": 50, "stem": "imagenet"},
                     data=dict(shape=[3, 64, 64], classes=10, size=512),
                     train=(8, 5, 2), b1=(1, 20, 3), b32=(32, 3, 1)),
    "vit": dict(model={"plugin": "vit", "config": "ti", "patch_size": 16},
                data=dict(shape=[3, 112, 112], classes=10, size=256),
                train=(8, 5, 2), b1=(1, 20, 3), b32=(32, 3, 1)),
    "gpt2": dict(model=dict(LM, flavour="gpt2", heads=4), data=TOKENS,
                 train=(8, 5, 2), b1=(1, 20, 3), b32=(32, 3, 1)),
    "llama": dict(model=dict(LM, flavour="llama", heads=8, kv_heads=4), data=TOKENS,
                  train=(8, 5, 2), b1=(1, 20, 3), b32=(32, 3, 1)),
    "convnet": dict(model={"plugin": "convnet", "channels": [32, 64], "batch_norm": True},
                    data=IMAGE_32, train=(64, 10, 2), b1=(1, 100, 10), b32=(32, 20, 2)),
    "mlp": dict(model={"plugin": "mlp", "hidden": [512, 512], "activation": "relu"},
                data=dict(shape=[784], classes=10, size=4096),
                train=(256, 20, 5), b1=(1, 200, 20), b32=(32, 100, 10)),
}


# ---------------------------------------------------------------- Python side

def oracle_module(script):
    """The definitions of a tests/oracle script (its imports, classes,
    functions and UPPER_CASE constants) as a module, without the rest: the
    scripts parse their arguments and compute when they run."""
    path = os.path.join(ROOT, "tests", "oracle", script)
    with open(path) as f:
        tree = ast.parse(f.read(), path)

    def kept(node):
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.ClassDef, ast.FunctionDef)):
            return True
        return isinstance(node, ast.Assign) and all(
            isinstance(t, ast.Name) and t.id.isupper() for t in node.targets)

    module = types.ModuleType(os.path.splitext(script)[0])
    module.__file__ = path
    body = ast.Module(body=[n for n in tree.body if kept(n)], type_ignores=[])
    exec(compile(body, path, "exec"), module.__dict__)
    return module


def build_model(name, spec):
    """The Python eager model of MODELS[name], built as runner's plugin is."""
    import torch
    from torch import nn
    opts, data = spec["model"], spec["data"]
    if opts["plugin"] == "resnet":
        import torchvision
        model = getattr(torchvision.models, f"resnet{opts['depth']}")(num_classes=data["classes"])
        if opts["stem"] == "cifar":  # as tests/oracle/resnet_reference.py
            model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
            model.maxpool = nn.Identity()
        return model
    if opts["plugin"] == "vit":
        from torchvision.models.vision_transformer import VisionTransformer
        hidden, layers, heads, mlp = oracle_module("vit_reference.py").SIZES[opts["config"]]
        return VisionTransformer(image_size=data["shape"][1], patch_size=opts["patch_size"],
                                 num_layers=layers, num_heads=heads, hidden_dim=hidden,
                                 mlp_dim=mlp, num_classes=data["classes"])
    if opts["plugin"] == "transformer_lm":
        lm = oracle_module("transformer_lm_reference.py")
        width, depth, heads = opts["width"], opts["depth"], opts["heads"]
        vocab, seq = data["vocab"], data["seq_len"]
        if opts["flavour"] == "gpt2":
            return lm.Gpt(vocab, width, depth, heads, 4 * width, seq, 1e-5)
        # The plugin's default mlp_hidden: 8 x width / 3 rounded up to a multiple of 256.
        hidden = (8 * width // 3 + 255) // 256 * 256
        return lm.Llama(vocab, width, depth, heads, opts["kv_heads"], hidden, seq, 1e-5, 10000.0)
    if opts["plugin"] == "convnet":
        layers, channels, side = [], data["shape"][0], data["shape"][1]
        for out in opts["channels"]:
            layers += [nn.Conv2d(channels, out, 3, padding=1, bias=not opts["batch_norm"])]
            layers += [nn.BatchNorm2d(out)] if opts["batch_norm"] else []
            layers += [nn.ReLU(), nn.MaxPool2d(2)]
            channels, side = out, side // 2
        return nn.Sequential(*layers, nn.Flatten(),
                             nn.Linear(channels * side * side, data["classes"]))
    if opts["plugin"] == "mlp":
        layers, width = [], data["shape"][0]
        for h in opts["hidden"]:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        return nn.Sequential(*layers, nn.Linear(width, data["classes"]))
    raise ValueError(f"no Python model for {name}")


def make_data(spec):
    """The data set in memory (inputs, targets) and the loss of a batch."""
    import torch
    data = spec["data"]
    gen = torch.Generator().manual_seed(SEED)
    if "vocab" in data:
        stream = torch.randint(0, data["vocab"], (data["size"], data["seq_len"] + 1),
                               generator=gen)
        inputs, targets = stream[:, :-1].contiguous(), stream[:, 1:].contiguous()

        def loss(logits, y):
            return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)),
                                                     y.reshape(-1))
    else:
        inputs = torch.randn(data["size"], *data["shape"], generator=gen)
        targets = torch.randint(0, data["classes"], (data["size"],), generator=gen)
        loss = torch.nn.functional.cross_entropy
    return inputs, targets, loss


class Batches:
    """Batches of a seeded shuffle, re-shuffled when fewer than a batch are left
    (drop_last), gathered with index_select, as runner's data pipeline does."""

    def __init__(self, inputs, targets, batch):
        import torch
        self.torch, self.inputs, self.targets, self.batch = torch, inputs, targets, batch
        self.generator = torch.Generator().manual_seed(SEED)
        self.order, self.position = torch.randperm(len(inputs), generator=self.generator), 0

    def next(self):
        if len(self.inputs) - self.position < self.batch:
            self.order = self.torch.randperm(len(self.inputs), generator=self.generator)
            self.position = 0
        idx = self.order[self.position:self.position + self.batch]
        self.position += self.batch
        return self.inputs.index_select(0, idx), self.targets.index_select(0, idx)


def summary(batch, marks):
    """samples/s, p50 step time and p50 per phase from per-step timestamps
    [start, end of phase 1, ...] (ns)."""
    walls = [m[-1] - m[0] for m in marks]
    phases = {PHASES[i]: statistics.median(m[i + 1] - m[i] for m in marks)
              for i in range(len(marks[0]) - 1)}
    return {"samples_per_s": len(walls) * batch / (sum(walls) * 1e-9),
            "p50_ns": statistics.median(walls), "phases": phases}


def python_train(model, data, batch, steps, warmup):
    import torch
    inputs, targets, loss_fn = data
    batches = Batches(inputs, targets, batch)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    clock, marks = time.perf_counter_ns, []
    for step in range(warmup + steps):
        t0 = clock()
        x, y = batches.next()
        t1 = clock()
        loss = loss_fn(model(x), y)
        t2 = clock()
        optimizer.zero_grad()
        loss.backward()
        t3 = clock()
        optimizer.step()
        t4 = clock()
        value = loss.item()
        if step >= warmup:
            marks.append((t0, t1, t2, t3, t4))
    out = summary(batch, marks)
    out["loss_last"] = value
    return out


def python_infer(model, data, batch, batches_measured, warmup):
    import torch
    inputs, targets, _ = data
    batches = Batches(inputs, targets, batch)
    model.eval()
    clock, marks = time.perf_counter_ns, []
    with torch.inference_mode():
        for step in range(warmup + batches_measured):
            t0 = clock()
            x, _ = batches.next()
            t1 = clock()
            model(x)
            t2 = clock()
            if step >= warmup:
                marks.append((t0, t1, t2))
    return summary(batch, marks)


def worker(name, threads, modes):
    """Eager runs of one model in this process (the driver asks for one mode
    at a time); prints JSON."""
    import torch
    torch.set_num_threads(threads)
    spec = MODELS[name]
    data = make_data(spec)
    results = {}
    for mode in modes:
        torch.manual_seed(SEED)
        model = build_model(name, spec)
        batch, steps, warmup = spec[mode]
        if mode == "train":
            results[mode] = python_train(model, data, batch, steps, warmup)
        else:
            results[mode] = python_infer(model, data, batch, steps, warmup)
        del model
    print(json.dumps({"threads": torch.get_num_threads(), "modes": results}))


# ---------------------------------------------------------------- runner side

def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return repr(v)


def experiment_toml(name, spec, threads, mode):
    batch, steps, warmup = spec[mode]
    data = dict(spec["data"])
    loader = "synthetic_tokens" if "vocab" in data else "synthetic"
    lines = ["[experiment]", f'name = "models-{name}-{mode}"',
             f'kind = "{"train" if mode == "train" else "infer"}"', f"seed = {SEED}", "",
             "[device]", 'type = "cpu"', f"threads = {threads}", "", "[model]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in spec["model"].items()]
    lines += ["", "[data]", f'plugin = "{loader}"', f"batch_size = {batch}"]
    lines += [f"{k} = {toml_value(v)}" for k, v in data.items()]
    if mode == "train":
        lines += ["", "[optimizer]", 'plugin = "sgd"', f"lr = {LR}", f"momentum = {MOMENTUM}",
                  "", "[train]", f"steps = {steps}", f"warmup = {warmup}"]
    else:
        lines += ["", "[infer]", f"batches = {steps}", f"warmup = {warmup}",
                  'mode = "inference"']
    return "\n".join(lines) + "\n"


def runner_side(runner, tmp, name, threads, modes):
    results = {}
    for mode in modes:
        path = os.path.join(tmp, f"{name}-{threads}-{mode}.toml")
        with open(path, "w") as f:
            f.write(experiment_toml(name, MODELS[name], threads, mode))
        metrics, p50 = run_experiment_file(runner, path, os.path.join(tmp, "runner.db"))
        results[mode] = {"samples_per_s": metrics["samples_per_s"],
                         "p50_ns": p50["step_time" if mode == "train" else "latency"],
                         "phases": {p: p50[p] for p in PHASES if p in p50}}
    return results


def eager_side(name, threads, modes, timeout):
    # A fresh process per mode, as runner's runs: in one process, inference
    # after training would find glibc's heap already grown and its mmap and
    # trim thresholds raised, and skip the page faults a fresh process pays.
    results = {}
    for mode in modes:
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--threads",
               str(threads), "--modes", mode]
        got = run_json_worker(cmd, timeout)
        if got["threads"] != threads:
            raise RuntimeError(f"eager ran {got['threads']} threads, not {threads}")
        results[mode] = got["modes"][mode]
    return results


# ---------------------------------------------------------------- the driver

def speed(mode, result):
    """What the table shows: samples/s, or for b1 the p50 latency in ms."""
    return result["p50_ns"] * 1e-6 if mode == "b1" else result["samples_per_s"]


def ratio(mode, runner, eager):
    """runner's speed / eager's (> 1: runner faster)."""
    if mode == "b1":
        return p50_ratio(runner, eager)
    return runner["samples_per_s"] / eager["samples_per_s"]


def p50_ratio(runner, eager):
    """eager's median step time / runner's: what preemption disturbs least."""
    return eager["p50_ns"] / runner["p50_ns"]


def median_of(values):
    return f"{statistics.median(values):.4g}" if values else "n/a"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runner", default=os.path.join(ROOT, "build", "bin", "runner"))
    ap.add_argument("--models", default=",".join(MODELS),
                    help="comma-separated subset of: " + ", ".join(MODELS))
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated subset of: " +
                    ", ".join(MODES))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per eager process")
    ap.add_argument("--json", help="also write every measurement to this file")
    ap.add_argument("--worker", choices=list(MODELS), help=argparse.SUPPRESS)
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    threads_list = [int(t) for t in args.threads.split(",") if t]

    if args.worker:
        worker(args.worker, threads_list[0], modes)
        return

    names = [n for n in args.models.split(",") if n]
    for n in names:
        if n not in MODELS:
            sys.exit(f"models.py: unknown model {n!r}; models: {', '.join(MODELS)}")
    for m in modes:
        if m not in MODES:
            sys.exit(f"models.py: unknown mode {m!r}; modes: {', '.join(MODES)}")
    runner = os.path.abspath(args.runner)
    if not os.access(runner, os.X_OK):
        sys.exit(f"models.py: {runner} is not an executable (build it, or pass --runner)")
    import torch  # only for the version line
    print(f"torch {torch.__version__} (python), runner {runner}")
    print(f"models={','.join(names)} threads={args.threads} rounds={args.rounds} "
          f"load at start: {loadavg()}")

    started = time.monotonic()
    record = {"load_start": loadavg(), "rounds": args.rounds, "results": []}
    rows, phase_rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            for threads in threads_list:
                got = {"runner": [], "eager": []}
                for r in range(args.rounds):
                    order = rotated(["runner", "eager"], r)
                    for side in order:
                        if side == "runner":
                            got[side].append(runner_side(runner, tmp, name, threads, modes))
                        else:
                            got[side].append(eager_side(name, threads, modes, args.timeout))
                    cells = [f"{m} {ratio(m, got['runner'][-1][m], got['eager'][-1][m]):.3f}"
                             for m in modes]
                    print(f"  {name} threads={threads} round {r + 1} [{','.join(order)}] "
                          f"runner/eager: {'  '.join(cells)}  load {loadavg()}", flush=True)
                for m in modes:
                    runs = [g[m] for g in got["runner"]]
                    eagers = [g[m] for g in got["eager"]]
                    ratios = [ratio(m, a, b) for a, b in zip(runs, eagers)]
                    p50s = [p50_ratio(a, b) for a, b in zip(runs, eagers)]
                    rows.append([name, threads, m, median_of([speed(m, x) for x in runs]),
                                 median_of([speed(m, x) for x in eagers]), med_range(ratios),
                                 med_range(p50s) if m != "b1" else "(the same)"])
                    cells = []
                    for p in PHASES:
                        a = [x["phases"][p] * 1e-6 for x in runs if p in x["phases"]]
                        b = [x["phases"][p] * 1e-6 for x in eagers if p in x["phases"]]
                        if a or b:
                            cells.append(f"{p} {median_of(a)}/{median_of(b)}")
                    phase_rows.append([name, threads, m, "  ".join(cells)])
                    record["results"].append({"model": name, "threads": threads, "mode": m,
                                              "runner": runs, "eager": eagers,
                                              "ratios": ratios, "p50_ratios": p50s})
    record["load_end"] = loadavg()
    record["seconds"] = time.monotonic() - started

    print(f"\nmedian over {args.rounds} rounds; ratio = runner's speed / eager's (> 1: runner "
          f"faster), median [min, max]; the p50 ratio compares median step times (eager's / "
          f"runner's), which preemption disturbs less; load at end: {loadavg()}; "
          f"{record['seconds'] / 60:.1f} min")
    print("modes: train = training samples/s, b1 = inference latency at batch 1 (p50, ms), "
          "b32 = inference samples/s at batch 32")
    print_table(["model", "threads", "mode", "runner", "eager", "ratio", "ratio of p50 steps"],
                rows)
    print("\nper-phase p50, ms, runner/eager (median over rounds):")
    print_table(["model", "threads", "mode", "phases"], phase_rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
