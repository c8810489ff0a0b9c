"""Reference for the autocast parity tests: torch.autocast("cpu", dtype).

A small model (Conv2d, GELU, Linear, LayerNorm, GELU, Linear, cross-entropy)
runs its forward pass and loss under torch.autocast("cpu", dtype=--dtype);
backward runs inside the autocast region with --backward inside, after it
otherwise (as PyTorch recommends). Saves, with torch.save: the weights, the
input and targets, the output of each operator (its dtype is autocast's
choice) and each parameter's gradient.
"""
import argparse

import torch
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--dtype", choices=["bfloat16", "float16"], required=True)
parser.add_argument("--backward", choices=["inside", "outside"], required=True)
parser.add_argument("--out", required=True)
args = parser.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc1 = torch.nn.Linear(8 * 8 * 8, 32)
        self.norm = torch.nn.LayerNorm(32)
        self.fc2 = torch.nn.Linear(32, 10)


model = Small()
with torch.no_grad():  # LayerNorm's default affine parameters are 1 and 0: make them matter
    model.norm.weight.uniform_(0.5, 1.5)
    model.norm.bias.normal_(0, 0.1)
state = {k: v.detach().clone() for k, v in model.state_dict().items()}
x = torch.randn(4, 3, 8, 8)
targets = torch.randint(0, 10, (4,))

outputs = {}
with torch.autocast("cpu", dtype=getattr(torch, args.dtype)):
    outputs["conv"] = model.conv(x)
    outputs["gelu1"] = F.gelu(outputs["conv"])
    outputs["fc1"] = model.fc1(outputs["gelu1"].flatten(1))
    outputs["norm"] = model.norm(outputs["fc1"])
    outputs["gelu2"] = F.gelu(outputs["norm"])
    outputs["fc2"] = model.fc2(outputs["gelu2"])
    outputs["loss"] = F.cross_entropy(outputs["fc2"], targets)
    if args.backward == "inside":
        outputs["loss"].backward()
if args.backward == "outside":
    outputs["loss"].backward()

torch.save(
    {
        "state": state,
        "x": x,
        "targets": targets,
        "outputs": {k: v.detach() for k, v in outputs.items()},
        "grads": {k: p.grad for k, p in model.named_parameters()},
    },
    args.out,
)
