"""The GPU check kit's experiments and what each check asserts (docs/gpu.md).

Every check is a function of the Kit that returns its key figures, raises
Skip (with why) where it has no form on this device, or Fail (with what was
wrong). Sizes are a GPU's (ResNet-18, CIFAR stem, batch 128) on a GPU and the
least that exercises the same path on the CPU proof (scripts/gpu-check --cpu)."""
import json
import os

from kit import Fail, Skip, by_key, median


def sizes(kit):
    if kit.cuda:
        return dict(batch=128, steps=30, warmup=5, repeats=3, eval=4, size=4096, kernel="[8192, 4096]")
    return dict(batch=8, steps=2, warmup=1, repeats=2, eval=1, size=64, kernel="[256, 256]")


def header(kit, name, kind="train", repeats=None):
    s = sizes(kit)
    threads = "" if kit.cuda else "threads = 2\n"
    return (f'[experiment]\nname = "{name}"\nkind = "{kind}"\nseed = 0\n'
            f'repeats = {repeats or s["repeats"]}\n\n[device]\ntype = "{kit.device}"\n{threads}')


def resnet(kit, name, device_extra="", train_extra="", sweep="", repeats=None, data_extra=""):
    s = sizes(kit)
    return (header(kit, name, repeats=repeats) + device_extra +
            '\n[model]\nplugin = "resnet"\ndepth = 18\nstem = "cifar"\n'
            f'\n[data]\nplugin = "synthetic"\nshape = [3, 32, 32]\nclasses = 10\nsize = {s["size"]}\n'
            f'batch_size = {s["batch"]}\n{data_extra}'
            '\n[optimizer]\nplugin = "sgd"\nlr = 0.01\nmomentum = 0.9\n'
            f'\n[train]\nsteps = {s["steps"]}\nwarmup = {s["warmup"]}\n{train_extra}'
            + (f"\n[sweep]\n{sweep}" if sweep else ""))


def mlp(kit, name, extra="", steps=None):
    s = sizes(kit)
    return (header(kit, name, repeats=2) +
            '\n[model]\nplugin = "mlp"\nhidden = [256, 256]\n'
            '\n[data]\nplugin = "synthetic"\nshape = [64]\nclasses = 10\nsize = 4096\nbatch_size = 64\n'
            '\n[optimizer]\nplugin = "sgd"\nlr = 0.05\nmomentum = 0.9\n'
            f'\n[train]\nsteps = {steps or max(s["steps"], 20)}\nwarmup = {s["warmup"]}\n' + extra)


# What `runner export` leaves empty because it is the default (docs/experiment.md).
DEFAULTS = {"train.precision": "fp32", "model.channels_last": "false", "data.workers": "0",
            "data.pin_memory": "false", "device.cudnn_benchmark": "false", "device.tf32_conv": "false"}


def value_of(run, key):
    """KEY's value in RUN as a string, as a TOML file spells it (true, fp32, 2)."""
    value = run.get(key)
    if value is None:
        return DEFAULTS.get(key, "")
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def finished(runs, key=None, value=None):
    """The runs with KEY = VALUE; Fail unless every one finished."""
    mine = [r for r in runs if key is None or value_of(r, key) == str(value)]
    if not mine:
        raise Fail(f"no run with {key} = {value}")
    bad = [r for r in mine if r["status"] != "finished"]
    if bad:
        raise Fail(f"{len(bad)} of {len(mine)} runs {bad[0]['status']}: {bad[0]['error']}")
    return mine


def ms(ns):
    return None if ns is None else round(ns / 1e6, 4)


def speedup(kit, name, by, baseline, versus, metric="step_time", where=()):
    """A/B of METRIC as a speed-up (1 / runner compare's ratio) with its interval."""
    c = kit.compare(name, by, baseline, versus, where).get(metric)
    if not c or not c["ratio"]:
        return None
    lo, hi = c["ci"]
    return {"speedup": round(1 / c["ratio"], 4),
            "ci": [round(1 / hi, 4) if hi else None, round(1 / lo, 4) if lo else None],
            "verdict": c["verdict"]}


# --- the checks --------------------------------------------------------------

def quickstart(kit):
    path = os.path.join(kit.root, "experiments", "quickstart.toml")
    kit.runner("run", path, "--db", kit.db, "--set", f"device.type={kit.device}",
               "--set", "train.steps=200", "--set", "experiment.repeats=2")
    runs = finished(kit.export("quickstart"))
    return {"runs": len(runs), "step_time_ms": ms(median(r["headline_p50_ns"] for r in runs))}


PRECISIONS = ["fp32", "amp_fp16", "amp_bf16", "bf16"]


