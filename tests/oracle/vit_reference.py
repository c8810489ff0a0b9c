"""Reference for the vit plugin's parity tests, from torchvision.

Builds torchvision's VisionTransformer with the sizes of the plugin's named
configuration. Without --meta: moves every parameter away from its
initialisation (torchvision starts the head, the class token and several
biases at zero, which would hide a wrong layout), and saves, as a plain dict
with torch.save (LibTorch's pickle_load reads a dict, not an OrderedDict): the
state, an input batch and targets, the eval-mode and train-mode logits, the
state after SGD steps in train mode, the parameter count and the forward
FLOPs of one sample (as floats: LibTorch's unpickler reads a Python int
of 2**31 or more only when pickle wrote it in 8 bytes, and pickle writes the
fewest bytes). With --meta: only the parameter count and the FLOPs,
from a model on the meta device (no memory, no arithmetic: for full sizes).

FLOPs are counted by torch.utils.flop_counter under the math backend of
scaled_dot_product_attention: on the CPU the default backend is a fused
kernel that flop_counter has no formula for, so it would count attention's
two batched products as nothing; under the math backend it sees them as
bmm, as its formula for the fused GPU kernels counts them. The default-CPU
figure is saved too ("flops_cpu_default").
"""
import argparse

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode
from torchvision.models.vision_transformer import VisionTransformer

SIZES = {  # hidden, layers, heads, mlp
    "ti": (192, 12, 3, 768),
    "s": (384, 12, 6, 1536),
    "b": (768, 12, 12, 3072),
    "l": (1024, 24, 16, 4096),
}

parser = argparse.ArgumentParser()
parser.add_argument("--config", choices=sorted(SIZES), required=True)
parser.add_argument("--image", type=int, default=32)
parser.add_argument("--patch", type=int, default=8)
parser.add_argument("--classes", type=int, default=10)
parser.add_argument("--batch", type=int, default=4)
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--momentum", type=float, default=0.9)
parser.add_argument("--meta", action="store_true")
parser.add_argument("--out", required=True)
args = parser.parse_args()

hidden, layers, heads, mlp = SIZES[args.config]
torch.manual_seed(0)
torch.set_num_threads(1)
device = "meta" if args.meta else "cpu"
with torch.device(device):
    model = VisionTransformer(image_size=args.image, patch_size=args.patch, num_layers=layers,
                              num_heads=heads, hidden_dim=hidden, mlp_dim=mlp,
                              num_classes=args.classes)
params = sum(p.numel() for p in model.parameters())


def count_flops(sample, math_attention):
    with FlopCounterMode(display=False) as counter:
        if math_attention:
            with sdpa_kernel(SDPBackend.MATH):
                model(sample)
        else:
            model(sample)
    return int(counter.get_total_flops())


model.eval()
sample = torch.randn(1, 3, args.image, args.image, device=device)
flops = count_flops(sample, math_attention=True)
print(f"vit {args.config}/{args.patch} at {args.image}, {args.classes} classes: "
      f"{params} parameters, {flops} FLOPs per sample", end="")
if args.meta:
    print()
    torch.save({"params": params, "flops": float(flops)}, args.out)
    raise SystemExit(0)
flops_cpu_default = count_flops(sample, math_attention=False)
print(f" ({flops_cpu_default} counted through the CPU's default attention kernel)")

with torch.no_grad():
    for p in model.parameters():
        p.add_(torch.randn_like(p), alpha=0.02)

state = {k: v.clone() for k, v in model.state_dict().items()}
x = torch.randn(args.batch, 3, args.image, args.image)
targets = torch.randint(0, args.classes, (args.batch,))

with torch.no_grad():
    eval_out = model(x)

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
        "params": params,
        "flops": float(flops),
        "flops_cpu_default": float(flops_cpu_default),
    },
    args.out,
)
