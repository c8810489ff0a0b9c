"""Reference for the learning-rate schedule parity tests, from torch.optim.lr_scheduler.

Reads a JSON list of cases written by tests/core/training/schedule_test.cpp (a
schedule spec, the base learning rate of each parameter group, the number of
steps) and, for each, drives PyTorch's scheduler the way a training loop
does: SGD with momentum over one parameter per group, and for every step the
group's lr and momentum are read, then backward, optimizer.step() and
scheduler.step(). The schedules:

  constant   LambdaLR(lambda _: 1.0)
  step       StepLR(step_size, gamma)
  cosine     CosineAnnealingLR(T_max = total_steps - warmup_steps, eta_min = min_lr)
  warm-up    SequentialLR([LinearLR(start_factor, 1.0, warmup_steps), main], [warmup_steps])
  one_cycle  OneCycleLR(max_lr = the groups' base lrs, total_steps, ...)

Writes {case name: {"lr": [[lr of each group] per step], "momentum": [...]}}
as JSON (Python writes floats in their shortest exact form).
"""
import argparse
import json
import warnings

import torch
from torch.optim import lr_scheduler

parser = argparse.ArgumentParser()
parser.add_argument("--cases", required=True)
parser.add_argument("--out", required=True)
args = parser.parse_args()

# LinearLR and SequentialLR warn about call order in some versions; the
# order below is the documented one.
warnings.simplefilter("ignore")
torch.set_num_threads(1)


def main_schedule(optimizer, case):
    kind = case["kind"]
    if kind == "constant":
        return lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    if kind == "step":
        return lr_scheduler.StepLR(optimizer, step_size=case["step_size"], gamma=case["gamma"])
    if kind == "cosine":
        return lr_scheduler.CosineAnnealingLR(
            optimizer, T_max=case["total_steps"] - case["warmup_steps"], eta_min=case["min_lr"]
        )
    raise ValueError(f"unknown kind {kind}")


def run(case):
    torch.manual_seed(0)
    groups = [{"params": [torch.nn.Parameter(torch.randn(3))], "lr": lr} for lr in case["base_lrs"]]
    optimizer = torch.optim.SGD(groups, lr=case["base_lrs"][0], momentum=0.9)
    if case["kind"] == "one_cycle":
        scheduler = lr_scheduler.OneCycleLR(
            optimizer,
            max_lr=case["base_lrs"],
            total_steps=case["total_steps"],
            pct_start=case["pct_start"],
            anneal_strategy=case["anneal"],
            cycle_momentum=case["cycle_momentum"],
            base_momentum=case["base_momentum"],
            max_momentum=case["max_momentum"],
            div_factor=case["div_factor"],
            final_div_factor=case["final_div_factor"],
            three_phase=case["three_phase"],
        )
    elif case["warmup_steps"] > 0:
        warmup = lr_scheduler.LinearLR(
            optimizer,
            start_factor=case["warmup_start_factor"],
            end_factor=1.0,
            total_iters=case["warmup_steps"],
        )
        main = main_schedule(optimizer, case)
        scheduler = lr_scheduler.SequentialLR(
            optimizer, [warmup, main], milestones=[case["warmup_steps"]]
        )
    else:
        scheduler = main_schedule(optimizer, case)

    lrs, momenta = [], []
    for _ in range(case["steps"]):
        lrs.append([float(g["lr"]) for g in optimizer.param_groups])
        momenta.append([float(g["momentum"]) for g in optimizer.param_groups])
        optimizer.zero_grad()
        loss = sum((p * p).sum() for g in optimizer.param_groups for p in g["params"])
        loss.backward()
        optimizer.step()
        scheduler.step()
    return {"lr": lrs, "momentum": momenta}


with open(args.cases) as f:
    cases = json.load(f)
with open(args.out, "w") as f:
    json.dump({case["name"]: run(case) for case in cases}, f)