def precision_runs(kit):
    if not hasattr(kit, "_precision"):
        s = sizes(kit)
        sweep = '"train.precision" = [' + ", ".join(f'"{p}"' for p in PRECISIONS) + "]\n"
        evaluation = f"\n[eval]\nbatches = {s['eval']}\n"
        # The CPU has no fast float16 convolution (28 s a ResNet-18 step at
        # batch 8 here): its proof takes the same precision paths on an MLP.
        text = (resnet(kit, "precision", sweep=sweep, train_extra=evaluation) if kit.cuda else
                mlp(kit, "precision", evaluation + "\n[sweep]\n" + sweep))
        kit._precision = kit.run_experiment("precision", text)
    return kit._precision


def precision(name):
    def check(kit):
        runs = finished(precision_runs(kit), "train.precision", name)
        metrics = kit.metrics("precision")
        figures = {"step_time_ms": ms(median(r["headline_p50_ns"] for r in runs)),
                   "samples_per_s": median(r["samples_per_s"] for r in runs),
                   "eval_accuracy": median(metrics[r["run_id"]].get("eval_accuracy") for r in runs)}
        if figures["eval_accuracy"] is None:
            raise Fail("no held-out accuracy recorded ([eval])")
        if name != "fp32":
            figures["speedup_vs_fp32"] = speedup(kit, "precision", "train.precision", "fp32", name)
        return figures
    check.__name__ = "precision_" + name
    return check


def peak_memory(kit):
    runs = finished(precision_runs(kit))
    metrics = kit.metrics("precision")
    name = "peak_cuda_allocated_bytes" if kit.cuda else "peak_cpu_alloc_bytes"
    peaks = by_key(runs, metrics, "train.precision", name)
    if any(v is None or v <= 0 for v in peaks.values()):
        raise Fail(f"{name} missing or not positive: {peaks}")
    return {name + "_by_precision": peaks}


def channels_last(kit):
    extra = 'precision = "amp_fp16"\n' if kit.cuda else ""
    runs = kit.run_experiment("channels_last", resnet(kit, "channels_last", train_extra=extra,
                                                      sweep='"model.channels_last" = [false, true]\n'))
    finished(runs)
    return {"speedup": speedup(kit, "channels_last", "model.channels_last", "false", "true")}


def cuda_flag(key):
    def check(kit):
        if not kit.cuda:
            raise Skip("needs CUDA")
        name = key.replace(".", "_")
        extra = "tf32_matmul = true\n" if key == "device.tf32_conv" else ""
        finished(kit.run_experiment(name, resnet(kit, name, device_extra=extra,
                                                 sweep=f'"{key}" = [false, true]\n')))
        return {"speedup": speedup(kit, name, key, "false", "true")}
    check.__name__ = key.split(".")[1]
    return check


def loader(kit):
    sweep = '"data.workers" = [0, 2]\n' + ('"data.pin_memory" = [false, true]\n' if kit.cuda else "")
    finished(kit.run_experiment("loader", resnet(kit, "loader", sweep=sweep)))
    where = ("data.pin_memory=false",) if kit.cuda else ()
    return {"workers_speedup": speedup(kit, "loader", "data.workers", "0", "2", where=where),
            "workers_data_wait_speedup": speedup(kit, "loader", "data.workers", "0", "2", "data", where)}


def pinned_memory(kit):
    if not kit.cuda:
        raise Skip("needs CUDA (pinned host memory is for copies to a GPU)")
    loader_runs = kit.export("loader")
    if not loader_runs:
        raise Fail("the loader check recorded no run")
    finished(loader_runs, "data.pin_memory", "true")
    return {"speedup": speedup(kit, "loader", "data.pin_memory", "false", "true", where=("data.workers=2",))}


def adamw(kit):
    text = resnet(kit, "adamw", sweep='"optimizer.impl" = ["loop", "foreach", "fused"]\n')
    text = text.replace('[optimizer]\nplugin = "sgd"\nlr = 0.01\nmomentum = 0.9\n',
                        '[optimizer]\nplugin = "adamw"\nlr = 3e-4\nweight_decay = 0.01\n')
    finished(kit.run_experiment("adamw", text))
    return {impl + "_vs_loop_optimizer": speedup(kit, "adamw", "optimizer.impl", "loop", impl, "optimizer")
            for impl in ("foreach", "fused")}


KERNELS = ["scale", "bias_gelu", "softmax", "rmsnorm", "layernorm"]


