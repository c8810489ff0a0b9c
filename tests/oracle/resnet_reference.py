"""Reference for the resnet plugin's parity tests, from torchvision.

Builds torchvision's ResNet of the given depth (the "cifar" stem: conv1 a 3x3
stride-1 convolution, no max-pool), gives every batch norm random statistics
and affine parameters (so eval mode is not the identity), and saves, as a
plain dict with torch.save (LibTorch's pickle_load reads a dict, not an
OrderedDict): the initial state, an input batch and targets, the eval-mode and
train-mode logits, the state after SGD steps in train mode, the parameter
count and the forward FLOPs of one sample counted by torch.utils.flop_counter.
"""
import argparse

import torch
import torchvision
from torch.utils.flop_counter import FlopCounterMode

parser = argparse.ArgumentParser()
parser.add_argument("--depth", type=int, required=True)
parser.add_argument("--stem", choices=["imagenet", "cifar"], required=True)
parser.add_argument("--classes", type=int, default=10)
parser.add_argument("--size", type=int, default=32)
parser.add_argument("--batch", type=int, default=4)
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--momentum", type=float, default=0.9)
parser.add_argument("--out", required=True)
args = parser.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
model = getattr(torchvision.models, f"resnet{args.depth}")(num_classes=args.classes)
if args.stem == "cifar":
    model.conv1 = torch.nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = torch.nn.Identity()
with torch.no_grad():
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.weight.uniform_(0.5, 1.5)
            m.bias.normal_(0, 0.1)
            m.running_mean.normal_(0, 0.1)
            m.running_var.uniform_(0.5, 1.5)

state = {k: v.clone() for k, v in model.state_dict().items()}
x = torch.randn(args.batch, 3, args.size, args.size)
targets = torch.randint(0, args.classes, (args.batch,))

model.eval()
with torch.no_grad():
    eval_out = model(x)
with FlopCounterMode(display=False) as counter:
    model(x[:1])
flops = counter.get_total_flops()

model.train()
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
train_out = None
for step in range(args.steps):
    optimizer.zero_grad()
    out = model(x)
    if train_out is None:
        train_out = out.detach().clone()
    torch.nn.functional.cross_entropy(out, targets).backward()
    optimizer.step()

torch.save(
    {
        "state": state,
        "x": x,
        "targets": targets,
        "eval_out": eval_out,
        "train_out": train_out,
        "after": {k: v.clone() for k, v in model.state_dict().items()},
        "params": sum(p.numel() for p in model.parameters()),
        "flops": int(flops),
    },
    args.out,
)
print(f"resnet{args.depth} {args.stem}: {sum(p.numel() for p in model.parameters())} parameters, {flops} FLOPs per sample")
