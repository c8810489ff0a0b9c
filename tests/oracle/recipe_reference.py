"""Reference for the end-to-end recipe parity tests (tests/cli/recipes).

Writes into --out:
  init.safetensors   the initial weights of runner's `mlp` model (hidden [32, 32], relu) over
                     16 features and 5 classes, in its parameter names (net.0.weight, ...);
                     a torch.save state dict (init.pt) when the safetensors package is missing
  data.pt            {"inputs": [120, 16] float32, "targets": [120] int64}, read by the test
                     loader `tensor_file`
  data_fp16.pt       the same samples with the inputs scaled up, so that float16 gradients
                     overflow under the initial loss scale
  reference.pt       {case: {"final": state dict after 10 optimizer steps, "loss", "lr",
                     "grad_norm", "loss_scale", "skipped": float64 [10] (nan: not recorded,
                     as NULL in runner's samples)}}
or, when torch cannot be imported, missing.txt saying why (the tests then skip).

Each case trains as runner's engine does: batches in file order (shuffle = false,
drop_last = true), cross-entropy mean; per optimizer step zero_grad, `accumulate`
micro-batches each with its loss divided by `accumulate` before backward, then (amp_fp16)
unscale, clip_grad_norm_, optimizer.step() (skipped by GradScaler on inf/nan), scaler.update()
and scheduler.step(). One thread, as the experiments set [device] threads = 1. The recipes
here and the experiment files in recipe_parity_test.cpp describe the same runs, case by case.
"""
import argparse
import math
import os
import sys
import warnings

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
args = parser.parse_args()
os.makedirs(args.out, exist_ok=True)
# A folder reused from an earlier invocation keeps none of that one's answers.
for stale in ("missing.txt", "init.safetensors", "init.pt", "data.pt", "data_fp16.pt",
              "reference.pt"):
    if os.path.exists(os.path.join(args.out, stale)):
        os.remove(os.path.join(args.out, stale))

try:
    import torch
    import torch.nn.functional as F
    from torch.optim import lr_scheduler
except ImportError as e:  # the tests skip, saying why
    with open(os.path.join(args.out, "missing.txt"), "w") as f:
        f.write(f"the Python oracle cannot import torch: {e}\n")
    sys.exit(0)
try:
    from safetensors.torch import save_file
except ImportError:
    save_file = None

# SequentialLR warns about the order of its inner schedulers' first steps; the
# order below is the documented one.
warnings.simplefilter("ignore")
torch.set_num_threads(1)

FEATURES, HIDDEN, CLASSES = 16, [32, 32], 5
SAMPLES, STEPS = 120, 10
FP16_INPUT_SCALE = 8.0

SGD = {"type": "sgd", "lr": 0.1, "momentum": 0.9}
CASES = {
    "accumulate": {"batch": 4, "accumulate": 3, "optimizer": SGD},
    "clip": {"batch": 4, "clip": 0.05, "optimizer": SGD},
    "step_warmup": {
        "batch": 4,
        "optimizer": SGD,
        "schedule": {"type": "step", "warmup_steps": 3, "warmup_start_factor": 0.25,
                     "step_size": 2, "gamma": 0.5},
    },
    "cosine_warmup": {
        "batch": 4,
        "optimizer": SGD,
        "schedule": {"type": "cosine", "warmup_steps": 2, "warmup_start_factor": 1.0 / 3.0,
                     "min_lr": 0.01},
    },
    "one_cycle": {"batch": 4, "optimizer": SGD, "schedule": {"type": "one_cycle"}},
    "amp_bf16": {"batch": 4, "precision": "amp_bf16", "optimizer": SGD},
    "bf16": {"batch": 4, "precision": "bf16", "optimizer": SGD},
    "amp_fp16": {"batch": 4, "precision": "amp_fp16", "optimizer": SGD, "data": "data_fp16.pt"},
    "adamw_fused": {
        "batch": 4,
        "optimizer": {"type": "adamw", "lr": 0.01, "weight_decay": 0.05, "fused": True},
    },
}


class Mlp(torch.nn.Module):
    """runner's mlp: a Sequential `net` of Linear and ReLU layers."""

    def __init__(self):
        super().__init__()
        layers, width = [], FEATURES
        for h in HIDDEN:
            layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
            width = h
        layers.append(torch.nn.Linear(width, CLASSES))
        self.net = torch.nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def make_optimizer(spec, model):
    if spec["type"] == "sgd":
        return torch.optim.SGD(model.parameters(), lr=spec["lr"], momentum=spec["momentum"])
    return torch.optim.AdamW(model.parameters(), lr=spec["lr"], weight_decay=spec["weight_decay"],
                             fused=spec["fused"])


