"""Reference for the loss-scaling parity tests: torch.amp.GradScaler("cpu").

Trains a tiny linear model (a weight, a bias and a parameter the loss does
not use, so it has no gradient) by SGD for --steps steps under a GradScaler
with --growth-interval, injecting an inf or a nan into the weight's gradient
after backward at the steps --inject names ("3:inf,7:nan"). With --clip the
step unscales first and clips to that global norm, as AMP with clipping is
written. Saves, with torch.save: the initial parameters and data, and per
step whether the optimizer step was skipped, the scale and the growth
tracker after update(), and the parameters at the end.
"""
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, required=True)
parser.add_argument("--growth-interval", type=int, default=2000)
parser.add_argument("--inject", default="")
parser.add_argument("--clip", type=float, default=0.0)
parser.add_argument("--out", required=True)
args = parser.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
inject = {}
for item in filter(None, args.inject.split(",")):
    step, what = item.split(":")
    inject[int(step)] = float(what)

w = torch.nn.Parameter(torch.randn(3, 4) * 0.5)
b = torch.nn.Parameter(torch.randn(3) * 0.1)
unused = torch.nn.Parameter(torch.ones(2))
x = torch.randn(8, 4)
y = torch.randn(8, 3)
initial = {"w": w.detach().clone(), "b": b.detach().clone(), "unused": unused.detach().clone()}

optimizer = torch.optim.SGD([w, b, unused], lr=0.05, momentum=0.9)
scaler = torch.amp.GradScaler("cpu", growth_interval=args.growth_interval)
skipped, scales, trackers = [], [], []
for step in range(args.steps):
    optimizer.zero_grad()
    loss = ((x @ w.t() + b - y) ** 2).mean()
    scaler.scale(loss).backward()
    if step in inject:
        w.grad[1, 2] = inject[step]
    if args.clip > 0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_([w, b, unused], args.clip)
    scaler.step(optimizer)
    found = sum(v.item() for v in scaler._found_inf_per_device(optimizer).values())
    skipped.append(found != 0)
    scaler.update()
    scales.append(scaler.get_scale())
    trackers.append(scaler._get_growth_tracker())

torch.save(
    {
        "initial": initial,
        "x": x,
        "y": y,
        "skipped": torch.tensor(skipped),
        "scales": torch.tensor(scales, dtype=torch.float64),
        "trackers": torch.tensor(trackers, dtype=torch.int64),
        "after": {"w": w.detach(), "b": b.detach(), "unused": unused.detach()},
    },
    args.out,
)