def kernels(kit):
    s = sizes(kit)
    text = (header(kit, "kernels", kind="kernel", repeats=2) +
            f'\n[kernel]\nplugin = "scale"\nshape = {s["kernel"]}\ndtype = "float32"\ncalls = 20\nwarmup = 3\n'
            'impl = "custom"\n')
    for k in KERNELS:
        text += f'\n[[trial]]\n"kernel.plugin" = "{k}"\n'
    runs = finished(kit.run_experiment("kernels", text))
    metrics = kit.metrics("kernels")
    fractions = by_key(runs, metrics, "kernel.plugin", "fraction_of_peak_bandwidth")
    return {"fraction_of_copy_bandwidth": {k: round(v, 4) if v else v for k, v in fractions.items()},
            "bandwidth_GBps": {k: round(v / 1e9, 2) if v else v for k, v in
                               by_key(runs, metrics, "kernel.plugin", "bandwidth_bytes_per_s").items()}}


def aoti(kit):
    models = os.path.join(kit.work, "models")
    os.makedirs(models, exist_ok=True)
    has_torchvision = kit.command([kit.python, "-c", "import torchvision"]).returncode == 0
    prefix = os.path.join(models, "net")
    exporter = [kit.python, os.path.join(kit.root, "python", "runner_export.py"), "--out", prefix,
                "--formats", "aoti", "--device", kit.device]
    if has_torchvision:
        exporter += ["--torchvision", "resnet18", "--input-shape", "16,3,64,64", "--num-classes", "10"]
    else:
        exporter += ["--python", os.path.join(kit.root, "scripts", "gpu_kit", "small_model.py") + ":build"]
    done = kit.command(exporter, timeout=400)
    if done.returncode != 0:
        raise Fail("runner-export failed: " + (done.stderr.strip().splitlines() or ["?"])[-1])
    shape = "[3, 64, 64]" if has_torchvision else "[32]"
    batch = 16 if has_torchvision else 8
    text = (header(kit, "aoti", kind="infer", repeats=2) +
            f'\n[data]\nplugin = "synthetic"\nshape = {shape}\nclasses = 10\nsize = 256\nbatch_size = {batch}\n'
            '\n[infer]\nbatches = 20\nwarmup = 3\n'
            f'\n[[trial]]\n"model.plugin" = "aoti"\n"model.package" = "{prefix}.pt2"\n'
            f'"model.check_against" = "{prefix}.reference.safetensors"\n')
    if has_torchvision:
        # The same weights (OUT.safetensors) run eagerly by runner's own ResNet: AOTInductor vs eager.
        text += ('\n[[trial]]\n"model.plugin" = "resnet"\n"model.depth" = 18\n"model.num_classes" = 10\n'
                 f'"model.init_from" = "{prefix}.safetensors"\n"model.check_against" = "{prefix}.reference.safetensors"\n')
    runs = finished(kit.run_experiment("aoti", text, timeout=400))
    figures = {"exported_with": "torchvision resnet18" if has_torchvision else "scripts/gpu_kit/small_model.py",
               "latency_ms": ms(median(r["headline_p50_ns"] for r in runs if r.get("model.plugin") == "aoti"))}
    if has_torchvision:
        figures["speedup_vs_eager"] = speedup(kit, "aoti", "model.plugin", "resnet", "aoti", "latency")
    return figures


def profile(kit):
    runs = finished(kit.run_experiment("profile", mlp(kit, "profile", "\n[profile]\nsteps = 3\n")))
    trace = kit.db + ".traces/run-" + runs[0]["uuid"] + ".json"
    if not os.path.isfile(trace):
        raise Fail(f"no trace at {trace}")
    with open(trace, encoding="utf-8") as f:
        events = json.load(f).get("traceEvents", [])
    cats = {}
    for e in events:
        cats[e.get("cat", "")] = cats.get(e.get("cat", ""), 0) + 1
    need = "kernel" if kit.cuda else "cpu_op"
    if not cats.get(need):
        raise Fail(f"the trace has no '{need}' events (categories: {sorted(cats)})")
    return {"trace_events": len(events), "events_by_category": cats}


def distributed(backend, ranks):
    def check(kit):
        if backend == "nccl" and not kit.cuda:
            raise Skip("needs CUDA (NCCL reduces CUDA tensors only)")
        name = f"{backend}_{ranks}_ranks"
        extra = f'\n[distributed]\nworld_size = {ranks}\nbackend = "{backend}"\n'
        runs = finished(kit.run_experiment(name, mlp(kit, name, extra)))
        return {"runs": len(runs), "tensors": kit.device,
                "step_time_ms": ms(median(r["headline_p50_ns"] for r in runs))}
    check.__name__ = f"{backend}_world_size_{ranks}"
    return check


PLAN = [quickstart] + [precision(p) for p in PRECISIONS] + [
    peak_memory, channels_last, cuda_flag("device.cudnn_benchmark"), cuda_flag("device.tf32_conv"),
    loader, pinned_memory, adamw, kernels, aoti, profile, distributed("nccl", 1), distributed("gloo", 2)]