def make_schedule(spec, optimizer):
    if spec is None:
        return None
    if spec["type"] == "one_cycle":
        return lr_scheduler.OneCycleLR(optimizer, max_lr=optimizer.param_groups[0]["lr"],
                                       total_steps=STEPS)
    if spec["type"] == "step":
        main = lr_scheduler.StepLR(optimizer, step_size=spec["step_size"], gamma=spec["gamma"])
    else:
        main = lr_scheduler.CosineAnnealingLR(optimizer, T_max=STEPS - spec["warmup_steps"],
                                              eta_min=spec["min_lr"])
    warmup = lr_scheduler.LinearLR(optimizer, start_factor=spec["warmup_start_factor"],
                                   end_factor=1.0, total_iters=spec["warmup_steps"])
    return lr_scheduler.SequentialLR(optimizer, [warmup, main], milestones=[spec["warmup_steps"]])


def batches(data, batch):
    """runner's sampler without shuffling: whole batches in order, epoch after epoch."""
    n = data["inputs"].shape[0]
    while True:
        for start in range(0, n - batch + 1, batch):
            yield data["inputs"][start:start + batch], data["targets"][start:start + batch]


def train(case, init, datasets):
    precision = case.get("precision", "fp32")
    accumulate = case.get("accumulate", 1)
    model = Mlp()
    model.load_state_dict(init)
    if precision == "bf16":
        model.to(torch.bfloat16)
    optimizer = make_optimizer(case["optimizer"], model)
    scheduler = make_schedule(case.get("schedule"), optimizer)
    scaler = torch.amp.GradScaler("cpu") if precision == "amp_fp16" else None
    autocast = {"amp_bf16": torch.bfloat16, "amp_fp16": torch.float16}.get(precision)
    source = batches(datasets[case.get("data", "data.pt")], case["batch"])
    record = {k: [] for k in ("loss", "lr", "grad_norm", "loss_scale", "skipped")}
    for _ in range(STEPS):
        optimizer.zero_grad()
        step_loss = None
        for _ in range(accumulate):
            x, y = next(source)
            if precision == "bf16":
                x = x.to(torch.bfloat16)
            with torch.autocast("cpu", dtype=autocast or torch.bfloat16,
                                enabled=autocast is not None):
                loss = F.cross_entropy(model(x), y)
            if accumulate > 1:
                loss = loss / float(accumulate)
            (scaler.scale(loss) if scaler else loss).backward()
            step_loss = loss.detach() if step_loss is None else step_loss + loss.detach()
        scale = math.nan
        if scaler:
            scale = scaler.get_scale()
            scaler.unscale_(optimizer)
        norm = math.nan
        if "clip" in case:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), case["clip"]).item()
        lr = optimizer.param_groups[0]["lr"]
        skipped = math.nan
        if scaler:
            scaler.step(optimizer)
            scaler.update()
            # The scale backs off exactly when the step was skipped (it grows only
            # after 2000 clean steps).
            skipped = int(scaler.get_scale() < scale)
        else:
            optimizer.step()
        if scheduler:
            scheduler.step()
        for key, value in (("loss", step_loss.item()), ("lr", lr), ("grad_norm", norm),
                           ("loss_scale", scale), ("skipped", skipped)):
            record[key].append(value)
    out = {k: torch.tensor(v, dtype=torch.float64) for k, v in record.items()}
    out["final"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return out


def main():
    torch.manual_seed(0)
    init = {k: v.detach().clone() for k, v in Mlp().state_dict().items()}
    inputs = torch.randn(SAMPLES, FEATURES)
    teacher = torch.randn(FEATURES, CLASSES)
    data = {"inputs": inputs, "targets": (inputs @ teacher).argmax(1)}
    datasets = {
        "data.pt": data,
        "data_fp16.pt": {"inputs": inputs * FP16_INPUT_SCALE, "targets": data["targets"]},
    }
    for name, d in datasets.items():
        torch.save(d, os.path.join(args.out, name))
    if save_file is not None:
        save_file(init, os.path.join(args.out, "init.safetensors"))
    else:
        torch.save(init, os.path.join(args.out, "init.pt"))
    reference = {name: train(case, init, datasets) for name, case in CASES.items()}
    torch.save(reference, os.path.join(args.out, "reference.pt"))


main()
